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
    let target = target.to_string_lossy().into_owned();
    let address = match target.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(&target)?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(message.as_bytes(), &address)?;
    Ok(true)
}

/// [`notify`], a failure reported on stderr: systemd missing a status line must not stop the daemon.
pub fn tell(message: &str) {
    if let Err(e) = notify(message) {
        eprintln!("cosched daemon: cannot notify the service manager: {e}");
    }
}
