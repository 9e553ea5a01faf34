//! Closed experiments (CaSAS §4.1, after Snavely & Tullsen's SMT job scheduling): every job starts again
//! as a new job as soon as it finishes, until each workload job has completed its runs; the runs still
//! going then are stopped, so that every counted run saw the same mix.

use super::SimJob;
use cosched_core::JobId;
use std::sync::Arc;

pub(super) struct ClosedRuns {
    runs: u32,
    /// For every job the engine knows (workload jobs, then reruns): the workload job it repeats.
    origin: Vec<usize>,
    completed: Vec<u32>,
    next_id: u32,
}

/// What follows a finished run.
pub(super) enum Next {
    /// Every workload job has its runs: stop the others.
    Stop(AllRunsDone),
    /// Start this new run now.
    Again(SimJob),
}

/// Why a closed experiment stops the runs still going, as their stop records say.
#[derive(Debug, thiserror::Error)]
#[error("stopped: every job has completed {runs} runs (closed experiment)")]
pub(super) struct AllRunsDone {
    runs: u32,
}

impl ClosedRuns {
    pub fn new(runs: u32, jobs: &[SimJob]) -> ClosedRuns {
        ClosedRuns {
            runs,
            origin: (0..jobs.len()).collect(),
            completed: vec![0; jobs.len()],
            next_id: jobs.iter().map(|j| j.spec.id.0 + 1).max().unwrap_or(0),
        }
    }

    /// Job `i` (an index among all jobs so far, `jobs`) finished at `now`.
    pub fn finished(&mut self, i: usize, now: f64, jobs: &[SimJob]) -> Next {
        let origin = self.origin[i];
        self.completed[origin] += 1;
        if self.completed.iter().all(|&done| done >= self.runs) {
            return Next::Stop(AllRunsDone { runs: self.runs });
        }
        let mut job = jobs[origin].clone();
        let spec = Arc::make_mut(&mut job.spec);
        spec.id = JobId(self.next_id);
        spec.arrival = now;
        spec.name = format!("{}#{}", spec.name, self.completed[origin] + 1);
        self.next_id += 1;
        self.origin.push(origin);
        Next::Again(job)
    }
}
