//! EQ, equipartitioning without topology (TACO §4.2): the CPUs are divided equally among the jobs, and a
//! change only adds CPUs to or removes CPUs from the sets jobs already hold, so that jobs do not migrate.
//!
//! Users, not jobs, share the machine (`crate::users`): waiting jobs get CPUs in fair-share order, and
//! the CPUs go to users first, in proportion to their shares, then to each user's jobs by weight
//! (`crate::users`); a single user's jobs of equal weight get equal counts. A job never gets more CPUs
//! than its `max_threads`; what it leaves goes to the others. With more jobs
//! than CPUs, running jobs keep one CPU each and newcomers wait in arrival order.

use crate::users;
use cosched_core::plan_change::SlotAssignment;
use cosched_core::{Assignment, Context, CpuSet, Event, JobId, Plan, PlanChange, Policy, Topology};
use rustc_hash::FxHashMap as HashMap;

#[derive(Debug, Default)]
pub struct Equipartition {
    held: HashMap<JobId, CpuSet>,
    /// Whether the jobs of the last decision had owners (`crate::users`).
    owned: bool,
}

impl Policy for Equipartition {
    fn name(&self) -> &str {
        "eq"
    }

    /// At most one job per CPU shares the machine, running ones first: a newcomer can only take a CPU
    /// that no receiver of the last decision holds.
    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        // Jobs of several users wait in fair-share order, not arrival order: every one is seen.
        if self.owned {
            return None;
        }
        Some(topology.num_cpus().saturating_sub(self.held.len()))
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        let machine = ctx.topology.cpus();
        // With a receiver on every CPU, a newcomer queues behind them and the shares stay as they are.
        if matches!(event, Event::Arrived { .. }) && self.held.len() >= machine.len() {
            return None;
        }
        self.owned = ctx.jobs.iter().any(|j| j.spec.owner.is_some());
        let receivers = users::admitted(ctx.jobs, machine.len());
        let targets = crate::users::split_cpus(
            machine.len(),
            &receivers.iter().map(|j| &*j.spec).collect::<Vec<_>>(),
            &receivers
                .iter()
                .map(|j| j.spec.max_threads as usize)
                .collect::<Vec<_>>(),
        );
        let wanted: Vec<(JobId, usize)> = receivers
            .iter()
            .zip(&targets)
            .map(|(job, &target)| (job.id(), target))
            .collect();
        let held = grow_in_place(machine, &mut self.held, &wanted);
        let mut plan = Plan::space_sharing(
            receivers
                .iter()
                .map(|job| Assignment {
                    job: job.id(),
                    cpus: held[&job.id()].clone(),
                })
                .collect(),
        );
        plan.advice = receivers
            .iter()
            .zip(&targets)
            .map(|(job, &target)| (job.id(), job.spec.threads_for(target)))
            .collect();
        self.held = held;
        Some(plan)
    }

    fn decide_change(
        &mut self,
        ctx: &Context,
        event: &Event,
        current: &Plan,
    ) -> Option<PlanChange> {
        if let Event::Finished { job } = event {
            if let Some(change) = self.hand_over(ctx, *job) {
                return Some(change);
            }
        }
        self.decide(ctx, event)
            .map(|plan| PlanChange::between(current, &plan))
    }
}

impl Equipartition {
    /// The change that gives a finished job's CPU to the oldest waiting job, when every CPU had a
    /// receiver (one CPU each) and one waits: every other receiver keeps its CPU and its advice, so
    /// nothing else changes. `None` when that does not hold.
    fn hand_over(&mut self, ctx: &Context, finished: JobId) -> Option<PlanChange> {
        if self.held.len() != ctx.topology.num_cpus() || !self.held.contains_key(&finished) {
            return None;
        }
        let next = match self.owned {
            true => users::admitted(ctx.jobs, self.held.len())
                .into_iter()
                .find(|j| j.started.is_none()),
            false => ctx.jobs.iter().find(|j| j.started.is_none()),
        }?;
        if self.held.contains_key(&next.id()) {
            // Placed but not started: the general path sorts out who waits.
            return None;
        }
        let freed = self.held.remove(&finished).expect("checked above");
        self.held.insert(next.id(), freed.clone());
        Some(PlanChange {
            slots: 1,
            removed: vec![(0, finished)],
            placed: vec![SlotAssignment {
                slot: 0,
                job: next.id(),
                cpus: freed,
            }],
            unadvised: vec![finished],
            advice: [(next.id(), next.spec.threads_for(1))].into(),
            ..PlanChange::default()
        })
    }
}

/// CPUs of `region` for each `(job, count)`: a job keeps the CPUs of `held` it still may have, trimmed or
/// grown from the free ones, so that resizing moves as little as possible. Consumes the jobs' entries of
/// `held`. The counts must add up to at most the region's size.
pub(crate) fn grow_in_place(
    region: &CpuSet,
    held: &mut HashMap<JobId, CpuSet>,
    wanted: &[(JobId, usize)],
) -> HashMap<JobId, CpuSet> {
    let mut kept: HashMap<JobId, CpuSet> =
        HashMap::with_capacity_and_hasher(wanted.len(), Default::default());
    let mut free = region.clone();
    for &(job, target) in wanted {
        // Sets held in different slots may overlap; the first job keeps what two claim.
        let mut cpus = held.remove(&job).unwrap_or_default().intersection(&free);
        if cpus.len() > target {
            cpus = cpus.take(target);
        }
        free.remove_all(&cpus);
        kept.insert(job, cpus);
    }
    for &(job, target) in wanted {
        let cpus = kept.get_mut(&job).expect("inserted above");
        if cpus.len() < target {
            let extra = free.take(target - cpus.len());
            free.remove_all(&extra);
            *cpus = cpus.union(&extra);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::synthetic;
    use cosched_core::{ActiveJob, JobKind};

    fn job(id: u32, max_threads: u32, started: bool) -> ActiveJob {
        let mut job = waiting(id, JobKind::Malleable, 1, max_threads);
        job.started = started.then_some(0.0);
        job
    }

    fn sets(plan: &Plan) -> Vec<CpuSet> {
        plan.slots[0]
            .assignments
            .iter()
            .map(|a| a.cpus.clone())
            .collect()
    }

    /// The CPU counts EQ gives jobs of `max_threads` `caps` on `cpus` CPUs, all started.
    fn counts(cpus: usize, caps: &[u32]) -> Vec<usize> {
        let topo = synthetic::parse(&format!("core:{cpus}")).unwrap();
        let jobs: Vec<ActiveJob> = (0..caps.len() as u32)
            .map(|i| job(i, caps[i as usize], true))
            .collect();
        counts_of(&topo, &jobs)
    }

    fn counts_of(topo: &cosched_core::Topology, jobs: &[ActiveJob]) -> Vec<usize> {
        let ctx = Context {
            topology: topo,
            now: 0.0,
            jobs,
        };
        let plan = Equipartition::default()
            .decide(&ctx, &Event::Arrived { job: jobs[0].id() })
            .unwrap();
        jobs.iter()
            .map(|j| plan.cpus_in_slot(0, j.id()).map_or(0, CpuSet::len))
            .collect()
    }

    #[test]
    fn shares_respect_caps_and_use_every_cpu() {
        assert_eq!(counts(24, &[24, 24, 24]), vec![8, 8, 8]);
        assert_eq!(counts(24, &[2, 24, 24]), vec![2, 11, 11]);
        assert_eq!(counts(10, &[24, 24, 24]).iter().sum::<usize>(), 10);
        assert_eq!(counts(3, &[5, 5, 5]), vec![1, 1, 1]);
    }

    /// One user's seven jobs get together the CPUs another user's one job gets, and a user of
    /// twice the share gets twice the CPUs.
    #[test]
    fn users_not_jobs_share_the_cpus() {
        let topo = synthetic::parse("core:16").unwrap();
        let owned = |id: u32, user: u32, share: f64| {
            cosched_core::test_util::job(id)
                .max_threads(16)
                .owner(user, share)
                .running(0.0, 1)
        };
        let mut jobs = vec![owned(0, 0, 1.0)];
        jobs.extend((1..8).map(|id| owned(id, 65534, 1.0)));
        let got = counts_of(&topo, &jobs);
        assert_eq!(got[0], 8, "{got:?}");
        assert_eq!(got[1..].iter().sum::<usize>(), 8, "{got:?}");
        let weighted = vec![owned(0, 0, 3.0), owned(1, 65534, 1.0), owned(2, 65534, 1.0)];
        assert_eq!(counts_of(&topo, &weighted), vec![12, 2, 2]);
    }

    /// Two EQs seeing the same events, one asked for changes: on a full machine a finish is handed
    /// over without the whole plan, and the change is the one the whole plan gives.
    #[test]
    fn a_finish_on_a_full_machine_hands_its_cpu_to_the_oldest_waiting_job() {
        let topo = synthetic::parse("core:4").unwrap();
        let (mut changes, mut whole) = (Equipartition::default(), Equipartition::default());
        let mut jobs: Vec<ActiveJob> = Vec::new();
        let mut plan = Plan::default();
        for id in 0..6 {
            jobs.push(job(id, 4, false));
            let ctx = Context {
                topology: &topo,
                now: 0.0,
                jobs: &jobs,
            };
            let event = Event::Arrived { job: JobId(id) };
            let given = whole.decide(&ctx, &event);
            assert_eq!(changes.decide(&ctx, &event), given);
            plan = given.unwrap_or(plan);
            for j in &mut jobs {
                if plan.cpus_in_slot(0, j.id()).is_some() {
                    j.started.get_or_insert(0.0);
                }
            }
        }
        assert_eq!(
            changes.queue_window(&topo),
            Some(0),
            "every CPU has a receiver"
        );
        let freed = plan.cpus_in_slot(0, JobId(1)).unwrap().clone();
        jobs.remove(1);
        let ctx = Context {
            topology: &topo,
            now: 1.0,
            jobs: &jobs,
        };
        let event = Event::Finished { job: JobId(1) };
        let change = changes
            .hand_over(&ctx, JobId(1))
            .expect("a full machine and a waiting job");
        let expected = PlanChange::between(&plan, &whole.decide(&ctx, &event).unwrap());
        assert_eq!(change, expected);
        assert_eq!(change.placed[0].job, JobId(4));
        assert_eq!(change.placed[0].cpus, freed);
    }

    #[test]
    fn arrivals_shrink_sets_without_moving_jobs() {
        let topo = synthetic::parse("core:12").unwrap();
        let mut eq = Equipartition::default();
        let mut jobs = vec![job(0, 12, false)];
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let first = eq.decide(&ctx, &Event::Arrived { job: JobId(0) }).unwrap();
        assert_eq!(sets(&first)[0].len(), 12);
        jobs[0].started = Some(0.0);
        jobs.push(job(1, 12, false));
        jobs.push(job(2, 12, false));
        let ctx = Context {
            topology: &topo,
            now: 1.0,
            jobs: &jobs,
        };
        let second = eq.decide(&ctx, &Event::Arrived { job: JobId(2) }).unwrap();
        let held = sets(&second);
        assert!(held.iter().all(|s| s.len() == 4));
        assert!(held[0].is_subset(&sets(&first)[0]));
        assert!(held[0].is_disjoint(&held[1]) && held[1].is_disjoint(&held[2]));
        assert_eq!(second.advice[&JobId(1)], 4);
    }

    #[test]
    fn newcomers_wait_when_every_cpu_is_taken() {
        let topo = synthetic::parse("core:2").unwrap();
        let jobs = vec![job(0, 2, true), job(1, 2, true), job(2, 2, false)];
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let plan = Equipartition::default()
            .decide(&ctx, &Event::Arrived { job: JobId(2) })
            .unwrap();
        assert!(!plan.placed_jobs().contains(&JobId(2)));
    }
}
