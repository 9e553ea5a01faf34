//! Talking to a daemon: one request, one response, over its Unix socket.

use crate::protocol::{Envelope, Reply, Request, Response, PROTOCOL_VERSION};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no cosched daemon answers at {socket}: {source}; start one with `cosched daemon` (or `systemctl start cosched`), or name its socket with --socket")]
    Connect {
        socket: String,
        source: std::io::Error,
    },
    #[error("the daemon at {socket} closed the connection: {source}")]
    Io {
        socket: String,
        source: std::io::Error,
    },
    /// It read the request and closed the connection without a word: it stopped (or was killed)
    /// meanwhile, not a daemon of another version.
    #[error("the daemon at {socket} stopped before it answered")]
    Stopped { socket: String },
    #[error("the daemon at {socket} answered something this client cannot read ({detail}); are client and daemon the same version?")]
    Protocol { socket: String, detail: String },
    /// The socket is not one the caller or root set up; nothing was sent.
    #[error(transparent)]
    Untrusted(#[from] crate::paths::UnsafePlace),
    /// The daemon refused the request; its message says why.
    #[error("{0}")]
    Refused(String),
}

/// Sends `request` and returns the daemon's reply; a refusal becomes [`ClientError::Refused`].
pub fn request(socket: &Path, request: Request) -> Result<Reply, ClientError> {
    let name = socket.display().to_string();
    let io = |source| ClientError::Io {
        socket: name.clone(),
        source,
    };
    let caller = nix::unistd::geteuid().as_raw();
    crate::paths::check_client_socket(socket, caller).map_err(ClientError::Untrusted)?;
    let mut stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
        socket: name.clone(),
        source,
    })?;
    let mut line = serde_json::to_vec(&Envelope {
        version: PROTOCOL_VERSION,
        request,
    })
    .expect("requests always serialise");
    line.push(b'\n');
    // A daemon that refuses the connection (too many) answers and closes before reading: its answer
    // is still there to read when the write fails.
    let sent = stream.write_all(&line);
    let mut answer = String::new();
    let read = BufReader::new(&stream).read_line(&mut answer);
    if answer.is_empty() {
        sent.map_err(io)?;
        read.map_err(io)?;
        return Err(ClientError::Stopped { socket: name });
    }
    let response: Response = serde_json::from_str(&answer).map_err(|e| ClientError::Protocol {
        socket: name.clone(),
        detail: e.to_string(),
    })?;
    match response.reply {
        Reply::Error { message } => Err(ClientError::Refused(message)),
        reply => Ok(reply),
    }
}
