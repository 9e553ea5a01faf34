//! TACO, topology-aware coscheduling (Schönherr et al., Scientific Programming 2014, §2).
//!
//! Jobs get partitions aligned to the topology, all of one size (a level of the hierarchy); when there
//! are more jobs than partitions of a level but too few for the next finer one, several jobs are
//! coscheduled in one partition, taking turns in slots. Every refinement of §2 is an option
//! ([`TacoOptions`]):
//! - level thresholds with hysteresis (Listing 1, §2.1) — [`levels`];
//! - the local per-unit variant (§2.1) — [`local`];
//! - coscheduling across levels so that every job gets the same CPU time (§2.2), grace periods while
//!   malleable jobs adapt (§2.3), opt-out of coscheduling and weights (§2.4) — [`global`];
//! - restricted partition sizes (§4.4) and the slice length (§3.3) — [`geometry`], [`options`];
//! - at most `mpl` jobs per CPU are admitted, first come first served; later ones wait unseen.
//!
//! **Users** share the machine before their jobs do (`crate::users`): where the admitted jobs belong
//! to several users, they are admitted in fair-share order, each job's weight becomes its part of its
//! user's share (§2.4's weights then give every user the same CPU time), the level follows the
//! weighted job count (a user's twelve jobs count as one job of full weight), and each level's jobs
//! are dealt so that its partitions carry equal turns ([`lanes::deal_by_load`]) with no partition
//! left idle for exactness: a user who cannot use their share leaves it to the others.
//!
//! Registered as `taco` (all refinements), `taco-basic` (the version the paper measured, §4.2) and
//! `taco-local`; any of them takes settings after a colon: `taco:hysteresis=0:sizes=1/6/24`.

mod geometry;
mod global;
pub(crate) mod lanes;
mod levels;
mod local;
mod options;
mod steady;

pub use options::{TacoOptions, DEFAULT_GRACE, DEFAULT_HYSTERESIS, DEFAULT_MPL, DEFAULT_SLICE};

use crate::users;
use cosched_core::{ActiveJob, Context, Event, JobSpec, Plan, PlanChange, Policy, Topology};
use geometry::Geometry;
use std::borrow::Cow;
use std::sync::Arc;

#[derive(Debug)]
pub struct Taco {
    name: String,
    options: TacoOptions,
    /// Built from the first context's topology; a run never changes machines.
    geometry: Option<Geometry>,
    global: global::Global,
    local: local::Local,
    /// Whether the jobs of the last decision had owners (`crate::users`).
    owned: bool,
}

impl Taco {
    pub fn new(name: impl Into<String>, options: TacoOptions) -> Taco {
        Taco {
            name: name.into(),
            options,
            geometry: None,
            global: global::Global::default(),
            local: local::Local::default(),
            owned: false,
        }
    }
}

impl Policy for Taco {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        // Jobs of several users are admitted in fair-share order, not arrival order: every one is
        // seen.
        if self.owned {
            return None;
        }
        Some(self.admitted_count(topology))
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let (jobs, recount) = self.deciding(ctx, event)?;
        let by_users = matches!(jobs, Admitted::ByUsers(_));
        let ctx = &Context {
            jobs: jobs.jobs(),
            ..*ctx
        };
        let geometry = geometry_of(&mut self.geometry, ctx.topology, &self.options);
        Some(if self.options.local {
            self.local
                .plan(ctx, geometry, &self.options, event, by_users)
        } else {
            self.global
                .plan(ctx, geometry, &self.options, recount, by_users)
        })
    }

    /// Under a long queue, most decisions need no full plan: a newcomer beyond the admitted jobs
    /// changes nothing, in the steady state a finished job's place goes to the next in the queue, and
    /// a job that adapted moves on its own (with any other whose grace period ended).
    fn decide_change(
        &mut self,
        ctx: &Context,
        event: &Event,
        current: &Plan,
    ) -> Option<PlanChange> {
        let admitted = self.admitted_count(ctx.topology);
        // Several users' jobs are planned whole: the shortcuts below keep the turns and the level
        // of jobs alone, which a user's next job or finish changes for all of that user's jobs.
        if self.options.local || users::several_users(ctx.jobs.iter().map(|j| &*j.spec)) {
            return self
                .decide(ctx, event)
                .map(|plan| PlanChange::between(current, &plan));
        }
        match (event, &self.geometry) {
            (Event::Arrived { .. }, _) if self.global.is_full(admitted) => return None,
            (Event::Finished { job }, Some(geometry)) => {
                if let Some(change) = self.global.hand_over(ctx, geometry, *job, admitted) {
                    return Some(change);
                }
            }
            (Event::ThreadsChanged { job, .. }, Some(geometry))
                if self.options.grace.is_some() && self.global.in_grace(*job) =>
            {
                let jobs = self::admitted(ctx.jobs, admitted);
                let ctx = &Context {
                    jobs: &jobs,
                    ..*ctx
                };
                if let Some(change) = self.global.adapted(ctx, geometry, &self.options, current) {
                    // Nobody moved: no plan, as a full decision answers a thread change that
                    // ends no grace period.
                    return (!change.changes_nothing(current)).then_some(change);
                }
            }
            _ => {}
        }
        let (jobs, recount) = self.deciding(ctx, event)?;
        let ctx = &Context {
            jobs: jobs.jobs(),
            ..*ctx
        };
        let geometry = geometry_of(&mut self.geometry, ctx.topology, &self.options);
        if let Event::Finished { job } = event {
            if let Some(change) = self
                .global
                .finished(ctx, geometry, &self.options, *job, current)
            {
                return Some(change);
            }
        }
        let change = self
            .global
            .plan_change(ctx, geometry, &self.options, recount, current);
        Some(change)
    }
}

impl Taco {
    fn admitted_count(&self, topology: &Topology) -> usize {
        self.options.mpl * topology.num_cpus()
    }

    /// Whether `event` calls for a plan: if so, the admitted jobs to plan for, and whether to
    /// re-evaluate the level.
    fn deciding<'c>(&mut self, ctx: &Context<'c>, event: &Event) -> Option<(Admitted<'c>, bool)> {
        let recount = matches!(event, Event::Arrived { .. } | Event::Finished { .. });
        // Threads matter to the plan only for a job in its grace period (§2.3): running with the
        // advised count ends it. Anyone else's new team leaves the plan as it is.
        let graced = !self.options.local && self.options.grace.is_some();
        let relevant = recount
            || (graced
                && match event {
                    Event::Timer => true,
                    Event::ThreadsChanged { job, .. } => self.global.in_grace(*job),
                    _ => false,
                });
        if !relevant {
            return None;
        }
        if let Event::Finished { job } = event {
            self.global.forget(*job);
        }
        self.owned = ctx.jobs.iter().any(|j| j.spec.owner.is_some());
        let count = self.admitted_count(ctx.topology);
        let jobs = match users::several_users(ctx.jobs.iter().map(|j| &*j.spec)) {
            true => Admitted::ByUsers(by_users(ctx.jobs, count)),
            false => Admitted::Alone(admitted(ctx.jobs, count)),
        };
        Some((jobs, recount))
    }
}

/// The jobs a plan is for.
enum Admitted<'c> {
    /// One user's (or no owner's), as they are.
    Alone(Cow<'c, [ActiveJob]>),
    /// Several users', each with its user's share folded into its weight.
    ByUsers(Vec<ActiveJob>),
}

impl Admitted<'_> {
    fn jobs(&self) -> &[ActiveJob] {
        match self {
            Admitted::Alone(jobs) => jobs,
            Admitted::ByUsers(jobs) => jobs,
        }
    }
}

/// The jobs of several users that may hold places, `count` in all (more if more have started), in
/// fair-share order, each weighing its part of its user's share (`users::fair_weights`).
fn by_users(jobs: &[ActiveJob], count: usize) -> Vec<ActiveJob> {
    let admitted = users::admitted(jobs, count);
    let specs: Vec<&JobSpec> = admitted.iter().map(|j| &*j.spec).collect();
    let weights = users::fair_weights(&specs);
    admitted
        .into_iter()
        .zip(weights)
        .map(|(job, weight)| {
            let spec = JobSpec {
                weight,
                ..JobSpec::clone(&job.spec)
            };
            ActiveJob::new(Arc::new(spec), job.started, job.threads)
        })
        .collect()
}

/// The geometry `built` holds, built from `topology` on the first call: a run never changes machines.
fn geometry_of<'g>(
    built: &'g mut Option<Geometry>,
    topology: &Topology,
    options: &TacoOptions,
) -> &'g Geometry {
    built.get_or_insert_with(|| Geometry::new(topology, options.sizes.as_deref()))
}

/// The started jobs and the oldest waiting ones, `count` in all (more if more have started), in arrival
/// order. TACO places every job it admits, so these are usually the first `count` jobs.
fn admitted(jobs: &[ActiveJob], count: usize) -> Cow<'_, [ActiveJob]> {
    if jobs.len() <= count || jobs[count..].iter().all(|j| j.started.is_none()) {
        return Cow::Borrowed(&jobs[..count.min(jobs.len())]);
    }
    let started = jobs.iter().filter(|j| j.started.is_some()).count();
    let mut room = count.saturating_sub(started);
    jobs.iter()
        .filter(|j| {
            j.started.is_some() || {
                let admit = room > 0;
                room = room.saturating_sub(1);
                admit
            }
        })
        .cloned()
        .collect::<Vec<_>>()
        .into()
}

#[cfg(test)]
mod tests;
