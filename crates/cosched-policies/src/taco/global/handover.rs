//! TACO's steady state under a long queue: a finished job's place goes to the next job in line
//! without a full plan.

use super::{finest_level, usable_threads, Global, Held, LevelPlan};
use crate::taco::geometry::Geometry;
use crate::taco::steady::Steady;
use cosched_core::{ActiveJob, Context, JobId, PlanChange};

impl Global {
    /// Whether the last plan placed `admitted` jobs or more: a newcomer then waits, and the plan holds.
    pub fn is_full(&self, admitted: usize) -> bool {
        self.held.len() >= admitted
    }

    /// In the steady state ([`Steady`]), the change when `finished` ends and the next job in the queue
    /// takes its place; `None` when the state does not hold, and a full plan must decide.
    pub fn hand_over(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        finished: JobId,
        admitted: usize,
    ) -> Option<PlanChange> {
        let steady = self.steady.as_mut()?;
        let placed = steady.job_count();
        if placed != admitted || !steady.holds(finished) {
            return None;
        }
        // Admission is first come first served and every admitted job is placed, so the placed jobs
        // are the oldest and the next one stands right behind them.
        let newcomer = ctx.jobs.get(placed - 1)?;
        let behind_the_placed = placed < 2 || steady.holds(ctx.jobs[placed - 2].id());
        let level = steady.level;
        let cap = geometry.level_at_most(usable_threads(newcomer) as usize);
        let fits = newcomer.started.is_none()
            && newcomer.spec.coschedule
            && newcomer.spec.weight == steady.weight
            && !steady.holds(newcomer.id())
            && finest_level(geometry, newcomer, cap, self.level.level) == level;
        if !behind_the_placed || !fits {
            return None;
        }
        let id = newcomer.id();
        let (cpus, change) = steady.hand_over(finished, id)?;
        let change = PlanChange {
            unadvised: vec![finished],
            advice: [(id, newcomer.spec.threads_for(geometry.sizes[level]))].into(),
            ..change
        };
        self.held.remove(&finished);
        // Its lanes no longer say where the jobs are held.
        self.decided = None;
        let size = geometry.sizes[level];
        let lane = usize::MAX;
        self.held.insert(id, Held { cpus, size, lane });
        Some(change)
    }

    /// The steady state the plan just made, if it is one: no opted-out job and no grace period, every
    /// job of one weight where its target level is, and that level's lanes equally full.
    pub(super) fn steady_state<'j>(
        &self,
        opted_out: usize,
        mut jobs: impl Iterator<Item = &'j ActiveJob>,
        targets: &[Option<usize>],
        effective: &[Option<usize>],
        levels: &[LevelPlan],
    ) -> Option<Steady> {
        if opted_out > 0 || !self.graces.is_empty() || levels.len() != 1 {
            return None;
        }
        let LevelPlan { level, lanes, .. } = &levels[0];
        let level = *level;
        let first = jobs.next()?;
        let weight = first.spec.weight;
        let settled = std::iter::once(first)
            .chain(jobs)
            .zip(targets.iter().zip(effective))
            .all(|(job, levels)| {
                job.spec.weight == weight && levels == (&Some(level), &Some(level))
            });
        if !settled || (0..lanes.len()).any(|lane| lanes.idle(lane) > 0.0) {
            return None;
        }
        Steady::of(level, weight, lanes)
    }
}
