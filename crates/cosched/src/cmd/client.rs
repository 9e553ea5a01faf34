//! What every client subcommand of the daemon shares: the socket to talk to and JSON output.

use cosched_service::client;
use cosched_service::protocol::{JobView, Reply, Request};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ClientArgs {
    /// The daemon's socket [default: $COSCHED_SOCKET, else your own daemon's, else
    /// /run/cosched/cosched.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print the daemon's answer as JSON
    #[arg(long)]
    pub json: bool,
}

impl ClientArgs {
    pub fn request(&self, request: Request) -> anyhow::Result<Reply> {
        let socket = self
            .socket
            .clone()
            .unwrap_or_else(cosched_service::paths::client_socket);
        Ok(client::request(&socket, request)?)
    }

    /// Prints `value` as one JSON line when `--json` was given; true if it did.
    pub fn print_json(&self, value: &impl serde::Serialize) -> bool {
        if self.json {
            println!(
                "{}",
                serde_json::to_string(value).expect("replies serialise")
            );
        }
        self.json
    }
}

/// One line per job: id, name, user, state, CPUs now, threads, elapsed (`H:MM:SS`).
pub fn print_jobs(jobs: &[JobView]) {
    println!(
        "{:>6}  {:<16} {:>6}  {:<9} {:<10} {:>7} {:>10} {:>8}  labels",
        "id", "name", "uid", "state", "cpus", "threads", "elapsed", "slowdown"
    );
    let now = cosched_service::protocol::now_unix();
    for job in jobs {
        let elapsed = job
            .started
            .map(|s| job.finished.unwrap_or(now) - s)
            .map_or("-".to_string(), super::slurm_time::format_duration);
        let mut labels: Vec<String> = job.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !job.tasks.is_empty() {
            labels.push(format!("tasks={}", job.tasks.len() + 1));
        }
        println!(
            "{:>6}  {:<16} {:>6}  {:<9} {:<10} {:>7} {:>10} {:>8}  {}",
            job.id,
            job.name,
            job.uid,
            format!("{:?}", job.state).to_lowercase(),
            job.cpus.as_deref().unwrap_or("-"),
            job.threads.map_or("-".into(), |t| t.to_string()),
            elapsed,
            job.slowdown.map_or("-".into(), |s| format!("{s:.2}")),
            labels.join(",")
        );
    }
}

pub fn unexpected(reply: Reply) -> anyhow::Error {
    anyhow::anyhow!("the daemon answered {reply:?}, which this request does not expect")
}
