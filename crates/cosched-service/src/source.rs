//! The daemon's job source: submissions taken from the registry as the executor's loop asks for them,
//! and what the executor reports (starts, placements, thread changes, ends) journaled and shown.

use crate::journal::{Appended, Entry};
use crate::protocol::{now_unix, JobState};
use crate::registry::Shared;
use cosched_core::trace::{ExitStatus, Record};
use cosched_core::{JobId, JobSpec, Policy};
use cosched_linux::{Adopt, ArrivingJob, InvokingUser, JobOutcome, JobSource};
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::Arc;

pub struct DaemonSource {
    pub shared: Arc<Shared>,
    pub cpus: usize,
    /// Run jobs as their submitter (a system daemon); a user daemon runs them as itself.
    pub as_submitter: bool,
}

impl DaemonSource {
    /// Appends `entry` to the journal under the registry's lock, which the caller holds.
    fn append(&self, entry: Entry) -> Option<Appended> {
        self.shared
            .append(&entry)
            .map_err(|e| eprintln!("cosched daemon: {e}"))
            .ok()
    }

    /// Waits, after the registry's lock is released, until what [`DaemonSource::append`] wrote is on
    /// disk.
    fn sync(&self, position: Option<Appended>) {
        if let Some(Err(e)) = position.map(|p| self.shared.sync(p)) {
            eprintln!("cosched daemon: {e}");
        }
    }
}

impl JobSource for DaemonSource {
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob> {
        self.shared.clear_wake();
        let mut registry = self.shared.lock();
        let ids: Vec<u64> = registry.incoming.drain(..).collect();
        let mut arrived = Vec::new();
        for id in ids {
            let Some(job) = registry.jobs.get_mut(&id) else {
                continue;
            };
            let Some(s) = job.submission.take() else {
                continue;
            };
            let max = s.max_threads.unwrap_or(self.cpus as u32).max(1);
            arrived.push(ArrivingJob {
                spec: JobSpec {
                    id: JobId(id as u32),
                    name: s.name,
                    arrival: now,
                    kind: s.kind,
                    min_threads: s.min_threads.unwrap_or(1).min(max),
                    max_threads: max,
                    coschedule: s.coschedule,
                    weight: s.weight,
                    hints: s.hints,
                },
                command: s.command,
                env: s.env,
                workload_dir: s.cwd.clone(),
                stdout: job.view.stdout.clone(),
                stderr: job.view.stderr.clone(),
                isolated: None,
                cwd: Some(s.cwd),
                user: self
                    .as_submitter
                    .then(|| InvokingUser::with_groups(job.view.uid, job.gid)),
                clear_env: true,
                adopt: job.adopt,
            });
        }
        arrived
    }

    fn next_arrival(&self) -> Option<f64> {
        None
    }

    fn not_arrived(&self) -> usize {
        self.shared.lock().incoming.len()
    }

    fn exhausted(&self) -> bool {
        false
    }

    fn finished(&mut self, outcome: JobOutcome) {
        let id = u64::from(outcome.id.0);
        let t = now_unix();
        let ok = outcome.status == ExitStatus::Ok;
        let mut registry = self.shared.lock();
        let position = self.append(Entry::Finished {
            id,
            t: Some(t),
            ok,
            exit_code: outcome.exit_code,
            error: outcome.error.clone(),
        });
        if let Some(job) = registry.jobs.get_mut(&id) {
            let view = &mut job.view;
            if view.state != JobState::Cancelled {
                view.state = if ok { JobState::Done } else { JobState::Failed };
            }
            view.finished = Some(t);
            view.exit_code = outcome.exit_code;
            view.error = outcome.error;
            view.cpus = None;
        }
        drop(registry);
        self.sync(position);
        self.shared.notify_ended();
    }

    fn take_policy(&mut self) -> Option<Box<dyn Policy>> {
        self.shared.lock().policy_switch.take()
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.shared.wake_fd())
    }

    fn take_joined(&mut self) -> Vec<(JobId, Adopt)> {
        let mut registry = self.shared.lock();
        // A task may join a job the executor has not taken yet (both came since its last pass): the
        // task waits for its job, or the executor would take it for a job that has ended.
        let joins = std::mem::take(&mut registry.joins);
        let (waiting, ready): (Vec<_>, Vec<_>) = joins
            .into_iter()
            .partition(|(id, _)| registry.incoming.contains(id));
        registry.joins = waiting;
        ready
            .into_iter()
            .map(|(id, task)| (JobId(id as u32), task))
            .collect()
    }

    fn take_cancelled(&mut self) -> Vec<JobId> {
        let mut registry = self.shared.lock();
        registry
            .cancelled
            .drain(..)
            .map(|id| JobId(id as u32))
            .collect()
    }

    fn slot_switched(&mut self, lateness: f64) {
        let mut log = self
            .shared
            .switches
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        log.record(lateness);
    }

    fn observe(&mut self, record: &Record) {
        match record {
            Record::Start { job, threads, pid } => {
                let id = u64::from(job.0);
                let pid = pid.unwrap_or(0);
                let start_ticks = cosched_linux::procfs::stat(pid as i32)
                    .map(|s| s.start_ticks)
                    .unwrap_or(0);
                let t = now_unix();
                let mut registry = self.shared.lock();
                let Some(job) = registry.jobs.get_mut(&id) else {
                    return;
                };
                // An attached process is adopted when a later daemon takes it over again.
                let adopted =
                    job.adopt.is_some() && (!job.view.attached || job.view.started.is_some());
                job.view.state = if job.view.state == JobState::Cancelled {
                    JobState::Cancelled
                } else {
                    JobState::Running
                };
                job.view.pid = Some(pid);
                job.view.threads = Some(*threads);
                job.view.started.get_or_insert(t);
                job.view.adopted = adopted;
                let position = self.append(Entry::Started {
                    id,
                    t,
                    pid,
                    start_ticks,
                    threads: *threads,
                    adopted,
                });
                drop(registry);
                self.sync(position);
            }
            Record::Plan { plan } => {
                let mut placed = BTreeMap::new();
                for id in plan.placed_jobs() {
                    let cpus =
                        (0..plan.slots.len().max(1)).find_map(|slot| plan.cpus_in_slot(slot, id));
                    if let Some(cpus) = cpus {
                        placed.insert(u64::from(id.0), cpus.to_string());
                    }
                }
                let t = now_unix();
                let mut registry = self.shared.lock();
                let mut last = None;
                for (id, cpus) in placed {
                    let Some(job) = registry.jobs.get_mut(&id) else {
                        continue;
                    };
                    if job.view.cpus.as_deref() != Some(cpus.as_str()) {
                        job.view.cpus = Some(cpus.clone());
                        last = self.append(Entry::Placed { id, t, cpus }).or(last);
                    }
                }
                drop(registry);
                self.sync(last);
            }
            Record::Threads { job, threads } => {
                let id = u64::from(job.0);
                let mut registry = self.shared.lock();
                if let Some(job) = registry.jobs.get_mut(&id) {
                    job.view.threads = Some(*threads);
                }
                let position = self.append(Entry::Threads {
                    id,
                    t: now_unix(),
                    threads: *threads,
                });
                drop(registry);
                self.sync(position);
            }
            _ => {}
        }
    }
}
