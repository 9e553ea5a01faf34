//! Scalpel (Liu et al., IEEE Transactions on Computers 2025): contention-aware co-scheduling of
//! many independent single-threaded tasks on a machine of P processors with C cores sharing each LLC.
//!
//! Tasks are grouped so that the summed average footprints of the groups are about equal
//! ([`grouping`], Algorithm 1), then groups are dispatched to processors and tasks to cores by two-level
//! LPT ([`lpt`], Algorithm 2). Footprints come from `hints.footprint_mb` (eq. 2–3, computed offline by
//! [`footprint`] from an address trace) and run times from `hints.runtime`.
//!
//! The paper schedules one static bag (§V-D leaves arrivals to future work). Here the bag is whatever
//! arrived together; a later arrival regroups every task that has not started yet, and running tasks
//! stay where they are.

pub mod footprint;
pub mod grouping;
pub mod lpt;

use crate::taskbag::{runtime, Cores, FillRule};
use cosched_core::{ActiveJob, Context, JobId};
use lpt::Dispatcher;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(crate) struct Scalpel {
    dispatcher: Option<Dispatcher<JobId>>,
    /// Tasks the dispatcher holds (queued in a group or buffered), to notice new arrivals.
    planned: BTreeSet<JobId>,
}

impl FillRule for Scalpel {
    fn name(&self) -> &str {
        "scalpel"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        let processors = cores.domains.len();
        let per_processor = cores.domains.iter().map(Vec::len).max().unwrap_or(1);
        if waiting.iter().any(|j| !self.planned.contains(&j.id())) {
            let footprints: Vec<(JobId, f64)> = waiting
                .iter()
                .map(|j| (j.id(), j.spec.hints.footprint_mb.unwrap_or(0.0)))
                .collect();
            let groups = grouping::group(&footprints, processors, per_processor)
                .into_iter()
                .map(|g| {
                    g.into_iter()
                        .map(|id| {
                            let job = waiting.iter().find(|j| j.id() == id).expect("grouped");
                            (id, runtime(job))
                        })
                        .collect()
                })
                .collect();
            self.dispatcher = Some(Dispatcher::new(groups, processors, per_processor));
            self.planned = waiting.iter().map(|j| j.id()).collect();
        }
        let Some(dispatcher) = self.dispatcher.as_mut() else {
            return;
        };
        let free: Vec<Vec<u32>> = (0..processors).map(|p| cores.free_in(p)).collect();
        let idle: Vec<bool> = (0..processors)
            .map(|p| cores.running_in(p).next().is_none())
            .collect();
        let counts: Vec<usize> = free.iter().map(Vec::len).collect();
        for (p, tasks) in dispatcher.dispatch(&counts, &idle).into_iter().enumerate() {
            for (cpu, task) in free[p].iter().zip(tasks) {
                cores.start(*cpu, task);
                self.planned.remove(&task);
            }
        }
    }

    fn forget(&mut self, job: JobId) {
        self.planned.remove(&job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskbag::tests::{cpu_of, start_bag, task};
    use crate::taskbag::TaskBag;
    use cosched_core::topology::synthetic;
    use cosched_core::{Context, Event, Policy};

    #[test]
    fn full_groups_start_first_and_a_freed_core_opens_the_next_group() {
        let topo = synthetic::parse("package:2 l3:1 core:2").unwrap();
        // 6 tasks on 2 × 2: the k split leaves the two largest footprints (tasks 0, 1) as partial
        // groups {0}, {1}; the rest form full groups {2, 5} and {3, 4}.
        let mut jobs = vec![
            task(0, 30.0, 9.0),
            task(1, 20.0, 8.0),
            task(2, 25.0, 2.0),
            task(3, 10.0, 1.0),
            task(4, 5.0, 0.5),
            task(5, 50.0, 0.4),
        ];
        let mut scalpel = TaskBag::new(Scalpel::default());
        let plan = start_bag(&mut scalpel, &topo, &jobs);
        let domain = |plan: &cosched_core::Plan, job| cpu_of(plan, job).map(|c| c / 2);
        // The full group with the longest task (50 s) takes processor 0, longest task on the first core.
        assert_eq!(cpu_of(&plan, 5), Some(0));
        assert_eq!(cpu_of(&plan, 2), Some(1));
        assert_eq!((domain(&plan, 3), domain(&plan, 4)), (Some(1), Some(1)));
        assert_eq!((cpu_of(&plan, 0), cpu_of(&plan, 1)), (None, None));
        jobs.retain(|j| j.id() != JobId(4));
        let ctx = Context {
            topology: &topo,
            now: 5.0,
            jobs: &jobs,
        };
        let plan = scalpel
            .decide(&ctx, &Event::Finished { job: JobId(4) })
            .unwrap();
        // Processor 1's buffer is empty, so its free core opens the longest partial group, {0}.
        assert_eq!(domain(&plan, 0), Some(1));
        assert_eq!(cpu_of(&plan, 1), None);
    }
}
