//! Where a cycle of slots goes on when a new plan comes: one copy for both executors, real and
//! simulated, so that they cannot drift.

use crate::job::JobId;
use crate::plan::Plan;
use std::cmp::Reverse;
use std::collections::BTreeSet;

/// Where the cycle of plan `next` goes on at `now`, given the jobs of the slot running now
/// ([`slot_jobs`]), its index and its deadline (infinite where no cycle runs). The slot of `next` running the same jobs, or else most of them, goes on to the same
/// deadline (sooner if `next` made it shorter); where none of them is left (its jobs ended), the slot
/// now at its place in the cycle starts. A plan of one slot holds for good; after one, the cycle
/// starts at its first slot. Daemons get a new plan on every arrival and end, often more than once
/// a cycle, and a slot's job often ends while it runs: restarting the cycle each time would run its
/// first slots over and over and never its last ones.
pub fn going_on(running: (&BTreeSet<JobId>, usize, f64), next: &Plan, now: f64) -> (usize, f64) {
    let (running, slot, deadline) = running;
    let count = next.slots.len();
    if count < 2 {
        return (0, f64::INFINITY);
    }
    let starts = |slot: usize| (slot, now + next.slots[slot].length.max(0.0));
    if !deadline.is_finite() {
        return starts(0);
    }
    let closest = (0..count)
        .map(|s| {
            let jobs = slot_jobs(next, s);
            let shared = jobs.intersection(running).count();
            (&jobs == running, shared, Reverse(s))
        })
        .max()
        .filter(|&(_, shared, _)| shared > 0);
    match closest {
        Some((_, _, Reverse(s))) => (s, deadline.min(now + next.slots[s].length.max(0.0))),
        None => starts(slot.min(count - 1)),
    }
}

/// The jobs of `plan`'s slot `slot` (none past its last slot).
pub fn slot_jobs(plan: &Plan, slot: usize) -> BTreeSet<JobId> {
    (plan.slots.get(slot).into_iter())
        .flat_map(|s| &s.assignments)
        .map(|a| a.job)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{going_on, slot_jobs};
    use crate::{Assignment, CpuSet, JobId, Plan, Slot};

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
        assert_eq!(
            going_on((&slot_jobs(&before, 2), 2, 10.05), &after, 10.0),
            (3, 10.05)
        );
        // Made shorter, the slot ends sooner.
        let after = rows(&[1, 2, 3, 4], 0.02);
        assert_eq!(
            going_on((&slot_jobs(&before, 2), 2, 10.05), &after, 10.0),
            (2, 10.02)
        );
    }

    #[test]
    fn a_slot_whose_job_ended_hands_over_to_the_next_one() {
        // Job 2's slot runs; job 2 ends: the slot after it, now at its place, starts.
        let before = rows(&[1, 2, 3, 4], 0.1);
        let after = rows(&[1, 3, 4], 0.1);
        assert_eq!(
            going_on((&slot_jobs(&before, 1), 1, 10.05), &after, 10.0),
            (1, 10.1)
        );
        // A slot that keeps one of its jobs goes on to its deadline.
        let mut before = rows(&[1, 2], 0.1);
        before.slots[1].assignments.push(Assignment {
            job: JobId(5),
            cpus: CpuSet::from_range(1..2),
        });
        let after = rows(&[1, 5], 0.1);
        assert_eq!(
            going_on((&slot_jobs(&before, 1), 1, 10.05), &after, 10.0),
            (1, 10.05)
        );
    }

    #[test]
    fn one_slot_holds_and_the_cycle_after_it_starts_at_its_first_slot() {
        let before = rows(&[1, 2, 3], 0.1);
        let (slot, deadline) = going_on((&slot_jobs(&before, 2), 2, 10.05), &rows(&[3], 0.1), 10.0);
        assert_eq!((slot, deadline.is_infinite()), (0, true));
        assert_eq!(
            going_on(
                (&slot_jobs(&rows(&[3], 0.1), 0), 0, f64::INFINITY),
                &before,
                10.0
            ),
            (0, 10.1)
        );
    }
}
