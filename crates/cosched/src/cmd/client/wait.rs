//! `cosched wait`: block until jobs end; exit with the status of the first that did not succeed.

use super::common::{exit_with_first_failure, wait_for, ClientArgs};

/// Wait for jobs to end; exits with the job's exit status (128+N if killed by signal N)
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit status: that of the first job that did not succeed (its exit code, 128+N \
when signal N killed it, 1 for any other failure), else 0; 3 when the daemon cannot be reached or \
closes the connection, 2 when it refuses the request (no such job).\n\n\
An array's id waits for every element of it, ARRAY_INDEX for one.\n\n\
Examples:\n  cosched wait 12\n  cosched wait 12 13 14 && echo all succeeded\n  \
cosched wait 20      # every element of array 20\n  cosched wait 20_3"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    /// Job ids; an array's id waits for every element, ARRAY_INDEX for one
    #[arg(required = true)]
    ids: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ids = super::job_ids::resolve(&args.client, &args.ids, true)?;
    let jobs = wait_for(&args.client, ids)?;
    if args.client.json {
        super::job_table::print_json(&jobs, None)?;
    } else {
        super::job_table::print_jobs(&jobs);
    }
    exit_with_first_failure(&jobs)
}
