//! Why a queued job waits: its dependencies, its array's limit, its user's running jobs, memory.

use super::Registry;
use crate::protocol::JobState;
use cosched_core::memory::admits;

/// Where a queued job's dependencies stand.
pub(super) enum Dependencies {
    Met,
    Waiting,
    Never(String),
}

impl Registry {
    /// Why queued job `id` has not started: waiting for its dependencies, held back for its array's
    /// limit or its user's running jobs (`running_per_user`), else waiting for the policy to give
    /// it CPUs.
    pub fn pending_reason(&self, id: u64, running_per_user: usize) -> Option<&'static str> {
        let job = self.jobs.get(&id)?;
        if job.view.state != JobState::Queued {
            return None;
        }
        if matches!(self.dependencies_of(id), Dependencies::Waiting) {
            return Some("dependency");
        }
        let limit = job.submission.as_ref().and_then(|s| s.array?.limit);
        let array = job.view.array_id;
        if limit.is_some_and(|limit| self.running_in_array(job.view.uid, array) >= limit as usize) {
            return Some("array_task_limit");
        }
        let held = job.submission.is_some()
            && job.adopt.is_none()
            && job.view.uid != 0
            && self.load_of(job.view.uid).running >= running_per_user;
        // Once handed to the executor, its memory is counted in use.
        let fits = job.submission.is_none()
            || admits(self.memory_for_jobs, self.memory_in_use, job.view.mem);
        Some(match (held, fits) {
            (true, _) => "user_limit",
            (false, false) => "memory",
            (false, true) => "resources",
        })
    }

    /// How many jobs of `uid`'s array `array` run.
    fn running_in_array(&self, uid: u32, array: Option<u64>) -> usize {
        self.running_of.get(&uid).map_or(0, |ids| {
            ids.iter()
                .filter(|id| self.jobs[id].view.array_id == array)
                .count()
        })
    }

    /// Whether the jobs queued job `id` depends on have ended as it asks.
    pub(super) fn dependencies_of(&self, id: u64) -> Dependencies {
        let Some(submission) = self.jobs.get(&id).and_then(|j| j.submission.as_ref()) else {
            return Dependencies::Met;
        };
        for dependency in &submission.dependency {
            let Some(job) = self.jobs.get(&dependency.id) else {
                return Dependencies::Never(format!("{dependency}: job forgotten"));
            };
            let view = &job.view;
            if !view.state.ended() || view.finished.is_none() {
                return Dependencies::Waiting;
            }
            if !dependency.met_by(view.state) {
                let state = format!("{:?}", view.state).to_lowercase();
                return Dependencies::Never(format!(
                    "dependency {dependency} never satisfied: job {} ended {state}",
                    dependency.id
                ));
            }
        }
        Dependencies::Met
    }
}
