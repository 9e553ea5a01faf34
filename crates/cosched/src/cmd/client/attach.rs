//! `cosched attach`: hand an already running process, and what it starts, to the daemon.

use super::common::{unexpected, ClientArgs};
use super::job_args::JobArgs;
use cosched_service::protocol::{Attachment, Reply, Request};

/// Adopt a running process and its descendants as a job, and print the job's id
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The process is then placed and time-sliced like a submitted job; it keeps \
its parent, output and environment. Only its owner or root may attach it, and only it and those \
of its descendants that are wholly its owner's are ever touched (a set-uid child is left alone). \
As root the daemon moves it into cosched's cgroups unless --in-place keeps it where it is (a batch \
system's cgroup), placed by CPU affinity and paused by signals; a process that another cgroup \
manager limits (a systemd MemoryMax or TasksMax, a container's or a batch system's cpuset) stays in \
place by default, and --move moves it all the same (docs/service.md).\n\n\
Examples:\n  cosched attach 4242\n  \
cosched attach --name solver --threads 1:16 --kind rigid 4242\n  \
cosched attach --in-place --label slurm_job=$SLURM_JOB_ID,slurm_step=$SLURM_STEP_ID $PID"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    job: JobArgs,
    /// Leave the process in the cgroups it is in (placed by affinity, paused by signals)
    #[arg(long)]
    in_place: bool,
    /// Move the process into cosched's cgroups even out of cgroups that limit it
    #[arg(long = "move", conflicts_with = "in_place")]
    move_out: bool,
    /// The process to attach
    pid: u32,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (min_threads, max_threads) = args.job.threads()?;
    let attachment = Attachment {
        pid: args.pid,
        name: args.job.name.clone(),
        min_threads,
        max_threads,
        kind: args.job.kind()?,
        weight: args.job.weight,
        coschedule: !args.job.no_coschedule,
        hints: args.job.hints()?,
        labels: args.job.labels()?,
        in_place: args.in_place,
        move_out: args.move_out,
    };
    match args.client.request(Request::Attach(attachment))? {
        Reply::Attached { id } => {
            if !args.client.print_json(&serde_json::json!({ "id": id })) {
                println!("{id}");
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
