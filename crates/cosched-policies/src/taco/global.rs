//! Global TACO: one level for all jobs (Listing 1), optionally with coscheduling across levels (§2.2),
//! grace periods (§2.3), per-job opt-out and weights (§2.4).

use super::geometry::Geometry;
use super::lanes::{deal, side_by_side};
use super::levels::LevelState;
use super::options::TacoOptions;
use cosched_core::{ActiveJob, Assignment, Context, CpuSet, JobId, JobKind, Plan};
use std::borrow::Cow;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Global {
    level: LevelState,
    /// The partition each job got in the last plan.
    held: HashMap<JobId, CpuSet>,
    /// Deadline of each job's grace period, kept after it expires until the job has moved.
    graces: HashMap<JobId, f64>,
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
        let available: Vec<Cow<[CpuSet]>> = geometry
            .parts
            .iter()
            .map(|parts| {
                if reserved_cpus.is_empty() {
                    return Cow::Borrowed(parts.as_slice());
                }
                parts
                    .iter()
                    .filter(|p| p.is_disjoint(&reserved_cpus))
                    .cloned()
                    .collect()
            })
            .collect();

        let mut plan = Plan::default();
        let mut held = HashMap::with_capacity(ctx.jobs.len());
        for (i, job) in opted_out.iter().enumerate() {
            let cpus = reserved[i % reserved.len()].clone();
            plan.advice
                .insert(job.spec.id, job.spec.threads_for(cpus.len()));
            held.insert(job.spec.id, cpus.clone());
            plan.pinned.push(Assignment {
                job: job.spec.id,
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
                let mut finest = cap.max(base);
                if let Some(threads) = fixed_threads(job) {
                    // Its threads cannot follow a smaller partition; squeezed, they would time-share
                    // CPUs and, if they spin, stall each other. Coscheduled in a partition they fit,
                    // it gets the same CPU time by taking shorter turns (§2.2).
                    finest = finest.min(geometry.level_at_least(threads as usize));
                }
                (finest..geometry.sizes.len()).find(|&l| !available[l].is_empty())
            })
            .collect();
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
        let effective =
            self.apply_graces(ctx, geometry, &available, &coscheduled, &targets, options);

        let durations: Vec<f64> = coscheduled
            .iter()
            .zip(&effective)
            .map(|(job, level)| {
                level.map_or(0.0, |l| {
                    job.spec.weight.max(1e-6) / geometry.sizes[l] as f64
                })
            })
            .collect();
        let shortest = durations
            .iter()
            .copied()
            .filter(|d| *d > 0.0)
            .fold(f64::INFINITY, f64::min);
        let unit = options.slice / shortest;
        for (level, partitions) in available.iter().enumerate() {
            let members: Vec<(JobId, f64)> = coscheduled
                .iter()
                .zip(&effective)
                .zip(&durations)
                .filter(|((_, l), _)| **l == Some(level))
                .map(|((job, _), d)| (job.spec.id, *d))
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut lanes = deal(partitions, &members, &self.held);
            let longest = lanes.iter().map(|l| l.load()).fold(0.0, f64::max);
            if options.balance_levels {
                // Exact shares: a lane shorter than the level idles for the rest of it. With equal
                // weights §2.2 leaves no such lane; with unequal ones this is what exactness costs.
                for lane in &mut lanes {
                    let rest = longest - lane.load();
                    if rest > longest * 1e-9 {
                        lane.idle_for(rest);
                    }
                }
            }
            let span = longest * unit;
            for lane in &lanes {
                for (job, _) in &lane.jobs {
                    held.insert(*job, lane.cpus.clone());
                }
            }
            plan.slots.extend(side_by_side(&lanes, span));
        }
        for (job, target) in coscheduled.iter().zip(&targets) {
            if let Some(level) = target {
                plan.advice
                    .insert(job.spec.id, job.spec.threads_for(geometry.sizes[*level]));
            }
        }
        plan.timer = self
            .graces
            .values()
            .copied()
            .filter(|deadline| *deadline > ctx.now)
            .reduce(f64::min);
        self.held = held;
        plan
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
        available: &[Cow<[CpuSet]>],
        jobs: &[&ActiveJob],
        caps: &[usize],
        targets: &mut [Option<usize>],
        base: usize,
    ) {
        for level in (1..=base).rev() {
            let partitions = available[level].len();
            if partitions == 0 || available[level - 1].is_empty() {
                break;
            }
            let members: Vec<usize> = (0..jobs.len())
                .filter(|&i| targets[i] == Some(level))
                .collect();
            let odd = members.len() % partitions;
            if odd == 0 {
                continue;
            }
            let coarser = geometry.sizes[level - 1];
            let mut movable: Vec<(bool, std::cmp::Reverse<usize>)> = members
                .into_iter()
                .filter(|&i| caps[i] < level)
                .map(|i| {
                    let was_coarser = self
                        .held
                        .get(&jobs[i].spec.id)
                        .is_some_and(|cpus| cpus.len() >= coarser);
                    (!was_coarser, std::cmp::Reverse(i))
                })
                .collect();
            // Only which `odd` jobs come first matters, not their order: a selection, not a sort.
            if movable.len() > odd {
                movable.select_nth_unstable(odd - 1);
            }
            for &(_, std::cmp::Reverse(i)) in movable.iter().take(odd) {
                targets[i] = Some(level - 1);
            }
        }
    }

    /// §2.3: a started malleable job asked to change its partition size keeps its old partition until
    /// it runs with the advised thread count or its grace period ends. Returns each job's level for now.
    fn apply_graces(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        available: &[Cow<[CpuSet]>],
        jobs: &[&ActiveJob],
        targets: &[Option<usize>],
        options: &TacoOptions,
    ) -> Vec<Option<usize>> {
        let mut graces = HashMap::new();
        let effective = jobs
            .iter()
            .zip(targets)
            .map(|(job, &target)| {
                let (Some(grace), Some(level)) = (options.grace, target) else {
                    return target;
                };
                let id = job.spec.id;
                let Some(old) = self.held.get(&id) else {
                    return target;
                };
                let wanted = job.spec.threads_for(geometry.sizes[level]);
                let waiting = job.spec.kind == JobKind::Malleable
                    && job.started.is_some()
                    && old.len() != geometry.sizes[level]
                    && job.threads != wanted;
                if !waiting {
                    return target;
                }
                // The old partition is found by a scan of its level, so only for a job that waits.
                let old_level = geometry
                    .level_of_size(old.len())
                    .filter(|&l| available[l].contains(old));
                match old_level {
                    Some(old_level) => {
                        let deadline = self.graces.get(&id).copied().unwrap_or(ctx.now + grace);
                        graces.insert(id, deadline);
                        if deadline > ctx.now {
                            Some(old_level)
                        } else {
                            target
                        }
                    }
                    None => target,
                }
            })
            .collect();
        self.graces = graces;
        effective
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
        return parts.clone();
    } else {
        ((parts.len() * opted_out) as f64 / total as f64)
            .round()
            .clamp(1.0, (parts.len() - 1) as f64) as usize
    };
    parts[parts.len() - count..].to_vec()
}
