//! Task bags: many independent single-threaded tasks, one per core (many-task computing, Scalpel §III).
//!
//! [`TaskBag`] does what every task-bag policy shares: it gathers all arrivals of one instant before
//! deciding (so that a rule ordering the whole bag sees the whole bag), keeps each started task on its
//! core, and asks a [`FillRule`] which waiting task goes to which free core. The rules here are Scalpel's
//! baselines (§VI-B): FIFO in arrival order and plain LPT ("longer_first", §VI-C); RR is [`RoundRobin`].
//! A job with several threads is treated as a task too: it gets one core and time-shares it.

use cosched_core::{ActiveJob, Assignment, Context, CpuSet, Event, JobId, Plan, Policy};
use std::collections::BTreeMap;

/// Decides which waiting tasks start on which free cores.
pub(crate) trait FillRule: Send {
    fn name(&self) -> &str;

    /// Places waiting tasks (arrival order) on free cores of `cores` with [`Cores::start`].
    fn fill(&mut self, ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]);

    /// Forgets a task that finished.
    fn forget(&mut self, _job: JobId) {}
}

/// Which task runs on which core (CPU number), and the LLC domain of every core.
#[derive(Debug, Default)]
pub(crate) struct Cores {
    running: BTreeMap<u32, JobId>,
    /// LLC domains of the machine, each a list of its CPUs in ascending order.
    pub domains: Vec<Vec<u32>>,
}

impl Cores {
    fn for_machine(ctx: &Context) -> Cores {
        Cores {
            running: BTreeMap::new(),
            domains: ctx
                .topology
                .llc_domains()
                .iter()
                .map(|d| d.iter().collect())
                .collect(),
        }
    }

    pub fn is_free(&self, cpu: u32) -> bool {
        !self.running.contains_key(&cpu)
    }

    /// Free cores, in CPU order.
    pub fn free(&self) -> Vec<u32> {
        self.domains
            .iter()
            .flatten()
            .copied()
            .filter(|c| self.is_free(*c))
            .collect()
    }

    /// Free cores of one LLC domain.
    pub fn free_in(&self, domain: usize) -> Vec<u32> {
        self.domains[domain]
            .iter()
            .copied()
            .filter(|c| self.is_free(*c))
            .collect()
    }

    /// Tasks running in one LLC domain.
    pub fn running_in(&self, domain: usize) -> impl Iterator<Item = JobId> + '_ {
        self.domains[domain]
            .iter()
            .filter_map(|c| self.running.get(c).copied())
    }

    pub fn start(&mut self, cpu: u32, job: JobId) {
        debug_assert!(self.is_free(cpu), "core {cpu} is taken");
        self.running.insert(cpu, job);
    }

    fn release(&mut self, job: JobId) {
        self.running.retain(|_, j| *j != job);
    }

    fn holds(&self, job: JobId) -> bool {
        self.running.values().any(|j| *j == job)
    }

    fn plan(&self, timer: Option<f64>) -> Plan {
        let mut plan = Plan::space_sharing(
            self.running
                .iter()
                .map(|(&cpu, &job)| Assignment {
                    job,
                    cpus: CpuSet::from_iter([cpu]),
                })
                .collect(),
        );
        plan.advice = self.running.values().map(|&job| (job, 1)).collect();
        plan.timer = timer;
        plan
    }
}

/// A task-bag policy: the shared bookkeeping around one [`FillRule`].
pub(crate) struct TaskBag<R> {
    rule: R,
    cores: Option<Cores>,
}

impl<R: FillRule> TaskBag<R> {
    pub fn new(rule: R) -> TaskBag<R> {
        TaskBag { rule, cores: None }
    }
}

impl<R: FillRule> Policy for TaskBag<R> {
    fn name(&self) -> &str {
        self.rule.name()
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let cores = self.cores.get_or_insert_with(|| Cores::for_machine(ctx));
        match event {
            // Every arrival due now reaches the policy before a timer due now, so a timer at `now`
            // lets the rule see the whole bag at once.
            Event::Arrived { .. } => return Some(cores.plan(Some(ctx.now))),
            Event::Finished { job } => {
                cores.release(*job);
                self.rule.forget(*job);
            }
            Event::Timer => {}
            Event::ThreadsChanged { .. } | Event::Sample(_) => return None,
        }
        let waiting: Vec<&ActiveJob> = ctx
            .jobs
            .iter()
            .filter(|j| !cores.holds(j.spec.id))
            .collect();
        self.rule.fill(ctx, cores, &waiting);
        Some(cores.plan(None))
    }
}

/// FIFO (Scalpel §VI-B, Linux `SCHED_FIFO`): the oldest waiting task takes the lowest free core and runs
/// to completion.
pub(crate) struct Fifo;

impl FillRule for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        for (cpu, task) in cores.free().into_iter().zip(waiting) {
            cores.start(cpu, task.spec.id);
        }
    }
}

/// Plain LPT, Scalpel's "longer_first" (§VI-C): the longest waiting task (by `hints.runtime`) takes the
/// lowest free core; no grouping. Tasks without a runtime count as shortest, in arrival order.
pub(crate) struct LongerFirst;

impl FillRule for LongerFirst {
    fn name(&self) -> &str {
        "lpt"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        let mut order = waiting.to_vec();
        order.sort_by(|a, b| runtime(b).total_cmp(&runtime(a)));
        for (cpu, task) in cores.free().into_iter().zip(order) {
            cores.start(cpu, task.spec.id);
        }
    }
}

/// A task's expected run time; unknown sorts last.
pub(crate) fn runtime(job: &ActiveJob) -> f64 {
    job.spec.hints.runtime.unwrap_or(0.0)
}

/// RR (Scalpel §VI-B, Linux `SCHED_RR`): every task may run on every core and the OS time-slices them
/// all, so every task shares every LLC with every other.
#[derive(Debug, Default)]
pub struct RoundRobin;

impl Policy for RoundRobin {
    fn name(&self) -> &str {
        "rr"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        let cpus = ctx.topology.cpus();
        let mut plan = Plan::space_sharing(
            ctx.jobs
                .iter()
                .map(|job| Assignment {
                    job: job.spec.id,
                    cpus: cpus.clone(),
                })
                .collect(),
        );
        plan.advice = ctx.jobs.iter().map(|job| (job.spec.id, 1)).collect();
        Some(plan)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cosched_core::topology::synthetic;
    use cosched_core::{JobHints, JobKind, JobSpec, Topology};

    pub fn task(id: u32, runtime: f64, footprint_mb: f64) -> ActiveJob {
        ActiveJob {
            spec: JobSpec {
                id: JobId(id),
                name: format!("t{id}"),
                arrival: 0.0,
                kind: JobKind::Rigid,
                min_threads: 1,
                max_threads: 1,
                coschedule: true,
                weight: 1.0,
                hints: JobHints {
                    runtime: Some(runtime),
                    footprint_mb: Some(footprint_mb),
                    ..JobHints::default()
                },
            },
            started: None,
            threads: 0,
        }
    }

    /// Delivers every arrival, then the gathering timer; returns the plan that follows.
    pub fn start_bag(policy: &mut dyn Policy, topo: &Topology, jobs: &[ActiveJob]) -> Plan {
        let ctx = Context {
            topology: topo,
            now: 0.0,
            jobs,
        };
        for job in jobs {
            let gather = policy
                .decide(&ctx, &Event::Arrived { job: job.spec.id })
                .unwrap();
            assert_eq!(gather.timer, Some(0.0));
        }
        policy.decide(&ctx, &Event::Timer).unwrap()
    }

    pub fn cpu_of(plan: &Plan, job: u32) -> Option<u32> {
        plan.slots[0]
            .assignments
            .iter()
            .find(|a| a.job == JobId(job))
            .map(|a| a.cpus.first().unwrap())
    }

    #[test]
    fn fifo_starts_tasks_in_arrival_order_and_refills_freed_cores() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0 + i as f64, 1.0)).collect();
        let mut fifo = TaskBag::new(Fifo);
        let plan = start_bag(&mut fifo, &topo, &jobs);
        assert_eq!(
            (0..6).map(|j| cpu_of(&plan, j)).collect::<Vec<_>>(),
            vec![Some(0), Some(1), Some(2), Some(3), None, None]
        );
        jobs.remove(2);
        let ctx = Context {
            topology: &topo,
            now: 5.0,
            jobs: &jobs,
        };
        let plan = fifo
            .decide(&ctx, &Event::Finished { job: JobId(2) })
            .unwrap();
        assert_eq!(cpu_of(&plan, 4), Some(2));
        assert_eq!(cpu_of(&plan, 5), None);
        assert!(plan.advice.values().all(|t| *t == 1));
    }

    #[test]
    fn lpt_starts_the_longest_tasks_first() {
        let topo = synthetic::parse("core:2").unwrap();
        let jobs = vec![task(0, 5.0, 1.0), task(1, 50.0, 1.0), task(2, 20.0, 1.0)];
        let plan = start_bag(&mut TaskBag::new(LongerFirst), &topo, &jobs);
        assert_eq!(cpu_of(&plan, 1), Some(0));
        assert_eq!(cpu_of(&plan, 2), Some(1));
        assert_eq!(cpu_of(&plan, 0), None);
    }

    #[test]
    fn rr_shares_every_core_among_all_tasks() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0, 1.0)).collect();
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let plan = RoundRobin
            .decide(&ctx, &Event::Arrived { job: JobId(5) })
            .unwrap();
        assert_eq!(plan.slots[0].assignments.len(), 6);
        assert!(plan.slots[0].assignments.iter().all(|a| a.cpus.len() == 4));
    }
}
