//! The run history carried from one simulated run to the next, as a real run's jobs carry it in the
//! store beside the isolated times: a first run knows each job's time alone on the whole machine (as
//! `cosched compare` measures it first); the next one also what the earlier runs' traces showed of
//! how each program takes advice (`cosched_core::observe::Behaviour`) and how it scales
//! (`cosched_core::scaling`).

use cosched_core::observe::{behaviours, Behaviour};
use cosched_core::scaling::{fit, runs_from_trace, times_alone, ScalingFit, ScalingRun};
use cosched_core::trace::TraceLine;
use cosched_core::{JobId, Topology};
use cosched_sim::{isolated_time, SimJob, SimOptions};
use std::collections::BTreeMap;

/// Runs kept per program, as the store keeps them.
const KEPT_RUNS: usize = 8;

/// Its width alone: its maximum threads, at most the machine.
fn full_width(job: &SimJob, topology: &Topology) -> u32 {
    job.spec.max_threads.clamp(1, topology.num_cpus() as u32)
}

/// Each job with its time alone on the whole machine as its run time (what a calibration measures,
/// and the denominator of its slowdown), and nothing known of its scaling.
pub fn calibrated(topology: &Topology, jobs: &[SimJob], options: &SimOptions) -> Vec<SimJob> {
    jobs.iter()
        .map(|job| {
            let mut spec = (*job.spec).clone();
            spec.hints.runtime = Some(isolated_time(topology, job, options));
            spec.hints.one_cpu_runtime = None;
            SimJob {
                spec: spec.into(),
                profile: job.profile.clone(),
                mem: job.mem,
            }
        })
        .collect()
}

/// The calibrated `jobs` as the next run sees them after the runs of `traces`, oldest first: each
/// with what they showed of how it takes advice, and its one-CPU time and times alone from the curve
/// fitted to its calibration and its spells in them.
pub fn learnt(topology: &Topology, jobs: &[SimJob], traces: &[&[TraceLine]]) -> Vec<SimJob> {
    let mut known: BTreeMap<JobId, Behaviour> = BTreeMap::new();
    let mut spells: BTreeMap<JobId, Vec<ScalingRun>> = BTreeMap::new();
    for trace in traces {
        for (id, run) in behaviours(trace.iter().map(|line| &line.record)) {
            known.entry(id).or_default().learn(&run);
        }
        for (id, run) in runs_from_trace(trace) {
            spells.entry(id).or_default().push(run);
        }
    }
    jobs.iter()
        .map(|job| {
            let width = full_width(job, topology);
            let runtime = job.spec.hints.runtime.unwrap();
            let mut history = vec![ScalingRun::alone(width, width, runtime)];
            history.extend(spells.remove(&job.spec.id).unwrap_or_default());
            let excess = history.len().saturating_sub(KEPT_RUNS);
            history.drain(..excess);
            let fitted: Option<ScalingFit> = fit(&history).filter(ScalingFit::trusted);
            let mut spec = (*job.spec).clone();
            spec.hints.one_cpu_runtime = fitted.map(|f| {
                f.one_cpu_seconds
                    .unwrap_or_else(|| runtime * f.speedup(width))
            });
            spec.hints.times_alone = (times_alone(&history).iter())
                .map(|t| (t.width, t.seconds))
                .collect();
            if let Some(behaviour) = known.get(&job.spec.id) {
                behaviour.apply(&mut spec);
            }
            SimJob {
                spec: spec.into(),
                profile: job.profile.clone(),
                mem: job.mem,
            }
        })
        .collect()
}
