//! The daemon's durable history: an append-only JSON Lines file, each entry written and fsynced before
//! the state change it records is acknowledged or acted upon. Replaying it gives back every job and
//! its state after a crash or a restart. Why a log and not SQLite: `docs/service.md`.
//!
//! Commits are grouped: entries are appended in order under a lock (cheap, page cache), and a writer
//! then waits until an fsync covers its entry. One fsync makes every entry appended before it durable,
//! so while one writer syncs, those who appended meanwhile wait for it and need none of their own;
//! concurrent submissions share fsyncs instead of queueing behind one each.
//!
//! At each start the journal is replayed in one pass (`replay.rs`), the jobs that ended longer ago
//! than the configured retention are forgotten, and the journal is rewritten to what is left when
//! that pays (`compact.rs`); a running daemon compacts it too once it has grown far past its jobs.

mod appender;
mod compact;
mod entry;
#[cfg(test)]
mod fault_tests;
mod replay;

pub use entry::{Entry, NewJob};
pub use replay::{History, Replayed};

/// The history the journal at `path` holds, read beside the daemon that writes it, never taken
/// over or rewritten (`cosched report --since`).
pub fn read_history(path: &Path) -> io::Result<History> {
    replay::read(path)
}

use crate::config;
use crate::error::ServiceError;
use crate::protocol::now_unix;
use appender::Appender;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Entries a journal may hold beyond four per job before it is compacted.
pub const COMPACT_SLACK: usize = 4096;
/// Bytes a journal may grow by beyond its compacted length before it is compacted.
pub const COMPACT_SLACK_BYTES: u64 = 64 << 20;

pub struct Journal {
    /// The file's end, and how many entries were appended to it.
    appended: Mutex<Appender>,
    /// A second handle on the file, and how many entries are known to be on disk.
    synced: Mutex<(File, u64)>,
    /// How many entries had been appended when it was last compacted.
    compacted_at: AtomicU64,
    /// Its length when it was opened or last compacted.
    compacted_len: AtomicU64,
    path: PathBuf,
    /// fsyncs made, for tests of how commits are grouped.
    #[cfg(test)]
    fsyncs: AtomicU64,
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Entries before.
    pub entries: usize,
    /// Jobs kept.
    pub jobs: usize,
    /// Jobs forgotten, ended longer than the retention ago.
    pub forgotten: usize,
}

/// The position of an entry in the journal, to wait for with [`Journal::sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Appended(u64);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Opens (creating) the journal and replays it, forgetting the jobs that ended longer than
    /// `retention` ago. A torn last line is cut off in place. The journal is compacted when that
    /// forgot any, when it had lines that did not read, or when it holds far more entries than its
    /// jobs need; a compaction that fails (a full file system) leaves it as it was.
    pub fn open(path: &Path, keep: &config::History) -> io::Result<(Journal, History)> {
        let mut history = replay::read(path)?;
        let forgotten = history.forget(keep, now_unix());
        if history.torn_bytes > 0 {
            eprintln!(
                "cosched: {}: cut off a last entry left half written ({} bytes); it was never acknowledged",
                path.display(),
                history.torn_bytes
            );
        }
        if history.unreadable > 0 {
            eprintln!(
                "cosched: {}: skipped {} unreadable entries",
                path.display(),
                history.unreadable
            );
        }
        cut_torn_tail(path, history.torn_bytes)?;
        let bloated = history.entries > 4 * history.jobs.len() + COMPACT_SLACK;
        if forgotten > 0 || history.unreadable > 0 || bloated {
            let fresh = path.with_extension("compacting");
            // A full file system may refuse the copy: the journal as it is serves meanwhile.
            match compact::write(&fresh, &history).and_then(|_| compact::install(&fresh, path)) {
                Ok(()) => eprintln!(
                    "cosched: {}: compacted {} entries to {} jobs; {forgotten} jobs forgotten",
                    path.display(),
                    history.entries,
                    history.jobs.len(),
                ),
                Err(e) => {
                    let _ = std::fs::remove_file(&fresh);
                    eprintln!("cosched: {}: cannot compact: {e}", path.display());
                }
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        let syncing = file.try_clone()?;
        Ok((
            Journal {
                appended: Mutex::new(Appender::new(file, len, 0)),
                synced: Mutex::new((syncing, 0)),
                compacted_at: AtomicU64::new(0),
                compacted_len: AtomicU64::new(len),
                path: path.to_path_buf(),
                #[cfg(test)]
                fsyncs: AtomicU64::new(0),
            },
            history,
        ))
    }

    /// Whether the journal has grown enough past the `jobs` it holds to compact it: by more than
    /// four entries per job (plus [`COMPACT_SLACK`]), or to more than twice its length after the
    /// last compaction (plus [`COMPACT_SLACK_BYTES`]), as long entries make it.
    pub fn needs_compaction(&self, jobs: usize) -> bool {
        let appended = lock(&self.appended);
        let entries = appended.entries - self.compacted_at.load(Ordering::Relaxed);
        let compacted = self.compacted_len.load(Ordering::Relaxed);
        entries as usize > 4 * jobs + COMPACT_SLACK
            || appended.len > 2 * compacted + COMPACT_SLACK_BYTES
    }

    /// Compacts the journal while it is in use, forgetting the jobs that ended longer than
    /// `retention` ago: what was appended until now is replayed and written anew (without holding
    /// the journal), then, holding it, what was appended meanwhile is copied after it and the new
    /// file takes the old one's place. Appends and syncs wait only for that last step.
    pub fn compact(&self, keep: &config::History) -> io::Result<Compaction> {
        let (bytes, count) = {
            let appended = lock(&self.appended);
            (appended.len, appended.entries)
        };
        let mut history = replay::read_prefix(&self.path, bytes)?;
        let forgotten = history.forget(keep, now_unix());
        let fresh = self.path.with_extension("compacting");
        let mut file = compact::write(&fresh, &history)?;
        // In the order `sync` takes them.
        let mut synced = lock(&self.synced);
        let mut appended = lock(&self.appended);
        let mut tail = File::open(&self.path)?;
        tail.seek(SeekFrom::Start(bytes))?;
        io::copy(&mut tail, &mut file)?;
        file.sync_data()?;
        compact::install(&fresh, &self.path)?;
        let reopened = OpenOptions::new().append(true).open(&self.path)?;
        synced.0 = reopened.try_clone()?;
        let len = reopened.metadata()?.len();
        appended.replace(reopened, len);
        self.compacted_len.store(len, Ordering::Relaxed);
        // The tail copied is synced with the rest.
        synced.1 = appended.entries;
        self.compacted_at.store(appended.entries, Ordering::Relaxed);
        Ok(Compaction {
            entries: history.entries + (appended.entries - count) as usize,
            jobs: history.jobs.len(),
            forgotten,
        })
    }

    /// Appends `entry` after every entry appended before; it is durable once [`Journal::sync`] of
    /// the returned position has returned.
    pub fn append(&self, entry: &Entry) -> Result<Appended, ServiceError> {
        let mut line = serde_json::to_vec(entry).expect("journal entries always serialise");
        line.push(b'\n');
        let mut appended = lock(&self.appended);
        appended.append(&line).map_err(|e| self.error(e))?;
        Ok(Appended(appended.entries))
    }

    /// Waits until the entry at `position`, and every one before it, is on disk.
    pub fn sync(&self, position: Appended) -> Result<(), ServiceError> {
        let mut synced = lock(&self.synced);
        if synced.1 >= position.0 {
            // Another writer's fsync covered it while this one waited for the lock.
            return Ok(());
        }
        let covered = lock(&self.appended).entries;
        synced.0.sync_data().map_err(|e| self.error(e))?;
        #[cfg(test)]
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        synced.1 = covered;
        Ok(())
    }

    /// The fsyncs made so far.
    #[cfg(test)]
    pub(crate) fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Holds the journal as an fsync that does not return (a disk that hangs) holds it, until the
    /// guard is dropped: every [`Journal::sync`] waits meanwhile, appends do not.
    #[cfg(test)]
    pub(crate) fn hang_syncs(&self) -> MutexGuard<'_, (File, u64)> {
        lock(&self.synced)
    }

    /// Appends `entry` and waits until it is on disk.
    pub fn write(&self, entry: &Entry) -> Result<(), ServiceError> {
        let position = self.append(entry)?;
        self.sync(position)
    }

    /// Makes appends fail, as on a full file system, once the file would pass `bytes`.
    #[cfg(test)]
    pub(crate) fn fail_at(&self, bytes: Option<u64>) {
        lock(&self.appended).fail_at = bytes;
    }

    /// A journal that cannot be written is reported, not hidden; a full file system by its mount
    /// point, which is what an administrator frees space on.
    fn error(&self, reason: io::Error) -> ServiceError {
        let path = self.path.clone();
        match reason.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => ServiceError::JournalFull {
                mount: mount_point(&path),
                path,
            },
            _ => ServiceError::Journal { path, reason },
        }
    }
}

/// Cuts off the `torn` bytes a crash or a failed append left at the end of the journal at `path`,
/// in place, so that the next entry starts a line of its own even when there is no room to compact.
fn cut_torn_tail(path: &Path, torn: usize) -> io::Result<()> {
    if torn == 0 {
        return Ok(());
    }
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(file.metadata()?.len() - torn as u64)?;
    file.sync_all()
}

/// The mount point of the file system holding `path`: its highest ancestor on the same device.
fn mount_point(path: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let mut mount = path.parent().unwrap_or(path).to_path_buf();
    let dev = device(&mount);
    while let Some(parent) = mount.parent() {
        if parent.as_os_str().is_empty() || device(parent) != dev {
            break;
        }
        mount = parent.to_path_buf();
    }
    mount
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::JobState;
    use crate::protocol::{Accounting, Submission};
    use std::io::Write;

    /// A history that forgets nothing.
    const FOREVER: config::History = config::History {
        retention_seconds: f64::INFINITY,
        jobs_per_user: usize::MAX,
        bytes_per_user: u64::MAX,
    };

    fn keep(retention_seconds: f64) -> config::History {
        config::History {
            retention_seconds,
            ..FOREVER
        }
    }

    #[test]
    fn concurrent_writers_each_get_a_whole_line_and_every_entry_replays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
        std::thread::scope(|scope| {
            for writer in 0..8u64 {
                let journal = &journal;
                scope.spawn(move || {
                    for n in 0..50 {
                        let entry = Entry::Cancelled {
                            id: writer * 1000 + n,
                            t: 1.0,
                        };
                        journal.write(&entry).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let mut ids: Vec<u64> = text
            .lines()
            .map(|l| match serde_json::from_str(l).unwrap() {
                Entry::Cancelled { id, .. } => id,
                other => panic!("{other:?}"),
            })
            .collect();
        ids.sort();
        let expected: Vec<u64> = (0..8)
            .flat_map(|w| (0..50).map(move |n| w * 1000 + n))
            .collect();
        assert_eq!(ids, expected);
    }

    fn submitted(id: u64) -> Entry {
        Entry::Submitted {
            id,
            t: 1.0,
            uid: 1000,
            gid: 1000,
            submission: Submission::of("/bin/true"),
            stdout: "o".into(),
            stderr: "e".into(),
        }
    }

    #[test]
    fn replay_gives_back_each_jobs_last_state_and_skips_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        {
            let (journal, history) = Journal::open(&path, &FOREVER).unwrap();
            assert!(history.jobs.is_empty() && history.policy.is_none());
            for name in ["gang", "auto"] {
                journal
                    .write(&Entry::Policy {
                        t: 0.5,
                        name: name.into(),
                        uid: 0,
                    })
                    .unwrap();
            }
            for id in 1..=3 {
                journal.write(&submitted(id)).unwrap();
            }
            for id in [1, 2] {
                journal
                    .write(&Entry::Started {
                        id,
                        t: 2.0,
                        pid: 40 + id as u32,
                        start_ticks: 7,
                        threads: 2,
                        adopted: false,
                    })
                    .unwrap();
            }
            journal
                .write(&Entry::Finished {
                    id: 1,
                    t: Some(3.0),
                    ok: false,
                    exit_code: Some(3),
                    signal: None,
                    error: None,
                    oom: false,
                    accounting: None,
                })
                .unwrap();
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"event\":\"cancel")
            .unwrap();
        let (_, history) = Journal::open(&path, &FOREVER).unwrap();
        assert_eq!(history.policy.as_deref(), Some("auto"));
        let jobs = history.jobs;
        let states: Vec<_> = jobs.iter().map(|j| j.view.state).collect();
        assert_eq!(
            states,
            [JobState::Failed, JobState::Running, JobState::Queued]
        );
        assert_eq!(jobs[0].view.exit_code, Some(3));
        assert_eq!((jobs[1].view.pid, jobs[1].start_ticks), (Some(42), Some(7)));
    }

    #[test]
    fn a_task_that_joined_an_attached_job_is_adopted_again_with_it_and_only_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal
                .write(&Entry::Attached {
                    id: 1,
                    t: 1.0,
                    uid: 1000,
                    gid: 1000,
                    submission: Submission::of("stencil"),
                    pid: 50,
                    start_ticks: 9,
                    in_place: true,
                })
                .unwrap();
            journal.write(&submitted(2)).unwrap();
            for id in [1, 2] {
                journal
                    .write(&Entry::Joined {
                        id,
                        t: 2.0,
                        pid: 51,
                        start_ticks: 10,
                    })
                    .unwrap();
            }
        }
        let (_, history) = Journal::open(&path, &FOREVER).unwrap();
        let attached = &history.jobs[0];
        assert_eq!(attached.view.tasks, [51]);
        let task = attached.joined[0];
        assert_eq!((task.pid, task.start_ticks), (51, 10));
        assert!(task.attached && task.in_place, "{task:?}");
        // A job cosched started itself has no tasks of a Slurm step to join it.
        let started = &history.jobs[1];
        assert!(started.joined.is_empty() && started.view.tasks.is_empty());
    }

    #[test]
    fn an_oom_end_and_its_accounting_replay_and_survive_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let accounting = Accounting {
            user_seconds: Some(1.5),
            system_seconds: Some(0.25),
            peak_memory: Some(64 << 20),
            cpus: Some("0-1,4".into()),
        };
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal.write(&submitted(1)).unwrap();
            journal.write(&started(1)).unwrap();
            journal
                .write(&Entry::Finished {
                    id: 1,
                    t: Some(now_unix()),
                    ok: false,
                    exit_code: Some(137),
                    signal: None,
                    error: Some("out of memory".into()),
                    oom: true,
                    accounting: Some(Box::new(accounting.clone())),
                })
                .unwrap();
            journal.compact(&FOREVER).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"event":"compacted""#), "{text}");
        let (_, history) = Journal::open(&path, &FOREVER).unwrap();
        let view = &history.jobs[0].view;
        assert_eq!(view.state, crate::protocol::JobState::Oom);
        assert_eq!(view.accounting.as_deref(), Some(&accounting));
    }

    #[test]
    fn a_hold_and_a_release_replay_and_survive_compaction_with_the_slurm_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut held = submitted(1);
        let Entry::Submitted { submission, .. } = &mut held else {
            unreachable!()
        };
        submission.begin = Some(5.0);
        submission.exclusive = true;
        submission.singleton = true;
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal.write(&held).unwrap();
            journal.write(&submitted(2)).unwrap();
            for (id, held) in [(1, true), (2, true), (2, false)] {
                let t = now_unix();
                journal.write(&Entry::Held { id, t, held }).unwrap();
            }
        }
        let (journal, history) = Journal::open(&path, &FOREVER).unwrap();
        let holds = |history: &History| -> Vec<bool> {
            history.jobs.iter().map(|j| j.submission.hold).collect()
        };
        assert_eq!(holds(&history), [true, false]);
        let kept = &history.jobs[0].submission;
        assert_eq!(
            (kept.begin, kept.exclusive, kept.singleton),
            (Some(5.0), true, true)
        );
        journal.compact(&FOREVER).unwrap();
        drop(journal);
        let (_, history) = Journal::open(&path, &FOREVER).unwrap();
        assert_eq!(holds(&history), [true, false]);
    }

    fn finished(id: u64, t: f64) -> Entry {
        Entry::Finished {
            id,
            t: Some(t),
            ok: true,
            exit_code: Some(0),
            signal: None,
            error: None,
            oom: false,
            accounting: None,
        }
    }

    fn started(id: u64) -> Entry {
        Entry::Started {
            id,
            t: now_unix(),
            pid: 100 + id as u32,
            start_ticks: 7,
            threads: 2,
            adopted: false,
        }
    }

    fn append_raw(path: &Path, bytes: &[u8]) {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    #[test]
    fn corrupt_lines_and_a_torn_tail_are_cut_off_and_counted_and_what_follows_survives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal.write(&submitted(1)).unwrap();
        }
        append_raw(
            &path,
            b"\xff\xfe not UTF-8 \xc3\x28\n{\"event\":\"nonsense\"}\n",
        );
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal.write(&submitted(2)).unwrap();
        }
        let torn = b"{\"event\":\"submitted\",\"id\":3,\"t\"";
        append_raw(&path, torn);
        let history = replay::read(&path).unwrap();
        assert_eq!((history.unreadable, history.torn_bytes), (0, torn.len()));
        // Opening cuts the torn tail off, so that the next entry is a line of its own.
        {
            let (journal, history) = Journal::open(&path, &FOREVER).unwrap();
            let ids: Vec<u64> = history.jobs.iter().map(|j| j.view.id).collect();
            assert_eq!(ids, [1, 2]);
            journal.write(&started(2)).unwrap();
        }
        let history = replay::read(&path).unwrap();
        assert_eq!((history.unreadable, history.torn_bytes), (0, 0));
        assert_eq!(history.jobs[1].view.state, JobState::Running);
    }

    #[test]
    fn unreadable_lines_are_skipped_and_counted_not_a_refusal_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        Journal::open(&path, &FOREVER)
            .unwrap()
            .0
            .write(&submitted(1))
            .unwrap();
        append_raw(&path, b"\xff\xfe\n{\"event\":\"nonsense\"}\n");
        let read = replay::read(&path).unwrap();
        assert_eq!((read.unreadable, read.jobs.len()), (2, 1));
        // Compacted away at the start that found them.
        let (_, history) = Journal::open(&path, &FOREVER).unwrap();
        assert_eq!(history.jobs.len(), 1);
        assert_eq!(replay::read(&path).unwrap().unreadable, 0);
    }

    #[test]
    fn compaction_forgets_old_ended_jobs_keeps_every_other_as_it_was_and_ids_never_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let now = now_unix();
        {
            let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
            journal
                .write(&Entry::Policy {
                    t: 0.5,
                    name: "gang".into(),
                    uid: 0,
                })
                .unwrap();
            for id in 0..6 {
                journal.write(&submitted(id)).unwrap();
            }
            // 0 and 5 ended long ago, 1 ended just now, 2 runs (placed, threads changed), 3 waits,
            // 4 was cancelled while running and has not ended yet.
            for id in [0, 1, 2, 4, 5] {
                journal.write(&started(id)).unwrap();
            }
            journal.write(&finished(0, 10.0)).unwrap();
            journal.write(&finished(5, 10.0)).unwrap();
            journal.write(&finished(1, now)).unwrap();
            for n in 0..50 {
                journal
                    .write(&Entry::Placed {
                        id: 2,
                        t: now,
                        cpus: format!("{n}"),
                    })
                    .unwrap();
            }
            journal
                .write(&Entry::Threads {
                    id: 2,
                    t: now,
                    threads: 5,
                })
                .unwrap();
            journal.write(&Entry::Cancelled { id: 4, t: now }).unwrap();
        }
        let mut before = replay::read(&path).unwrap();
        before.forget(&keep(3600.0), now);
        let (journal, after) = Journal::open(&path, &keep(3600.0)).unwrap();
        let ids = |h: &History| h.jobs.iter().map(|j| j.view.id).collect::<Vec<_>>();
        assert_eq!(ids(&after), [1, 2, 3, 4]);
        assert_eq!(format!("{:?}", before.jobs), format!("{:?}", after.jobs));
        assert_eq!(after.policy.as_deref(), Some("gang"));
        assert_eq!(after.jobs[1].view.cpus.as_deref(), Some("49"));
        assert_eq!(after.jobs[1].view.threads, Some(5));
        assert_eq!(after.next_id, 6);
        drop(journal);
        // The compacted journal holds what is left, in few entries, and still knows the ids used.
        let again = replay::read(&path).unwrap();
        assert!(again.entries < 15, "{} entries", again.entries);
        assert_eq!(ids(&again), [1, 2, 3, 4]);
        assert_eq!(again.next_id, 6);
        let (_, all_forgotten) = Journal::open(&path, &keep(0.0)).unwrap();
        assert_eq!(ids(&all_forgotten), [2, 3, 4]);
        assert_eq!(replay::read(&path).unwrap().next_id, 6);
    }

    #[test]
    fn compaction_while_writers_append_loses_nothing_and_appends_go_on_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
        let now = now_unix();
        let mut last = None;
        for id in 0..100 {
            journal.append(&submitted(id)).unwrap();
            journal.append(&started(id)).unwrap();
            for n in 0..20 {
                let cpus = format!("{n}");
                journal.append(&Entry::Placed { id, t: now, cpus }).unwrap();
            }
            last = Some(journal.append(&finished(id, now)).unwrap());
        }
        journal.sync(last.unwrap()).unwrap();
        let compactions = std::thread::scope(|scope| {
            for writer in 0..4u64 {
                let journal = &journal;
                scope.spawn(move || {
                    for n in 0..100 {
                        let id = 1000 + writer * 100 + n;
                        journal.write(&submitted(id)).unwrap();
                        journal.write(&Entry::Cancelled { id, t: now }).unwrap();
                    }
                });
            }
            (0..3)
                .map(|_| journal.compact(&FOREVER).unwrap())
                .collect::<Vec<_>>()
        });
        assert!(compactions[0].entries >= 2300, "{compactions:?}");
        journal.write(&submitted(5000)).unwrap();
        drop(journal);
        let history = replay::read(&path).unwrap();
        assert_eq!((history.unreadable, history.torn_bytes), (0, 0));
        assert!(history.entries < 1500, "{} entries", history.entries);
        let state = |id: u64| {
            history
                .jobs
                .iter()
                .find(|j| j.view.id == id)
                .map(|j| j.view.state)
        };
        for id in 0..100 {
            assert_eq!(state(id), Some(JobState::Done), "job {id}");
        }
        for id in 1000..1400 {
            assert_eq!(state(id), Some(JobState::Cancelled), "job {id}");
        }
        assert_eq!(state(5000), Some(JobState::Queued));
        assert_eq!(history.next_id, 5001);
    }
}
