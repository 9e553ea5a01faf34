//! The daemon's job source: submissions taken from the registry as the executor's loop asks for them,
//! and what the executor reports (starts, placements, thread changes, ends) journaled and shown.

use crate::journal::Entry;
use crate::protocol::{now_unix, Accounting, DEFAULT_UMASK};
use crate::registry::Ending;
use crate::scaling_history::ScalingHistory;
use crate::state::Shared;
use cosched_core::trace::{ExitStatus, Record};
use cosched_core::{CpuSet, JobId, JobSpec, Owner, Policy};
use cosched_linux::{Adopt, ArrivingJob, InvokingUser, JobOutcome, JobSource, OpenedAsUser};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// The executor's id of registry job `id`: the same number, for the registry gives out no id the
/// executor cannot hold (`Registry::new_id`).
fn executor_id(id: u64) -> JobId {
    let id = u32::try_from(id).expect("the registry gives out no id past the executor's");
    JobId(id)
}

/// The registry's id of the executor's job `id`.
fn registry_id(id: JobId) -> u64 {
    u64::from(id.0)
}

pub struct DaemonSource {
    pub shared: Arc<Shared>,
    pub cpus: usize,
    /// Run jobs as their submitter (a system daemon); a user daemon runs them as itself.
    pub as_submitter: bool,
    pub history: ScalingHistory,
}

impl JobSource for DaemonSource {
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob> {
        self.shared.clear_wake();
        let running_per_user = self.shared.config().limits.running_jobs_per_user;
        let taken = self.shared.record(|registry| {
            registry.tick(now_unix());
            let taken = registry.take_incoming(running_per_user, self.cpus);
            let t = now_unix();
            // Cancelled as `cosched cancel` cancels a queued job, with the reason as its error.
            let cancellations = registry
                .take_unsatisfiable()
                .into_iter()
                .flat_map(|(id, why)| registry.cancellation(id, t, Some(why)))
                .collect();
            (cancellations, taken)
        });
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
                let id = executor_id(job.id);
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
                        .then_some(self.shared.config().limits.log_bytes_per_user),
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
        let id = registry_id(outcome.id);
        self.shared.record(|registry| {
            // An attached process's usage is known only to its parent, and so is the CPU time of
            // a job an earlier daemon started.
            let view = registry.job(id);
            let measured = view.is_some_and(|j| !j.attached) && outcome.started.is_some();
            let ours = view.is_some_and(|j| !j.adopted);
            let accounting = measured.then(|| Accounting {
                user_seconds: ours.then_some(outcome.user_seconds),
                system_seconds: ours.then_some(outcome.system_seconds),
                peak_memory: outcome.peak_memory,
                cpus: None,
            });
            let ending = Ending {
                t: Some(now_unix()),
                ok: outcome.status == ExitStatus::Ok,
                exit_code: outcome.exit_code,
                signal: outcome.signal,
                error: outcome.error,
                oom: outcome.oom_killed,
                accounting,
            };
            (vec![registry.finished_entry(id, ending)], ())
        });
    }

    fn take_reweighted(&mut self) -> Vec<(JobId, f64)> {
        let reweighted = self.shared.lock().take_reweighted();
        reweighted
            .into_iter()
            .map(|(id, weight)| (executor_id(id), weight))
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
            .map(|(id, task)| (executor_id(id), task))
            .collect()
    }

    fn take_cancelled(&mut self) -> Vec<JobId> {
        let cancelled = self.shared.lock().take_cancelled();
        cancelled.into_iter().map(executor_id).collect()
    }

    /// SIGTERM for the jobs past their time limit, journaled as `timed_out` first; those that
    /// outlive `jobs.kill_wait_seconds` after it are killed through the cancellations.
    fn take_signals(&mut self) -> Vec<(JobId, nix::sys::signal::Signal)> {
        let t = now_unix();
        let kill_wait = self.shared.config().jobs.kill_wait_seconds;
        let overdue = self.shared.record(|registry| {
            let overdue = registry.take_overdue(t, kill_wait);
            let timed_out = overdue
                .iter()
                .map(|&id| Entry::TimedOut { id, t })
                .collect();
            (timed_out, overdue)
        });
        overdue
            .into_iter()
            .map(|id| (executor_id(id), nix::sys::signal::Signal::SIGTERM))
            .collect()
    }

    fn slot_enforced(&mut self, frozen: &[JobId]) {
        self.shared
            .set_suspended(frozen.iter().copied().map(registry_id));
    }

    fn slot_switched(&mut self, lateness: f64) {
        self.shared.record_switch(lateness);
    }

    fn placed(&mut self, placed: &[(JobId, &CpuSet)]) {
        let t = now_unix();
        self.shared.record(|registry| {
            let moved = placed
                .iter()
                .filter_map(|(id, cpus)| {
                    registry.placed_entry(registry_id(*id), t, cpus.to_string())
                })
                .collect();
            (moved, ())
        });
    }

    fn observe(&mut self, record: &Record) {
        self.history.observe(record);
        match record {
            Record::Start { job, threads, pid } => {
                let id = registry_id(*job);
                let pid = pid.unwrap_or(0);
                let start_ticks = cosched_linux::procfs::stat(pid as i32)
                    .map(|s| s.start_ticks)
                    .unwrap_or(0);
                let t = now_unix();
                self.shared.record(|registry| {
                    let started = registry.started_entry(id, t, pid, start_ticks, *threads);
                    (started.into_iter().collect(), ())
                });
            }
            Record::Threads { job, threads } => {
                let entry = Entry::Threads {
                    id: registry_id(*job),
                    t: now_unix(),
                    threads: *threads,
                };
                self.shared.record(|_| (vec![entry], ()));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
