//! The local variant of TACO §2.1: instead of one global level, every unit of the hierarchy decides on
//! its own. A unit that has gathered enough jobs splits into its children; when a unit runs dry and no
//! sibling can spare a job, the siblings hand their jobs back to the parent.
//!
//! Each unit coschedules its jobs in turn, independently of the other units, so CPU time is not equal
//! across units: the imbalance the paper names as this variant's cost. Within a unit, several users'
//! jobs take turns as long as their weights, which then carry their users' shares.

use super::geometry::Geometry;
use super::lanes::{deal_by_count, deal_by_load, side_by_side, Lanes, Places};
use super::levels::{threshold_down, weighted_count};
use super::options::TacoOptions;
use cosched_core::{Assignment, Context, CpuSet, Event, JobId, Plan};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
struct Unit {
    level: usize,
    cpus: CpuSet,
    jobs: Vec<JobId>,
}

/// The units that currently hold jobs: a tiling of the machine by partitions of possibly different levels.
#[derive(Debug, Default)]
pub struct Local {
    /// Every arrived job's unit, by the count rule.
    units: Vec<Unit>,
    /// The units of the last plan for several users' jobs, found anew on each (empty otherwise):
    /// `units` goes on beside them, so that the count rule takes over where one user is left.
    by_users: Vec<Unit>,
}

impl Local {
    pub fn plan(
        &mut self,
        ctx: &Context,
        geometry: &Geometry,
        options: &TacoOptions,
        event: &Event,
        by_users: bool,
    ) -> Plan {
        if self.units.is_empty() {
            self.units.push(Unit {
                level: 0,
                cpus: geometry.parts[0][0].clone(),
                jobs: Vec::new(),
            });
            // Sizes restricted below the machine leave several top-level units.
            for cpus in &geometry.parts[0][1..] {
                self.units.push(Unit {
                    level: 0,
                    cpus: cpus.clone(),
                    jobs: Vec::new(),
                });
            }
        }
        match event {
            Event::Arrived { job } => self.arrive(*job, geometry, options.hysteresis),
            Event::Finished { job } => self.depart(*job, geometry),
            _ => {}
        }
        if !by_users {
            self.by_users.clear();
            return build(&self.units, ctx, options.slice, false);
        }
        self.by_users = regroup_by_users(&self.by_users, ctx, geometry, options.hysteresis);
        build(&self.by_users, ctx, options.slice, true)
    }

    fn arrive(&mut self, job: JobId, geometry: &Geometry, hysteresis: f64) {
        // The unit where the newcomer gets the most CPU time.
        let best = (0..self.units.len())
            .max_by(|&a, &b| {
                share(&self.units[a])
                    .total_cmp(&share(&self.units[b]))
                    .then(b.cmp(&a))
            })
            .expect("the machine is a unit");
        self.units[best].jobs.push(job);
        self.split(best, geometry, hysteresis);
    }

    fn split(&mut self, index: usize, geometry: &Geometry, hysteresis: f64) {
        let unit = &self.units[index];
        let finer = unit.level + 1;
        if finer >= geometry.sizes.len() {
            return;
        }
        let children: Arc<[CpuSet]> = geometry.parts[finer]
            .iter()
            .filter(|p| p.is_subset(&unit.cpus))
            .cloned()
            .collect();
        if unit.jobs.len() < threshold_down(children.len(), hysteresis) {
            return;
        }
        let unit = self.units.swap_remove(index);
        let jobs: Vec<(JobId, f64)> = unit.jobs.iter().map(|j| (*j, 1.0)).collect();
        let lanes = deal_by_count(&children, &Places::of(&children), &jobs, |_| None);
        let first_child = self.units.len();
        self.units.extend(lanes.iter().map(|(cpus, jobs)| Unit {
            level: finer,
            cpus: cpus.clone(),
            jobs: jobs.iter().map(|(j, _)| *j).collect(),
        }));
        for child in (first_child..self.units.len()).rev() {
            self.split(child, geometry, hysteresis);
        }
    }

    fn depart(&mut self, job: JobId, geometry: &Geometry) {
        let Some(index) = self.units.iter().position(|u| u.jobs.contains(&job)) else {
            return;
        };
        self.units[index].jobs.retain(|j| *j != job);
        let mut index = index;
        while self.units[index].jobs.is_empty() && self.units[index].level > 0 {
            let unit = &self.units[index];
            let parent = geometry.parts[unit.level - 1]
                .iter()
                .find(|p| unit.cpus.is_subset(p))
                .expect("levels nest")
                .clone();
            let siblings: Vec<usize> = (0..self.units.len())
                .filter(|&i| i != index && self.units[i].cpus.is_subset(&parent))
                .collect();
            let donor = siblings
                .iter()
                .copied()
                .max_by_key(|&i| (self.units[i].jobs.len(), std::cmp::Reverse(i)))
                .filter(|&i| self.units[i].jobs.len() >= 2);
            if let Some(donor) = donor {
                let moved = self.units[donor].jobs.pop().expect("has two jobs");
                self.units[index].jobs.push(moved);
                return;
            }
            let level = self.units[index].level - 1;
            let mut jobs = Vec::new();
            let mut members = siblings;
            members.push(index);
            members.sort_unstable();
            for &i in members.iter().rev() {
                jobs.extend(self.units.swap_remove(i).jobs);
            }
            self.units.push(Unit {
                level,
                cpus: parent,
                jobs,
            });
            index = self.units.len() - 1;
        }
    }
}

/// The plan of the units' jobs, each taking equal turns in its unit, or with `by_users` turns as
/// long as its weight.
fn build(units: &[Unit], ctx: &Context, slice: f64, by_users: bool) -> Plan {
    let mut plan = Plan::default();
    let mut lanes = Vec::new();
    let mut longest = 0;
    for unit in units {
        let mut lane = Vec::new();
        for &id in &unit.jobs {
            let Some(job) = ctx.job(id) else { continue };
            plan.advice
                .insert(id, job.spec.threads_for(unit.cpus.len()));
            if job.spec.coschedule {
                let turn = if by_users { job.spec.weight } else { 1.0 };
                lane.push((id, turn));
            } else {
                // §2.4 opt-out: runs all the time in its unit, uncoordinated with the unit's other jobs.
                plan.pinned.push(Assignment {
                    job: id,
                    cpus: unit.cpus.clone(),
                });
            }
        }
        longest = longest.max(lane.len());
        lanes.push((unit.cpus.clone(), lane));
    }
    plan.slots = side_by_side(&Lanes::new(lanes), slice * longest.max(1) as f64);
    plan
}

/// Units for several users' jobs (those of `ctx`), found anew from the top, since every arrival or
/// departure changes the weights of its user's jobs: the jobs are dealt to the top units by load,
/// and a unit splits while its jobs, counted by weight, reach its children's threshold, dealing them
/// to the children by load. A job stays in the unit it had `before` where the loads allow.
fn regroup_by_users(
    before: &[Unit],
    ctx: &Context,
    geometry: &Geometry,
    hysteresis: f64,
) -> Vec<Unit> {
    let before: HashMap<JobId, CpuSet> = before
        .iter()
        .flat_map(|u| u.jobs.iter().map(|&j| (j, u.cpus.clone())))
        .collect();
    let held = |job| before.get(&job).map(|cpus| (cpus, usize::MAX));
    let jobs: Vec<(JobId, f64)> = ctx.jobs.iter().map(|j| (j.id(), j.spec.weight)).collect();
    let weight: HashMap<JobId, f64> = jobs.iter().copied().collect();
    let tops = &geometry.parts[0];
    let lanes = deal_by_load(tops, &geometry.places[0], &jobs, held);
    let mut units: Vec<Unit> = lanes
        .iter()
        .map(|(cpus, jobs)| Unit {
            level: 0,
            cpus: cpus.clone(),
            jobs: jobs.iter().map(|(j, _)| *j).collect(),
        })
        .collect();
    let mut unit = 0;
    while unit < units.len() {
        let finer = units[unit].level + 1;
        let children: Arc<[CpuSet]> = match geometry.parts.get(finer) {
            Some(parts) => parts
                .iter()
                .filter(|p| p.is_subset(&units[unit].cpus))
                .cloned()
                .collect(),
            None => Arc::from([]),
        };
        let members: Vec<(JobId, f64)> =
            units[unit].jobs.iter().map(|&j| (j, weight[&j])).collect();
        let count = weighted_count(members.iter().map(|(_, w)| *w));
        if children.is_empty() || count < threshold_down(children.len(), hysteresis) {
            unit += 1;
            continue;
        }
        let lanes = deal_by_load(&children, &Places::of(&children), &members, held);
        units.swap_remove(unit);
        units.extend(lanes.iter().map(|(cpus, jobs)| Unit {
            level: finer,
            cpus: cpus.clone(),
            jobs: jobs.iter().map(|(j, _)| *j).collect(),
        }));
    }
    units
}

/// CPUs per job a newcomer would see in `unit`.
fn share(unit: &Unit) -> f64 {
    unit.cpus.len() as f64 / (unit.jobs.len() + 1) as f64
}
