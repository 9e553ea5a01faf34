//! Task bags: many independent single-threaded tasks, one per core (many-task computing, Scalpel §III).
//!
//! [`TaskBag`] does what every task-bag policy shares: it gathers all arrivals of one instant before
//! deciding (so that a rule ordering the whole bag sees the whole bag), keeps each started task on its
//! core, and asks a [`FillRule`] which waiting task goes to which free core. The rules here are Scalpel's
//! baselines (§VI-B): FIFO and plain LPT ("longer_first", §VI-C); RR is [`RoundRobin`].
//! A job with several threads is treated as a task too: it gets one core and time-shares it.
//!
//! Scalpel ran its Linux baselines with every task bound to a core (§VI-A: CPU affinity so that each task
//! monopolises a core), so with more tasks than cores each core has a queue of its own: [`Fifo`] and
//! [`RoundRobin`] bind tasks to cores in arrival order, cyclically, and a core whose queue is empty idles
//! while others still have work — what Scalpel's dispatch avoids ("full use of computing cores", §VI-B).
//! [`GlobalFifo`] and [`GlobalRoundRobin`] are the same Linux policies without affinity.
//!
//! **Users** (`crate::users`): where the tasks belong to several users, the rules of [`TaskBag`]
//! (FIFO, LPT, DI, Scalpel) see only each user's oldest waiting tasks up to their share of the cores.
//! RR and global RR model the Linux scheduler, which shares cores among tasks, not users.

use crate::users;
use cosched_core::{ActiveJob, Assignment, Context, CpuSet, Event, JobId, JobSpec, Plan, Policy};
use std::collections::{BTreeMap, HashMap, HashSet};

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

    /// Every core, in CPU order.
    pub fn all(&self) -> impl Iterator<Item = u32> + '_ {
        self.domains.iter().flatten().copied()
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
        let mut waiting: Vec<&ActiveJob> =
            ctx.jobs.iter().filter(|j| !cores.holds(j.id())).collect();
        if users::several_users(ctx.jobs.iter().map(|j| &*j.spec)) {
            waiting = within_shares(ctx, cores, waiting);
        }
        self.rule.fill(ctx, cores, &waiting);
        Some(cores.plan(None))
    }
}

/// The waiting tasks of several users the rule may start: each user's oldest tasks up to their
/// share of the cores (`users::given_places`, a task per core), so that one user's bag cannot take
/// every core that frees while another user's tasks wait. Running tasks are never stopped.
fn within_shares<'a>(
    ctx: &Context,
    cores: &Cores,
    waiting: Vec<&'a ActiveJob>,
) -> Vec<&'a ActiveJob> {
    let specs: Vec<&JobSpec> = ctx.jobs.iter().map(|j| &*j.spec).collect();
    let count = cores.all().count();
    let given: HashSet<JobId> = users::given_places(count, &specs, &vec![1; specs.len()])
        .into_iter()
        .map(|i| specs[i].id)
        .collect();
    waiting
        .into_iter()
        .filter(|j| given.contains(&j.id()))
        .collect()
}

/// Cores in turn for tasks in arrival order: task k is bound to core k mod (cores), in CPU order.
#[derive(Debug, Default)]
struct Binding {
    core_of: HashMap<JobId, u32>,
    arrived: usize,
}

impl Binding {
    fn core(&mut self, job: JobId, cores: &[u32]) -> u32 {
        *self.core_of.entry(job).or_insert_with(|| {
            let core = cores[self.arrived % cores.len()];
            self.arrived += 1;
            core
        })
    }
}

/// FIFO as Scalpel ran it (§VI-A, §VI-B; Linux `SCHED_FIFO` with CPU affinity): each task is bound to a
/// core on arrival, cores in turn, and each core runs its tasks one after another in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Fifo {
    binding: Binding,
}

impl FillRule for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        let all: Vec<u32> = cores.all().collect();
        for task in waiting {
            let core = self.binding.core(task.id(), &all);
            if cores.is_free(core) {
                cores.start(core, task.id());
            }
        }
    }

    fn forget(&mut self, job: JobId) {
        self.binding.core_of.remove(&job);
    }
}

/// FIFO without affinity (Linux `SCHED_FIFO` migrating waiting tasks to idle cores): the oldest waiting
/// task takes the lowest free core and runs to completion.
pub(crate) struct GlobalFifo;

impl FillRule for GlobalFifo {
    fn name(&self) -> &str {
        "fifo-global"
    }

    fn fill(&mut self, _ctx: &Context, cores: &mut Cores, waiting: &[&ActiveJob]) {
        for (cpu, task) in cores.free().into_iter().zip(waiting) {
            cores.start(cpu, task.id());
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
            cores.start(cpu, task.id());
        }
    }
}

/// A task's expected run time; unknown sorts last.
pub(crate) fn runtime(job: &ActiveJob) -> f64 {
    job.spec.hints.runtime.unwrap_or(0.0)
}

/// RR as Scalpel ran it (§VI-A, §VI-B; Linux `SCHED_RR` with CPU affinity): each task is bound to a
/// core on arrival, cores in turn, and the OS time-slices the tasks bound to each core.
#[derive(Debug, Default)]
pub struct RoundRobin {
    binding: Binding,
}

impl Policy for RoundRobin {
    fn name(&self) -> &str {
        "rr"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        match event {
            Event::Arrived { .. } => {}
            Event::Finished { job } => {
                self.binding.core_of.remove(job);
            }
            _ => return None,
        }
        let cores: Vec<u32> = ctx.topology.cpus().iter().collect();
        let mut plan = Plan::space_sharing(
            ctx.jobs
                .iter()
                .map(|job| Assignment {
                    job: job.id(),
                    cpus: CpuSet::from_iter([self.binding.core(job.id(), &cores)]),
                })
                .collect(),
        );
        plan.advice = ctx.jobs.iter().map(|job| (job.id(), 1)).collect();
        Some(plan)
    }
}

/// RR without affinity (Linux `SCHED_RR` balancing tasks over all cores): every task may run on every
/// core and the OS time-slices them all, so every task shares every LLC with every other.
#[derive(Debug, Default)]
pub struct GlobalRoundRobin;

impl Policy for GlobalRoundRobin {
    fn name(&self) -> &str {
        "rr-global"
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
                    job: job.id(),
                    cpus: cpus.clone(),
                })
                .collect(),
        );
        plan.advice = ctx.jobs.iter().map(|job| (job.id(), 1)).collect();
        Some(plan)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::synthetic;
    use cosched_core::{JobHints, JobKind, Topology};

    /// A single-threaded task `j<id>` arriving at 0, with its run time and footprint as hints.
    pub fn task(id: u32, runtime: f64, footprint_mb: f64) -> ActiveJob {
        let mut job = waiting(id, JobKind::Rigid, 1, 1);
        let spec = std::sync::Arc::make_mut(&mut job.spec);
        spec.arrival = 0.0;
        spec.hints = JobHints {
            runtime: Some(runtime),
            footprint_mb: Some(footprint_mb),
            ..JobHints::default()
        };
        job
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
                .decide(&ctx, &Event::Arrived { job: job.id() })
                .unwrap();
            assert_eq!(gather.timer, Some(0.0));
        }
        policy.decide(&ctx, &Event::Timer).unwrap()
    }

    pub fn cpu_of(plan: &Plan, job: u32) -> Option<u32> {
        plan.cpus_in_slot(0, JobId(job))
            .map(|cpus| cpus.first().unwrap())
    }

    /// Finishes `job` and returns the plan that follows.
    fn finish(
        policy: &mut dyn Policy,
        topo: &Topology,
        jobs: &mut Vec<ActiveJob>,
        job: u32,
    ) -> Plan {
        jobs.retain(|j| j.id() != JobId(job));
        let ctx = Context {
            topology: topo,
            now: 5.0,
            jobs,
        };
        policy
            .decide(&ctx, &Event::Finished { job: JobId(job) })
            .unwrap()
    }

    #[test]
    fn fifo_queues_tasks_on_their_cores_in_turn_and_leaves_an_emptied_core_idle() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0, 1.0)).collect();
        let mut fifo = TaskBag::new(Fifo::default());
        let plan = start_bag(&mut fifo, &topo, &jobs);
        assert_eq!(
            (0..6).map(|j| cpu_of(&plan, j)).collect::<Vec<_>>(),
            vec![Some(0), Some(1), Some(2), Some(3), None, None]
        );
        // Core 2's queue is empty (tasks 4 and 5 are bound to cores 0 and 1): it idles.
        let plan = finish(&mut fifo, &topo, &mut jobs, 2);
        assert_eq!((cpu_of(&plan, 4), cpu_of(&plan, 5)), (None, None));
        let plan = finish(&mut fifo, &topo, &mut jobs, 1);
        assert_eq!((cpu_of(&plan, 4), cpu_of(&plan, 5)), (None, Some(1)));
    }

    #[test]
    fn global_fifo_starts_tasks_in_arrival_order_and_refills_freed_cores() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0 + i as f64, 1.0)).collect();
        let mut fifo = TaskBag::new(GlobalFifo);
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
    fn rr_time_shares_each_core_among_the_tasks_bound_to_it() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0, 1.0)).collect();
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let mut rr = RoundRobin::default();
        let plan = rr.decide(&ctx, &Event::Arrived { job: JobId(5) }).unwrap();
        assert_eq!(
            (0..6).map(|j| cpu_of(&plan, j)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1].map(Some)
        );
        // Bindings hold when others leave: task 5 stays on core 1 though core 2 is free.
        let plan = finish(&mut rr, &topo, &mut jobs, 2);
        assert_eq!(cpu_of(&plan, 5), Some(1));
    }

    #[test]
    fn global_rr_shares_every_core_among_all_tasks() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let jobs: Vec<ActiveJob> = (0..6).map(|i| task(i, 10.0, 1.0)).collect();
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let plan = GlobalRoundRobin
            .decide(&ctx, &Event::Arrived { job: JobId(5) })
            .unwrap();
        assert_eq!(plan.slots[0].assignments.len(), 6);
        assert!(plan.slots[0].assignments.iter().all(|a| a.cpus.len() == 4));
    }

    #[test]
    fn a_users_bag_leaves_another_user_their_share_of_the_cores() {
        let topo = synthetic::parse("core:4").unwrap();
        // User 1's eight tasks arrived before user 2's two: each user gets two of the four cores.
        let jobs: Vec<ActiveJob> = (0..10)
            .map(|id| {
                let mut job = task(id, 10.0, 1.0);
                std::sync::Arc::make_mut(&mut job.spec).owner = Some(cosched_core::Owner {
                    user: if id < 8 { 1 } else { 2 },
                    share: 1.0,
                });
                job
            })
            .collect();
        for rule in [
            Box::new(TaskBag::new(GlobalFifo)) as Box<dyn Policy>,
            Box::new(TaskBag::new(LongerFirst)),
        ] {
            let mut policy = rule;
            let plan = start_bag(policy.as_mut(), &topo, &jobs);
            let mut placed: Vec<u32> = plan.placed_jobs().into_iter().map(|j| j.0).collect();
            placed.sort_unstable();
            assert_eq!(placed, [0, 1, 8, 9], "{}", policy.name());
        }
    }
}
