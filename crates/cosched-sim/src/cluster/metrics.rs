//! The Parallel Workloads Archive's figures for a batch schedule: wait time, bounded slowdown with a
//! 10 s threshold (Feitelson et al., "Theory and Practice in Parallel Job Scheduling", JSSPP 1997)
//! and utilisation.

use super::state::Placement;
use crate::swf::SwfJob;
use serde::Serialize;

/// Runs shorter than this count as this long in bounded slowdown, so tiny jobs do not dominate it.
pub const BOUNDED_SLOWDOWN_THRESHOLD: f64 = 10.0;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchMetrics {
    pub jobs: usize,
    /// Mean of start − submit, seconds.
    pub mean_wait: f64,
    pub max_wait: f64,
    /// Mean of end − submit (turnaround, response time), seconds.
    pub mean_turnaround: f64,
    /// Mean of max(1, (end - submit) / max(run, 10 s)), `run` the recorded run time (a job that shares
    /// its nodes takes longer than that).
    pub mean_bounded_slowdown: f64,
    pub max_bounded_slowdown: f64,
    /// Processor-seconds used over processor-seconds available from the first submit to the last end.
    pub utilisation: f64,
    /// From the first submit to the last end, seconds.
    pub makespan: f64,
}

/// Bounded slowdown of a job that spent `response` seconds from submit to end and whose recorded run
/// time is `run`.
pub fn bounded_slowdown(response: f64, run: f64) -> f64 {
    (response / run.max(BOUNDED_SLOWDOWN_THRESHOLD)).max(1.0)
}

/// Figures of `placements` (from [`super::replay()`]) of `jobs` on `machine_procs` processors.
pub fn summarize(jobs: &[SwfJob], placements: &[Placement], machine_procs: u32) -> BatchMetrics {
    let n = placements.len().max(1) as f64;
    let (mut wait_sum, mut max_wait, mut bsld_sum, mut max_bsld, mut used) =
        (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut turnaround_sum = 0.0;
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in placements {
        let job = &jobs[p.job];
        let wait = p.start - job.submit;
        let bsld = bounded_slowdown(p.end - job.submit, job.run);
        wait_sum += wait;
        turnaround_sum += p.end - job.submit;
        bsld_sum += bsld;
        max_wait = f64::max(max_wait, wait);
        max_bsld = f64::max(max_bsld, bsld);
        used += job.run * f64::from(job.procs);
        first = first.min(job.submit);
        last = last.max(p.end);
    }
    let makespan = if placements.is_empty() {
        0.0
    } else {
        last - first
    };
    let available = makespan * f64::from(machine_procs);
    BatchMetrics {
        jobs: placements.len(),
        mean_wait: wait_sum / n,
        max_wait,
        mean_turnaround: turnaround_sum / n,
        mean_bounded_slowdown: bsld_sum / n,
        max_bounded_slowdown: max_bsld,
        utilisation: if available > 0.0 {
            used / available
        } else {
            0.0
        },
        makespan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swf::SwfJob;

    #[test]
    fn short_jobs_are_bounded_by_the_threshold() {
        assert_eq!(bounded_slowdown(32.0, 2.0), 3.2);
        assert_eq!(bounded_slowdown(2.0, 2.0), 1.0);
        assert_eq!(bounded_slowdown(32.0, 20.0), 1.6);
    }

    #[test]
    fn utilisation_counts_processor_seconds_over_the_span() {
        let job = |submit, run, procs| SwfJob {
            id: 0,
            submit,
            run,
            procs,
            estimate: run,
        };
        let jobs = [job(0.0, 10.0, 2), job(0.0, 5.0, 4)];
        let placements = [
            Placement {
                job: 0,
                start: 0.0,
                end: 10.0,
                nodes: vec![0, 1],
            },
            Placement {
                job: 1,
                start: 10.0,
                end: 15.0,
                nodes: vec![0, 1, 2, 3],
            },
        ];
        let m = summarize(&jobs, &placements, 4);
        // 20 + 20 processor-seconds over 4 x 15.
        assert!((m.utilisation - 40.0 / 60.0).abs() < 1e-12, "{m:?}");
        assert_eq!((m.mean_wait, m.max_wait, m.makespan), (5.0, 10.0, 15.0));
        assert_eq!(m.mean_turnaround, (10.0 + 15.0) / 2.0);
        assert_eq!(m.mean_bounded_slowdown, (1.0 + 1.5) / 2.0);
    }
}
