//! `cosched hold` and `cosched release`: keep pending jobs from starting, and let them start again
//! (Slurm's `scontrol hold` and `scontrol release`, for `submit --hold`).

use super::common::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// Hold pending jobs: they stay pending, reason job_held_user, until released
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched hold 12\n  cosched hold 20   # every pending \
element of array 20\n  cosched release 12"
)]
pub struct Args {
    #[command(flatten)]
    jobs: Jobs,
}

#[derive(clap::Args, Debug)]
struct Jobs {
    #[command(flatten)]
    client: ClientArgs,
    /// Job ids (your own; root: any) that have not started; an array's id names every element,
    /// ARRAY_INDEX one
    #[arg(required = true)]
    ids: Vec<String>,
}

/// Release held jobs (submitted with --hold, or held with `cosched hold`): they start as their
/// turn comes
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched submit --hold job.sh   # Submitted batch job 12\n  \
cosched release 12"
)]
pub struct ReleaseArgs {
    #[command(flatten)]
    jobs: Jobs,
}

pub fn hold(args: Args) -> anyhow::Result<()> {
    send(args.jobs, true)
}

pub fn release(args: ReleaseArgs) -> anyhow::Result<()> {
    send(args.jobs, false)
}

fn send(args: Jobs, held: bool) -> anyhow::Result<()> {
    let mut ids = super::job_ids::resolve(&args.client, &args.ids, false)?;
    ids.sort_unstable();
    ids.dedup();
    let request = match held {
        true => Request::Hold { ids },
        false => Request::Release { ids },
    };
    match args.client.request(request)? {
        Reply::Held { ids, held } => {
            let done = if held { "held" } else { "released" };
            if !args.client.print_json(&serde_json::json!({ done: ids })) {
                ids.iter().for_each(|id| println!("{done} {id}"));
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
