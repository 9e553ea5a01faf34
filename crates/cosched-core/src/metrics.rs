//! Metrics computed from a trace, the same for real and simulated runs.
//!
//! Definitions (sources in parentheses):
//! - response = finish − arrival; slowdown = response / isolated time (TACO §4);
//! - bounded slowdown = max(1, response / max(isolated, 10 s)), which keeps very short jobs from
//!   dominating the mean (Feitelson's usual bound);
//! - NTT = execution time shared / time alone, with execution time = finish − start; ANTT = mean NTT;
//!   STP = Σ 1/NTT (CaSAS §2, after Eyerman & Eeckhout);
//! - fairness = Jain's index over the jobs' progress rates 1/NTT;
//! - reconfigurations = changes of a started job's CPU set; migrations = those changes that take away
//!   CPUs the job had (its threads must move); thread changes = `threads` records.
//!
//! Failed jobs are counted, and left out of the time-based means.

use crate::cpuset::CpuSet;
use crate::job::{JobId, JobSpec};
use crate::plan_change::Placements;
use crate::trace::{ExecutorKind, ExitStatus, Record, TraceLine};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// Floor of the bounded slowdown's denominator, seconds.
pub const BOUNDED_SLOWDOWN_FLOOR: f64 = 10.0;

/// The median of repeated measurements of one thing, with their range: what `calibrate` keeps when a
/// machine's speed may move between runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// Finite samples it was taken from.
    pub samples: usize,
}

impl Spread {
    /// Of the finite `samples`; `None` if there are none.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut sorted: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            low: sorted[0],
            high: sorted[n - 1],
            samples: n,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobResult {
    pub id: JobId,
    pub name: String,
    pub arrival: f64,
    pub start: Option<f64>,
    pub finish: Option<f64>,
    pub failed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub isolated: Option<f64>,
    pub response: Option<f64>,
    pub slowdown: Option<f64>,
    pub bounded_slowdown: Option<f64>,
    pub ntt: Option<f64>,
    pub reconfigurations: u32,
    pub migrations: u32,
    pub thread_changes: u32,
    /// CPU seconds reported by samples.
    pub cpu_seconds: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSummary {
    pub policy: String,
    pub machine: String,
    pub workload: String,
    pub executor: Option<ExecutorKind>,
    pub mechanism: Option<String>,
    pub seed: Option<u64>,
    pub jobs: Vec<JobResult>,
    pub makespan: Option<f64>,
    pub mean_slowdown: Option<f64>,
    pub max_slowdown: Option<f64>,
    pub mean_bounded_slowdown: Option<f64>,
    pub antt: Option<f64>,
    pub stp: Option<f64>,
    pub fairness: Option<f64>,
    pub reconfigurations: u32,
    pub migrations: u32,
    pub thread_changes: u32,
    pub failed: usize,
    /// Jobs that never finished (the run was interrupted).
    pub unfinished: usize,
    pub overhead_seconds: Option<f64>,
}

#[derive(Default)]
struct JobTrack {
    spec: Option<JobSpec>,
    isolated: Option<f64>,
    start: Option<f64>,
    finish: Option<f64>,
    failed: bool,
    error: Option<String>,
    cpus: Option<CpuSet>,
    reconfigurations: u32,
    migrations: u32,
    thread_changes: u32,
    cpu_seconds: f64,
}

pub fn summarize(trace: &[TraceLine]) -> RunSummary {
    let mut summarizer = Summarizer::default();
    for line in trace {
        summarizer.add(line);
    }
    summarizer.finish()
}

/// Computes a [`RunSummary`] from trace lines as they come, keeping only the jobs still running and
/// one [`JobResult`] per finished job, so that very long runs need not keep their trace.
#[derive(Default)]
pub struct Summarizer {
    summary: RunSummary,
    open: HashMap<JobId, JobTrack>,
    done: BTreeMap<JobId, JobResult>,
    placements: Placements,
}

impl Summarizer {
    pub fn add(&mut self, line: &TraceLine) {
        match &line.record {
            Record::RunStart {
                executor,
                policy,
                machine,
                workload,
                seed,
                mechanism,
                ..
            } => {
                let summary = &mut self.summary;
                summary.policy = policy.clone();
                summary.machine = machine.clone();
                summary.workload = workload.clone();
                summary.executor = Some(*executor);
                summary.seed = *seed;
                summary.mechanism = mechanism.clone();
            }
            Record::Arrival { job, isolated } => {
                let track = self.open.entry(job.id).or_default();
                track.spec = Some(job.clone());
                track.isolated = *isolated;
            }
            Record::Plan { plan } => {
                self.placements.replace(plan);
                let jobs: Vec<JobId> = self.placements.jobs().collect();
                self.note_placements(jobs);
            }
            Record::PlanChange(change) => {
                self.placements.apply(change);
                let mut touched: Vec<JobId> = change.jobs().collect();
                touched.sort_unstable();
                touched.dedup();
                self.note_placements(touched);
            }
            Record::Start { job, .. } => {
                let track = self.open.entry(*job).or_default();
                track.start.get_or_insert(line.t);
            }
            Record::Threads { job, .. } => self.open.entry(*job).or_default().thread_changes += 1,
            Record::Sample(sample) => match self.done.get_mut(&sample.job) {
                Some(result) => result.cpu_seconds += sample.cpu_seconds,
                None => self.open.entry(sample.job).or_default().cpu_seconds += sample.cpu_seconds,
            },
            Record::Finish {
                job, status, error, ..
            } => {
                let mut track = self.open.remove(job).unwrap_or_default();
                track.finish = Some(line.t);
                track.failed = *status == ExitStatus::Failed;
                track.error = error.clone();
                if let Some(result) = track.result(*job) {
                    self.done.insert(*job, result);
                }
            }
            Record::RunEnd {
                overhead_seconds, ..
            } => self.summary.overhead_seconds = *overhead_seconds,
        }
    }

    /// Counts the reconfigurations of `jobs` under the plan now in force.
    fn note_placements(&mut self, jobs: Vec<JobId>) {
        for id in jobs {
            if let (Some(track), Some(cpus)) = (self.open.get_mut(&id), self.placements.cpus_of(id))
            {
                track.note_cpus(cpus);
            }
        }
    }

    pub fn finish(mut self) -> RunSummary {
        for (id, track) in std::mem::take(&mut self.open) {
            if let Some(result) = track.result(id) {
                self.done.insert(id, result);
            }
        }
        self.summary.jobs = self.done.into_values().collect();
        summarize_jobs(&mut self.summary);
        self.summary
    }
}

impl JobTrack {
    /// A frozen job (empty set) keeps its CPUs for counting; only a running job's changes count, since
    /// a pending job's placement can change freely before it starts.
    fn note_cpus(&mut self, cpus: CpuSet) {
        if cpus.is_empty() || self.cpus.as_ref() == Some(&cpus) {
            return;
        }
        if let (Some(old), Some(_)) = (&self.cpus, self.start) {
            self.reconfigurations += 1;
            if !old.is_subset(&cpus) {
                self.migrations += 1;
            }
        }
        self.cpus = Some(cpus);
    }

    fn result(self, id: JobId) -> Option<JobResult> {
        let spec = self.spec?;
        let response = self.finish.map(|f| f - spec.arrival);
        let ok = !self.failed;
        let isolated = self.isolated.filter(|t| *t > 0.0);
        let slowdown = match (response, isolated) {
            (Some(r), Some(i)) if ok => Some(r / i),
            _ => None,
        };
        let bounded_slowdown = match (response, isolated) {
            (Some(r), Some(i)) if ok => Some((r / i.max(BOUNDED_SLOWDOWN_FLOOR)).max(1.0)),
            _ => None,
        };
        let ntt = match (self.start, self.finish, isolated) {
            (Some(s), Some(f), Some(i)) if ok => Some((f - s) / i),
            _ => None,
        };
        Some(JobResult {
            id,
            name: spec.name,
            arrival: spec.arrival,
            start: self.start,
            finish: self.finish,
            failed: self.failed,
            error: self.error,
            isolated,
            response,
            slowdown,
            bounded_slowdown,
            ntt,
            reconfigurations: self.reconfigurations,
            migrations: self.migrations,
            thread_changes: self.thread_changes,
            cpu_seconds: self.cpu_seconds,
        })
    }
}

fn summarize_jobs(summary: &mut RunSummary) {
    let jobs = &summary.jobs;
    summary.failed = jobs.iter().filter(|j| j.failed).count();
    summary.unfinished = jobs.iter().filter(|j| j.finish.is_none()).count();
    summary.reconfigurations = jobs.iter().map(|j| j.reconfigurations).sum();
    summary.migrations = jobs.iter().map(|j| j.migrations).sum();
    summary.thread_changes = jobs.iter().map(|j| j.thread_changes).sum();
    let first_arrival = jobs.iter().map(|j| j.arrival).reduce(f64::min);
    let last_finish = jobs.iter().filter_map(|j| j.finish).reduce(f64::max);
    summary.makespan = match (first_arrival, last_finish) {
        (Some(a), Some(f)) if summary.unfinished == 0 => Some(f - a),
        _ => None,
    };
    let slowdowns: Vec<f64> = jobs.iter().filter_map(|j| j.slowdown).collect();
    summary.mean_slowdown = mean(&slowdowns);
    summary.max_slowdown = slowdowns.iter().copied().reduce(f64::max);
    summary.mean_bounded_slowdown = mean(
        &jobs
            .iter()
            .filter_map(|j| j.bounded_slowdown)
            .collect::<Vec<_>>(),
    );
    let ntts: Vec<f64> = jobs
        .iter()
        .filter_map(|j| j.ntt)
        .filter(|n| *n > 0.0)
        .collect();
    summary.antt = mean(&ntts);
    let progress: Vec<f64> = ntts.iter().map(|n| 1.0 / n).collect();
    summary.stp = (!progress.is_empty()).then(|| progress.iter().sum());
    summary.fairness = jain(&progress);
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Jain's fairness index: 1 when all values are equal, 1/n when one value takes everything.
pub fn jain(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Assignment, Plan};

    fn spec(id: u32, arrival: f64) -> JobSpec {
        crate::test_util::job(id)
            .arrival(arrival)
            .max_threads(2)
            .spec()
    }

    fn line(t: f64, record: Record) -> TraceLine {
        TraceLine { t, record }
    }

    fn plan(places: &[(u32, &str)]) -> Record {
        Record::Plan {
            plan: Plan::space_sharing(
                places
                    .iter()
                    .map(|(id, cpus)| Assignment {
                        job: JobId(*id),
                        cpus: cpus.parse().unwrap(),
                    })
                    .collect(),
            ),
        }
    }

    fn finish(id: u32, status: ExitStatus) -> Record {
        Record::Finish {
            job: JobId(id),
            status,
            exit_code: None,
            error: None,
        }
    }

    /// Two jobs of 10 s alone that share the machine and both take 20 s; a third one fails.
    fn shared_pair() -> Vec<TraceLine> {
        let start = |id| Record::Start {
            job: JobId(id),
            threads: 2,
            pid: None,
        };
        vec![
            line(
                0.0,
                Record::Arrival {
                    job: spec(0, 0.0),
                    isolated: Some(10.0),
                },
            ),
            line(0.0, start(0)),
            line(0.0, plan(&[(0, "0-1")])),
            line(
                0.0,
                Record::Arrival {
                    job: spec(1, 0.0),
                    isolated: Some(10.0),
                },
            ),
            line(0.0, start(1)),
            line(0.0, plan(&[(0, "0"), (1, "1")])),
            line(
                1.0,
                Record::Arrival {
                    job: spec(2, 1.0),
                    isolated: Some(5.0),
                },
            ),
            line(1.0, finish(2, ExitStatus::Failed)),
            line(20.0, finish(0, ExitStatus::Ok)),
            line(20.0, plan(&[(1, "0-1")])),
            line(20.0, finish(1, ExitStatus::Ok)),
        ]
    }

    #[test]
    fn shared_pair_has_slowdown_two_and_one_failure() {
        let summary = summarize(&shared_pair());
        assert_eq!(summary.makespan, Some(20.0));
        assert_eq!(summary.mean_slowdown, Some(2.0));
        assert_eq!(summary.antt, Some(2.0));
        assert_eq!(summary.stp, Some(1.0));
        assert_eq!(summary.fairness, Some(1.0));
        assert_eq!(summary.failed, 1);
        assert_eq!(summary.jobs[2].slowdown, None);
    }

    #[test]
    fn shrinking_counts_as_migration_and_growing_does_not() {
        let summary = summarize(&shared_pair());
        // job 0: 0-1 → 0 (shrink, lost CPU 1: a migration); job 1: 1 → 0-1 (grow only)
        assert_eq!(summary.jobs[0].reconfigurations, 1);
        assert_eq!(summary.jobs[0].migrations, 1);
        assert_eq!(summary.jobs[1].reconfigurations, 1);
        assert_eq!(summary.jobs[1].migrations, 0);
    }

    #[test]
    fn unfinished_run_has_no_makespan() {
        let mut trace = shared_pair();
        trace.truncate(8);
        let summary = summarize(&trace);
        assert_eq!(summary.unfinished, 2);
        assert_eq!(summary.makespan, None);
    }

    #[test]
    fn jain_index_extremes() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
    }
}
