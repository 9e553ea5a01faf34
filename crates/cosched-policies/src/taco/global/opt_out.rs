//! §2.4: jobs opted out of coscheduling share partitions set aside for them, uncoordinated and never
//! frozen; the coscheduled jobs are dealt what is left.

use super::Held;
use crate::taco::geometry::Geometry;
use cosched_core::{ActiveJob, Assignment, Context, CpuSet, JobId, Plan};
use std::sync::Arc;

/// The partitions set aside for the opted-out jobs. They get the share of the machine their number
/// warrants, in whole partitions of the current level (or the first level below with at least two, so
/// coscheduled jobs keep some), taken from the right so that the reserved partitions stay where they
/// were while the level holds.
pub(super) fn reserve(
    geometry: &Geometry,
    base: usize,
    opted_out: usize,
    coscheduled: usize,
) -> Vec<CpuSet> {
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

/// Each level's partitions that the coscheduled jobs may be dealt: those disjoint from `reserved`.
/// `none_coscheduled` says whether there are no coscheduled jobs.
pub(super) fn partitions_left(
    ctx: &Context,
    geometry: &Geometry,
    reserved: &[CpuSet],
    none_coscheduled: bool,
) -> Vec<Arc<[CpuSet]>> {
    let mut reserved_cpus = reserved.iter().fold(CpuSet::new(), |acc, p| acc.union(p));
    if reserved_cpus == *ctx.topology.cpus() && !none_coscheduled {
        // A machine too small to set a partition aside: opted-out jobs share it with the others.
        reserved_cpus = CpuSet::new();
    }
    geometry
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
        .collect()
}

/// Pins the `opted_out` jobs in `plan` to the `reserved` partitions in turn and advises each the
/// threads its partition takes. Returns where each is held.
pub(super) fn place_opted_out(
    opted_out: &[&ActiveJob],
    reserved: &[CpuSet],
    plan: &mut Plan,
    advice: &mut Vec<(JobId, u32)>,
) -> Vec<(JobId, Held)> {
    let mut held_apart = Vec::with_capacity(opted_out.len());
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
    held_apart
}
