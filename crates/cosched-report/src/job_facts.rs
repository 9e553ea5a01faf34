//! What a trace says about each job beyond its times: its kind, the threads it ran, the CPUs the plan
//! gave it when it started and its exit code.

use cosched_core::cpuset::CpuSet;
use cosched_core::job::{JobId, JobKind};
use cosched_core::plan::Plan;
use cosched_core::trace::{Record, TraceLine};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFacts {
    pub kind: Option<JobKind>,
    pub start_threads: Option<u32>,
    /// The most threads it ran at once (start or a later change).
    pub peak_threads: Option<u32>,
    /// Its CPUs in the plan in force when it started, over all slots of the cycle.
    pub start_cpus: Option<CpuSet>,
    pub exit_code: Option<i32>,
}

/// Facts for every job of a trace, by id.
pub fn job_facts(lines: &[TraceLine]) -> BTreeMap<JobId, JobFacts> {
    let mut facts: BTreeMap<JobId, JobFacts> = BTreeMap::new();
    let mut plan: Option<&Plan> = None;
    for line in lines {
        match &line.record {
            Record::Arrival { job, .. } => facts.entry(job.id).or_default().kind = Some(job.kind),
            Record::Plan { plan: p } => plan = Some(p),
            Record::Start { job, threads, .. } => {
                let f = facts.entry(*job).or_default();
                f.start_threads = Some(*threads);
                f.peak_threads = Some(f.peak_threads.unwrap_or(0).max(*threads));
                f.start_cpus = plan.map(|p| cpus_of(p, *job));
            }
            Record::Threads { job, threads } => {
                let f = facts.entry(*job).or_default();
                f.peak_threads = Some(f.peak_threads.unwrap_or(0).max(*threads));
            }
            Record::Finish { job, exit_code, .. } => {
                facts.entry(*job).or_default().exit_code = *exit_code
            }
            _ => {}
        }
    }
    facts
}

/// Every CPU `job` holds somewhere in the plan's cycle (slotted or pinned); empty if it holds none.
pub fn cpus_of(plan: &Plan, job: JobId) -> CpuSet {
    plan.slots
        .iter()
        .flat_map(|s| &s.assignments)
        .chain(&plan.pinned)
        .filter(|a| a.job == job)
        .fold(CpuSet::new(), |all, a| all.union(&a.cpus))
}
