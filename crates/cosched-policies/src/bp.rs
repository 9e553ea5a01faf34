//! BP, batch processing (TACO §4.2): jobs run one after the other in arrival order, each alone on the
//! whole machine. Where the waiting jobs belong to several users (`crate::users`), the next is the
//! oldest of the user with the fewest jobs run for their share among the users with jobs.

use crate::users;
use cosched_core::{ActiveJob, Assignment, Context, Event, JobSpec, Plan, Policy, Topology};

#[derive(Debug, Default)]
pub struct Batch {
    /// Jobs started for each user with jobs.
    started_by_user: users::Turns,
    /// Whether the jobs of the last decision had owners.
    owned: bool,
}

impl Policy for Batch {
    fn name(&self) -> &str {
        "bp"
    }

    /// Only the oldest waiting job can be next, or any user's oldest where jobs have owners.
    fn queue_window(&self, _topology: &Topology) -> Option<usize> {
        (!self.owned).then_some(1)
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        self.owned = ctx.jobs.iter().any(|j| j.spec.owner.is_some());
        // A started job keeps the machine until it finishes; otherwise the oldest arrival gets it.
        let head = ctx
            .jobs
            .iter()
            .find(|job| job.started.is_some())
            .or_else(|| self.next_of_users(ctx))
            .or_else(|| ctx.jobs.first());
        let Some(head) = head else {
            return Some(Plan::default());
        };
        let cpus = ctx.topology.cpus();
        let mut plan = Plan::space_sharing(vec![Assignment {
            job: head.id(),
            cpus: cpus.clone(),
        }]);
        plan.advice
            .insert(head.id(), head.spec.threads_for(cpus.len()));
        Some(plan)
    }
}

impl Batch {
    /// Where several users wait, the oldest job of the user with the fewest jobs started for their
    /// share (counted among the users with jobs), which is now counted as started.
    fn next_of_users<'c>(&mut self, ctx: &Context<'c>) -> Option<&'c ActiveJob> {
        let specs: Vec<&JobSpec> = ctx.jobs.iter().map(|j| &*j.spec).collect();
        if !users::several_users(specs.iter().copied()) {
            return None;
        }
        // Jobs come oldest first: among equal turns, the first is the oldest.
        let next = self.started_by_user.next(&specs, 0..specs.len())?;
        Some(&ctx.jobs[next])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::synthetic;
    use cosched_core::{ActiveJob, JobId, JobKind};

    fn active(id: u32) -> ActiveJob {
        waiting(id, JobKind::Rigid, 4, 4)
    }

    #[test]
    fn the_running_job_keeps_the_machine() {
        let topo = synthetic::parse("core:4").unwrap();
        let mut jobs = vec![active(0), active(1)];
        jobs[1].started = Some(0.0);
        let ctx = Context {
            topology: &topo,
            now: 1.0,
            jobs: &jobs,
        };
        let plan = Batch::default()
            .decide(&ctx, &Event::Arrived { job: jobs[0].id() })
            .unwrap();
        assert_eq!(
            plan.placed_jobs().into_iter().collect::<Vec<_>>(),
            vec![jobs[1].id()]
        );
    }

    #[test]
    fn the_next_job_is_the_oldest_of_the_user_who_ran_fewest() {
        let topo = synthetic::parse("core:4").unwrap();
        let owned = |id: u32, user: u32| {
            cosched_core::test_util::job(id)
                .arrival(f64::from(id))
                .owner(user, 1.0)
                .waiting()
        };
        let mut jobs = vec![owned(0, 1), owned(1, 1), owned(2, 1), owned(3, 2)];
        let mut batch = Batch::default();
        let mut next = |jobs: &[ActiveJob], event: Event| {
            let ctx = Context {
                topology: &topo,
                now: 0.0,
                jobs,
            };
            let plan = batch.decide(&ctx, &event).unwrap();
            plan.placed_jobs().into_iter().next().map(|j| j.0)
        };
        assert_eq!(next(&jobs, Event::Arrived { job: JobId(3) }), Some(0));
        jobs.remove(0);
        // User 1 has run a job, user 2 none: user 2's job goes before user 1's older ones.
        assert_eq!(next(&jobs, Event::Finished { job: JobId(0) }), Some(3));
        jobs.retain(|j| j.id() != JobId(3));
        assert_eq!(next(&jobs, Event::Finished { job: JobId(3) }), Some(1));
    }
}
