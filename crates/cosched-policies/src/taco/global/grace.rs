//! §2.3: a malleable job asked to change its partition size keeps its old partition while it adapts,
//! until its grace period ends.

use super::Global;
use crate::taco::geometry::Geometry;
use crate::taco::options::TacoOptions;
use cosched_core::{ActiveJob, Context, CpuSet, JobId, JobKind};
use rustc_hash::FxHashMap as HashMap;

impl Global {
    /// The earliest grace period still running, to wake the policy when it ends.
    pub(super) fn grace_timer(&self, now: f64) -> Option<f64> {
        self.graces
            .values()
            .copied()
            .filter(|deadline| *deadline > now)
            .reduce(f64::min)
    }

    /// Whether `job` keeps its old partition while it adapts to a new size (§2.3).
    pub fn in_grace(&self, job: JobId) -> bool {
        self.graces.contains_key(&job)
    }

    /// §2.3: a started malleable job asked to change its partition size keeps its old partition until
    /// it runs with the advised thread count or its grace period ends. Returns each job's level for now,
    /// and the jobs (indices into `jobs`) in their grace period.
    pub(super) fn apply_graces(
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
    pub(super) fn grace(
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
