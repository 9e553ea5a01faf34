//! `cosched cancel`: stop jobs, named by id or chosen by user, name and state (your own; root may
//! stop any).

use super::client::{unexpected, ClientArgs};
use super::jobs::FilterArgs;
use anyhow::Context as _;
use cosched_service::protocol::{JobView, Reply, Request};

/// Cancel jobs: queued ones never start, running ones are killed
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Without --user, the filters choose among your own jobs (root's: \
everyone's).\n\nExamples:\n  cosched cancel 12\n  cosched cancel 12 13 14\n  \
cosched cancel --name sweep --state pending\n  cosched cancel --user ana   # as root"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Job ids; an array's id cancels every element, ARRAY_INDEX one
    #[arg(required_unless_present_any = ["user", "state", "name", "since"])]
    ids: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut ids = Vec::new();
    if !args.ids.is_empty() {
        let listed = match args.client.request(Request::Jobs {
            all: false,
            filter: Default::default(),
        })? {
            Reply::Jobs { jobs } => jobs,
            other => return Err(unexpected(other)),
        };
        for text in &args.ids {
            ids.extend(chosen(text, &listed)?);
        }
    }
    if !args.filter.is_empty() {
        let mut filter = args.filter.filter()?;
        let me = nix::unistd::getuid().as_raw();
        if filter.users.is_empty() && me != 0 {
            filter.users = vec![me];
        }
        match args.client.request(Request::Jobs { all: false, filter })? {
            Reply::Jobs { jobs } => ids.extend(jobs.iter().map(|j| j.id)),
            other => return Err(unexpected(other)),
        }
        if ids.is_empty() {
            eprintln!("no job matches");
            return Ok(());
        }
    }
    ids.sort_unstable();
    ids.dedup();
    match args.client.request(Request::Cancel { ids })? {
        Reply::Cancelled { ids } => {
            if !args
                .client
                .print_json(&serde_json::json!({ "cancelled": ids }))
            {
                ids.iter().for_each(|id| println!("cancelled {id}"));
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}

/// The ids `text` names among the jobs not ended: `ID` (with every element of the array it begins),
/// or `ARRAY_INDEX`. An id that names nothing running is kept, for the daemon to say why.
fn chosen(text: &str, listed: &[JobView]) -> anyhow::Result<Vec<u64>> {
    let number = |s: &str| {
        s.parse::<u64>()
            .with_context(|| format!("{text}: write a job id, or ARRAY_INDEX for one element"))
    };
    if let Some((array, index)) = text.split_once('_') {
        let (array, index) = (number(array)?, number(index)?);
        return listed
            .iter()
            .find(|j| j.array_id == Some(array) && j.array_index == Some(index))
            .map(|j| vec![j.id])
            .with_context(|| {
                format!("{text}: no element {index} of array {array} is queued or running")
            });
    }
    let id = number(text)?;
    let ids: Vec<u64> = listed
        .iter()
        .filter(|j| j.id == id || j.array_id == Some(id))
        .map(|j| j.id)
        .collect();
    Ok(if ids.is_empty() { vec![id] } else { ids })
}
