//! The daemon's socket: every connection gets its own thread, a deadline for each whole request and a
//! cap on the length of a request line, so that no client — silent, slow, malformed, huge or one of
//! hundreds — can hold up the executor's thread, which never reads from the socket itself. The
//! connections open at once are limited in all and per user, with the last few kept for root
//! (`config.rs`).

use crate::config::Limits;
use crate::error::ServiceError;
use crate::protocol::{decode, Reply, Request, Response, MAX_REQUEST_BYTES, PROTOCOL_VERSION};
use crate::registry::Peer;
use crate::requests::Listing;
use crate::state::Shared;
use nix::sys::socket::{getsockopt, sockopt};
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Accepts connections until the listener fails.
pub fn serve(listener: UnixListener, shared: Arc<Shared>, idle_timeout: Duration) {
    let open = Arc::new(Mutex::new(Connections::default()));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let Ok(peer) = peer_of(&stream) else { continue };
        let admitted = match Connections::admit(&open, peer.uid, &shared.config().limits) {
            Ok(admitted) => admitted,
            Err(refused) => {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let message = refused.to_string();
                let _ = respond(&mut stream, Reply::Error { message });
                continue;
            }
        };
        let shared = shared.clone();
        // A thread that cannot be started drops `admitted` with the closure, which gives its place
        // back.
        let _ = std::thread::Builder::new()
            .name("cosched-client".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = connection(stream, peer, &shared, idle_timeout);
                drop(admitted);
            });
    }
}

/// The connections open, in all and per user.
#[derive(Default)]
struct Connections {
    total: usize,
    by_user: HashMap<u32, usize>,
}

/// A connection counted in [`Connections`] until dropped.
struct Admitted {
    table: Arc<Mutex<Connections>>,
    uid: u32,
}

impl Connections {
    /// Counts a new connection of `uid`, or says which limit refuses it: one user's connections
    /// (each `cosched wait` holds one) cannot take the last ones, which are root's.
    fn admit(
        table: &Arc<Mutex<Connections>>,
        uid: u32,
        limits: &Limits,
    ) -> Result<Admitted, ServiceError> {
        let mut open = table.lock().unwrap_or_else(|p| p.into_inner());
        if open.total >= limits.connections {
            return Err(ServiceError::TooManyConnections { open: open.total });
        }
        if uid != 0 {
            if open.total >= limits.connections - limits.connections_reserved_for_root {
                return Err(ServiceError::RootsConnections {
                    open: open.total,
                    reserved: limits.connections_reserved_for_root,
                });
            }
            let own = open.by_user.get(&uid).copied().unwrap_or(0);
            if own >= limits.connections_per_user {
                return Err(ServiceError::UsersConnections { uid, open: own });
            }
        }
        open.total += 1;
        *open.by_user.entry(uid).or_default() += 1;
        Ok(Admitted {
            table: table.clone(),
            uid,
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.table.lock().unwrap_or_else(|p| p.into_inner());
        open.total -= 1;
        if let Some(own) = open.by_user.get_mut(&self.uid) {
            *own -= 1;
            if *own == 0 {
                open.by_user.remove(&self.uid);
            }
        }
    }
}

/// A socket read against one deadline for a whole request, however the client spreads its bytes.
struct DeadlineReader {
    stream: UnixStream,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// The credentials of the process at the other end (SO_PEERCRED).
pub fn peer_of(stream: &UnixStream) -> io::Result<Peer> {
    let cred = getsockopt(stream, sockopt::PeerCredentials)?;
    Ok(Peer {
        pid: cred.pid(),
        uid: cred.uid(),
        gid: cred.gid(),
    })
}

fn connection(
    stream: UnixStream,
    peer: Peer,
    shared: &Shared,
    idle_timeout: Duration,
) -> io::Result<()> {
    stream.set_write_timeout(Some(idle_timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(DeadlineReader {
        stream,
        deadline: Instant::now(),
    });
    loop {
        reader.get_mut().deadline = Instant::now() + idle_timeout;
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let message = format!(
                    "no complete request within {} s; closing the connection",
                    idle_timeout.as_secs_f64()
                );
                return respond(&mut writer, Reply::Error { message });
            }
            Err(e) => return Err(e),
        }
        if line.len() > MAX_REQUEST_BYTES {
            let message =
                format!("request longer than {MAX_REQUEST_BYTES} bytes; closing the connection");
            return respond(&mut writer, Reply::Error { message });
        }
        let reply = match decode(&line) {
            Ok(Request::Jobs { all, filter }) => {
                stream_jobs(&mut writer, Listing::new(shared, all, &filter, peer))?;
                continue;
            }
            Err(message) => Reply::Error { message },
            Ok(request) => crate::requests::handle(shared, request, peer),
        };
        respond(&mut writer, reply)?;
    }
}

/// Bytes of a reply buffered before they are written to the socket.
const REPLY_BUFFER: usize = 64 * 1024;

/// Writes a `jobs` reply as it is listed, one chunk of jobs at a time, through a bounded buffer:
/// a client that does not read holds this connection's thread and one chunk, nothing more, and
/// the registry is never held while the socket is written.
fn stream_jobs(stream: &mut UnixStream, mut listing: Listing) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(REPLY_BUFFER, stream);
    write!(
        out,
        r#"{{"version":{PROTOCOL_VERSION},"reply":{{"jobs":{{"jobs":["#
    )?;
    let mut first = true;
    loop {
        let chunk = listing.next_chunk();
        if chunk.is_empty() {
            break;
        }
        for view in chunk {
            if !std::mem::take(&mut first) {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut out, &view)?;
        }
    }
    out.write_all(b"]}}}\n")?;
    out.flush()
}

fn respond(stream: &mut UnixStream, reply: Reply) -> io::Result<()> {
    let mut line = serde_json::to_vec(&Response {
        version: PROTOCOL_VERSION,
        reply,
    })
    .expect("responses always serialise");
    line.push(b'\n');
    stream.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DaemonConfig;
    use crate::journal::{Entry, Journal};
    use crate::protocol::{JobFilter, Submission};
    use crate::registry::Registry;

    #[test]
    fn a_streamed_jobs_reply_is_the_reply_a_whole_one_would_be() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) =
            Journal::open(&dir.path().join("journal.jsonl"), &Default::default()).unwrap();
        let mut registry = Registry::new("eq".into(), 1, Default::default());
        // Several chunks, one of them ended and listed only with `all`.
        for uid in (0..300).map(|n| 1000 + n % 3) {
            let _ = registry.apply(Entry::Submitted {
                id: registry.next_id(),
                t: 1.0,
                uid,
                gid: uid,
                submission: Submission::of("/bin/true"),
                stdout: "o".into(),
                stderr: "e".into(),
            });
        }
        registry.take_incoming(1000, 1000);
        registry.finish(7, Some(2.0), true, Some(0), None);
        let shared = Shared::new(
            registry,
            journal,
            dir.path().into(),
            DaemonConfig::default(),
        );
        let peer = Peer {
            pid: 1,
            uid: 1001,
            gid: 1001,
        };
        for all in [true, false] {
            let filter = JobFilter::default();
            let (mut ours, theirs) = UnixStream::pair().unwrap();
            let reader = std::thread::spawn(move || {
                let mut line = String::new();
                BufReader::new(theirs).read_line(&mut line).unwrap();
                line
            });
            stream_jobs(&mut ours, Listing::new(&shared, all, &filter, peer)).unwrap();
            let streamed: Response = serde_json::from_str(&reader.join().unwrap()).unwrap();
            let request = Request::Jobs { all, filter };
            let whole = crate::requests::handle(&shared, request, peer);
            let Reply::Jobs { jobs } = &whole else {
                panic!("{whole:?}")
            };
            assert_eq!(jobs.len(), if all { 300 } else { 299 });
            assert_eq!(streamed.reply, whole);
        }
    }
}
