//! How the journal's entries change the registry: [`Registry::apply`] is the only way a job's state
//! changes, live (`state.rs` commits each entry, then applies it) as at a restart. The entries are
//! made here too, from what the registry holds, so that the journal tells what the registry does.

use super::{Registry, Tracked};
use crate::journal::{Entry, NewJob};
use crate::protocol::Accounting;
use cosched_core::CpuSet;
use cosched_linux::Adopt;

/// What applying entries asks of the daemon beyond the registry.
#[derive(Debug, Default)]
#[must_use]
pub struct Applied {
    /// The executor has news to take.
    pub wake: bool,
    /// A job ended: clients waiting on ends are to hear of it once it is durable.
    pub ended: bool,
    /// Processes of jobs cancelled before the executor took them (a job an earlier daemon started,
    /// an attached process, its step's tasks), with their owners: no executor watches them, so
    /// they are to be killed, once the registry is released.
    pub unwatched: Vec<(Adopt, u32)>,
}

impl Applied {
    fn waking() -> Applied {
        Applied {
            wake: true,
            ..Applied::default()
        }
    }

    /// What `self` and then `later` ask together.
    pub fn and(mut self, later: Applied) -> Applied {
        self.wake |= later.wake;
        self.ended |= later.ended;
        self.unwatched.extend(later.unwatched);
        self
    }
}

/// What the executor saw of a job's end.
#[derive(Debug, Default)]
pub struct Ending {
    /// `None`: it ended while no daemon watched it.
    pub t: Option<f64>,
    pub ok: bool,
    pub exit_code: Option<i32>,
    /// The signal that ended its main process.
    pub signal: Option<i32>,
    pub error: Option<String>,
    /// Processes of it were killed for passing its memory limit.
    pub oom: bool,
    /// What it used, where the executor measured it.
    pub accounting: Option<Accounting>,
}

impl Registry {
    /// Changes the registry as `entry` says, once it is in the journal (or, for a fact the
    /// executor reports, once an append was tried).
    pub fn apply(&mut self, entry: Entry) -> Applied {
        if let Some(job) = entry.job().and_then(|id| self.jobs.get_mut(&id)) {
            entry.change(&mut job.view);
        }
        match entry {
            Entry::Submitted { .. } | Entry::Attached { .. } => {
                if let Some(job) = entry.into_new_job() {
                    let NewJob {
                        view,
                        gid,
                        submission,
                        process,
                    } = job;
                    self.enqueue(Tracked::new(view, gid, Some(submission), process));
                }
                Applied::waking()
            }
            Entry::Joined {
                id,
                pid,
                start_ticks,
                ..
            } => {
                let main = self.jobs.get(&id).filter(|j| j.view.attached);
                if let Some(main) = main.and_then(|j| j.adopt) {
                    let task = Adopt {
                        pid: pid as i32,
                        start_ticks,
                        ..main
                    };
                    self.joins.push((id, task));
                }
                Applied::waking()
            }
            Entry::Started { id, .. } => self.started(id),
            Entry::Placed { id, cpus, .. } => {
                if let (Some(job), Ok(set)) = (self.jobs.get_mut(&id), cpus.parse::<CpuSet>()) {
                    job.ran_on = job.ran_on.union(&set);
                }
                Applied::default()
            }
            Entry::Threads { .. } => Applied::default(),
            Entry::Finished { id, .. } => self.finished(id),
            Entry::Cancelled { id, .. } => self.cancelled(id),
            Entry::Held { id, held, .. } => self.held(id, held),
            Entry::TimedOut { id, t } => {
                if let Some(job) = self.jobs.get_mut(&id) {
                    job.terminated = Some(t);
                }
                Applied::default()
            }
            Entry::Policy { name, .. } => {
                // Checked by whoever journaled it.
                self.policy_switch = cosched_policies::create(&name).ok();
                self.policy = name;
                Applied::waking()
            }
            Entry::Compacted { next_id, .. } => {
                self.next_id = self.next_id.max(next_id);
                Applied::default()
            }
        }
    }

    /// Adds a new job under [`Registry::next_id`] and queues it for the executor.
    pub(super) fn enqueue(&mut self, job: Tracked) {
        let id = job.view.id;
        debug_assert_eq!(id, self.next_id, "jobs are enqueued under the next id");
        self.next_id = id + 1;
        self.users.entry(job.view.uid).or_default().queued += 1;
        self.incoming
            .push(id, job.view.uid, job.view.priority, job.queue_kind());
        if let Some(begin) = job.submission.as_ref().and_then(|s| s.begin) {
            self.next_begin = self.next_begin.min(begin);
        }
        self.jobs.insert(id, Box::new(job));
        self.takeable = true;
    }

    /// The `started` entry of job `id`, which the executor started (or adopted) at `t`; `None`
    /// for a job the registry does not hold.
    pub fn started_entry(
        &self,
        id: u64,
        t: f64,
        pid: u32,
        start_ticks: u64,
        threads: u32,
    ) -> Option<Entry> {
        let job = self.jobs.get(&id)?;
        // An attached process is adopted when a later daemon takes it over again.
        let adopted = job.adopt.is_some() && (!job.view.attached || job.view.started.is_some());
        Some(Entry::Started {
            id,
            t,
            pid,
            start_ticks,
            threads,
            adopted,
        })
    }

    fn started(&mut self, id: u64) -> Applied {
        let Some(job) = self.jobs.get_mut(&id) else {
            return Applied::default();
        };
        if std::mem::take(&mut job.awaiting_start) {
            let uid = job.view.uid;
            if let Some(awaiting) = self.awaiting_start.get_mut(&uid) {
                *awaiting -= 1;
            }
            self.takeable |= self.users.get(&uid).is_some_and(|l| l.queued > 0);
        }
        if job.view.time_limit.is_some() && !self.limited.contains(&id) {
            self.limited.push(id);
        }
        // A job that waits for this one to start (`after`) may go.
        self.incoming.job_ended();
        self.takeable |= self.incoming.any_held();
        Applied {
            wake: self.takeable,
            ..Applied::default()
        }
    }

    /// The `placed` entry of job `id` on `cpus` at `t`, `None` when it has them already.
    pub fn placed_entry(&self, id: u64, t: f64, cpus: String) -> Option<Entry> {
        let job = self.jobs.get(&id)?;
        (job.view.cpus.as_deref() != Some(&cpus)).then_some(Entry::Placed { id, t, cpus })
    }

    /// The `finished` entry of job `id` for what the executor saw of its end, told as the
    /// registry has it: a job killed after its time limit's grace says so, the CPUs it used are
    /// every one the plans gave it, and a job ended by a signal has the exit code shells give it.
    pub fn finished_entry(&self, id: u64, ending: Ending) -> Entry {
        let Ending {
            t,
            ok,
            exit_code,
            signal,
            error,
            oom,
            accounting,
        } = ending;
        let Some(job) = self.jobs.get(&id) else {
            // Already forgotten, its history's bound passed: journaled as the executor saw it.
            return Entry::Finished {
                id,
                t,
                ok,
                exit_code,
                signal,
                error,
                oom,
                accounting: None,
            };
        };
        let mut signal = signal.or(job.view.signal);
        // Killed like a cancelled job, but for its time limit: say so, as a kill.
        let killed = error
            .as_deref()
            .is_some_and(|e| e.starts_with("killed by signal"));
        let error = match job.terminated {
            Some(_) if exit_code.is_none() && !killed => {
                signal.get_or_insert(libc::SIGKILL);
                Some(format!(
                    "killed by signal {} (SIGKILL): still running when the grace after its time \
                     limit ended",
                    libc::SIGKILL
                ))
            }
            _ => error,
        };
        // The kernel's out-of-memory killer sends SIGKILL; a job whose own exit is unknown
        // (adopted) ended by it all the same.
        if oom && !ok && exit_code.is_none() {
            signal.get_or_insert(libc::SIGKILL);
        }
        let accounting = accounting.map(|mut used| {
            if !job.ran_on.is_empty() {
                used.cpus = Some(job.ran_on.to_string());
            }
            Box::new(used)
        });
        Entry::Finished {
            id,
            t,
            ok,
            // As shells give it: 128 + the signal.
            exit_code: exit_code.or(signal.map(|s| 128 + s)),
            signal,
            error,
            oom,
            accounting,
        }
    }

    /// Job `id` has ended (its view says how): it counts no more against its user, and a job it
    /// held back may start.
    fn finished(&mut self, id: u64) -> Applied {
        let Some(job) = self.jobs.get_mut(&id) else {
            return Applied::default();
        };
        let uid = job.view.uid;
        if std::mem::take(&mut job.awaiting_start) {
            if let Some(awaiting) = self.awaiting_start.get_mut(&uid) {
                *awaiting -= 1;
            }
        }
        let was_running = std::mem::take(&mut job.running);
        // The jobs an exclusive one kept waiting may start now, whoever's they are.
        let node_freed = was_running && job.exclusive;
        let mem = job.view.mem.unwrap_or(0);
        job.submission = None;
        let ended_before = std::mem::replace(&mut job.ended, true);
        self.limited.retain(|&limited| limited != id);
        let mut may_start = false;
        if was_running {
            let users_before = self.running_of.len();
            self.memory_in_use = self.memory_in_use.saturating_sub(mem);
            let load = self.users.entry(uid).or_default();
            load.running -= 1;
            may_start = load.queued > 0;
            if let Some(running) = self.running_of.get_mut(&uid) {
                running.retain(|&r| r != id);
                if running.is_empty() {
                    self.running_of.remove(&uid);
                }
            }
            self.reweigh_after(users_before, vec![uid]);
        }
        if !ended_before {
            self.ended_now(id);
        }
        self.incoming.job_ended();
        may_start |= self.incoming.any_held() || node_freed;
        self.takeable |= may_start;
        Applied {
            wake: may_start,
            ended: true,
            unwatched: Vec::new(),
        }
    }

    /// The entries that cancel job `id` at `t`, checked with [`Registry::check_cancel`]: the
    /// cancellation, and for a job the executor never took, its end too, with `why` (else: that
    /// it never started).
    pub fn cancellation(&self, id: u64, t: f64, why: Option<String>) -> Vec<Entry> {
        let mut entries = vec![Entry::Cancelled { id, t }];
        if self.incoming.contains(id) {
            let adopted = self.jobs.get(&id).is_some_and(|j| j.adopt.is_some())
                || self.joins.iter().any(|&(joined, _)| joined == id);
            let error = why.unwrap_or_else(|| {
                match adopted {
                    true => "cancelled before this daemon took it over",
                    false => "cancelled before it started",
                }
                .to_string()
            });
            entries.push(Entry::Finished {
                id,
                t: Some(t),
                ok: false,
                exit_code: None,
                signal: None,
                error: Some(error),
                oom: false,
                accounting: None,
            });
        }
        entries
    }

    /// Job `id` is cancelled: the executor is to kill it, or, when it never took it, its
    /// processes are to be killed here.
    fn cancelled(&mut self, id: u64) -> Applied {
        let queued = self.incoming.remove(id);
        let Some(job) = self.jobs.get_mut(&id) else {
            return Applied::default();
        };
        if !queued {
            self.cancelled.push(id);
            return Applied::waking();
        }
        let owner = job.view.uid;
        self.users.entry(owner).or_default().queued -= 1;
        let mut processes: Vec<Adopt> = job.adopt.take().into_iter().collect();
        job.submission = None;
        self.joins.retain(|&(joined, task)| {
            let ours = joined == id;
            if ours {
                processes.push(task);
            }
            !ours
        });
        Applied {
            wake: true,
            ended: false,
            unwatched: processes.into_iter().map(|p| (p, owner)).collect(),
        }
    }

    /// Queued job `id` is held (`held`) or released, checked with [`Registry::check_hold`]. A held
    /// job keeps its place in its user's queue until it comes to the front.
    fn held(&mut self, id: u64, held: bool) -> Applied {
        let Some(submission) = self.jobs.get_mut(&id).and_then(|j| j.submission.as_mut()) else {
            return Applied::default();
        };
        submission.hold = held;
        if !held {
            self.incoming.job_ended();
            self.takeable = true;
        }
        Applied::waking()
    }
}
