//! The daemon's durable history: an append-only JSON Lines file, each entry written and fsynced before
//! the state change it records is acknowledged or acted upon. Replaying it gives back every job and
//! its state after a crash or a restart. Why a log and not SQLite: `docs/service.md`.
//!
//! Commits are grouped: entries are appended in order under a lock (cheap, page cache), and a writer
//! then waits until an fsync covers its entry. One fsync makes every entry appended before it durable,
//! so while one writer syncs, those who appended meanwhile wait for it and need none of their own;
//! concurrent submissions share fsyncs instead of queueing behind one each.

use crate::error::ServiceError;
use crate::protocol::{JobState, JobView, Submission};
use cosched_linux::Adopt;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// One state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Entry {
    Submitted {
        id: u64,
        t: f64,
        uid: u32,
        gid: u32,
        submission: Submission,
        stdout: PathBuf,
        stderr: PathBuf,
    },
    /// A running process adopted as job `id` (`cosched attach`); `submission` describes it, it is
    /// never started from it.
    Attached {
        id: u64,
        t: f64,
        /// The process's real uid.
        uid: u32,
        gid: u32,
        submission: Submission,
        pid: u32,
        start_ticks: u64,
        in_place: bool,
    },
    /// A further task of attached job `id`, run as part of it: another task of its Slurm step.
    Joined {
        id: u64,
        t: f64,
        pid: u32,
        start_ticks: u64,
    },
    Started {
        id: u64,
        t: f64,
        pid: u32,
        /// With the pid, names the process across a daemon restart.
        start_ticks: u64,
        threads: u32,
        adopted: bool,
    },
    Placed {
        id: u64,
        t: f64,
        cpus: String,
    },
    Threads {
        id: u64,
        t: f64,
        threads: u32,
    },
    Finished {
        id: u64,
        /// `None`: it ended while no daemon watched it.
        t: Option<f64>,
        ok: bool,
        exit_code: Option<i32>,
        error: Option<String>,
    },
    Cancelled {
        id: u64,
        t: f64,
    },
    /// The daemon's policy from now on (`--policy` at start, or `cosched policy P` by `uid`).
    Policy {
        t: f64,
        name: String,
        uid: u32,
    },
}

pub struct Journal {
    /// The file and how many entries were appended to it.
    appended: Mutex<(File, u64)>,
    /// A second handle on the file, and how many entries are known to be on disk.
    synced: Mutex<(File, u64)>,
    path: PathBuf,
}

/// The position of an entry in the journal, to wait for with [`Journal::sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Appended(u64);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A job as the journal left it, with what is needed to run or adopt it again.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub view: JobView,
    pub gid: u32,
    pub submission: Submission,
    pub start_ticks: Option<u64>,
    /// The process of an attached job, to adopt again instead of starting anything.
    pub attached: Option<Adopt>,
    /// The further tasks that joined it.
    pub joined: Vec<Adopt>,
}

/// What replaying a journal gives back.
#[derive(Debug, Default)]
pub struct History {
    pub jobs: Vec<Replayed>,
    /// The last policy it names.
    pub policy: Option<String>,
}

impl Journal {
    /// Opens (creating) the journal and replays it.
    pub fn open(path: &Path) -> io::Result<(Journal, History)> {
        let mut history = History::default();
        if let Ok(file) = File::open(path) {
            for (n, line) in BufReader::new(file).lines().enumerate() {
                let line = line?;
                // A crash can leave the last line half written; every earlier line is whole.
                let Ok(entry) = serde_json::from_str::<Entry>(&line) else {
                    eprintln!(
                        "cosched: {}:{}: skipping an unreadable entry",
                        path.display(),
                        n + 1
                    );
                    continue;
                };
                match entry {
                    Entry::Policy { name, .. } => history.policy = Some(name),
                    entry => apply(&mut history.jobs, entry),
                }
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let syncing = file.try_clone()?;
        Ok((
            Journal {
                appended: Mutex::new((file, 0)),
                synced: Mutex::new((syncing, 0)),
                path: path.to_path_buf(),
            },
            history,
        ))
    }

    /// Appends `entry` after every entry appended before; it is durable once [`Journal::sync`] of
    /// the returned position has returned.
    pub fn append(&self, entry: &Entry) -> Result<Appended, ServiceError> {
        let mut line = serde_json::to_vec(entry).expect("journal entries always serialise");
        line.push(b'\n');
        let mut appended = lock(&self.appended);
        appended.0.write_all(&line).map_err(|e| self.error(e))?;
        appended.1 += 1;
        Ok(Appended(appended.1))
    }

    /// Waits until the entry at `position`, and every one before it, is on disk.
    pub fn sync(&self, position: Appended) -> Result<(), ServiceError> {
        let mut synced = lock(&self.synced);
        if synced.1 >= position.0 {
            // Another writer's fsync covered it while this one waited for the lock.
            return Ok(());
        }
        let covered = lock(&self.appended).1;
        synced.0.sync_data().map_err(|e| self.error(e))?;
        synced.1 = covered;
        Ok(())
    }

    /// Appends `entry` and waits until it is on disk.
    pub fn write(&self, entry: &Entry) -> Result<(), ServiceError> {
        let position = self.append(entry)?;
        self.sync(position)
    }

    /// A journal that cannot be written is reported, not hidden.
    fn error(&self, source: io::Error) -> ServiceError {
        ServiceError::Journal {
            path: self.path.clone(),
            source,
        }
    }
}

fn apply(jobs: &mut Vec<Replayed>, entry: Entry) {
    if let Entry::Submitted {
        id,
        t,
        uid,
        gid,
        submission,
        stdout,
        stderr,
    } = entry
    {
        jobs.push(Replayed {
            view: JobView::queued(id, uid, t, &submission, stdout, stderr),
            gid,
            submission,
            start_ticks: None,
            attached: None,
            joined: Vec::new(),
        });
        return;
    }
    if let Entry::Attached {
        id,
        t,
        uid,
        gid,
        submission,
        pid,
        start_ticks,
        in_place,
    } = entry
    {
        let mut view = JobView::queued(id, uid, t, &submission, PathBuf::new(), PathBuf::new());
        view.pid = Some(pid);
        view.attached = true;
        jobs.push(Replayed {
            view,
            gid,
            submission,
            start_ticks: Some(start_ticks),
            attached: Some(Adopt {
                pid: pid as i32,
                start_ticks,
                attached: true,
                in_place,
            }),
            joined: Vec::new(),
        });
        return;
    }
    let id = match &entry {
        Entry::Started { id, .. }
        | Entry::Joined { id, .. }
        | Entry::Placed { id, .. }
        | Entry::Threads { id, .. }
        | Entry::Finished { id, .. }
        | Entry::Cancelled { id, .. } => *id,
        Entry::Submitted { .. } | Entry::Attached { .. } | Entry::Policy { .. } => {
            unreachable!("handled above")
        }
    };
    let Some(job) = jobs.iter_mut().find(|j| j.view.id == id) else {
        return;
    };
    let view = &mut job.view;
    match entry {
        Entry::Started {
            t,
            pid,
            start_ticks,
            threads,
            adopted,
            ..
        } => {
            view.state = JobState::Running;
            view.started.get_or_insert(t);
            view.pid = Some(pid);
            view.threads = Some(threads);
            view.adopted = adopted;
            job.start_ticks = Some(start_ticks);
        }
        Entry::Joined {
            pid, start_ticks, ..
        } => {
            if let Some(main) = job.attached {
                view.tasks.push(pid);
                job.joined.push(Adopt {
                    pid: pid as i32,
                    start_ticks,
                    ..main
                });
            }
        }
        Entry::Placed { cpus, .. } => view.cpus = Some(cpus),
        Entry::Threads { threads, .. } => view.threads = Some(threads),
        Entry::Finished {
            t,
            ok,
            exit_code,
            error,
            ..
        } => {
            if view.state != JobState::Cancelled {
                view.state = if ok { JobState::Done } else { JobState::Failed };
            }
            view.finished = t;
            view.exit_code = exit_code;
            view.error = error;
            view.cpus = None;
        }
        Entry::Cancelled { .. } => view.state = JobState::Cancelled,
        Entry::Submitted { .. } | Entry::Attached { .. } | Entry::Policy { .. } => {
            unreachable!("handled above")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_each_get_a_whole_line_and_every_entry_replays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (journal, _) = Journal::open(&path).unwrap();
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
            let (journal, history) = Journal::open(&path).unwrap();
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
                    error: None,
                })
                .unwrap();
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"event\":\"cancel")
            .unwrap();
        let (_, history) = Journal::open(&path).unwrap();
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
            let (journal, _) = Journal::open(&path).unwrap();
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
        let (_, history) = Journal::open(&path).unwrap();
        let attached = &history.jobs[0];
        assert_eq!(attached.view.tasks, [51]);
        let task = attached.joined[0];
        assert_eq!((task.pid, task.start_ticks), (51, 10));
        assert!(task.attached && task.in_place, "{task:?}");
        // A job cosched started itself has no tasks of a Slurm step to join it.
        let started = &history.jobs[1];
        assert!(started.joined.is_empty() && started.view.tasks.is_empty());
    }
}
