//! Telling systemd how the daemon is doing (`sd_notify`, Type=notify): one datagram per message to
//! the socket named by `$NOTIFY_SOCKET`, a path or, when it starts with `@`, an abstract name.
//! Without that variable (not started by systemd) every message is silently dropped.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `message` (newline-separated `KEY=VALUE` assignments) to systemd; `Ok(false)` when no
/// service manager listens.
pub fn notify(message: &str) -> io::Result<bool> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET").filter(|t| !t.is_empty()) else {
        return Ok(false);
    };
    send(&target.to_string_lossy(), message)?;
    Ok(true)
}

/// Sends `message` to `target`, a socket path or `@` and an abstract socket name.
fn send(target: &str, message: &str) -> io::Result<()> {
    let address = match target.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(target)?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(message.as_bytes(), &address)?;
    Ok(())
}

/// [`notify`], a failure reported on stderr: systemd missing a status line must not stop the daemon.
pub fn tell(message: &str) {
    if let Err(e) = notify(message) {
        eprintln!("cosched daemon: cannot notify the service manager: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(listener: &UnixDatagram) -> String {
        let mut buffer = [0u8; 256];
        let n = listener.recv(&mut buffer).unwrap();
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    }

    #[test]
    fn messages_reach_a_socket_path_and_an_abstract_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.to_str().unwrap(), "READY=1").unwrap();
        assert_eq!(received(&listener), "READY=1");

        let name = format!("cosched-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&address).unwrap();
        send(&format!("@{name}"), "STOPPING=1").unwrap();
        assert_eq!(received(&listener), "STOPPING=1");
    }
}
