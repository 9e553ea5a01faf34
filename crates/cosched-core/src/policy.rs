//! The one interface every scheduling policy implements.
//!
//! A policy is pure: it sees the machine, the jobs that have arrived and not finished, the time and one
//! event, and answers with a plan. It never touches the OS and never knows whether it is simulated.

use crate::event::Event;
use crate::job::{JobId, JobKind, JobSpec};
use crate::plan::Plan;
use crate::plan_change::PlanChange;
use crate::topology::Topology;
use std::sync::Arc;

/// A job the executor currently holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveJob {
    /// Shared with whoever holds the job's description: an executor shifts its list of active jobs
    /// on every finish, and a queue of thousands behind it is cheaper to move as pointers.
    pub spec: Arc<JobSpec>,
    /// `spec.id`, kept here: policies pass over every active job on most decisions, comparing ids,
    /// and reading them behind the pointer cost a cache miss per job.
    id: JobId,
    /// When its processes were started; `None` while it waits for its first placement.
    pub started: Option<f64>,
    /// Threads it runs with now (its start advice for moldable jobs, the applied advice for malleable).
    pub threads: u32,
}

impl ActiveJob {
    pub fn new(spec: Arc<JobSpec>, started: Option<f64>, threads: u32) -> Self {
        ActiveJob {
            id: spec.id,
            spec,
            started,
            threads,
        }
    }

    /// The job's id (`spec.id`).
    pub fn id(&self) -> JobId {
        self.id
    }

    /// The thread count the job is bound to, at least one: a rigid job's, or a started moldable
    /// job's; `None` while advice can still change it.
    pub fn fixed_threads(&self) -> Option<u32> {
        match (self.spec.kind, self.started) {
            (JobKind::Rigid, _) => Some(self.spec.max_threads.max(1)),
            (JobKind::Moldable, Some(_)) => Some(self.threads.max(1)),
            _ => None,
        }
    }
}

/// Everything a policy may look at when it decides.
pub struct Context<'a> {
    pub topology: &'a Topology,
    pub now: f64,
    /// Active jobs in arrival order.
    pub jobs: &'a [ActiveJob],
}

impl Context<'_> {
    pub fn job(&self, id: JobId) -> Option<&ActiveJob> {
        self.jobs.iter().find(|j| j.id() == id)
    }
}

pub trait Policy: Send {
    /// Short name used on the command line and in traces (`taco`, `eq`, …).
    fn name(&self) -> &str;

    /// Reacts to one event. Returns the plan to enforce from now on, or `None` to keep the current one.
    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan>;

    /// [`decide`](Policy::decide), answered as the change to `current`, the plan in force (the last one
    /// this policy gave, as the executor holds it). The simulator asks this way, so that on a large
    /// machine a decision that moves one job costs what moving one job costs. The default diffs the
    /// whole plan; a policy that knows what it changed answers without building the rest.
    fn decide_change(
        &mut self,
        ctx: &Context,
        event: &Event,
        current: &Plan,
    ) -> Option<PlanChange> {
        self.decide(ctx, event)
            .map(|plan| PlanChange::between(current, &plan))
    }

    /// How many waiting jobs (arrived, never started), oldest first, the next decision can read; `None`
    /// (the default): all of them. Asked again after every decision, so it may follow the policy's
    /// state. An executor may show the policy only the started jobs and that many waiting ones, and
    /// deliver a hidden job's `Arrived` event when it comes into view; a first-come-first-served policy
    /// then pays nothing for a long queue behind the head. Showing every job is always correct.
    fn queue_window(&self, _topology: &Topology) -> Option<usize> {
        None
    }
}

/// A policy taking over jobs it has never seen (a daemon switching policy while jobs run): each active
/// job arrives in turn, in arrival order, with the ones before it already known, as if the policy had
/// been there all along. Returns the last plan it gave, `None` if it gave none.
pub fn take_over(
    policy: &mut dyn Policy,
    topology: &Topology,
    now: f64,
    jobs: &[ActiveJob],
) -> Option<Plan> {
    let mut plan = None;
    for (i, job) in jobs.iter().enumerate() {
        let ctx = Context {
            topology,
            now,
            jobs: &jobs[..=i],
        };
        plan = policy
            .decide(&ctx, &Event::Arrived { job: job.spec.id })
            .or(plan);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::job;
    use crate::{JobId, JobKind};

    #[test]
    fn only_rigid_and_started_moldable_jobs_are_bound_to_their_threads() {
        let rigid = job(0).kind(JobKind::Rigid).threads(6, 6);
        assert_eq!(rigid.clone().waiting().fixed_threads(), Some(6));
        assert_eq!(rigid.running(1.0, 2).fixed_threads(), Some(6));
        let moldable = job(1).kind(JobKind::Moldable).max_threads(8);
        assert_eq!(moldable.clone().waiting().fixed_threads(), None);
        assert_eq!(moldable.clone().running(1.0, 3).fixed_threads(), Some(3));
        assert_eq!(moldable.running(1.0, 0).fixed_threads(), Some(1));
        let malleable = job(2).max_threads(8);
        assert_eq!(malleable.running(1.0, 3).fixed_threads(), None);
    }

    /// Remembers how many jobs each decision saw; plans only when the second job arrives.
    struct Counting(Vec<usize>);

    impl Policy for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
            self.0.push(ctx.jobs.len());
            matches!(event, Event::Arrived { job } if *job == JobId(2)).then(|| Plan {
                timer: Some(7.0),
                ..Plan::default()
            })
        }
    }

    #[test]
    fn a_new_policy_meets_running_jobs_one_by_one_and_its_last_plan_stands() {
        let topology = crate::topology::synthetic::parse("pack:1 core:2").unwrap();
        let jobs: Vec<ActiveJob> = (1..=3)
            .map(|id| {
                crate::test_util::job(id)
                    .kind(JobKind::Rigid)
                    .running(1.0, 1)
            })
            .collect();
        let mut policy = Counting(Vec::new());
        let plan = take_over(&mut policy, &topology, 5.0, &jobs);
        assert_eq!(policy.0, [1, 2, 3]);
        assert_eq!(plan.map(|p| p.timer), Some(Some(7.0)));
    }
}
