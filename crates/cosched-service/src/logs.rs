//! The logs the daemon keeps for jobs run without `-o`: `logs/<uid>/<id>.stdout|stderr` in the state
//! directory, each user's apart. The directory is the daemon's (a user cannot plant a link there
//! for it to write through), so users remove their logs through it (`cosched logs --remove`).
//!
//! A user's logs are held to `limits.log_bytes_per_user`: a job of theirs cannot grow any file past
//! it (RLIMIT_FSIZE, set in its process before exec: writes past it fail and SIGXFSZ ends it), and
//! no job of theirs with logs there is taken once their logs hold it. Root is held to neither.

use crate::error::ServiceError;
use crate::protocol::Reply;
use crate::registry::Peer;
use crate::state::Shared;
use std::fs;
use std::os::unix::fs::PermissionsExt;

/// Makes `uid`'s log directory, and refuses a job that would write there once it is full. Called
/// without the registry's lock: it reads the user's directory.
pub fn make_room(shared: &Shared, uid: u32) -> Result<(), ServiceError> {
    let dir = shared.logs_of(uid);
    if !dir.is_dir() {
        // Readable by all, whatever the daemon's umask: each log is its user's alone (mode 0600).
        fs::DirBuilder::new()
            .recursive(true)
            .create(&dir)
            .and_then(|()| fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)))
            .map_err(|reason| ServiceError::LogDirectory {
                path: dir.clone(),
                reason,
            })?;
    }
    if uid == 0 {
        return Ok(());
    }
    let bytes: u64 = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|m| m.len())
        .sum();
    match bytes >= shared.config().limits.log_bytes_per_user {
        true => Err(ServiceError::LogsFull { uid, dir, bytes }),
        false => Ok(()),
    }
}

/// Removes job `id`'s logs: the asker's own, or with root those of the job's owner. A job still
/// held must have ended; a forgotten one's logs go by id.
pub fn remove(shared: &Shared, id: u64, peer: Peer) -> Result<Reply, ServiceError> {
    let owner = {
        let registry = shared.lock();
        match registry.job(id) {
            Some(job) if !job.state.ended() => return Err(ServiceError::LogsInUse(id)),
            Some(job) if peer.uid == 0 => job.uid,
            _ => peer.uid,
        }
    };
    let dir = shared.logs_of(owner);
    let mut bytes = 0;
    let mut found = false;
    for stream in ["stdout", "stderr"] {
        let path = dir.join(format!("{id}.{stream}"));
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        fs::remove_file(&path).map_err(|reason| ServiceError::RemoveLogs { path, reason })?;
        bytes += meta.len();
        found = true;
    }
    match found {
        true => Ok(Reply::LogsRemoved { id, bytes }),
        false => Err(ServiceError::NoLogs { id, uid: owner }),
    }
}
