//! Compaction: the journal rewritten as the entries that give back the jobs it still holds, so that
//! its length, and a restart's time, follow the history kept rather than every change ever made.

use super::replay::History;
use super::Entry;
use crate::protocol::now_unix;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `history` to a new file `fresh`: a `compacted` entry with the next id (so that ids never
/// repeat, forgotten jobs' included), the policy, then each job in as few entries as replay needs.
/// Returns the file, synced, open for more to be appended.
pub fn write(fresh: &Path, history: &History) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(fresh)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let t = now_unix();
    let mut write = |entry: &Entry| -> io::Result<()> {
        serde_json::to_writer(&mut out, entry)?;
        out.write_all(b"\n")
    };
    write(&Entry::Compacted {
        t,
        next_id: history.next_id,
    })?;
    if let Some(name) = &history.policy {
        write(&Entry::Policy {
            t,
            name: name.clone(),
            uid: history.policy_uid,
        })?;
    }
    for job in &history.jobs {
        for entry in job.entries() {
            write(&entry)?;
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file)
}

/// Renames `fresh` over the journal `path`, durably: a crash leaves either file whole in its place.
pub fn install(fresh: &Path, path: &Path) -> io::Result<()> {
    fs::rename(fresh, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
