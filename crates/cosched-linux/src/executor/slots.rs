//! Slot enforcement: making the current slot of the plan hold on the running jobs, and moving to the
//! next slot on time.

use super::clock::monotonic;
use super::{running_mut, Executor, State};
use crate::Error;
use cosched_core::JobId;

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
