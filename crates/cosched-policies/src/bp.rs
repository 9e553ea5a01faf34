//! BP, batch processing (TACO §4.2): jobs run one after the other in arrival order, each alone on the
//! whole machine.

use cosched_core::{Assignment, Context, Event, Plan, Policy, Topology};

#[derive(Debug, Default)]
pub struct Batch;

impl Policy for Batch {
    fn name(&self) -> &str {
        "bp"
    }

    /// Only the oldest waiting job can be next.
    fn queue_window(&self, _topology: &Topology) -> Option<usize> {
        Some(1)
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        // A started job keeps the machine until it finishes; otherwise the oldest arrival gets it.
        let head = ctx
            .jobs
            .iter()
            .find(|job| job.started.is_some())
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

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::synthetic;
    use cosched_core::{ActiveJob, JobKind};

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
        let plan = Batch
            .decide(&ctx, &Event::Arrived { job: jobs[0].id() })
            .unwrap();
        assert_eq!(
            plan.placed_jobs().into_iter().collect::<Vec<_>>(),
            vec![jobs[1].id()]
        );
    }
}
