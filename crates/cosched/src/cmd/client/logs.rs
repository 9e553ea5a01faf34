//! `cosched logs`: a job's output, read from the files the daemon gives it.

use super::common::{unexpected, ClientArgs};
use super::log_file::{self, Shape};
use cosched_service::protocol::{JobView, Reply, Request};

/// Print a job's standard output (or with --stderr its standard error)
#[derive(clap::Args, Debug)]
#[command(
    after_help = "With --json, each piece of output read is one JSON line: {\"id\": ID, \
\"stream\": \"stdout\" or \"stderr\", \"text\": ...} (bytes that are not UTF-8 replaced by U+FFFD).\n\n\
Examples:\n  cosched logs 12\n  cosched logs 12 --follow\n  cosched logs 12 --stderr\n  \
cosched logs 12 --tail 20 --follow\n  cosched logs 12 --follow --json | jq -r .text\n  \
cosched logs 12 --remove\n\n\
Only a regular file is read: a job whose output goes to a device or a FIFO has no log here."
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    id: u64,
    /// Keep printing what the job writes until it ends
    #[arg(long, short)]
    follow: bool,
    /// Standard error instead of standard output
    #[arg(long)]
    stderr: bool,
    /// Only the last N lines (then, with --follow, what follows)
    #[arg(long, short = 'n', value_name = "N")]
    tail: Option<u64>,
    /// Remove the job's logs from the daemon's state directory (an ended job's, your own)
    #[arg(long, conflicts_with_all = ["follow", "stderr", "tail"])]
    remove: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.remove {
        return remove(&args);
    }
    let mut job = show(&args)?;
    anyhow::ensure!(
        !job.attached,
        "job {} is an attached process: cosched did not start it, so its output goes where its own \
parent sent it",
        job.id
    );
    let path = if args.stderr {
        &job.stderr
    } else {
        &job.stdout
    }
    .clone();
    // Where jobs are private, another user's job comes without its paths.
    anyhow::ensure!(
        !path.as_os_str().is_empty(),
        "job {} is another user's: only its owner or root may read its output",
        job.id
    );
    let stream = if args.stderr { "stderr" } else { "stdout" };
    let shape = match args.client.json {
        true => Shape::Json { id: job.id, stream },
        false => Shape::Raw,
    };
    let mut offset = None;
    let mut out = std::io::stdout();
    loop {
        // Opened afresh each time: the job may not have created it yet.
        if let Some((mut file, len)) = log_file::open(&path)? {
            let from = match (offset, args.tail) {
                (Some(offset), _) => offset,
                (None, Some(lines)) => log_file::tail_offset(&mut file, len, lines)?,
                (None, None) => 0,
            };
            offset = Some(log_file::copy(&mut file, from, len, &mut out, shape)?);
        }
        if !args.follow || job.state.ended() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        job = show(&args)?;
    }
}

fn remove(args: &Args) -> anyhow::Result<()> {
    match args.client.request(Request::RemoveLogs { id: args.id })? {
        Reply::LogsRemoved { id, bytes } if args.client.json => {
            println!(
                "{}",
                serde_json::json!({ "id": id, "removed_bytes": bytes })
            );
        }
        Reply::LogsRemoved { id, bytes } => {
            println!("removed the logs of job {id} ({bytes} bytes)")
        }
        other => return Err(unexpected(other)),
    }
    Ok(())
}

fn show(args: &Args) -> anyhow::Result<JobView> {
    match args.client.request(Request::Show { id: args.id })? {
        Reply::Job { job } => Ok(*job),
        other => Err(unexpected(other)),
    }
}
