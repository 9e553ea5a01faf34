//! Each job's state over time as tidy rows (`timeline.csv`): one row whenever a job's state, CPUs or
//! thread count changes, so that the rows of a job read as a step function.

use crate::job_facts::cpus_of;
use crate::run::Run;
use cosched_core::cpuset::CpuSet;
use cosched_core::job::JobId;
use cosched_core::plan::Plan;
use cosched_core::trace::{ExitStatus, Record, TraceLine};
use std::collections::BTreeMap;

/// Where a job stands at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Arrived, not started.
    Waiting,
    /// Started and placed in the plan (in at least one slot of its cycle, or pinned).
    Running,
    /// Started, but in no slot of the plan: stopped until a plan places it again.
    Frozen,
    Finished,
    Failed,
}

impl JobState {
    pub fn name(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Running => "running",
            JobState::Frozen => "frozen",
            JobState::Finished => "finished",
            JobState::Failed => "failed",
        }
    }
}

/// One step of one job: from `t` on it is in `state` on `cpus` with `threads` threads.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub t: f64,
    pub job: JobId,
    pub state: JobState,
    pub cpus: CpuSet,
    pub threads: u32,
    /// The share of the plan's cycle of slots during which it runs: the lengths of its slots over
    /// the cycle's; 1 when pinned, 0 unless running. A running job below 1 is frozen in the others.
    pub cycle_share: f64,
}

#[derive(Default)]
struct Track {
    started: bool,
    ended: Option<JobState>,
    threads: u32,
}

/// The steps of every job of `run`, in time order; the records of one instant make one step.
pub fn timeline(run: &Run) -> Vec<Step> {
    let mut tracks: BTreeMap<JobId, Track> = BTreeMap::new();
    let mut last: BTreeMap<JobId, Step> = BTreeMap::new();
    let mut plan = Plan::default();
    let mut steps = Vec::new();
    // Stable: records of one instant keep the order they were written in.
    let mut lines: Vec<&TraceLine> = run.lines.iter().collect();
    lines.sort_by(|a, b| a.t.total_cmp(&b.t));
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].t;
        while i < lines.len() && lines[i].t == t {
            match &lines[i].record {
                Record::Arrival { job, .. } => {
                    tracks.entry(job.id).or_default();
                }
                Record::Plan { plan: p } => plan = p.clone(),
                Record::Start { job, threads, .. } => {
                    let track = tracks.entry(*job).or_default();
                    track.started = true;
                    track.threads = *threads;
                }
                Record::Threads { job, threads } => {
                    tracks.entry(*job).or_default().threads = *threads
                }
                Record::Finish { job, status, .. } => {
                    tracks.entry(*job).or_default().ended = Some(match status {
                        ExitStatus::Ok => JobState::Finished,
                        ExitStatus::Failed => JobState::Failed,
                    })
                }
                _ => {}
            }
            i += 1;
        }
        for (&job, track) in &tracks {
            let step = step_at(t, job, track, &plan);
            let changed = last.get(&job).is_none_or(|prev| {
                (prev.state, &prev.cpus, prev.threads, prev.cycle_share)
                    != (step.state, &step.cpus, step.threads, step.cycle_share)
            });
            if changed {
                last.insert(job, step.clone());
                steps.push(step);
            }
        }
    }
    steps
}

fn step_at(t: f64, job: JobId, track: &Track, plan: &Plan) -> Step {
    let (state, cpus, threads) = match track.ended {
        Some(end) => (end, CpuSet::new(), 0),
        None if !track.started => (JobState::Waiting, CpuSet::new(), 0),
        None => {
            let cpus = cpus_of(plan, job);
            let state = if cpus.is_empty() {
                JobState::Frozen
            } else {
                JobState::Running
            };
            (state, cpus, track.threads)
        }
    };
    let cycle_share = match state {
        JobState::Running => cycle_share(plan, job),
        _ => 0.0,
    };
    Step {
        t,
        job,
        state,
        cpus,
        threads,
        cycle_share,
    }
}

fn cycle_share(plan: &Plan, job: JobId) -> f64 {
    if plan.pinned.iter().any(|a| a.job == job) {
        return 1.0;
    }
    let total: f64 = plan.slots.iter().map(|s| s.length).sum();
    let own: f64 = (plan.slots.iter())
        .filter(|s| s.assignments.iter().any(|a| a.job == job))
        .map(|s| s.length)
        .sum();
    if total > 0.0 {
        own / total
    } else {
        1.0
    }
}
