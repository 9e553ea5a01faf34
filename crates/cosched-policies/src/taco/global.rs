//! Global TACO: one level for all jobs (Listing 1), optionally with coscheduling across levels (§2.2),
//! grace periods (§2.3), per-job opt-out and weights (§2.4).

use super::geometry::Geometry;
use super::lanes::{deal, deal_again, side_by_side, Lanes, Places};
use super::levels::LevelState;
use super::options::TacoOptions;
use super::steady::Steady;
use cosched_core::{
    ActiveJob, Assignment, Context, CpuSet, JobId, JobKind, Plan, PlanChange, Slot,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A job's partition in the last plan, with its size: counted once, asked on every plan.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    cpus: CpuSet,
    size: usize,
    /// Its lane's index among the partitions it was dealt from (`usize::MAX` if none): where the next
    /// deal looks first.
    lane: usize,
}

#[derive(Debug, Default, Clone)]
pub struct Global {
    level: LevelState,
    /// The partition each job got in the last plan.
    held: HashMap<JobId, Held>,
    /// Deadline of each job's grace period, kept after it expires until the job has moved.
    graces: HashMap<JobId, f64>,
    /// The last plan's lanes, when they are TACO's steady state under a long queue.
    steady: Option<Steady>,
    /// The last plan's levels, finest first: its slots, and what the next plan starts from while
    /// `decided` stands.
    levels: Vec<LevelPlan>,
    /// What the last plan decided for its coscheduled jobs, while none is opted out.
    decided: Option<Decided>,
}

/// A plan's decisions, kept so that a thread change that only ends grace periods moves just the
/// jobs that adapted ([`Global::adapted`]), and a finish just the jobs it moves ([`Global::finished`]).
#[derive(Debug, Clone)]
struct Decided {
    /// The coscheduled jobs, in the plan's order, and each one's target level, its level for now and
    /// its turn's length.
    jobs: Vec<JobId>,
    targets: Vec<Option<usize>>,
    effective: Vec<Option<usize>>,
    durations: Vec<f64>,
    /// Each job's finest usable level and its target before §2.2's promotions: what a finish leaves
    /// as it was for the others ([`Global::finished`]).
    caps: Vec<usize>,
    unpromoted: Vec<Option<usize>>,
    /// Jobs (indices into `jobs`) that were moldable and not started: starting binds their threads,
    /// which can change their level.
    unstarted_moldable: Vec<usize>,
    /// Jobs in their grace period (indices into `jobs`).
    graced: Vec<usize>,
    /// The shortest turn of `durations`, which sets `unit`.
    shortest: f64,
    unit: f64,
}

impl Decided {
    /// Forgets job `k`: its entries go, and the indices after it move down one.
    fn remove(&mut self, k: usize) {
        self.jobs.remove(k);
        self.targets.remove(k);
        self.effective.remove(k);
        self.durations.remove(k);
        self.caps.remove(k);
        self.unpromoted.remove(k);
        for indices in [&mut self.unstarted_moldable, &mut self.graced] {
            indices.retain(|&i| i != k);
            indices.iter_mut().filter(|i| **i > k).for_each(|i| *i -= 1);
        }
    }
}

/// One level's lanes and the slots they make, with what they were made from: the same jobs dealt
/// again give the same lanes, and the same span the same slots.
#[derive(Debug, Clone)]
struct LevelPlan {
    level: usize,
    /// The level's jobs in the plan's order, with their turns: what was dealt.
    members: Vec<(JobId, f64)>,
    /// The longest lane's load, before idle time evened the others.
    longest: f64,
    span: f64,
    lanes: Lanes,
    slots: Vec<Slot>,
    /// The jobs whose place `held` does not record yet, `None` for all of them.
    unheld: Option<Vec<JobId>>,
}

impl LevelPlan {
    /// Records in `held` where this level puts its jobs.
    fn hold(&mut self, geometry: &Geometry, held: &mut HashMap<JobId, Held>) {
        match self.unheld.replace(Vec::new()) {
            None => self.hold_all(geometry, held),
            Some(jobs) => {
                let size = geometry.sizes[self.level];
                for job in jobs {
                    let lane = self.lanes.lane_of(job).expect("dealt here");
                    let cpus = self.lanes.cpus(lane).clone();
                    held.insert(job, Held { cpus, size, lane });
                }
            }
        }
    }

    fn hold_all(&self, geometry: &Geometry, held: &mut HashMap<JobId, Held>) {
        let size = geometry.sizes[self.level];
        for (lane, (cpus, jobs)) in self.lanes.iter().enumerate() {
            for (job, _) in jobs {
                let cpus = cpus.clone();
                held.insert(*job, Held { cpus, size, lane });
            }
        }
    }
}

impl Global {
    /// The plan for the jobs of `ctx`. `recount` re-evaluates the level (on arrivals and departures only:
    /// Listing 1 changes levels on `on_start` and `on_terminate`).
    pub fn plan(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        recount: bool,
    ) -> Plan {
        let (mut plan, advice) = self.plan_but_slots(ctx, geometry, options, recount);
        plan.slots = self.slots().cloned().collect();
        plan.advice = advice.into_iter().collect();
        plan
    }

    /// What turns `current` into [`plan`](Self::plan)'s plan, found without copying its slots: on a
    /// machine of a thousand CPUs they list thousands of assignments, most of them as they were.
    pub fn plan_change(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        recount: bool,
        current: &Plan,
    ) -> PlanChange {
        let (plan, advice) = self.plan_but_slots(ctx, geometry, options, recount);
        PlanChange::with_slots(current, &plan, self.slots(), advice)
    }

    /// The last plan's slots.
    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.levels.iter().flat_map(|l| &l.slots)
    }

    /// The plan for the jobs of `ctx`, its slots left empty (they are the levels' it keeps), and its
    /// advice apart, in job order.
    fn plan_but_slots(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        recount: bool,
    ) -> (Plan, Vec<(JobId, u32)>) {
        if recount {
            self.level
                .update(geometry, ctx.jobs.len(), options.hysteresis);
        }
        let base = self.level.level;
        let (opted_out, coscheduled): (Vec<&ActiveJob>, Vec<&ActiveJob>) =
            ctx.jobs.iter().partition(|j| !j.spec.coschedule);
        let reserved = reserve(geometry, base, opted_out.len(), coscheduled.len());
        let mut reserved_cpus = reserved.iter().fold(CpuSet::new(), |acc, p| acc.union(p));
        if reserved_cpus == *ctx.topology.cpus() && !coscheduled.is_empty() {
            // A machine too small to set a partition aside: opted-out jobs share it with the others.
            reserved_cpus = CpuSet::new();
        }
        let available: Vec<Arc<[CpuSet]>> = geometry
            .parts
            .iter()
            .map(|parts| {
                if reserved_cpus.is_empty() {
                    return parts.clone();
                }
                parts
                    .iter()
                    .filter(|p| p.is_disjoint(&reserved_cpus))
                    .cloned()
                    .collect()
            })
            .collect();
        // A level short of its reserved partitions needs its own table.
        let places: Vec<Cow<Places>> = available
            .iter()
            .zip(&geometry.parts)
            .zip(&geometry.places)
            .map(|((partitions, all), places)| {
                if Arc::ptr_eq(partitions, all) {
                    Cow::Borrowed(places)
                } else {
                    Cow::Owned(Places::of(partitions))
                }
            })
            .collect();

        let mut plan = Plan::default();
        // Written into `held` once every level is dealt: until then it says where jobs were.
        let mut held_apart = Vec::with_capacity(opted_out.len());
        let mut advice = Vec::with_capacity(ctx.jobs.len());
        for (i, job) in opted_out.iter().enumerate() {
            let cpus = reserved[i % reserved.len()].clone();
            advice.push((job.id(), job.spec.threads_for(cpus.len())));
            let size = cpus.len();
            held_apart.push((
                job.id(),
                Held {
                    cpus: cpus.clone(),
                    size,
                    lane: usize::MAX,
                },
            ));
            plan.pinned.push(Assignment {
                job: job.id(),
                cpus,
            });
        }

        let caps: Vec<usize> = coscheduled
            .iter()
            .map(|job| geometry.level_at_most(usable_threads(job) as usize))
            .collect();
        let mut targets: Vec<Option<usize>> = coscheduled
            .iter()
            .zip(&caps)
            .map(|(job, &cap)| {
                let finest = finest_level(geometry, job, cap, base);
                (finest..geometry.sizes.len()).find(|&l| !available[l].is_empty())
            })
            .collect();
        let unpromoted = targets.clone();
        if options.balance_levels {
            self.promote_odd_jobs(
                geometry,
                &available,
                &coscheduled,
                &caps,
                &mut targets,
                base,
            );
        }
        let (effective, graced) = self.apply_graces(
            ctx,
            geometry,
            |l, cpus: &CpuSet| places[l].holds(cpus, &available[l]),
            &coscheduled,
            &targets,
            options,
        );

        let durations: Vec<f64> = coscheduled
            .iter()
            .zip(&effective)
            .map(|(job, &level)| duration(geometry, job, level))
            .collect();
        let shortest = shortest(&durations);
        let unit = options.slice / shortest;
        let mut previous = self.previous_levels(geometry.sizes.len());
        let mut levels = Vec::new();
        // The finest level's slots first: it holds most jobs, and a job moving between coarser levels
        // then renumbers only the few slots behind it, not everyone's.
        let ids = coscheduled.iter().map(|job| job.id());
        let mut members = members_by_level(ids, &effective, &durations, available.len());
        for (level, partitions) in available.iter().enumerate().rev() {
            let before = previous[level].take();
            let members = std::mem::take(&mut members[level]);
            if let Some(planned) = self.plan_level(
                partitions,
                &places[level],
                level,
                members,
                unit,
                options,
                before,
            ) {
                levels.push(planned);
            }
        }
        let mut held = std::mem::take(&mut self.held);
        // What writing every place anew gives, which writing only the moved ones must match.
        #[cfg(debug_assertions)]
        let anew = {
            let mut anew: HashMap<JobId, Held> = held_apart.iter().cloned().collect();
            levels.iter().for_each(|l| l.hold_all(geometry, &mut anew));
            anew
        };
        held.extend(held_apart);
        for planned in &mut levels {
            planned.hold(geometry, &mut held);
        }
        // Only the places that moved were written, and finished jobs were forgotten: any other job
        // held before and placed nowhere now (one left without a level) must go.
        let placed = opted_out.len() + levels.iter().map(|l| l.members.len()).sum::<usize>();
        if held.len() != placed {
            let placed: HashSet<JobId> = opted_out
                .iter()
                .map(|job| job.id())
                .chain(levels.iter().flat_map(|l| l.members.iter().map(|m| m.0)))
                .collect();
            held.retain(|job, _| placed.contains(job));
        }
        #[cfg(debug_assertions)]
        assert!(
            held == anew,
            "places written piecemeal differ from places written anew"
        );
        advice.extend(advice_for(geometry, coscheduled.iter().copied(), &targets));
        // Jobs come in arrival order, most often their ids' order too, which the sort only checks.
        advice.sort_unstable_by_key(|&(job, _)| job);
        plan.timer = self.grace_timer(ctx.now);
        self.held = held;
        let jobs = || coscheduled.iter().copied();
        self.steady = self.steady_state(opted_out.len(), jobs(), &targets, &effective, &levels);
        self.decided = opted_out.is_empty().then(|| Decided {
            jobs: jobs().map(|job| job.id()).collect(),
            unstarted_moldable: jobs()
                .enumerate()
                .filter(|(_, job)| job.spec.kind == JobKind::Moldable && job.started.is_none())
                .map(|(i, _)| i)
                .collect(),
            graced,
            targets,
            effective,
            durations,
            caps,
            unpromoted,
            shortest,
            unit,
        });
        self.levels = levels;
        (plan, advice)
    }

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
    fn look_again(
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
    fn deal_where_moved(
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
                options,
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

    /// The lanes and slots of `level` for its `members` (in the plan's order, with their turns),
    /// from its lanes `before` where it can; `None` if it has no members.
    #[allow(clippy::too_many_arguments)]
    fn plan_level(
        &self,
        partitions: &Arc<[CpuSet]>,
        places: &Places,
        level: usize,
        members: Vec<(JobId, f64)>,
        unit: f64,
        options: &TacoOptions,
        before: Option<LevelPlan>,
    ) -> Option<LevelPlan> {
        if members.is_empty() {
            return None;
        }
        let held = |job| self.held.get(&job).map(|h| (&h.cpus, h.lane));
        // The last deal's jobs are held where it put them (every plan holds every level).
        let before = before.filter(|b| b.lanes.on(partitions));
        let before = match before {
            // The same jobs dealt again all go home: the lanes stand, and with the same span, the
            // slots too.
            Some(before) if before.members == members => {
                let span = before.longest * unit;
                let slots = if span.to_bits() == before.span.to_bits() {
                    before.slots
                } else if let Some(factor) = exact_factor(before.span, span) {
                    // A new shortest turn doubles or halves every span: the lanes cut at the same
                    // places scaled, which scaling the slots gives to the bit, without cutting again.
                    let mut slots = before.slots;
                    slots.iter_mut().for_each(|slot| slot.length *= factor);
                    debug_assert_eq!(slots, side_by_side(&before.lanes, span));
                    slots
                } else {
                    side_by_side(&before.lanes, span)
                };
                return Some(LevelPlan {
                    span,
                    slots,
                    ..before
                });
            }
            before => before,
        };
        let again = before.and_then(|b| deal_again(b.lanes, &b.members, &members, places, held));
        let (mut lanes, unheld) = match again {
            Some((lanes, moved)) => (lanes, Some(moved)),
            None => (deal(partitions, places, &members, held), None),
        };
        let longest = (0..lanes.len()).map(|l| lanes.load(l)).fold(0.0, f64::max);
        if options.balance_levels {
            // Exact shares: a lane shorter than the level idles for the rest of it. With equal
            // weights §2.2 leaves no such lane; with unequal ones this is what exactness costs.
            for lane in 0..lanes.len() {
                let rest = longest - lanes.load(lane);
                if rest > longest * 1e-9 {
                    lanes.idle_for(lane, rest);
                }
            }
        }
        let span = longest * unit;
        let slots = side_by_side(&lanes, span);
        Some(LevelPlan {
            level,
            members,
            longest,
            span,
            lanes,
            slots,
            unheld,
        })
    }

    /// `job` finished: it is held nowhere.
    pub fn forget(&mut self, job: JobId) {
        self.held.remove(&job);
    }

    /// The last plan's levels, by level, while they still describe where every job is held (until
    /// the steady state hands a place over, or while a job is opted out).
    fn previous_levels(&mut self, count: usize) -> Vec<Option<LevelPlan>> {
        let mut previous: Vec<Option<LevelPlan>> = (0..count).map(|_| None).collect();
        let levels = std::mem::take(&mut self.levels);
        let standing = self.decided.take().is_some();
        for planned in levels.into_iter().filter(|_| standing) {
            let level = planned.level;
            previous[level] = Some(planned);
        }
        previous
    }

    /// The earliest grace period still running, to wake the policy when it ends.
    fn grace_timer(&self, now: f64) -> Option<f64> {
        self.graces
            .values()
            .copied()
            .filter(|deadline| *deadline > now)
            .reduce(f64::min)
    }

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
    fn steady_state<'j>(
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

    /// Whether `job` keeps its old partition while it adapts to a new size (§2.3).
    pub fn in_grace(&self, job: JobId) -> bool {
        self.graces.contains_key(&job)
    }

    /// §2.2: leaves each level with a multiple of its partition count and moves the odd jobs one level
    /// up, level by level, so that every partition of a level is equally loaded. Jobs that were on the
    /// coarser level already are moved first, then the latest arrivals, so that the older jobs stay put.
    fn promote_odd_jobs(
        &self,
        geometry: &Geometry,
        available: &[Arc<[CpuSet]>],
        jobs: &[&ActiveJob],
        caps: &[usize],
        targets: &mut [Option<usize>],
        base: usize,
    ) {
        let mut counts = vec![0; base + 1];
        for &level in targets.iter().flatten() {
            if let Some(count) = counts.get_mut(level) {
                *count += 1;
            }
        }
        // The jobs held coarser than the finest level before, with their partition's size, found once
        // and only when some level has odd jobs: looking up every member's place missed the cache
        // once per job.
        let mut held_coarse: Option<Vec<(usize, usize)>> = None;
        for level in (1..=base).rev() {
            let partitions = available[level].len();
            if partitions == 0 || available[level - 1].is_empty() {
                break;
            }
            let odd = counts[level] % partitions;
            if odd == 0 {
                continue;
            }
            let coarser = geometry.sizes[level - 1];
            let movable = |i: usize| targets[i] == Some(level) && caps[i] < level;
            let held_coarse =
                held_coarse.get_or_insert_with(|| self.held_coarser_than(geometry, base, jobs));
            // Those held coarser first, latest first, then the latest arrivals: a walk back from the
            // last job stops after `odd` of them.
            let mut chosen: Vec<usize> = held_coarse
                .iter()
                .filter(|&&(i, size)| size >= coarser && movable(i))
                .map(|&(i, _)| i)
                .collect();
            chosen.sort_unstable_by(|a, b| b.cmp(a));
            chosen.truncate(odd);
            let were_coarser = chosen.len();
            let mut latest = (0..targets.len()).rev();
            while chosen.len() < odd {
                let Some(i) = latest.next() else { break };
                if movable(i) && !chosen[..were_coarser].contains(&i) {
                    chosen.push(i);
                }
            }
            for &i in &chosen {
                targets[i] = Some(level - 1);
            }
            counts[level - 1] += chosen.len();
        }
    }

    /// The jobs (indices into `jobs`) the last plan held in partitions larger than those of level
    /// `base`, with their partition's size.
    fn held_coarser_than(
        &self,
        geometry: &Geometry,
        base: usize,
        jobs: &[&ActiveJob],
    ) -> Vec<(usize, usize)> {
        let finest = geometry.sizes[base];
        let found = self
            .held_coarser_by_levels(geometry, finest, jobs)
            .unwrap_or_else(|| self.held_coarser_by_places(finest, jobs));
        debug_assert_eq!(found, self.held_coarser_by_places(finest, jobs));
        found
    }

    /// [`held_coarser_than`](Self::held_coarser_than) read from the last plan's decisions, while they
    /// say where every job is held: its jobs, in order, each with its level. The jobs now are the same
    /// less those that left, in the same order, then the newcomers, so one walk of both lists finds
    /// every job's level without a lookup. `None` if the decisions do not stand or a job held was not
    /// met on the way (the jobs came in another order).
    fn held_coarser_by_levels(
        &self,
        geometry: &Geometry,
        finest: usize,
        jobs: &[&ActiveJob],
    ) -> Option<Vec<(usize, usize)>> {
        let decided = self.decided.as_ref()?;
        let mut last = decided.jobs.iter().zip(&decided.effective);
        let mut found = Vec::new();
        let mut held = 0;
        for (i, job) in jobs.iter().enumerate() {
            let id = job.id();
            // Passes over the jobs that left; a newcomer passes over all that remain, which leaves
            // any job held after it unmet.
            let Some((_, level)) = last.find(|(&other, _)| other == id) else {
                continue;
            };
            if let Some(level) = *level {
                held += 1;
                let size = geometry.sizes[level];
                if size > finest {
                    found.push((i, size));
                }
            }
        }
        (held == self.held.len()).then_some(found)
    }

    /// [`held_coarser_than`](Self::held_coarser_than) from the places held, looked up by job.
    fn held_coarser_by_places(&self, finest: usize, jobs: &[&ActiveJob]) -> Vec<(usize, usize)> {
        let sizes: HashMap<JobId, usize> = self
            .held
            .iter()
            .filter(|(_, held)| held.size > finest)
            .map(|(&job, held)| (job, held.size))
            .collect();
        if sizes.is_empty() {
            return Vec::new();
        }
        jobs.iter()
            .enumerate()
            .filter_map(|(i, job)| sizes.get(&job.id()).map(|&size| (i, size)))
            .collect()
    }

    /// §2.3: a started malleable job asked to change its partition size keeps its old partition until
    /// it runs with the advised thread count or its grace period ends. Returns each job's level for now,
    /// and the jobs (indices into `jobs`) in their grace period.
    fn apply_graces(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        available: impl Fn(usize, &CpuSet) -> bool,
        jobs: &[&ActiveJob],
        targets: &[Option<usize>],
        options: &TacoOptions,
    ) -> (Vec<Option<usize>>, Vec<usize>) {
        let mut graces = HashMap::default();
        let mut graced = Vec::new();
        let effective = jobs
            .iter()
            .zip(targets)
            .enumerate()
            .map(|(i, (job, &target))| {
                let (level, deadline) =
                    self.grace(ctx.now, geometry, &available, job, target, options);
                if let Some(deadline) = deadline {
                    graces.insert(job.id(), deadline);
                    graced.push(i);
                }
                level
            })
            .collect();
        self.graces = graces;
        (effective, graced)
    }

    /// `job`'s level for now given its `target`, and the deadline of its grace period if it is in one
    /// (kept after it passes, until the job has moved). `available(level, cpus)` says whether `cpus`
    /// is one of the partitions the plan may deal on `level`.
    fn grace(
        &self,
        now: f64,
        geometry: &Geometry,
        available: impl Fn(usize, &CpuSet) -> bool,
        job: &ActiveJob,
        target: Option<usize>,
        options: &TacoOptions,
    ) -> (Option<usize>, Option<f64>) {
        let (Some(grace), Some(level)) = (options.grace, target) else {
            return (target, None);
        };
        let id = job.id();
        let wanted = job.spec.threads_for(geometry.sizes[level]);
        let adapting =
            job.spec.kind == JobKind::Malleable && job.started.is_some() && job.threads != wanted;
        // Most jobs run what they were advised: only the others' old places are looked up.
        let Some(old) = adapting.then(|| self.held.get(&id)).flatten() else {
            return (target, None);
        };
        if old.size == geometry.sizes[level] {
            return (target, None);
        }
        let old_level = geometry
            .level_of_size(old.size)
            .filter(|&l| available(l, &old.cpus));
        match old_level {
            Some(old_level) => {
                let deadline = self.graces.get(&id).copied().unwrap_or(now + grace);
                let level = if deadline > now { old_level } else { level };
                (Some(level), Some(deadline))
            }
            None => (target, None),
        }
    }
}

/// Each level's jobs among `ids` (in their order) with their turns, by their level for now.
fn members_by_level(
    ids: impl Iterator<Item = JobId>,
    effective: &[Option<usize>],
    durations: &[f64],
    levels: usize,
) -> Vec<Vec<(JobId, f64)>> {
    let mut members = lists_for(effective, levels);
    for (id, (level, duration)) in ids.zip(effective.iter().zip(durations)) {
        if let Some(level) = level {
            members[*level].push((id, *duration));
        }
    }
    members
}

/// An empty list for each of `count` levels, with room for the jobs `levels` puts there: a level may
/// hold thousands, which a list grown one job at a time copies a dozen times over.
fn lists_for<T>(levels: &[Option<usize>], count: usize) -> Vec<Vec<T>> {
    let mut sizes = vec![0; count];
    for &level in levels.iter().flatten() {
        if let Some(size) = sizes.get_mut(level) {
            *size += 1;
        }
    }
    sizes.into_iter().map(Vec::with_capacity).collect()
}

/// Each of `jobs`' advice: the threads for its `targets` level's partitions.
fn advice_for<'j>(
    geometry: &'j Geometry,
    jobs: impl Iterator<Item = &'j ActiveJob> + 'j,
    targets: &'j [Option<usize>],
) -> impl Iterator<Item = (JobId, u32)> + 'j {
    jobs.zip(targets).filter_map(|(job, target)| {
        let level = (*target)?;
        Some((job.id(), job.spec.threads_for(geometry.sizes[level])))
    })
}

/// A job's turn on `level`, in its lanes' unit: its weight over the level's partition size.
fn duration(geometry: &Geometry, job: &ActiveJob, level: Option<usize>) -> f64 {
    level.map_or(0.0, |l| {
        job.spec.weight.max(1e-6) / geometry.sizes[l] as f64
    })
}

/// The power of two that turns `from` into `to`, if one does exactly: every product with it is exact,
/// so lengths computed from `from` and scaled by it are those computed from `to`.
fn exact_factor(from: f64, to: f64) -> Option<f64> {
    const MANTISSA: u64 = (1 << 52) - 1;
    let factor = to / from;
    let exact = factor.is_normal() && factor.to_bits() & MANTISSA == 0 && from * factor == to;
    exact.then_some(factor)
}

/// The shortest turn of `durations` (those of placed jobs).
fn shortest(durations: &[f64]) -> f64 {
    durations
        .iter()
        .copied()
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min)
}

/// The finest level `job` may have, given the finest its threads can use (`cap`) and the current level.
fn finest_level(geometry: &Geometry, job: &ActiveJob, cap: usize, base: usize) -> usize {
    let finest = cap.max(base);
    match fixed_threads(job) {
        // Its threads cannot follow a smaller partition; squeezed, they would time-share CPUs and, if
        // they spin, stall each other. Coscheduled in a partition they fit, it gets the same CPU time
        // by taking shorter turns (§2.2).
        Some(threads) => finest.min(geometry.level_at_least(threads as usize)),
        None => finest,
    }
}

/// Threads a job can use: what it runs with if that can no longer change, else its maximum.
fn usable_threads(job: &ActiveJob) -> u32 {
    fixed_threads(job).unwrap_or(job.spec.max_threads).max(1)
}

/// The thread count a job is bound to: a rigid job's, or a started moldable job's.
fn fixed_threads(job: &ActiveJob) -> Option<u32> {
    match (job.spec.kind, job.started) {
        (JobKind::Rigid, _) => Some(job.spec.max_threads),
        (JobKind::Moldable, Some(_)) => Some(job.threads),
        _ => None,
    }
}

/// §2.4: partitions set aside for jobs opted out of coscheduling, which share them uncoordinated and
/// are never frozen. They get the share of the machine their number warrants, in whole partitions of
/// the current level (or the first level below with at least two, so coscheduled jobs keep some), taken
/// from the right so that the reserved partitions stay where they were while the level holds.
fn reserve(geometry: &Geometry, base: usize, opted_out: usize, coscheduled: usize) -> Vec<CpuSet> {
    if opted_out == 0 {
        return Vec::new();
    }
    let level = if coscheduled == 0 {
        base
    } else {
        (base..geometry.sizes.len())
            .find(|&l| geometry.parts[l].len() >= 2)
            .unwrap_or(geometry.sizes.len() - 1)
    };
    let parts = &geometry.parts[level];
    let total = opted_out + coscheduled;
    let count = if coscheduled == 0 {
        opted_out.min(parts.len())
    } else if parts.len() < 2 {
        return parts.to_vec();
    } else {
        ((parts.len() * opted_out) as f64 / total as f64)
            .round()
            .clamp(1.0, (parts.len() - 1) as f64) as usize
    };
    parts[parts.len() - count..].to_vec()
}
