//! `cosched cancel`: stop jobs, named by id or chosen by user, name and state (your own; root may
//! stop any).

use super::common::{unexpected, ClientArgs};
use super::job_filter::FilterArgs;
use cosched_service::protocol::{Reply, Request};

/// Cancel jobs: queued ones never start, running ones are killed
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Without --user, the filters choose among your own jobs (root's: \
everyone's).\n\nExamples:\n  cosched cancel 12\n  cosched cancel 12 13 14\n  cosched cancel 20_3   # element 3 of array 20\n  \
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
    let mut ids = super::job_ids::resolve(&args.client, &args.ids, false)?;
    if !args.filter.is_empty() {
        let mut filter = args.filter.filter()?;
        let me = nix::unistd::getuid().as_raw();
        if filter.users.is_empty() && me != 0 {
            filter.users = vec![me];
        }
        // Refused as a job of theirs named by id is, whether or not they have one now.
        if let Some(other) = filter.users.iter().find(|&&uid| me != 0 && uid != me) {
            anyhow::bail!(
                "--user {}: only root may cancel another user's jobs (uid {other}); you are uid \
                 {me}: drop --user, or name yourself",
                args.filter.user.as_deref().unwrap_or_default()
            );
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
