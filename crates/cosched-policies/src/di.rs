//! DI, Distributed Intensity (Zhuravlev, Blagodurov, Fedorova, ASPLOS'10; the contention-aware baseline
//! of Scalpel §VI-B and cited by CaSAS §1): tasks are ranked by how hard they use the LLC, and the most
//! intensive ones are spread over different LLC domains so that every domain gets a similar total
//! intensity.
//!
//! Intensity is the LLC miss rate `hints.mpki` where known, otherwise the cache footprint
//! `hints.footprint_mb` (Scalpel's argument, §VI-B: footprints compose, miss rates do not). DI does not
//! change *which* tasks run — it starts waiting tasks in arrival order, as FIFO would — only *where*:
//! the most intensive of the tasks starting now goes to the free core of the domain with the least
//! intensity running, and so on down.

use crate::taskbag::{Cores, FillRule};
use cosched_core::{ActiveJob, Context, JobId};
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(crate) struct DistributedIntensity {
    intensity: HashMap<JobId, f64>,
}

/// The intensity DI ranks a job by: miss rate if measured, footprint otherwise, 0 when neither is known.
fn intensity(job: &ActiveJob) -> f64 {
    let hints = &job.spec.hints;
    hints.mpki.or(hints.footprint_mb).unwrap_or(0.0)
}

impl FillRule for DistributedIntensity {
    fn name(&self) -> &str {
        "di"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        let free = cores.free().len();
        let mut starting: Vec<&ActiveJob> = waiting.iter().copied().take(free).collect();
        starting.sort_by(|a, b| intensity(b).total_cmp(&intensity(a)));
        let mut load: Vec<f64> = (0..cores.domains.len())
            .map(|d| {
                cores
                    .running_in(d)
                    .map(|j| self.intensity.get(&j).copied().unwrap_or(0.0))
                    .sum()
            })
            .collect();
        for task in starting {
            let target = (0..load.len())
                .filter(|&d| !cores.free_in(d).is_empty())
                .min_by(|&a, &b| {
                    load[a]
                        .total_cmp(&load[b])
                        .then(cores.free_in(b).len().cmp(&cores.free_in(a).len()))
                })
                .expect("as many free cores as starting tasks");
            let cpu = cores.free_in(target)[0];
            cores.start(cpu, task.id());
            let value = intensity(task);
            load[target] += value;
            self.intensity.insert(task.id(), value);
        }
    }

    fn forget(&mut self, job: JobId) {
        self.intensity.remove(&job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskbag::tests::{cpu_of, start_bag, task};
    use crate::taskbag::TaskBag;
    use cosched_core::topology::synthetic;

    #[test]
    fn intensive_tasks_land_in_different_domains_with_balanced_totals() {
        // Two LLC domains of 2 cores: footprints 9, 8, 2, 1 must pair as {9, 1} and {8, 2}.
        let topo = synthetic::parse("package:2 l3:1 core:2").unwrap();
        let jobs = vec![
            task(0, 10.0, 2.0),
            task(1, 10.0, 9.0),
            task(2, 10.0, 1.0),
            task(3, 10.0, 8.0),
        ];
        let plan = start_bag(
            &mut TaskBag::new(DistributedIntensity::default()),
            &topo,
            &jobs,
        );
        let domain = |job| cpu_of(&plan, job).unwrap() / 2;
        assert_ne!(domain(1), domain(3), "the two heaviest share an LLC");
        assert_eq!(domain(1), domain(2));
        assert_eq!(domain(3), domain(0));
    }

    #[test]
    fn miss_rate_outranks_footprint() {
        let topo = synthetic::parse("package:2 l3:1 core:2").unwrap();
        let mut jobs = vec![
            task(0, 10.0, 9.0),
            task(1, 10.0, 8.0),
            task(2, 10.0, 1.0),
            task(3, 10.0, 1.0),
        ];
        std::sync::Arc::make_mut(&mut jobs[2].spec).hints.mpki = Some(50.0);
        std::sync::Arc::make_mut(&mut jobs[3].spec).hints.mpki = Some(40.0);
        let plan = start_bag(
            &mut TaskBag::new(DistributedIntensity::default()),
            &topo,
            &jobs,
        );
        let domain = |job| cpu_of(&plan, job).unwrap() / 2;
        assert_ne!(domain(2), domain(3));
    }
}
