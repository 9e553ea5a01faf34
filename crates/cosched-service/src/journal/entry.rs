//! The journal's entries: each a change of the daemon's state, and what each does to a job's view,
//! defined once for the live registry (`registry/apply.rs`) and for replay (`replay.rs`).

use crate::protocol::{Accounting, JobState, JobView, Submission};
use cosched_linux::Adopt;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
        /// The signal that ended its main process ([`JobView::signal`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        error: Option<String>,
        /// It failed after processes of it were killed for passing its memory limit.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        oom: bool,
        /// What it used, where the executor measured it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accounting: Option<Box<Accounting>>,
    },
    Cancelled {
        id: u64,
        t: f64,
    },
    /// Held by its user (`held`) or released, while pending.
    Held {
        id: u64,
        t: f64,
        held: bool,
    },
    /// Its time limit passed and it was sent SIGTERM.
    TimedOut {
        id: u64,
        t: f64,
    },
    /// The daemon's policy from now on (`--policy` at start, or `cosched policy P` by `uid`).
    Policy {
        t: f64,
        name: String,
        uid: u32,
    },
    /// The first entry of a compacted journal (`compact.rs`): ids from `next_id` on are free.
    Compacted {
        t: f64,
        next_id: u64,
    },
}

/// A job as the entry that brings it in describes it.
pub struct NewJob {
    pub view: JobView,
    pub gid: u32,
    pub submission: Submission,
    /// The running process an attached job is, to adopt instead of starting anything.
    pub process: Option<Adopt>,
}

impl Entry {
    /// The job it is about; `None` for the daemon's own changes (policy, compaction).
    pub fn job(&self) -> Option<u64> {
        match self {
            Entry::Submitted { id, .. }
            | Entry::Attached { id, .. }
            | Entry::Joined { id, .. }
            | Entry::Started { id, .. }
            | Entry::Placed { id, .. }
            | Entry::Threads { id, .. }
            | Entry::Finished { id, .. }
            | Entry::Cancelled { id, .. }
            | Entry::Held { id, .. }
            | Entry::TimedOut { id, .. } => Some(*id),
            Entry::Policy { .. } | Entry::Compacted { .. } => None,
        }
    }

    /// The job it brings in (`submitted`, `attached`); `None` for any other entry.
    pub fn into_new_job(self) -> Option<NewJob> {
        match self {
            Entry::Submitted {
                id,
                t,
                uid,
                gid,
                submission,
                stdout,
                stderr,
            } => Some(NewJob {
                view: JobView::queued(id, uid, t, &submission, stdout, stderr),
                gid,
                submission,
                process: None,
            }),
            Entry::Attached {
                id,
                t,
                uid,
                gid,
                submission,
                pid,
                start_ticks,
                in_place,
            } => {
                let no_logs = PathBuf::new;
                let mut view = JobView::queued(id, uid, t, &submission, no_logs(), no_logs());
                view.pid = Some(pid);
                view.attached = true;
                let process = Adopt {
                    pid: pid as i32,
                    start_ticks,
                    attached: true,
                    in_place,
                };
                Some(NewJob {
                    view,
                    gid,
                    submission,
                    process: Some(process),
                })
            }
            _ => None,
        }
    }

    /// Changes `view`, the view of the job it is about, as it says. A job the daemon cancelled or
    /// timed out keeps that state whatever the executor reports later.
    pub fn change(&self, view: &mut JobView) {
        match self {
            Entry::Started {
                t,
                pid,
                threads,
                adopted,
                ..
            } => {
                if !view.state.ended_by_daemon() {
                    view.state = JobState::Running;
                }
                view.started.get_or_insert(*t);
                view.pid = Some(*pid);
                view.threads = Some(*threads);
                view.adopted = *adopted;
            }
            // Only an attached job has further tasks of its Slurm step.
            Entry::Joined { pid, .. } if view.attached => view.tasks.push(*pid),
            Entry::Placed { cpus, .. } => view.cpus = Some(cpus.clone()),
            Entry::Threads { threads, .. } => view.threads = Some(*threads),
            Entry::Finished {
                t,
                ok,
                exit_code,
                signal,
                error,
                oom,
                accounting,
                ..
            } => {
                if !view.state.ended_by_daemon() {
                    view.state = match (*ok, *oom) {
                        (true, _) => JobState::Done,
                        (false, true) => JobState::Oom,
                        (false, false) => JobState::Failed,
                    };
                }
                view.accounting.clone_from(accounting);
                view.finished = *t;
                view.exit_code = *exit_code;
                view.signal = *signal;
                view.error.clone_from(error);
                view.cpus = None;
            }
            Entry::Cancelled { .. } => view.state = JobState::Cancelled,
            Entry::TimedOut { .. } if !view.state.ended_by_daemon() => {
                view.state = JobState::Timeout
            }
            _ => {}
        }
    }
}
