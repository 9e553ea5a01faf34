//! BP, batch processing (TACO §4.2): jobs run one after the other in arrival order, each alone on the
//! whole machine. Where the waiting jobs belong to several users (`crate::users`), the next is the
//! oldest of the user with the fewest jobs run for their share among the users with jobs.
//!
//! `bp:order=shortest` takes the waiting job with the shortest estimated run time first (its time
//! alone, `hints.runtime`), jobs without one after those with one, in arrival order: the schedule a
//! user with the times alone at hand would run by hand, which minimises the mean response time of jobs
//! arriving together among one-at-a-time schedules.

use crate::settings::{self, Setting, SettingError};
use crate::users;
use cosched_core::{ActiveJob, Assignment, Context, Event, JobSpec, Plan, Policy, Topology};

/// The settings `Batch::with_settings` takes, with their defaults.
pub(crate) fn setting_list() -> Vec<Setting> {
    vec![Setting {
        key: "order",
        values: "arrival|shortest",
        default: "arrival".to_string(),
        example: "shortest",
        about: "which waiting job goes next: the oldest, or the shortest known time alone",
    }]
}

#[derive(Debug)]
pub struct Batch {
    name: String,
    /// Shortest estimated run time first instead of arrival order.
    shortest_first: bool,
    /// Jobs started for each user with jobs.
    started_by_user: users::Turns,
    /// Whether the jobs of the last decision had owners.
    owned: bool,
}

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            name: "bp".to_string(),
            shortest_first: false,
            started_by_user: users::Turns::default(),
            owned: false,
        }
    }
}

impl Batch {
    /// BP with the settings after its name (`order=arrival|shortest`); `name` is the full string.
    pub fn with_settings(name: &str, settings: &str) -> Result<Batch, SettingError> {
        let mut shortest_first = false;
        for setting in settings.split(':').filter(|s| !s.is_empty()) {
            match setting.split_once('=') {
                Some(("order", "arrival")) => shortest_first = false,
                Some(("order", "shortest")) => shortest_first = true,
                _ => return Err(settings::unknown("bp", setting, &setting_list())),
            }
        }
        Ok(Batch {
            name: name.to_string(),
            shortest_first,
            ..Batch::default()
        })
    }
}

impl Policy for Batch {
    fn name(&self) -> &str {
        &self.name
    }

    /// Only the oldest waiting job can be next, or any user's oldest where jobs have owners; shortest
    /// first reads the whole queue.
    fn queue_window(&self, _topology: &Topology) -> Option<usize> {
        (!self.owned && !self.shortest_first).then_some(1)
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
            .or_else(|| self.order(ctx).first().map(|&i| &ctx.jobs[i]));
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
        // Among equal turns, the first in order goes.
        let next = self.started_by_user.next(&specs, self.order(ctx))?;
        Some(&ctx.jobs[next])
    }

    /// The jobs (indices into `ctx.jobs`, which come oldest first) in the order they go.
    fn order(&self, ctx: &Context) -> Vec<usize> {
        let mut order: Vec<usize> = (0..ctx.jobs.len()).collect();
        if self.shortest_first {
            let runtime = |i: usize| ctx.jobs[i].spec.hints.runtime.unwrap_or(f64::INFINITY);
            order.sort_by(|&a, &b| runtime(a).total_cmp(&runtime(b)));
        }
        order
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

    #[test]
    fn shortest_first_takes_the_shortest_known_time_then_the_unknown_in_arrival_order() {
        let topo = synthetic::parse("core:4").unwrap();
        let timed = |id: u32, runtime: Option<f64>| {
            let mut job = active(id);
            std::sync::Arc::make_mut(&mut job.spec).hints.runtime = runtime;
            job
        };
        let mut jobs = vec![
            timed(0, Some(9.0)),
            timed(1, None),
            timed(2, Some(2.0)),
            timed(3, None),
            timed(4, Some(5.0)),
        ];
        let mut batch = Batch::with_settings("bp:order=shortest", "order=shortest").unwrap();
        assert_eq!(batch.name(), "bp:order=shortest");
        assert_eq!(batch.queue_window(&topo), None, "it reads the whole queue");
        let mut ran = Vec::new();
        while !jobs.is_empty() {
            let ctx = Context {
                topology: &topo,
                now: 0.0,
                jobs: &jobs,
            };
            let plan = batch
                .decide(&ctx, &Event::Arrived { job: JobId(0) })
                .unwrap();
            let next = plan.placed_jobs().into_iter().next().unwrap();
            assert_eq!(plan.advice[&next], 4, "alone on the whole machine");
            ran.push(next.0);
            jobs.retain(|j| j.id() != next);
        }
        assert_eq!(ran, [2, 4, 0, 1, 3]);
        let arrival = Batch::with_settings("bp:order=arrival", "order=arrival").unwrap();
        assert_eq!(arrival.queue_window(&topo), Some(1));
        assert!(Batch::with_settings("bp:order=longest", "order=longest").is_err());
    }
}
