//! Applying the policy's plan changes: jobs start, malleable jobs get new thread counts, timers and
//! (exact mode) slot ends are scheduled.

use super::calendar::{self, Due};
use super::job::{mark_started, switch_on_advice, Phase, Run, Switch};
use super::rates::{switch_cost, Figures};
use super::sampling::SampleWindow;
use super::{Engine, SimError};
use crate::model::Mode;
use cosched_core::cycle::slot_jobs;
use cosched_core::trace::Record;
use cosched_core::{Assignment, JobId, JobKind, Plan, PlanChange, PlanError};
use std::collections::{BTreeSet, HashSet};

impl Engine<'_> {
    pub(super) fn apply(&mut self, change: PlanChange) -> Result<(), SimError> {
        let states = &self.states;
        let index = &self.index;
        let is_active = |job| {
            index
                .get(&job)
                .is_some_and(|&i| matches!(states[i].phase, Phase::Waiting | Phase::Running(_)))
        };
        change
            .validate(self.topology.cpus(), is_active)
            .map_err(|e| self.plan_error(e))?;
        // Where the cycle stands matters only slot by slot.
        let running = (self.options.mode == Mode::Exact).then(|| slot_jobs(&self.plan, self.slot));
        let mut plan = std::mem::take(&mut self.plan);
        change.apply(&mut plan);
        self.book.change(&change, &plan, &self.index);
        // The rest of the plan was valid when placed; of it, only a job that finished since can have
        // become inactive.
        for id in std::mem::take(&mut self.finished_since_plan) {
            let pinned = plan.pinned.iter().any(|a| a.job == id);
            if pinned || self.book.slots_of(self.index[&id]).next().is_some() {
                self.plan = plan;
                return Err(self.plan_error(PlanError::InactiveJob { job: id }));
            }
        }
        self.rates_stale = true;
        // Jobs whose place or advice changed: the only ones that can start or get new thread advice.
        let touched: BTreeSet<JobId> = change.jobs().chain(change.advice.keys().copied()).collect();
        self.emit(Record::PlanChange(change))?;
        let mut starts = Vec::new();
        for id in touched {
            let i = self.index[&id];
            let pinned = plan.pinned.iter().find(|a| a.job == id);
            if pinned.is_none() && self.book.slots_of(i).next().is_none() {
                continue;
            }
            let advice = plan.advice.get(&id).copied();
            match self.states[i].phase {
                Phase::Waiting => starts.push((i, self.start(i, &plan, pinned, advice))),
                Phase::Running(_) if self.jobs[i].spec.kind == JobKind::Malleable => {
                    if let Some(advised) = advice {
                        self.advise(i, advised);
                    }
                }
                _ => {}
            }
        }
        for (i, threads) in starts {
            let id = self.jobs[i].spec.id;
            let active = self.active.get_mut(self.states[i].order);
            let record = mark_started(active, id, threads, self.now);
            self.emit(record)?;
        }
        self.timer = plan.timer;
        self.timer_version += 1;
        if let Some(t) = plan.timer {
            let version = self.timer_version;
            self.calendar
                .schedule(t.max(self.now), Due::Timer { version });
        }
        (self.slot, self.slot_end) =
            going_on_at(running, (self.slot, self.slot_end), &plan, self.now);
        self.slot_version += 1;
        if self.options.mode == Mode::Exact && plan.slots.len() > 1 {
            let version = self.slot_version;
            self.calendar
                .schedule(self.slot_end, Due::SlotEnd { version });
        }
        self.plan = plan;
        Ok(())
    }

    /// Starts waiting job `i` where `plan` places it (`pinned`, if it is pinned): with the threads it
    /// is advised, its memory on the NUMA nodes of its first CPUs. Returns its thread count.
    fn start(
        &mut self,
        i: usize,
        plan: &Plan,
        pinned: Option<&Assignment>,
        advice: Option<u32>,
    ) -> u32 {
        let id = self.jobs[i].spec.id;
        let job = &self.jobs[i];
        let mut first = None;
        let mut widest = 0;
        for s in self.book.slots_of(i) {
            let assignments = &plan.slots[s].assignments;
            let here = assignments.iter().find(|a| a.job == id);
            let here = here.expect("the job is in this slot");
            let cpus = pinned.map_or(&here.cpus, |pin| &pin.cpus);
            widest = widest.max(cpus.len());
            first = first.or(Some(here));
        }
        if let Some(pin) = pinned {
            widest = widest.max(pin.cpus.len());
        }
        let threads = match job.spec.kind {
            JobKind::Rigid => job.spec.max_threads,
            JobKind::Moldable | JobKind::Malleable => advice
                .map(|a| a.clamp(job.spec.min_threads, job.spec.max_threads))
                .unwrap_or_else(|| job.spec.threads_for(widest)),
        };
        let home = first
            .or(pinned)
            .map(|a| self.machine.numa_nodes(&a.cpus))
            .unwrap_or_default();
        self.starts += 1;
        self.states[i].phase = Phase::Running(Box::new(Run {
            started: self.starts,
            threads,
            home,
            figures: Figures::default(),
            remaining: job.profile.work,
            done_below: calendar::done_below(job.profile.work),
            has_footprint: job.profile.footprint.is_some(),
            since: self.calendar.clock().cycles_at(self.now),
            since_squared: self.calendar.clock().squared_cycles_at(self.now),
            stall_until: 0.0,
            pending: None,
            finish_version: 0,
            threads_version: 0,
            sampling: SampleWindow::open(self.now, job.profile.work),
        }));
        self.running.push(i);
        self.running_count += 1;
        self.shown_waiting -= 1;
        self.book.job_changed(i, pinned.is_some());
        threads
    }

    /// Running malleable job `i` is `advised` a thread count: it switches to it after its
    /// reconfiguration delay, unless it runs that many already or is switching to them.
    fn advise(&mut self, i: usize, advised: u32) {
        let job = &self.jobs[i];
        let Some(run) = self.states[i].running_mut() else {
            return;
        };
        let effects = &self.options.effects;
        match switch_on_advice(job, run.threads, run.pending, advised, self.now, effects) {
            Switch::Unchanged => {}
            Switch::CalledOff => run.pending = None,
            Switch::At(due, threads) => {
                run.pending = Some((due, threads));
                run.threads_version += 1;
                let version = run.threads_version;
                let rank = run.started;
                self.calendar
                    .schedule_ranked(due, Due::Threads { job: i, version }, rank);
            }
        }
    }

    /// Exact mode: the next slot of the cycle begins; jobs entering it stall while they refill caches.
    pub(super) fn next_slot(&mut self) {
        let n = self.plan.slots.len();
        let previous = self.slot;
        self.slot = (self.slot + 1) % n;
        self.slot_end = self.now + self.plan.slots[self.slot].length;
        self.slot_version += 1;
        let version = self.slot_version;
        self.calendar
            .schedule(self.slot_end, Due::SlotEnd { version });
        if self.options.effects.switch_cost {
            let before: HashSet<JobId> = self.plan.slots[previous]
                .assignments
                .iter()
                .map(|a| a.job)
                .collect();
            let entering: Vec<usize> = self.plan.slots[self.slot]
                .assignments
                .iter()
                .filter(|a| !before.contains(&a.job))
                .map(|a| self.index[&a.job])
                .collect();
            for i in entering {
                self.settle(i);
                let cost = switch_cost(&self.machine, &self.jobs[i], self.options);
                let now = self.calendar.clock().cycles_at(self.now);
                if let Some(run) = self.states[i].running_mut() {
                    run.stall_until = now + cost;
                }
                self.reschedule_finish(i);
            }
        }
        self.rates_stale = true;
    }
}

/// Where the cycle of `next` starts at `now`: in exact mode, as the real executor has it, the slot
/// running now (its jobs `running`, its index and end in `current`) goes on; averaged over the cycle,
/// it starts at the first slot.
pub(super) fn going_on_at(
    running: Option<BTreeSet<JobId>>,
    current: (usize, f64),
    next: &Plan,
    now: f64,
) -> (usize, f64) {
    match running {
        Some(jobs) => {
            let (slot, end) =
                cosched_core::cycle::going_on((&jobs, current.0, current.1), next, now);
            (slot, end.max(now))
        }
        None => (
            0,
            now + next.slots.first().map_or(f64::INFINITY, |s| s.length),
        ),
    }
}
