//! The daemon's job source: submissions taken from the registry as the executor's loop asks for them,
//! and what the executor reports (starts, placements, thread changes, ends) journaled and shown.

use crate::journal::{Appended, Entry};
use crate::protocol::{now_unix, Accounting, DEFAULT_UMASK};
use crate::scaling_history::ScalingHistory;
use crate::state::Shared;
use cosched_core::trace::{ExitStatus, Record};
use cosched_core::{CpuSet, JobId, JobSpec, Owner, Policy};
use cosched_linux::{Adopt, ArrivingJob, InvokingUser, JobOutcome, JobSource, OpenedAsUser};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

pub struct DaemonSource {
    pub shared: Arc<Shared>,
    pub cpus: usize,
    /// Run jobs as their submitter (a system daemon); a user daemon runs them as itself.
    pub as_submitter: bool,
    pub history: ScalingHistory,
}

impl DaemonSource {
    /// Appends `entry` to the journal under the registry's lock, which the caller holds.
    fn append(&self, entry: Entry) -> Option<Appended> {
        self.shared
            .journal
            .append(&entry)
            .map_err(|e| eprintln!("cosched daemon: {e}"))
            .ok()
    }

    /// Has what [`DaemonSource::append`] wrote made durable by the syncer's thread (`syncer.rs`),
    /// without waiting for the disk; `ended`: clients waiting on ends hear of it once it is.
    fn sync(&self, position: Option<Appended>, ended: bool) {
        if let Some(position) = position {
            self.shared.syncer.request(position, ended);
        }
    }
}

impl JobSource for DaemonSource {
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob> {
        self.shared.clear_wake();
        let running_per_user = self.shared.config.limits.running_jobs_per_user;
        let mut registry = self.shared.lock();
        registry.tick(now_unix());
        let taken = registry.take_incoming(running_per_user, self.cpus);
        let unsatisfiable = registry.take_unsatisfiable();
        let mut last = None;
        for (id, why) in unsatisfiable {
            // Cancelled as `cosched cancel` cancels a queued job, with the reason as its error.
            let t = now_unix();
            last = self.append(Entry::Cancelled { id, t }).or(last);
            last = self
                .append(Entry::Finished {
                    id,
                    t: Some(t),
                    ok: false,
                    exit_code: None,
                    signal: None,
                    error: Some(why.clone()),
                    oom: false,
                    accounting: None,
                })
                .or(last);
            registry.cancel(id);
            registry.finish(id, Some(t), false, None, Some(why));
        }
        drop(registry);
        self.sync(last, true);
        taken
            .into_iter()
            .map(|job| {
                let s = job.submission;
                let priority = s.effective_priority();
                // `-o` alone sends standard error to the same file, as in Slurm.
                let opened_as_user = OpenedAsUser {
                    stdout: s.output.is_some(),
                    stderr: s.names_its_output(),
                };
                let max = s.max_threads.unwrap_or(self.cpus as u32).max(1);
                let id = JobId(job.id as u32);
                // Measured here before, its times alone replace any the user declared.
                let mut hints = s.hints;
                hints.take_measured_times_alone(self.history.times_alone(job.uid, &s.command));
                if job.adopt.is_none() {
                    self.history.follow(id, job.uid, &s.command);
                }
                ArrivingJob {
                    spec: JobSpec {
                        id,
                        name: s.name,
                        arrival: now,
                        kind: s.kind,
                        min_threads: s.min_threads.unwrap_or(1).min(max),
                        max_threads: max,
                        coschedule: s.coschedule,
                        weight: job.weight,
                        hints,
                        owner: Some(Owner {
                            user: job.uid,
                            share: job.share,
                        }),
                    },
                    command: s.command,
                    env: s.env,
                    workload_dir: s.cwd.clone(),
                    stdout: job.stdout,
                    stderr: job.stderr,
                    isolated: None,
                    cwd: Some(s.cwd),
                    user: self
                        .as_submitter
                        .then(|| InvokingUser::with_groups(job.uid, job.gid)),
                    clear_env: true,
                    umask: Some(s.umask.unwrap_or(DEFAULT_UMASK) & 0o777),
                    adopt: job.adopt,
                    opened_as_user,
                    memory_limit: s.mem,
                    // Its logs in the state directory stay within its user's share of it.
                    file_size_limit: (job.uid != 0 && !opened_as_user.stdout)
                        .then_some(self.shared.config.limits.log_bytes_per_user),
                    priority,
                }
            })
            .collect()
    }

    fn next_arrival(&self) -> Option<f64> {
        None
    }

    fn not_arrived(&self) -> usize {
        self.shared.lock().incoming_len()
    }

    fn exhausted(&self) -> bool {
        false
    }

    fn finished(&mut self, outcome: JobOutcome) {
        let id = u64::from(outcome.id.0);
        let t = now_unix();
        let ok = outcome.status == ExitStatus::Ok;
        let mut registry = self.shared.lock();
        // An attached process's usage is known only to its parent, and so is the CPU time of a job
        // an earlier daemon started.
        let view = registry.job(id);
        let measured = view.is_some_and(|j| !j.attached) && outcome.started.is_some();
        let ours = view.is_some_and(|j| !j.adopted);
        if measured {
            let accounting = Accounting {
                user_seconds: ours.then_some(outcome.user_seconds),
                system_seconds: ours.then_some(outcome.system_seconds),
                peak_memory: outcome.peak_memory,
                cpus: None,
            };
            registry.account(id, accounting, outcome.oom_killed);
        }
        if let Some(signal) = outcome.signal {
            registry.killed_by(id, signal);
        }
        let may_start = registry.finish(id, Some(t), ok, outcome.exit_code, outcome.error.clone());
        // Journaled as the registry has it, so that a job's listing, its journal and the
        // accounting drawn from it tell one story (a kill after a time limit's grace included).
        let (exit_code, signal, error, accounting) = match registry.job(id) {
            Some(view) => (
                view.exit_code,
                view.signal,
                view.error.clone(),
                view.accounting.clone(),
            ),
            // Already forgotten, its history's bound passed: journaled as the executor saw it.
            None => (outcome.exit_code, outcome.signal, outcome.error, None),
        };
        let position = self.append(Entry::Finished {
            id,
            t: Some(t),
            ok,
            exit_code,
            signal,
            error,
            oom: outcome.oom_killed,
            accounting,
        });
        drop(registry);
        self.sync(position, true);
        if may_start {
            self.shared.wake_executor();
        }
    }

    fn take_reweighted(&mut self) -> Vec<(JobId, f64)> {
        let reweighted = self.shared.lock().take_reweighted();
        reweighted
            .into_iter()
            .map(|(id, weight)| (JobId(id as u32), weight))
            .collect()
    }

    fn take_policy(&mut self) -> Option<Box<dyn Policy>> {
        self.shared.lock().take_policy_switch()
    }

    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.shared.wake_fd())
    }

    fn take_joined(&mut self) -> Vec<(JobId, Adopt)> {
        let ready = self.shared.lock().take_joins();
        ready
            .into_iter()
            .map(|(id, task)| (JobId(id as u32), task))
            .collect()
    }

    fn take_cancelled(&mut self) -> Vec<JobId> {
        let cancelled = self.shared.lock().take_cancelled();
        cancelled.into_iter().map(|id| JobId(id as u32)).collect()
    }

    /// SIGTERM for the jobs past their time limit, journaled as `timed_out` first; those that
    /// outlive `jobs.kill_wait_seconds` after it are killed through the cancellations.
    fn take_signals(&mut self) -> Vec<(JobId, nix::sys::signal::Signal)> {
        let t = now_unix();
        let kill_wait = self.shared.config.jobs.kill_wait_seconds;
        let mut registry = self.shared.lock();
        let overdue = registry.take_overdue(t, kill_wait);
        if overdue.is_empty() {
            return Vec::new();
        }
        let mut last = None;
        for &id in &overdue {
            last = self.append(Entry::TimedOut { id, t }).or(last);
        }
        drop(registry);
        self.sync(last, false);
        overdue
            .into_iter()
            .map(|id| (JobId(id as u32), nix::sys::signal::Signal::SIGTERM))
            .collect()
    }

    fn slot_enforced(&mut self, frozen: &[JobId]) {
        let mut suspended = self
            .shared
            .suspended
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        suspended.clear();
        suspended.extend(frozen.iter().map(|id| u64::from(id.0)));
    }

    fn slot_switched(&mut self, lateness: f64) {
        let mut log = self
            .shared
            .switches
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        log.record(lateness);
    }

    fn placed(&mut self, placed: &[(JobId, &CpuSet)]) {
        let t = now_unix();
        let mut registry = self.shared.lock();
        let mut last = None;
        for (id, cpus) in placed {
            let (id, cpus) = (u64::from(id.0), cpus.to_string());
            if registry.mark_placed(id, &cpus) {
                last = self.append(Entry::Placed { id, t, cpus }).or(last);
            }
        }
        drop(registry);
        self.sync(last, false);
    }

    fn observe(&mut self, record: &Record) {
        self.history.observe(record);
        match record {
            Record::Start { job, threads, pid } => {
                let id = u64::from(job.0);
                let pid = pid.unwrap_or(0);
                let start_ticks = cosched_linux::procfs::stat(pid as i32)
                    .map(|s| s.start_ticks)
                    .unwrap_or(0);
                let t = now_unix();
                let mut registry = self.shared.lock();
                let Some(adopted) = registry.mark_started(id, pid, *threads, t) else {
                    return;
                };
                if registry.takeable() {
                    self.shared.wake_executor();
                }
                let position = self.append(Entry::Started {
                    id,
                    t,
                    pid,
                    start_ticks,
                    threads: *threads,
                    adopted,
                });
                drop(registry);
                self.sync(position, false);
            }
            Record::Threads { job, threads } => {
                let id = u64::from(job.0);
                let mut registry = self.shared.lock();
                registry.set_threads(id, *threads);
                let position = self.append(Entry::Threads {
                    id,
                    t: now_unix(),
                    threads: *threads,
                });
                drop(registry);
                self.sync(position, false);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
