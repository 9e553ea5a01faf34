//! Where a daemon keeps its socket and its state: system-wide as root, per user otherwise.

use std::path::PathBuf;

pub const SYSTEM_SOCKET: &str = "/run/cosched/cosched.sock";
pub const SYSTEM_STATE: &str = "/var/lib/cosched";

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The socket a daemon of this user listens on: `$XDG_RUNTIME_DIR/cosched.sock`, or one under /tmp
/// named after the uid where no runtime directory is set.
pub fn user_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("cosched.sock"),
        _ => {
            // SAFETY: getuid has no preconditions.
            let uid = unsafe { libc::getuid() };
            PathBuf::from(format!("/tmp/cosched-{uid}/cosched.sock"))
        }
    }
}

/// `$XDG_STATE_HOME/cosched`, by default `~/.local/state/cosched`.
pub fn user_state() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("cosched");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
    PathBuf::from(home).join(".local/state/cosched")
}

/// The daemon's defaults for this user: system paths for root.
pub fn default_daemon_paths() -> (PathBuf, PathBuf) {
    if is_root() {
        (SYSTEM_SOCKET.into(), SYSTEM_STATE.into())
    } else {
        (user_socket(), user_state())
    }
}

/// The socket a client talks to: `$COSCHED_SOCKET`, else this user's daemon when one listens, else
/// the system daemon.
pub fn client_socket() -> PathBuf {
    if let Some(socket) = std::env::var_os("COSCHED_SOCKET").filter(|s| !s.is_empty()) {
        return socket.into();
    }
    let user = user_socket();
    if !is_root() && user.exists() {
        return user;
    }
    SYSTEM_SOCKET.into()
}
