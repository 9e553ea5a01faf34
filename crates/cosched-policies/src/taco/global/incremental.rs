//! Replanning in part: after a thread change that only ends grace periods, or a finish while the
//! last plan's decisions stand, only the levels that jobs leave or join are dealt again.

use super::{duration, members_by_level, shortest, Deal, Decided, Global};
use crate::taco::geometry::Geometry;
use crate::taco::options::TacoOptions;
use cosched_core::{ActiveJob, Context, CpuSet, JobId, Plan, PlanChange};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

impl Global {
    /// The change to `current` (the last plan given) after a thread change when only grace periods
    /// can have ended, `None` when that does not hold and a full plan must decide. Between the last
    /// plan and now no job came or went, so every level keeps its job count and §2.2 promotes the same
    /// jobs: those it promoted are held on the coarser level now, or still on their old one while they
    /// adapt, which keeps or strengthens their claim, and those it did not lose theirs or keep it. Only the jobs whose grace period ended
    /// move, from their old level to their target; the other levels keep their lanes and slots (all
    /// are dealt again when the shortest turn changed, since it sets every slot's length), and every
    /// job its advice, so the change is found among the slots from the first level dealt again on.
    pub fn adapted(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        current: &Plan,
    ) -> Option<PlanChange> {
        let decided = self.decided.as_ref()?;
        let same_jobs = ctx.jobs.len() == decided.jobs.len()
            && ctx
                .jobs
                .iter()
                .zip(&decided.jobs)
                .all(|(job, id)| job.id() == *id)
            && decided
                .unstarted_moldable
                .iter()
                .all(|&i| ctx.jobs[i].started.is_none());
        if !same_jobs {
            return None;
        }
        // Edited in place: its lists hold every job, and only those whose grace period ended change.
        let mut decided = self.decided.take()?;
        let was_graced = std::mem::take(&mut decided.graced);
        let (affected, replaced) =
            self.look_again(ctx, geometry, options, &mut decided, &was_graced);
        // The shortest turn moves only with the turns that change: found again among all of them only
        // when a job that had it changes its own.
        let shortest_before = decided.shortest;
        let durations = &decided.durations;
        let shortest_left = replaced
            .iter()
            .any(|&(i, old)| old == shortest_before && durations[i] != old);
        decided.shortest = if shortest_left {
            shortest(durations)
        } else {
            replaced
                .iter()
                .map(|&(i, _)| durations[i])
                .filter(|&turn| turn > 0.0)
                .fold(shortest_before, f64::min)
        };
        Some(self.deal_where_moved(ctx, geometry, options, decided, &affected, current))
    }

    /// The change to `current` after `finished` left (and was forgotten), `None` when a full plan must
    /// decide. It holds while the last plan's decisions stand, the jobs are those it decided for less
    /// this one, in the same order, no moldable one among them has started since, and the level stays:
    /// then the others keep their finest levels and §2.2 promotes again for the new counts. Only the
    /// jobs it moves and those in a grace period are looked at again; the levels they and the finished
    /// job leave or join are dealt again (every level when the shortest turn changes, as in
    /// [`adapted`](Self::adapted)), and only moved advice changes. A full plan finds the same at the
    /// cost of every job; debug builds compare the two.
    pub fn finished(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        finished: JobId,
        current: &Plan,
    ) -> Option<PlanChange> {
        let decided = self.decided.as_ref()?;
        let gone = decided.jobs.iter().position(|&job| job == finished)?;
        let mut level = self.level;
        level.update(geometry, ctx.jobs.len(), options.hysteresis);
        let others = decided.jobs.iter().enumerate().filter(|&(k, _)| k != gone);
        let same_jobs = ctx.jobs.len() + 1 == decided.jobs.len()
            && ctx
                .jobs
                .iter()
                .zip(others)
                .all(|(job, (_, &id))| job.id() == id)
            && decided
                .unstarted_moldable
                .iter()
                .filter(|&&k| k != gone)
                .all(|&k| ctx.jobs[k - usize::from(k > gone)].started.is_none());
        if level != self.level || !same_jobs {
            return None;
        }
        // The level the finished job leaves.
        let left = decided.effective[gone];
        #[cfg(debug_assertions)]
        let mut full = self.clone();
        let base = self.level.level;
        let jobs: Vec<&ActiveJob> = ctx.jobs.iter().collect();
        // The decisions stay in place until the promotions are made: where the jobs were held is read
        // from them, and they must list the jobs of `ctx`, the finished one gone.
        self.decided.as_mut()?.remove(gone);
        let decided = self.decided.as_ref()?;
        let mut targets = decided.unpromoted.clone();
        if options.balance_levels {
            self.promote_odd_jobs(
                geometry,
                &geometry.parts,
                &jobs,
                &decided.caps,
                &mut targets,
                base,
            );
        }
        let mut decided = self.decided.take()?;
        let moved: Vec<usize> = (0..jobs.len())
            .filter(|&i| targets[i] != decided.targets[i])
            .collect();
        // A job neither moved nor in a grace period is where its target is, as a full plan finds it.
        let mut looked_at: Vec<usize> = std::mem::take(&mut decided.graced)
            .into_iter()
            .chain(moved.iter().copied())
            .collect();
        looked_at.sort_unstable();
        looked_at.dedup();
        decided.targets = targets;
        let (mut affected, _) = self.look_again(ctx, geometry, options, &mut decided, &looked_at);
        affected.extend(left);
        decided.shortest = shortest(&decided.durations);
        let mut unadvised: Vec<JobId> = current
            .advice
            .contains_key(&finished)
            .then_some(finished)
            .into_iter()
            .collect();
        let mut advice = BTreeMap::new();
        for &i in &moved {
            let id = jobs[i].id();
            let level = decided.targets[i];
            match level.map(|l| jobs[i].spec.threads_for(geometry.sizes[l])) {
                Some(threads) if current.advice.get(&id) != Some(&threads) => {
                    advice.insert(id, threads);
                }
                None if current.advice.contains_key(&id) => unadvised.push(id),
                _ => {}
            }
        }
        unadvised.sort_unstable();
        let change = PlanChange {
            unadvised,
            advice,
            ..self.deal_where_moved(ctx, geometry, options, decided, &affected, current)
        };
        #[cfg(debug_assertions)]
        {
            let mut by_finish = current.clone();
            change.apply(&mut by_finish);
            let mut by_full = current.clone();
            full.plan_change(ctx, geometry, options, true, current)
                .apply(&mut by_full);
            assert_eq!(
                by_finish, by_full,
                "a finish planned in part differs from a full plan"
            );
            assert_eq!(
                self.held, full.held,
                "a finish holds jobs elsewhere than a full plan"
            );
        }
        Some(change)
    }

    /// Looks again at the jobs `looked_at` (indices into `ctx.jobs` and `decided`'s lists, in order)
    /// for their grace periods under `decided.targets`, as a full plan would with no partition
    /// reserved, and moves their levels and turns in `decided`. The grace periods found replace the
    /// running ones, and their jobs `decided.graced`. Returns the levels jobs left or joined, and each
    /// turn replaced as (index, old turn).
    pub(super) fn look_again(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        decided: &mut Decided,
        looked_at: &[usize],
    ) -> (Vec<usize>, Vec<(usize, f64)>) {
        let mut graces = HashMap::default();
        let mut affected = Vec::new();
        let mut replaced = Vec::new();
        let available =
            |l: usize, cpus: &CpuSet| geometry.places[l].holds(cpus, &geometry.parts[l]);
        for &i in looked_at {
            let job = &ctx.jobs[i];
            let target = decided.targets[i];
            let (now, deadline) = self.grace(ctx.now, geometry, available, job, target, options);
            if let Some(deadline) = deadline {
                graces.insert(job.id(), deadline);
                decided.graced.push(i);
            }
            if now != decided.effective[i] {
                affected.extend(decided.effective[i].into_iter().chain(now));
                decided.effective[i] = now;
                let turn = duration(geometry, job, now);
                replaced.push((i, std::mem::replace(&mut decided.durations[i], turn)));
            }
        }
        self.graces = graces;
        (affected, replaced)
    }

    /// The change to `current`'s slots once the jobs of `decided` have moved as it says: the levels
    /// in `affected` are dealt again (every level when the shortest turn changed, since it sets every
    /// slot's length), the others keep their lanes and slots, and the jobs that moved are held where
    /// they go. `decided` becomes the last plan's decisions.
    pub(super) fn deal_where_moved(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        mut decided: Decided,
        affected: &[usize],
        current: &Plan,
    ) -> PlanChange {
        let unit = options.slice / decided.shortest;
        let rescaled = unit.to_bits() != decided.unit.to_bits();
        let ids = decided.jobs.iter().copied();
        let mut members = members_by_level(
            ids,
            &decided.effective,
            &decided.durations,
            geometry.sizes.len(),
        );
        let mut kept = std::mem::take(&mut self.levels).into_iter().peekable();
        let mut levels = Vec::new();
        let mut replanned = Vec::new();
        // The levels before the first one dealt again, as in the current plan.
        let mut unchanged = None;
        for level in (0..geometry.sizes.len()).rev() {
            let old = kept.next_if(|l| l.level == level);
            if !rescaled && !affected.contains(&level) {
                levels.extend(old);
                continue;
            }
            unchanged.get_or_insert(levels.len());
            if let Some(planned) = self.plan_level(
                &geometry.parts[level],
                &geometry.places[level],
                level,
                std::mem::take(&mut members[level]),
                unit,
                Deal::ByCount {
                    balance: options.balance_levels,
                },
                old,
            ) {
                replanned.push(levels.len());
                levels.push(planned);
            }
        }
        // Held places change only once every level is dealt, as in a full plan.
        for &k in &replanned {
            levels[k].hold(geometry, &mut self.held);
        }
        let unchanged = unchanged.unwrap_or(levels.len());
        let change = PlanChange::replacing_slots(
            current,
            levels[..unchanged].iter().map(|l| l.slots.len()).sum(),
            levels[unchanged..].iter().flat_map(|l| &l.slots),
            self.grace_timer(ctx.now),
        );
        self.steady = self.steady_state(
            0,
            ctx.jobs.iter(),
            &decided.targets,
            &decided.effective,
            &levels,
        );
        decided.unit = unit;
        self.decided = Some(decided);
        self.levels = levels;
        change
    }
}
