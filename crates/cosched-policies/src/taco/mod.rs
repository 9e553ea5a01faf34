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

use cosched_core::{ActiveJob, Context, Event, Plan, PlanChange, Policy, Topology};
use geometry::Geometry;
use std::borrow::Cow;

#[derive(Debug)]
pub struct Taco {
    name: String,
    options: TacoOptions,
    /// Built from the first context's topology; a run never changes machines.
    geometry: Option<Geometry>,
    global: global::Global,
    local: local::Local,
}

impl Taco {
    pub fn new(name: impl Into<String>, options: TacoOptions) -> Taco {
        Taco {
            name: name.into(),
            options,
            geometry: None,
            global: global::Global::default(),
            local: local::Local::default(),
        }
    }
}

impl Policy for Taco {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        Some(self.admitted_count(topology))
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let (jobs, recount) = self.deciding(ctx, event)?;
        let ctx = &Context {
            jobs: &jobs,
            ..*ctx
        };
        let geometry = geometry_of(&mut self.geometry, ctx.topology, &self.options);
        Some(if self.options.local {
            self.local.plan(ctx, geometry, &self.options, event)
        } else {
            self.global.plan(ctx, geometry, &self.options, recount)
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
        if self.options.local {
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
            jobs: &jobs,
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
    fn deciding<'c>(
        &mut self,
        ctx: &Context<'c>,
        event: &Event,
    ) -> Option<(Cow<'c, [ActiveJob]>, bool)> {
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
        let jobs = admitted(ctx.jobs, self.admitted_count(ctx.topology));
        Some((jobs, recount))
    }
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
