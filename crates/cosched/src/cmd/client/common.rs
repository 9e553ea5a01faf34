//! What every client subcommand of the daemon shares: the socket to talk to, JSON output, and
//! waiting for jobs to end (`wait`, `submit --wait`).

use cosched_service::client::{self, ClientError};
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
        let chosen = self.socket.is_none() && std::env::var_os("COSCHED_SOCKET").is_none();
        let socket = self
            .socket
            .clone()
            .unwrap_or_else(cosched_service::paths::client_socket);
        let user = cosched_service::paths::user_socket();
        match client::request(&socket, request) {
            // The system daemon's socket was tried because the user's own daemon has none: a user
            // whose daemon stopped is told of theirs, not of a daemon they never ran.
            Err(e @ client::ClientError::Connect { .. })
                if chosen && !cosched_service::paths::is_root() && socket != user =>
            {
                Err(anyhow::Error::from(e).context(format!(
                    "your own daemon's socket {} does not exist (start your daemon with `cosched \
                     daemon`), so the system daemon's was tried",
                    user.display()
                )))
            }
            other => Ok(other?),
        }
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

pub fn unexpected(reply: Reply) -> anyhow::Error {
    anyhow::anyhow!("the daemon answered {reply:?}, which this request does not expect")
}

/// The jobs `ids` once all have ended, as the daemon tells of them.
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

/// Ends the process with the status of the first job that did not succeed.
pub fn exit_with_first_failure(jobs: &[JobView]) -> anyhow::Result<()> {
    match jobs.iter().map(JobView::wait_status).find(|&s| s != 0) {
        Some(status) => std::process::exit(status),
        None => Ok(()),
    }
}
