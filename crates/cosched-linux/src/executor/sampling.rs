//! Sampling: what each running job did since its last sample (CPU time, control-page progress, CPUs
//! held), thread-count changes reported on control pages, and the periodic re-application of affinity
//! masks for threads that raced a change.

use super::{running_mut, Executor};
use crate::enforce::ProcessTable;
use crate::measure::Reading;
use crate::Error;
use cosched_core::trace::Record;
use cosched_core::{Event, Sample};

impl Executor<'_> {
    pub(super) fn sample_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if now < self.next_sample {
            return Ok(());
        }
        self.next_sample = now + self.options.sample_interval.max(0.01);
        self.sample_all()
    }

    /// One sample per running job since its previous one, into the trace and to the policy.
    pub(super) fn sample_all(&mut self) -> Result<(), Error> {
        let table = if self.running().any(|(_, r)| r.control.cgroups.is_empty()) {
            ProcessTable::read()
        } else {
            ProcessTable::default()
        };
        let mut samples = Vec::new();
        for id in self.running_ids() {
            let now = self.now();
            self.account_held(id, now);
            let Some(r) = running_mut(&mut self.jobs, id) else {
                continue;
            };
            let members = self.enforcer.members(&r.control, &table);
            for &pid in &members {
                r.peak.observe(pid);
            }
            let stats: Vec<_> = (members.into_iter())
                .filter_map(|pid| crate::procfs::stat(pid).ok())
                .collect();
            let cpu_seconds = stats.iter().map(|s| s.cpu_seconds()).sum::<f64>();
            let counters = r.page.counters();
            let reading = Reading {
                t: now,
                // Processes that exited take their CPU time with them; never report negative use.
                cpu_seconds: cpu_seconds.max(r.mark.cpu_seconds),
                progress: counters.progress(),
                regions_started: counters.regions_started,
                held: r.held_total,
            };
            if let Some(sample) = r.mark.sample_until(&reading, id) {
                r.mark = reading;
                samples.push(Sample {
                    os_threads: Some(stats.iter().map(|s| s.num_threads).sum()),
                    team_size: (counters.last_team_size > 0).then_some(counters.last_team_size),
                    advice_seen: Some(counters.seen_generation == r.page.generation()),
                    ..sample
                });
            }
        }
        for sample in samples {
            self.emit(Record::Sample(sample.clone()))?;
            self.decide(Event::Sample(sample))?;
        }
        Ok(())
    }

    pub(super) fn reapply_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if now < self.next_reapply || !self.reapplies_any() {
            return Ok(());
        }
        self.next_reapply = now + self.options.reapply_interval.max(0.01);
        let table = ProcessTable::read();
        let failed: Vec<_> = (self.running())
            .filter_map(|(id, r)| {
                self.enforcer
                    .reapply(&r.control, &table)
                    .err()
                    .map(|e| (id, e))
            })
            .collect();
        for (id, e) in failed {
            self.end_unenforceable(id, e)?;
        }
        Ok(())
    }

    /// A malleable job's region applied the latest advice with a new team size.
    pub(super) fn notice_thread_changes(&mut self) -> Result<(), Error> {
        let mut changed = Vec::new();
        for (id, r) in self.running() {
            let counters = r.page.counters();
            if counters.seen_generation == r.page.generation()
                && counters.last_team_size != 0
                && counters.last_team_size != r.threads
            {
                changed.push((id, counters.last_team_size));
            }
        }
        for (id, threads) in changed {
            if let Some(r) = running_mut(&mut self.jobs, id) {
                r.threads = threads;
            }
            if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == id) {
                a.threads = threads;
            }
            self.emit(Record::Threads { job: id, threads })?;
            self.decide(Event::ThreadsChanged { job: id, threads })?;
        }
        Ok(())
    }
}
