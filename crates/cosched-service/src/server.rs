//! The daemon's socket: every connection gets its own thread, a read timeout and a cap on the length
//! of a request line, so that no client — silent, malformed, huge or one of hundreds — can hold up the
//! executor's thread, which never reads from the socket itself.

use crate::protocol::{Envelope, Reply, Response, MAX_REQUEST_BYTES, PROTOCOL_VERSION};
use crate::registry::Peer;
use crate::state::Shared;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once; more are refused with an error.
pub const MAX_CONNECTIONS: usize = 512;

/// Accepts connections until the listener fails.
pub fn serve(listener: UnixListener, shared: Arc<Shared>, idle_timeout: Duration) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = respond(
                &mut stream,
                Reply::Error {
                    message: format!("too many connections ({MAX_CONNECTIONS}); try again"),
                },
            );
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        let still_open = open.clone();
        let spawned = std::thread::Builder::new()
            .name("cosched-client".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = connection(stream, &shared, idle_timeout);
                still_open.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The credentials of the process at the other end (SO_PEERCRED).
pub fn peer_of(stream: &UnixStream) -> io::Result<Peer> {
    // SAFETY: ucred is plain data; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

fn connection(stream: UnixStream, shared: &Shared, idle_timeout: Duration) -> io::Result<()> {
    let peer = peer_of(&stream)?;
    stream.set_read_timeout(Some(idle_timeout))?;
    stream.set_write_timeout(Some(idle_timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
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
        let reply = match serde_json::from_slice::<Envelope>(&line) {
            Err(e) => Reply::Error {
                message: format!("malformed request: {e}"),
            },
            Ok(envelope) if envelope.version != PROTOCOL_VERSION => Reply::Error {
                message: format!(
                    "protocol version {} is not spoken here; this daemon speaks version {PROTOCOL_VERSION}",
                    envelope.version
                ),
            },
            Ok(envelope) => crate::requests::handle(shared, envelope.request, peer),
        };
        respond(&mut writer, reply)?;
    }
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
