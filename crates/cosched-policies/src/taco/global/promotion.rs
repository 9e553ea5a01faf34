//! §2.2: each level keeps a multiple of its partition count, the odd jobs going one level up.

use super::Global;
use crate::taco::geometry::Geometry;
use cosched_core::{ActiveJob, CpuSet, JobId};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

impl Global {
    /// §2.2: leaves each level with a multiple of its partition count and moves the odd jobs one level
    /// up, level by level, so that every partition of a level is equally loaded. Jobs that were on the
    /// coarser level already are moved first, then the latest arrivals, so that the older jobs stay put.
    pub(super) fn promote_odd_jobs(
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
    pub(super) fn held_coarser_than(
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
    pub(super) fn held_coarser_by_levels(
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
    pub(super) fn held_coarser_by_places(
        &self,
        finest: usize,
        jobs: &[&ActiveJob],
    ) -> Vec<(usize, usize)> {
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
}
