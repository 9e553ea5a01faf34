//! TA, topology-aware equipartitioning (TACO §4.2): TACO without coscheduling. Every job gets its own
//! aligned partition (on the TACO machine 24, 12, 6, 3, 2 or 1 cores). The paper "strives" for equal
//! sizes: all jobs get the largest size of which the machine has one partition per job, and where that
//! leaves whole partitions idle, the oldest jobs get the next larger size that contains theirs instead,
//! as many as fit (5 jobs on 24 cores: three packages and two half-packages, not five halves and nine
//! idle cores). Sizes therefore differ by at most one step.
//!
//! Where the jobs belong to several users, the sizes follow each job's part of its user's part of the
//! machine instead, and waiting jobs get partitions in fair-share order (`crate::users`): a user with one job gets as many CPUs as one with seven, in
//! the largest aligned partitions that fit those counts.
//!
//! Balancing is central and moves as little as it can: on every change a job keeps its partition when
//! the size holds, shrinks inside it or grows around it when the size changes, and only the jobs that
//! find their place taken move. With more jobs than CPUs, newcomers wait in arrival order.

use crate::partitions::Partitions;
use cosched_core::{ActiveJob, Assignment, Context, CpuSet, Event, JobId, Plan, Policy, Topology};
use rustc_hash::FxHashMap as HashMap;

#[derive(Debug, Default)]
pub struct TopologyAware {
    held: HashMap<JobId, CpuSet>,
    partitions: Partitions,
    /// Whether the jobs of the last decision had owners (`crate::users`).
    owned: bool,
}

impl Policy for TopologyAware {
    fn name(&self) -> &str {
        "ta"
    }

    /// At most one job per CPU gets a partition, running ones first.
    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        // Jobs of several users wait in fair-share order, not arrival order: every one is seen.
        if self.owned {
            return None;
        }
        Some(topology.num_cpus())
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        let topo = ctx.topology;
        let cpus = topo.num_cpus();
        // Running jobs first, so that a newcomer never displaces one.
        self.owned = ctx.jobs.iter().any(|j| j.spec.owner.is_some());
        let receivers = crate::users::admitted(ctx.jobs, cpus);
        if receivers.is_empty() {
            self.held.clear();
            return Some(Plan::default());
        }
        if crate::users::several_users(receivers.iter().map(|j| &*j.spec)) {
            let assignments = self.place_by_user(topo, &receivers);
            return Some(self.plan(assignments));
        }
        let sizes = self.partitions.sizes(topo);
        let size = sizes
            .iter()
            .copied()
            .rev()
            .find(|&s| self.partitions.of_size(topo, s).len() >= receivers.len())
            .expect("size 1 has a partition per CPU");
        let fine = self.partitions.of_size(topo, size);
        let larger = sizes
            .iter()
            .copied()
            .filter(|&l| l > size)
            .find(|&l| nests(&fine, &self.partitions.of_size(topo, l)));
        let upgraded = larger.map_or(0, |l| (cpus - receivers.len() * size) / (l - size));
        let mut assignments = Vec::with_capacity(receivers.len());
        match larger {
            Some(l) if upgraded > 0 => {
                let (wide, narrow) = receivers.split_at(upgraded.min(receivers.len()));
                let coarse = self.partitions.of_size(topo, l);
                let wide_parts = self.place(&coarse, wide, &CpuSet::new());
                let used = wide_parts
                    .iter()
                    .fold(CpuSet::new(), |acc, (_, p)| acc.union(p));
                assignments.extend(wide_parts);
                assignments.extend(self.place(&fine, narrow, &used));
            }
            _ => assignments.extend(self.place(&fine, &receivers, &CpuSet::new())),
        }
        Some(self.plan(assignments))
    }
}

impl TopologyAware {
    /// The plan giving each job its partition; remembered as the jobs' homes.
    fn plan(&mut self, assignments: Vec<(&ActiveJob, CpuSet)>) -> Plan {
        let mut plan = Plan::space_sharing(Vec::with_capacity(assignments.len()));
        for (job, cpus) in assignments {
            plan.advice
                .insert(job.id(), job.spec.threads_for(cpus.len()));
            plan.slots[0].assignments.push(Assignment {
                job: job.id(),
                cpus,
            });
        }
        self.held = plan.slots[0]
            .assignments
            .iter()
            .map(|a| (a.job, a.cpus.clone()))
            .collect();
        plan
    }

    /// Partitions for jobs of several users: each job's CPU count is its part of its user's part
    /// (`crate::users`), and it gets the largest free aligned partition not wider than that, the
    /// widest jobs first so that narrow ones do not break up the large partitions. A job keeps its
    /// home (the partition equal to, inside or around its old CPUs) where it is free.
    fn place_by_user<'a>(
        &mut self,
        topo: &Topology,
        receivers: &[&'a ActiveJob],
    ) -> Vec<(&'a ActiveJob, CpuSet)> {
        let specs: Vec<_> = receivers.iter().map(|j| &*j.spec).collect();
        let caps: Vec<usize> = receivers
            .iter()
            .map(|j| j.spec.max_threads as usize)
            .collect();
        let targets = crate::users::split_cpus(topo.num_cpus(), &specs, &caps);
        let mut order: Vec<usize> = (0..receivers.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(targets[i]));
        let sizes = self.partitions.sizes(topo);
        let mut used = CpuSet::new();
        let mut placed = Vec::with_capacity(receivers.len());
        for i in order {
            let job = receivers[i];
            let old = self.held.get(&job.id()).cloned();
            // Every job's target is at least 1 and the targets add up to at most the machine, so
            // some CPU, a partition of size 1, is always left.
            let cpus = sizes
                .iter()
                .rev()
                .filter(|&&s| s <= targets[i])
                .find_map(|&s| {
                    let parts = self.partitions.of_size(topo, s);
                    let mut free = parts.iter().filter(|p| p.is_disjoint(&used));
                    let home = old.as_ref().and_then(|old| {
                        free.clone().find(|p| p.is_subset(old) || old.is_subset(p))
                    });
                    home.or_else(|| free.next()).cloned()
                })
                .expect("a free CPU is left for every job");
            used = used.union(&cpus);
            placed.push((i, cpus));
        }
        // Rounding down to aligned sizes leaves CPUs idle: the jobs furthest below their targets
        // grow first into free partitions around theirs, up to their caps; a CPU goes to a job
        // above its target rather than stay idle.
        placed.sort_by_key(|(i, cpus)| std::cmp::Reverse(targets[*i] - cpus.len()));
        for (i, cpus) in &mut placed {
            let around = sizes
                .iter()
                .rev()
                .filter(|&&s| s > cpus.len() && s <= caps[*i])
                .find_map(|&s| {
                    let others = used.difference(cpus);
                    self.partitions
                        .of_size(topo, s)
                        .iter()
                        .find(|p| cpus.is_subset(p) && p.is_disjoint(&others))
                        .cloned()
                });
            if let Some(wider) = around {
                used = used.union(&wider);
                *cpus = wider;
            }
        }
        placed.sort_by_key(|(i, _)| *i);
        placed
            .into_iter()
            .map(|(i, cpus)| (receivers[i], cpus))
            .collect()
    }

    /// One partition each for `jobs`, from `partitions` not overlapping `used`: a job keeps the one equal
    /// to, inside, or around its old CPUs where it is free; the others take the first free ones.
    fn place<'a>(
        &self,
        partitions: &[CpuSet],
        jobs: &[&'a ActiveJob],
        used: &CpuSet,
    ) -> Vec<(&'a ActiveJob, CpuSet)> {
        let mut taken: Vec<bool> = partitions.iter().map(|p| !p.is_disjoint(used)).collect();
        let mut placed: HashMap<JobId, usize> =
            HashMap::with_capacity_and_hasher(jobs.len(), Default::default());
        for job in jobs {
            let Some(old) = self.held.get(&job.id()) else {
                continue;
            };
            let home = (0..partitions.len()).find(|&i| {
                !taken[i]
                    && (partitions[i] == *old
                        || partitions[i].is_subset(old)
                        || old.is_subset(&partitions[i]))
            });
            if let Some(i) = home {
                taken[i] = true;
                placed.insert(job.id(), i);
            }
        }
        let mut free = (0..partitions.len()).filter(|&i| !taken[i]);
        jobs.iter()
            .map(|job| {
                let i = match placed.get(&job.id()) {
                    Some(&i) => i,
                    None => free.next().expect("sizes chosen so that every job fits"),
                };
                (*job, partitions[i].clone())
            })
            .collect()
    }
}

fn nests(fine: &[CpuSet], coarse: &[CpuSet]) -> bool {
    fine.iter().all(|f| coarse.iter().any(|c| f.is_subset(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::presets;
    use cosched_core::{ActiveJob, JobKind, Topology};
    use proptest::prelude::*;

    fn job(id: u32) -> ActiveJob {
        let mut job = waiting(id, JobKind::Malleable, 1, 24);
        job.started = Some(0.0);
        job.threads = 1;
        job
    }

    fn decide(ta: &mut TopologyAware, topo: &Topology, jobs: &[ActiveJob], event: Event) -> Plan {
        let ctx = Context {
            topology: topo,
            now: 0.0,
            jobs,
        };
        ta.decide(&ctx, &event).unwrap()
    }

    fn cpus_of(plan: &Plan, job: u32) -> CpuSet {
        plan.cpus_in_slot(0, JobId(job)).unwrap().clone()
    }

    #[test]
    fn sizes_follow_the_job_count_one_step_apart_at_most() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        let mut ta = TopologyAware::default();
        let cases: [(u32, &[usize]); 8] = [
            (1, &[24]),
            (2, &[12, 12]),
            (3, &[12, 6, 6]),
            (4, &[6, 6, 6, 6]),
            (5, &[6, 6, 6, 3, 3]),
            (9, &[6, 2, 2, 2, 2, 2, 2, 2, 2]),
            (13, &[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1]),
            (24, &[1; 24]),
        ];
        for (n, sizes) in cases {
            let jobs: Vec<ActiveJob> = (0..n).map(job).collect();
            let plan = decide(&mut ta, &topo, &jobs, Event::Arrived { job: JobId(n - 1) });
            let got: Vec<usize> = (0..n).map(|j| cpus_of(&plan, j).len()).collect();
            assert_eq!(got, sizes, "{n} jobs");
        }
    }

    #[test]
    fn shrinking_and_growing_stay_in_place() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        let mut ta = TopologyAware::default();
        let jobs: Vec<ActiveJob> = (0..2).map(job).collect();
        let halves = decide(&mut ta, &topo, &jobs, Event::Arrived { job: JobId(1) });
        let jobs: Vec<ActiveJob> = (0..3).map(job).collect();
        let packages = decide(&mut ta, &topo, &jobs, Event::Arrived { job: JobId(2) });
        for j in 0..2 {
            assert!(cpus_of(&packages, j).is_subset(&cpus_of(&halves, j)));
        }
        let jobs: Vec<ActiveJob> = [0, 2].into_iter().map(job).collect();
        let again = decide(&mut ta, &topo, &jobs, Event::Finished { job: JobId(1) });
        // Job 0 grows around its package; job 2's package lies in the same half, so job 2 moves.
        assert!(cpus_of(&packages, 0).is_subset(&cpus_of(&again, 0)));
        assert!(cpus_of(&again, 2).is_disjoint(&cpus_of(&again, 0)));
    }

    /// Jobs started on the TACO machine, `users[i]` owning job `i`.
    fn owned(users: &[(u32, f64)]) -> Vec<ActiveJob> {
        users
            .iter()
            .enumerate()
            .map(|(i, &(user, share))| {
                cosched_core::test_util::job(i as u32)
                    .max_threads(24)
                    .owner(user, share)
                    .running(0.0, 1)
            })
            .collect()
    }

    #[test]
    fn a_user_with_one_job_gets_what_a_user_with_seven_gets() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        let mut users = vec![(0, 1.0)];
        users.extend([(65534, 1.0); 7]);
        let jobs = owned(&users);
        let plan = decide(
            &mut TopologyAware::default(),
            &topo,
            &jobs,
            Event::Arrived { job: JobId(7) },
        );
        let sizes: Vec<usize> = (0..8).map(|j| cpus_of(&plan, j).len()).collect();
        assert_eq!(sizes[0], 12, "{sizes:?}");
        assert_eq!(sizes[1..].iter().sum::<usize>(), 12, "{sizes:?}");
        for (i, a) in plan.slots[0].assignments.iter().enumerate() {
            assert!(topo.partitions(a.cpus.len()).contains(&a.cpus));
            for b in &plan.slots[0].assignments[i + 1..] {
                assert!(a.cpus.is_disjoint(&b.cpus));
            }
        }
    }

    #[test]
    fn cpus_a_share_cannot_use_in_one_partition_go_to_others_rather_than_idle() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        let jobs = owned(&[(0, 3.0), (65534, 1.0)]);
        let plan = decide(
            &mut TopologyAware::default(),
            &topo,
            &jobs,
            Event::Arrived { job: JobId(1) },
        );
        // 18 and 6 CPUs are fair, but 18 is no partition size: the larger share gets a half, and the
        // package beside the smaller share's grows into the other half.
        assert_eq!([cpus_of(&plan, 0).len(), cpus_of(&plan, 1).len()], [12, 12]);
    }

    #[test]
    fn partitions_rounded_down_grow_into_what_is_left() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        let mut ta = TopologyAware::default();
        let jobs = owned(&[(0, 1.0), (65534, 1.0), (65534, 1.0)]);
        let plan = decide(&mut ta, &topo, &jobs, Event::Arrived { job: JobId(2) });
        let sizes: Vec<usize> = (0..3).map(|j| cpus_of(&plan, j).len()).collect();
        assert_eq!(sizes, [12, 6, 6]);
        // A third job of the second user: 4 CPUs each are rounded down to halves of packages, and
        // one grows back to a whole package. The first user's job does not move.
        let mut more = jobs.clone();
        more.extend(owned(&[(0, 1.0), (0, 1.0), (0, 1.0), (65534, 1.0)]).pop());
        let again = decide(&mut ta, &topo, &more, Event::Arrived { job: JobId(3) });
        assert_eq!(cpus_of(&again, 0), cpus_of(&plan, 0));
        let mut sizes: Vec<usize> = (1..4).map(|j| cpus_of(&again, j).len()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [3, 3, 6]);
    }

    proptest! {
        #[test]
        fn partitions_are_aligned_disjoint_and_of_two_sizes_at_most(
            machine in prop::sample::select(vec!["taco-opteron8435", "casas-opteron6172", "gang-opteron8380"]),
            counts in prop::collection::vec(1u32..60, 1..12),
        ) {
            let topo = presets::preset(machine).unwrap();
            let mut ta = TopologyAware::default();
            for n in counts {
                let jobs: Vec<ActiveJob> = (0..n).map(job).collect();
                let plan = decide(&mut ta, &topo, &jobs, Event::Arrived { job: JobId(n - 1) });
                let sets: Vec<&CpuSet> = plan.slots[0].assignments.iter().map(|a| &a.cpus).collect();
                prop_assert_eq!(sets.len(), (n as usize).min(topo.num_cpus()));
                let mut sizes: Vec<usize> = sets.iter().map(|s| s.len()).collect();
                sizes.sort_unstable();
                sizes.dedup();
                prop_assert!(sizes.len() <= 2, "sizes {:?}", sizes);
                for (i, a) in sets.iter().enumerate() {
                    prop_assert!(topo.partitions(a.len()).contains(a));
                    for b in &sets[i + 1..] {
                        prop_assert!(a.is_disjoint(b));
                    }
                }
            }
        }
    }
}
