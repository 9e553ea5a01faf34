//! `cosched wait`: block until jobs end; exit with the status of the first that did not succeed.

use super::client::{unexpected, ClientArgs};
use cosched_service::protocol::{JobView, Reply, Request};

/// Wait for jobs to end; exits with the job's exit status (128+N if killed by signal N)
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit status: that of the first job that did not succeed (its exit code, 128+N \
when signal N killed it, 1 for any other failure), else 0; 3 when the daemon cannot be reached or \
closes the connection, 2 when it refuses the request (no such job).\n\n\
Examples:\n  cosched wait 12\n  cosched wait 12 13 14 && echo all succeeded"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[arg(required = true)]
    ids: Vec<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let jobs = wait_for(&args.client, args.ids)?;
    if !args.client.print_json(&jobs) {
        super::client::print_jobs(&jobs);
    }
    super::submit::exit_with_first_failure(&jobs)
}

pub fn wait_for(client: &ClientArgs, ids: Vec<u64>) -> anyhow::Result<Vec<JobView>> {
    match client.request(Request::Wait { ids })? {
        Reply::Ended { jobs } => Ok(jobs),
        other => Err(unexpected(other)),
    }
}
