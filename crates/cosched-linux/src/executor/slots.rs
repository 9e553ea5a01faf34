//! Slot enforcement: making the current slot of the plan hold on the running jobs, and moving to the
//! next slot on time.

use super::clock::monotonic;
use super::{running_mut, Executor, State};
use crate::Error;
use cosched_core::{JobId, Plan};
use std::cmp::Reverse;
use std::collections::BTreeSet;

/// Where the cycle of plan `next` goes on at `now`, given the slot of plan `current` running now and
/// its deadline. The slot of `next` running the same jobs, or else most of them, goes on to the same
/// deadline (sooner if `next` made it shorter); where none of them is left (its jobs ended), the slot
/// now at its place in the cycle starts. A plan of one slot holds for good; after one, the cycle
/// starts at its first slot. Daemons get a new plan on every arrival and end, often more than once
/// a cycle, and a slot's job often ends while it runs: restarting the cycle each time would run its
/// first slots over and over and never its last ones.
pub(super) fn going_on(current: (&Plan, usize, f64), next: &Plan, now: f64) -> (usize, f64) {
    let (plan, slot, deadline) = current;
    let count = next.slots.len();
    if count < 2 {
        return (0, f64::INFINITY);
    }
    let starts = |slot: usize| (slot, now + next.slots[slot].length.max(0.0));
    if !deadline.is_finite() || slot >= plan.slots.len() {
        return starts(0);
    }
    let jobs_of = |plan: &Plan, slot: usize| -> BTreeSet<JobId> {
        plan.slots[slot].assignments.iter().map(|a| a.job).collect()
    };
    let running = jobs_of(plan, slot);
    let closest = (0..count)
        .map(|s| {
            let jobs = jobs_of(next, s);
            let shared = jobs.intersection(&running).count();
            (jobs == running, shared, Reverse(s))
        })
        .max()
        .filter(|&(_, shared, _)| shared > 0);
    match closest {
        Some((_, _, Reverse(s))) => (s, deadline.min(now + next.slots[s].length.max(0.0))),
        None => starts(slot.min(count - 1)),
    }
}

impl Executor<'_> {
    /// Makes the current slot hold: freeze the jobs leaving it, move jobs whose CPUs change, then thaw
    /// the jobs entering it. Jobs opted out of coscheduling, pinned jobs and jobs asked to end are
    /// never frozen.
    pub(super) fn enforce_slot(&mut self, switching: bool) -> Result<(), Error> {
        let now = self.now();
        let mut freeze = Vec::new();
        let mut place = Vec::new();
        for (id, r) in self.running() {
            let spec = &self.jobs[&id].arriving.spec;
            let never_frozen =
                !spec.coschedule || r.asked_to_end || self.plan.pinned.iter().any(|a| a.job == id);
            match self.plan.cpus_in_slot(self.slot, id) {
                Some(cpus) => place.push((id, cpus.clone())),
                None if !never_frozen => freeze.push(id),
                None => {}
            }
        }
        // A job whose plan cannot be enforced fails alone, once the slot holds for the others.
        let mut failed = Vec::new();
        for &id in &freeze {
            self.account_held(id, now);
            if let Some(r) = running_mut(&mut self.jobs, id) {
                if let Err(e) = self.enforcer.set_frozen(&mut r.control, true) {
                    failed.push((id, e));
                }
            }
        }
        for (id, cpus) in &place {
            self.account_held(*id, now);
            if let Some(r) = running_mut(&mut self.jobs, *id) {
                if let Err(e) = self.enforcer.place(&mut r.control, cpus) {
                    failed.push((*id, e));
                }
            }
        }
        let first_thaw = monotonic();
        let mut thawed = 0;
        for (id, _) in &place {
            let Some(r) = running_mut(&mut self.jobs, *id) else {
                continue;
            };
            if r.control.frozen {
                thawed += 1;
                if let Err(e) = self.enforcer.set_frozen(&mut r.control, false) {
                    failed.push((*id, e));
                }
            }
        }
        if switching && thawed > 0 {
            self.switch_skew.push(monotonic() - first_thaw);
        }
        for (id, e) in failed {
            self.end_unenforceable(id, e)?;
        }
        let frozen: Vec<JobId> = self
            .running()
            .filter(|(_, r)| r.control.frozen)
            .map(|(id, _)| id)
            .collect();
        self.source.slot_enforced(&frozen);
        Ok(())
    }

    /// Adds the CPUs job `id` held since the last change to its running total.
    pub(super) fn account_held(&mut self, id: JobId, now: f64) {
        if let Some(State::Running(r)) = self.jobs.get_mut(&id).map(|j| &mut j.state) {
            let held = if r.control.frozen {
                0
            } else {
                r.control.cpus.len()
            };
            r.held_total += held as f64 * (now - r.held_since);
            r.held_since = now;
        }
    }

    pub(super) fn switch_slot_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if now < self.slot_deadline {
            return Ok(());
        }
        self.switch_lateness.push(now - self.slot_deadline);
        self.source.slot_switched(now - self.slot_deadline);
        let slots = &self.plan.slots;
        self.slot = (self.slot + 1) % slots.len();
        let length = slots[self.slot].length.max(0.0);
        // Deadlines follow each other exactly, so late switches do not make the cycle drift; after a
        // long stall the cycle restarts from now.
        self.slot_deadline = if self.slot_deadline + length > now {
            self.slot_deadline + length
        } else {
            now + length
        };
        self.enforce_slot(true)
    }
}

#[cfg(test)]
mod tests {
    use super::going_on;
    use cosched_core::{Assignment, CpuSet, JobId, Plan, Slot};

    /// A plan of one slot per job of `rows`, each `length` long on CPU 0.
    fn rows(jobs: &[u32], length: f64) -> Plan {
        Plan {
            slots: (jobs.iter())
                .map(|&job| Slot {
                    length,
                    assignments: vec![Assignment {
                        job: JobId(job),
                        cpus: CpuSet::from_range(0..1),
                    }],
                })
                .collect(),
            ..Plan::default()
        }
    }

    #[test]
    fn a_new_plan_goes_on_with_the_slot_running_now() {
        // Slot 2 (job 3) runs until 10.05; a newcomer's row comes first in the next plan.
        let before = rows(&[1, 2, 3, 4], 0.1);
        let after = rows(&[9, 1, 2, 3, 4], 0.1);
        assert_eq!(going_on((&before, 2, 10.05), &after, 10.0), (3, 10.05));
        // Made shorter, the slot ends sooner.
        let after = rows(&[1, 2, 3, 4], 0.02);
        assert_eq!(going_on((&before, 2, 10.05), &after, 10.0), (2, 10.02));
    }

    #[test]
    fn a_slot_whose_job_ended_hands_over_to_the_next_one() {
        // Job 2's slot runs; job 2 ends: the slot after it, now at its place, starts.
        let before = rows(&[1, 2, 3, 4], 0.1);
        let after = rows(&[1, 3, 4], 0.1);
        assert_eq!(going_on((&before, 1, 10.05), &after, 10.0), (1, 10.1));
        // A slot that keeps one of its jobs goes on to its deadline.
        let mut before = rows(&[1, 2], 0.1);
        before.slots[1].assignments.push(cosched_core::Assignment {
            job: JobId(5),
            cpus: CpuSet::from_range(1..2),
        });
        let after = rows(&[1, 5], 0.1);
        assert_eq!(going_on((&before, 1, 10.05), &after, 10.0), (1, 10.05));
    }

    #[test]
    fn one_slot_holds_and_the_cycle_after_it_starts_at_its_first_slot() {
        let before = rows(&[1, 2, 3], 0.1);
        let (slot, deadline) = going_on((&before, 2, 10.05), &rows(&[3], 0.1), 10.0);
        assert_eq!((slot, deadline.is_infinite()), (0, true));
        assert_eq!(
            going_on((&rows(&[3], 0.1), 0, f64::INFINITY), &before, 10.0),
            (0, 10.1)
        );
    }
}
