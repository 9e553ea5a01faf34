//! `cosched jobs`: the daemon's jobs, queued and running (with `--all`, its whole history).

use super::client::{print_jobs, unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// List the daemon's jobs: id, name, user, state, CPUs now, threads, elapsed, slowdown so far
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  cosched jobs\n  cosched jobs --all --json")]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    /// Include jobs that have ended
    #[arg(long)]
    all: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.client.request(Request::Jobs { all: args.all })? {
        Reply::Jobs { jobs } => {
            if !args.client.print_json(&jobs) {
                print_jobs(&jobs);
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
