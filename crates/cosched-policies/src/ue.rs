//! UE, uncontrolled execution (TACO §4.2): no co-scheduling at all. Every job gets every CPU and as many
//! threads as the machine has CPUs, and the OS time-shares all threads of all jobs.

use cosched_core::{Assignment, Context, Event, Plan, Policy};

#[derive(Debug, Default)]
pub struct Uncontrolled;

impl Policy for Uncontrolled {
    fn name(&self) -> &str {
        "ue"
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
        plan.advice = ctx
            .jobs
            .iter()
            .map(|job| (job.id(), job.spec.threads_for(cpus.len())))
            .collect();
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
        waiting(id, JobKind::Malleable, 1, 4)
    }

    #[test]
    fn every_job_gets_the_whole_machine() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let jobs = [active(0), active(1)];
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs: &jobs,
        };
        let plan = Uncontrolled
            .decide(&ctx, &Event::Arrived { job: jobs[1].id() })
            .unwrap();
        assert_eq!(plan.slots.len(), 1);
        assert!(plan.slots[0].assignments.iter().all(|a| a.cpus.len() == 4));
        assert!(plan.advice.values().all(|t| *t == 4));
    }
}
