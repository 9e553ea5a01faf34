//! Where a daemon keeps its socket and its state: system-wide as root, per user otherwise.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

pub const SYSTEM_SOCKET: &str = "/run/cosched/cosched.sock";
pub const SYSTEM_STATE: &str = "/var/lib/cosched";

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The socket a daemon of this user listens on: `$XDG_RUNTIME_DIR/cosched.sock`, or one under /tmp
/// named after the uid where no runtime directory is set.
pub fn user_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("cosched.sock"),
        _ => {
            let uid = nix::unistd::getuid();
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

/// Why a directory or socket is not one to trust: someone other than its user (or root) could
/// control it.
#[derive(Debug, thiserror::Error)]
pub enum UnsafePlace {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("{} belongs to uid {owner}, not to uid {uid} that this daemon runs as; a daemon keeps its \
socket and state only in directories of its own user that no one else may write to (choose another \
with --socket or --state)", path.display())]
    NotTheDaemons { path: PathBuf, owner: u32, uid: u32 },
    #[error("{} may be written by other users (mode {mode:o}); `chmod go-w {}`, or choose another \
directory", path.display(), path.display())]
    WritableByOthers { path: PathBuf, mode: u32 },
    #[error("its directory {} belongs to uid {owner}, neither to you (uid {uid}) nor to root", dir.display())]
    ForeignDirectory { dir: PathBuf, owner: u32, uid: u32 },
    #[error("it is not a socket of yours (uid {uid}) or of root's (it belongs to uid {owner})")]
    ForeignSocket { owner: u32, uid: u32 },
    #[error("refusing to talk to {}: {why}; start your own daemon (`cosched daemon`) or name a socket \
you trust with --socket", socket.display())]
    UntrustedSocket {
        socket: PathBuf,
        why: Box<UnsafePlace>,
    },
}

/// Checks that `dir`, a directory a daemon keeps its socket or state in, belongs to `uid` (the
/// daemon's) and that no one else may write to it: whoever could would control the daemon's
/// journal, logs or socket.
pub fn check_own_dir(dir: &Path, uid: u32) -> Result<(), UnsafePlace> {
    let meta = std::fs::metadata(dir).map_err(|source| UnsafePlace::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    if meta.uid() != uid {
        return Err(UnsafePlace::NotTheDaemons {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    check_not_writable_by_others(dir, meta.mode())
}

fn check_not_writable_by_others(dir: &Path, mode: u32) -> Result<(), UnsafePlace> {
    if mode & 0o022 != 0 {
        return Err(UnsafePlace::WritableByOthers {
            path: dir.to_path_buf(),
            mode: mode & 0o7777,
        });
    }
    Ok(())
}

/// Checks, before a client sends anything, that the socket at `socket` is one that the caller
/// (`uid`) or root set up: its directory belongs to one of them and no one else may write to it,
/// and the socket belongs to one of them. Another user could otherwise listen there and be sent the
/// request, a submission's whole environment included. A socket or directory that does not exist is
/// left for the connection to report.
pub fn check_client_socket(socket: &Path, uid: u32) -> Result<(), UnsafePlace> {
    let trusted = |owner: u32| owner == uid || owner == 0;
    let dir = match socket.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let refuse = |why: UnsafePlace| UnsafePlace::UntrustedSocket {
        socket: socket.to_path_buf(),
        why: Box::new(why),
    };
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| refuse(UnsafePlace::Unreadable { path, source })
    };
    let dir_meta = match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        meta => meta.map_err(unreadable(dir))?,
    };
    if !trusted(dir_meta.uid()) {
        return Err(refuse(UnsafePlace::ForeignDirectory {
            dir: dir.to_path_buf(),
            owner: dir_meta.uid(),
            uid,
        }));
    }
    check_not_writable_by_others(dir, dir_meta.mode()).map_err(refuse)?;
    let meta = match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        meta => meta.map_err(unreadable(socket))?,
    };
    if !meta.file_type().is_socket() || !trusted(meta.uid()) {
        return Err(refuse(UnsafePlace::ForeignSocket {
            owner: meta.uid(),
            uid,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_client_refuses_a_socket_in_a_directory_others_may_write_to() {
        let uid = nix::unistd::geteuid().as_raw();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cosched.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        mode(dir.path(), 0o755);
        check_client_socket(&socket, uid).unwrap();
        mode(dir.path(), 0o777);
        let refused = check_client_socket(&socket, uid).unwrap_err().to_string();
        assert!(
            refused.contains("may be written by other users"),
            "{refused}"
        );
        assert!(
            refused.contains(&dir.path().display().to_string()),
            "{refused}"
        );
    }

    #[test]
    fn a_client_refuses_a_socket_another_user_owns() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root to give a directory to another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cosched.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        mode(dir.path(), 0o755);
        std::os::unix::fs::chown(dir.path(), Some(4242), None).unwrap();
        // Root trusts only what root owns; uid 4242 its own directory.
        let refused = check_client_socket(&socket, 0).unwrap_err().to_string();
        assert!(refused.contains("belongs to uid 4242"), "{refused}");
        // A root-owned socket in the user's own directory.
        check_client_socket(&socket, 4242).unwrap();
        std::os::unix::fs::lchown(&socket, Some(4343), None).unwrap();
        let refused = check_client_socket(&socket, 4242).unwrap_err().to_string();
        assert!(refused.contains("belongs to uid 4343"), "{refused}");
    }

    #[test]
    fn a_daemon_refuses_a_directory_it_does_not_own() {
        let uid = nix::unistd::geteuid().as_raw();
        let dir = tempfile::tempdir().unwrap();
        mode(dir.path(), 0o755);
        check_own_dir(dir.path(), uid).unwrap();
        let refused = check_own_dir(dir.path(), uid + 1).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("belongs to uid {uid}")),
            "{refused}"
        );
        mode(dir.path(), 0o775);
        let refused = check_own_dir(dir.path(), uid).unwrap_err().to_string();
        assert!(refused.contains("chmod go-w"), "{refused}");
    }
}
