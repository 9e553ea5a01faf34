//! Global TACO: one level for all jobs (Listing 1), optionally with coscheduling across levels (§2.2),
//! grace periods (§2.3), per-job opt-out and weights (§2.4).

mod grace;
mod handover;
mod incremental;
mod opt_out;
mod promotion;

use super::geometry::Geometry;
use super::lanes::{deal_again, deal_by_count, deal_by_load, side_by_side, Lanes, Places};
use super::levels::{weighted_count, LevelState};
use super::options::TacoOptions;
use super::steady::Steady;
use cosched_core::{ActiveJob, Context, CpuSet, JobId, JobKind, Plan, PlanChange, Slot};
use opt_out::{partitions_left, place_opted_out, reserve};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
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
    /// Listing 1 changes levels on `on_start` and `on_terminate`). `by_users` plans for several users'
    /// jobs, their shares folded into their weights (see the module doc of `taco`).
    pub fn plan(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        recount: bool,
        by_users: bool,
    ) -> Plan {
        let (mut plan, advice) = self.plan_but_slots(ctx, geometry, options, recount, by_users);
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
        let (plan, advice) = self.plan_but_slots(ctx, geometry, options, recount, false);
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
        by_users: bool,
    ) -> (Plan, Vec<(JobId, u32)>) {
        if recount {
            let count = match by_users {
                true => weighted_count(ctx.jobs.iter().map(|j| j.spec.weight)),
                false => ctx.jobs.len(),
            };
            self.level.update(geometry, count, options.hysteresis);
        }
        let base = self.level.level;
        let (opted_out, coscheduled): (Vec<&ActiveJob>, Vec<&ActiveJob>) =
            ctx.jobs.iter().partition(|j| !j.spec.coschedule);
        let reserved = reserve(geometry, base, opted_out.len(), coscheduled.len());
        let available = partitions_left(ctx, geometry, &reserved, coscheduled.is_empty());
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
        let mut advice = Vec::with_capacity(ctx.jobs.len());
        // Written into `held` once every level is dealt: until then it says where jobs were.
        let held_apart = place_opted_out(&opted_out, &reserved, &mut plan, &mut advice);

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
        let ids = coscheduled.iter().map(|job| job.id());
        let members = members_by_level(ids, &effective, &durations, available.len());
        let deal = match by_users {
            true => Deal::ByLoad,
            false => Deal::ByCount {
                balance: options.balance_levels,
            },
        };
        let mut levels = self.plan_levels(&available, &places, members, unit, deal);
        self.hold_levels(geometry, &mut levels, held_apart, &opted_out);
        advice.extend(advice_for(geometry, coscheduled.iter().copied(), &targets));
        // Jobs come in arrival order, most often their ids' order too, which the sort only checks.
        advice.sort_unstable_by_key(|&(job, _)| job);
        plan.timer = self.grace_timer(ctx.now);
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
        if by_users {
            // Its turns are the users' shares of the moment: the next plan deals every level anew.
            self.steady = None;
            self.decided = None;
        }
        (plan, advice)
    }

    /// Every level dealt for its `members`, from the last plan's levels where they still stand.
    fn plan_levels(
        &mut self,
        available: &[Arc<[CpuSet]>],
        places: &[Cow<Places>],
        mut members: Vec<Vec<(JobId, f64)>>,
        unit: f64,
        deal: Deal,
    ) -> Vec<LevelPlan> {
        let mut previous = self.previous_levels(available.len());
        let mut levels = Vec::new();
        // The finest level's slots first: it holds most jobs, and a job moving between coarser levels
        // then renumbers only the few slots behind it, not everyone's.
        for (level, partitions) in available.iter().enumerate().rev() {
            let before = previous[level].take();
            let members = std::mem::take(&mut members[level]);
            if let Some(planned) = self.plan_level(
                partitions,
                &places[level],
                level,
                members,
                unit,
                deal,
                before,
            ) {
                levels.push(planned);
            }
        }
        levels
    }

    /// Records where `levels` and the opted-out jobs (`held_apart`) are held, and forgets every job
    /// placed nowhere now.
    fn hold_levels(
        &mut self,
        geometry: &Geometry,
        levels: &mut [LevelPlan],
        held_apart: Vec<(JobId, Held)>,
        opted_out: &[&ActiveJob],
    ) {
        let mut held = std::mem::take(&mut self.held);
        // What writing every place anew gives, which writing only the moved ones must match.
        #[cfg(debug_assertions)]
        let anew = {
            let mut anew: HashMap<JobId, Held> = held_apart.iter().cloned().collect();
            levels.iter().for_each(|l| l.hold_all(geometry, &mut anew));
            anew
        };
        held.extend(held_apart);
        for planned in levels.iter_mut() {
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
        self.held = held;
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
        deal: Deal,
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
        let (mut lanes, unheld) = match deal {
            Deal::ByLoad => (deal_by_load(partitions, places, &members, held), None),
            Deal::ByCount { .. } => {
                match before.and_then(|b| deal_again(b.lanes, &b.members, &members, places, held)) {
                    Some((lanes, moved)) => (lanes, Some(moved)),
                    None => (deal_by_count(partitions, places, &members, held), None),
                }
            }
        };
        let longest = (0..lanes.len()).map(|l| lanes.load(l)).fold(0.0, f64::max);
        if deal == (Deal::ByCount { balance: true }) {
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
}

/// How a level's jobs are dealt to its partitions.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Deal {
    /// Lane counts even (TACO's equal jobs), from the last deal where it stands; with `balance`
    /// (§2.2), a lane shorter than the level idles for the rest of it, so that shares are exact.
    ByCount { balance: bool },
    /// Lane loads even, every lane kept busy: several users' jobs, whose turns differ by user.
    ByLoad,
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
    match job.fixed_threads() {
        // Its threads cannot follow a smaller partition; squeezed, they would time-share CPUs and, if
        // they spin, stall each other. Coscheduled in a partition they fit, it gets the same CPU time
        // by taking shorter turns (§2.2).
        Some(threads) => finest.min(geometry.level_at_least(threads as usize)),
        None => finest,
    }
}

/// Threads a job can use: what it runs with if that can no longer change, else its maximum.
fn usable_threads(job: &ActiveJob) -> u32 {
    job.fixed_threads().unwrap_or(job.spec.max_threads).max(1)
}
