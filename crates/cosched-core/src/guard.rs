//! What every executor, real or simulated, checks about a policy's decisions: that a plan places only
//! active jobs on CPUs of the machine, how many threads a job starts with, and that the policy neither
//! loops on timers nor leaves jobs waiting forever. One copy here, so the two executors cannot drift.

use crate::cpuset::CpuSet;
use crate::job::{JobId, JobKind, JobSpec};
use crate::plan::Plan;
use crate::plan_change::PlanChange;

/// A decision no executor can carry out; the executor adds the policy's name (and the time).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("placed job {job}, which is not active (not arrived yet, finished or unknown)")]
    InactiveJob { job: JobId },
    #[error("gave job {job} an empty CPU set; a placed job needs at least one CPU")]
    NoCpus { job: JobId },
    #[error("gave job {job} CPUs {cpus}; the machine has only {machine}")]
    CpusOutsideMachine {
        job: JobId,
        cpus: CpuSet,
        machine: CpuSet,
    },
    #[error("keeps asking for timers without letting time pass")]
    TimerLoop,
    #[error("left {waiting} arrived job(s) unable to progress with no timer set; does it place every arrived job eventually?")]
    Stalled { waiting: usize },
}

impl Plan {
    /// Checks every assignment (slotted and pinned): the job is active and its CPUs are a non-empty
    /// subset of `machine`.
    pub fn validate(
        &self,
        machine: &CpuSet,
        is_active: impl Fn(JobId) -> bool,
    ) -> Result<(), PlanError> {
        self.slots
            .iter()
            .flat_map(|s| &s.assignments)
            .chain(&self.pinned)
            .try_for_each(|a| check_assignment(a.job, &a.cpus, machine, &is_active))
    }

    /// The most CPUs `job` holds in any slot of the cycle (0 if it is not placed).
    pub fn widest(&self, job: JobId) -> usize {
        (0..self.slots.len().max(1))
            .filter_map(|slot| self.cpus_in_slot(slot, job))
            .map(CpuSet::len)
            .max()
            .unwrap_or(0)
    }
}

/// One assignment's job is active and its CPUs a non-empty subset of `machine`.
fn check_assignment(
    job: JobId,
    cpus: &CpuSet,
    machine: &CpuSet,
    is_active: impl Fn(JobId) -> bool,
) -> Result<(), PlanError> {
    if !is_active(job) {
        return Err(PlanError::InactiveJob { job });
    }
    if cpus.is_empty() {
        return Err(PlanError::NoCpus { job });
    }
    if !cpus.is_subset(machine) {
        return Err(PlanError::CpusOutsideMachine {
            job,
            cpus: cpus.clone(),
            machine: machine.clone(),
        });
    }
    Ok(())
}

impl PlanChange {
    /// [`Plan::validate`] for what a change places or pins; the rest of the plan was checked when it
    /// was placed.
    pub fn validate(
        &self,
        machine: &CpuSet,
        is_active: impl Fn(JobId) -> bool,
    ) -> Result<(), PlanError> {
        let placed = self.placed.iter().map(|p| (p.job, &p.cpus));
        let pinned = self.pinned.iter().map(|a| (a.job, &a.cpus));
        placed
            .chain(pinned)
            .try_for_each(|(job, cpus)| check_assignment(job, cpus, machine, &is_active))
    }
}

impl JobSpec {
    /// The thread count the job starts with under `plan`: a rigid job its fixed count, others the
    /// plan's advice within their bounds, or as many as the widest partition the plan gives them.
    pub fn threads_at_start(&self, plan: &Plan) -> u32 {
        match self.kind {
            JobKind::Rigid => self.max_threads,
            JobKind::Moldable | JobKind::Malleable => plan
                .advice
                .get(&self.id)
                .map(|&a| a.clamp(self.min_threads, self.max_threads))
                .unwrap_or_else(|| self.threads_for(plan.widest(self.id))),
        }
    }
}

/// A policy asking for more than this many timers within one millisecond is looping, not deciding.
const MAX_TIMERS_PER_MS: u32 = 1000;

/// Counts timers that fire in quick succession.
#[derive(Debug, Clone, Default)]
pub struct TimerLoopGuard {
    window_start: f64,
    count: u32,
}

impl TimerLoopGuard {
    /// Call when a timer fires at `now`; an error once the policy loops.
    pub fn fired(&mut self, now: f64) -> Result<(), PlanError> {
        if self.count > 0 && now - self.window_start < 1e-3 {
            self.count += 1;
        } else {
            self.window_start = now;
            self.count = 1;
        }
        if self.count > MAX_TIMERS_PER_MS {
            return Err(PlanError::TimerLoop);
        }
        Ok(())
    }
}

/// The stall guard: `waiting` arrived jobs, none of which can progress and no timer set means no
/// event will ever come to place them.
pub fn check_stall(
    waiting: usize,
    anything_progresses: bool,
    timer: Option<f64>,
) -> Result<(), PlanError> {
    if waiting > 0 && !anything_progresses && timer.is_none() {
        return Err(PlanError::Stalled { waiting });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Assignment, Slot};

    fn cpus(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    fn plan_with(job: u32, set: &str) -> Plan {
        Plan::space_sharing(vec![Assignment {
            job: JobId(job),
            cpus: cpus(set),
        }])
    }

    #[test]
    fn validation_rejects_empty_foreign_and_inactive_placements() {
        let machine = cpus("0-3");
        let active = |id: JobId| id == JobId(0);
        assert_eq!(plan_with(0, "0-1").validate(&machine, active), Ok(()));
        assert_eq!(
            plan_with(0, "").validate(&machine, active),
            Err(PlanError::NoCpus { job: JobId(0) })
        );
        assert!(matches!(
            plan_with(0, "2-5").validate(&machine, active),
            Err(PlanError::CpusOutsideMachine { .. })
        ));
        assert_eq!(
            plan_with(1, "0").validate(&machine, active),
            Err(PlanError::InactiveJob { job: JobId(1) })
        );
    }

    #[test]
    fn start_threads_follow_kind_advice_and_widest_slot() {
        let mut spec = crate::test_util::job(0)
            .kind(JobKind::Moldable)
            .max_threads(8)
            .spec();
        let mut plan = plan_with(0, "0-1");
        plan.slots.push(Slot {
            length: 1.0,
            assignments: vec![Assignment {
                job: JobId(0),
                cpus: cpus("0-3"),
            }],
        });
        assert_eq!(spec.threads_at_start(&plan), 4);
        plan.advice.insert(JobId(0), 20);
        assert_eq!(spec.threads_at_start(&plan), 8);
        spec.kind = JobKind::Rigid;
        spec.max_threads = 3;
        assert_eq!(spec.threads_at_start(&plan), 3);
    }

    #[test]
    fn timers_in_a_loop_are_caught_and_spaced_timers_are_not() {
        let mut guard = TimerLoopGuard::default();
        for i in 0..5000 {
            guard.fired(i as f64 * 1e-3).unwrap();
        }
        let mut looping = TimerLoopGuard::default();
        let result = (0..=MAX_TIMERS_PER_MS).try_for_each(|_| looping.fired(7.0));
        assert_eq!(result, Err(PlanError::TimerLoop));
    }

    #[test]
    fn a_stall_needs_waiting_jobs_no_progress_and_no_timer() {
        assert_eq!(
            check_stall(2, false, None),
            Err(PlanError::Stalled { waiting: 2 })
        );
        assert!(check_stall(2, true, None).is_ok());
        assert!(check_stall(2, false, Some(1.0)).is_ok());
        assert!(check_stall(0, false, None).is_ok());
    }
}
