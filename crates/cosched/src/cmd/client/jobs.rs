//! `cosched jobs`: the daemon's jobs, queued and running (with `--all`, its whole history), filtered
//! and shown with the fields asked for, as `squeue`/`sacct` would.

use super::common::{unexpected, ClientArgs};
use super::job_filter::FilterArgs;
use super::job_table::{check_fields, print_json, print_table, DEFAULT_FIELDS};
use cosched_service::protocol::{Reply, Request};

/// List the daemon's jobs: id, name, user, state, CPUs now, threads, elapsed, slowdown so far
#[derive(clap::Args, Debug)]
#[command(
    after_help = "States, as Slurm names them (any of the three spellings, any case): \
pending PD PENDING (not started; `reason` says why), running R RUNNING, suspended S SUSPENDED \
(running, frozen between its slots), done CD COMPLETED, failed F FAILED, cancelled CA CANCELLED, \
timeout TO TIMEOUT, oom OOM OUT_OF_MEMORY (killed for passing its --mem). Asking for a state a \
job reaches by ending lists ended jobs without --all.\n\n\
Fields for --format: id (ARRAY_INDEX for an element of an array), job_id, name, user, uid, state, \
state_code (PD, R, S, CD, F, CA, TO, OOM), reason (why pending; why it ended), cpus (how many \
now; once ended, how many it ever had), cpu_list (those CPUs), threads, elapsed, time_limit, \
submitted, started, finished, exit_code (128+N when signal N ended it, as shells give it), \
signal, exit (code, or the signal that killed it), error, slowdown, labels, priority (pending \
jobs start highest first), nice, mem (asked for), and once ended: cputime, user_time, \
system_time, maxrss (peak memory).\n\n\
--json prints {\"jobs\": [...]} as squeue --json does, each job whole, or with --format only \
the fields named.\n\n\
Examples:\n  cosched jobs\n  cosched jobs --user ana -t R,S\n  cosched jobs -t CD,F,TO --since 1h\n  \
cosched jobs --all --since 1h --format id,name,state,elapsed,exit_code\n  \
cosched jobs --all --since 1h --format id,name,state,exit,reason,cputime,maxrss,mem,cpus\n  \
cosched jobs --format id,state,reason,priority,nice\n  cosched jobs --name lu --json\n  \
cosched jobs --json --format id,state,cpus"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Include jobs that have ended
    #[arg(short, long)]
    all: bool,
    /// Fields to show, comma-separated, in order (see below); `-O` as squeue's `--Format`, since
    /// `-o` names an output file in every cosched command. Example: -O id,state,cpus
    #[arg(short = 'O', long, value_name = "FIELDS")]
    format: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let filter = args.filter.filter()?;
    // As `squeue -t CD` does: asking for an ended state asks for the jobs that ended.
    let ended_asked = filter.states.iter().any(|s| s.ended());
    let request = Request::Jobs {
        all: args.all || args.filter.since.is_some() || ended_asked,
        filter,
    };
    let fields = args.format.as_deref();
    if let Some(fields) = fields {
        // Refused before asking, so that a typo is told even when no job is listed.
        check_fields(fields)?;
    }
    match args.client.request(request)? {
        Reply::Jobs { jobs } => {
            if args.client.json {
                print_json(&jobs, fields)?;
            } else {
                print_table(&jobs, fields.unwrap_or(DEFAULT_FIELDS))?;
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
