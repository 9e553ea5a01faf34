//! `cosched logs`: a job's output, read from the files the daemon gives it.

use super::client::{unexpected, ClientArgs};
use anyhow::Context as _;
use cosched_service::protocol::{JobView, Reply, Request};
use std::io::{Read, Seek, SeekFrom, Write};

/// Print a job's standard output (and with --stderr its standard error)
#[derive(clap::Args, Debug)]
#[command(
    after_help = "With --json, each piece of output read is one JSON line: {\"id\": ID, \
\"stream\": \"stdout\" or \"stderr\", \"text\": ...} (bytes that are not UTF-8 replaced by U+FFFD).\n\n\
Examples:\n  cosched logs 12\n  cosched logs 12 --follow\n  cosched logs 12 --stderr\n  \
cosched logs 12 --follow --json | jq -r .text\n  cosched logs 12 --remove"
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
    /// Remove the job's logs from the daemon's state directory (an ended job's, your own)
    #[arg(long, conflicts_with_all = ["follow", "stderr"])]
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
    let stream = if args.stderr { "stderr" } else { "stdout" };
    let json = args.client.json.then_some((job.id, stream));
    let mut offset = 0;
    let mut out = std::io::stdout();
    loop {
        offset += copy_from(&path, offset, &mut out, json)?;
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

/// Copies what `path` holds beyond `offset`, as it is or, given the job's id and stream, as one JSON
/// line; a log not created yet holds nothing.
fn copy_from(
    path: &std::path::Path,
    offset: u64,
    out: &mut impl Write,
    json: Option<(u64, &str)>,
) -> anyhow::Result<u64> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot read {}; only the job's owner may", path.display())
            })
        }
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    match json {
        Some(_) if bytes.is_empty() => {}
        Some((id, stream)) => {
            let text = String::from_utf8_lossy(&bytes);
            let line = serde_json::json!({ "id": id, "stream": stream, "text": text });
            writeln!(out, "{line}")?;
        }
        None => out.write_all(&bytes)?,
    }
    out.flush()?;
    Ok(bytes.len() as u64)
}
