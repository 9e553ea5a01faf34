//! `cosched wait`: block until jobs end; exit with the status of the first that did not succeed.

use super::client::{unexpected, ClientArgs};
use cosched_service::client::ClientError;
use cosched_service::protocol::{JobView, Reply, Request};

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
        super::jobs::print_json(&jobs, None)?;
    } else {
        super::client::print_jobs(&jobs);
    }
    super::submit::exit_with_first_failure(&jobs)
}

pub fn wait_for(client: &ClientArgs, ids: Vec<u64>) -> anyhow::Result<Vec<JobView>> {
    let listed: Vec<String> = ids.iter().map(u64::to_string).collect();
    let stopped = |e: anyhow::Error| {
        let is_stop = e.chain().any(|cause| {
            matches!(
                cause.downcast_ref::<ClientError>(),
                Some(ClientError::Stopped { .. })
            )
        });
        match is_stop {
            true => e.context(format!(
                "the daemon stopped while waiting for job {} to end; the job may go on (a daemon \
                 started again adopts it): `cosched wait {}` again once it runs",
                listed.join(", "),
                listed.join(" ")
            )),
            false => e,
        }
    };
    match client.request(Request::Wait { ids }).map_err(stopped)? {
        Reply::Ended { jobs } => Ok(jobs),
        other => Err(unexpected(other)),
    }
}
