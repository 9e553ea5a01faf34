//! One run as the report sees it: its trace, its metrics, and the label that names it in tables and
//! legends.

use crate::ReportError;
use cosched_core::metrics::{summarize, RunSummary};
use cosched_core::plan::Plan;
use cosched_core::trace::{read_trace, Record, TraceLine};
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

pub struct Run {
    /// How the run is named in tables and legends: its policy, unless two runs share one.
    pub label: String,
    /// The trace file it came from, if any.
    pub source: Option<PathBuf>,
    pub lines: Vec<TraceLine>,
    pub summary: RunSummary,
    /// Number of CPUs the run's machine has, from `run_start`.
    pub cpus: usize,
    /// The record of the invocation that made this run, where each run has its own (a daemon's
    /// starts); else the report's metadata stands for every run.
    pub metadata: Option<crate::RunMetadata>,
}

impl Run {
    pub fn new(lines: Vec<TraceLine>, source: Option<PathBuf>) -> Run {
        let summary = summarize(&lines);
        let cpus = lines
            .iter()
            .find_map(|l| match &l.record {
                Record::RunStart { cpus, .. } => Some(*cpus),
                _ => None,
            })
            .unwrap_or(0);
        let label = if summary.policy.is_empty() {
            source
                .as_deref()
                .and_then(file_stem)
                .unwrap_or_else(|| "run".into())
        } else {
            summary.policy.clone()
        };
        Run {
            label,
            source,
            lines,
            summary,
            cpus,
            metadata: None,
        }
    }

    pub fn load(path: &Path) -> Result<Run, ReportError> {
        let file = File::open(path).map_err(|e| ReportError::io(path, e))?;
        let lines = read_trace(BufReader::new(file), &path.display().to_string())?;
        if lines.is_empty() {
            return Err(ReportError::EmptyTrace(path.to_path_buf()));
        }
        Ok(Run::new(lines, Some(path.to_path_buf())))
    }

    /// `real` or `sim`, as the trace spells it.
    pub fn executor_name(&self) -> Option<String> {
        let value = serde_json::to_value(self.summary.executor?).ok()?;
        value.as_str().map(str::to_string)
    }

    /// Time of the last record: the end of every time axis.
    pub fn end_time(&self) -> f64 {
        self.lines.iter().map(|l| l.t).fold(0.0, f64::max)
    }

    /// Each plan with the interval during which it held.
    pub fn plan_periods(&self) -> Vec<PlanPeriod<'_>> {
        let plans: Vec<(f64, &Plan)> = self
            .lines
            .iter()
            .filter_map(|l| match &l.record {
                Record::Plan { plan } => Some((l.t, plan)),
                _ => None,
            })
            .collect();
        let end = self.end_time();
        plans
            .iter()
            .enumerate()
            .map(|(i, (from, plan))| PlanPeriod {
                from: *from,
                to: plans.get(i + 1).map_or(end, |(t, _)| *t),
                plan,
            })
            .filter(|p| p.to > p.from)
            .collect()
    }

    /// Number of started, unfinished jobs as a step function: (time, count from then on).
    pub fn running_jobs(&self) -> Vec<(f64, usize)> {
        let mut deltas: Vec<(f64, i64)> = Vec::new();
        for job in &self.summary.jobs {
            if let Some(start) = job.start {
                deltas.push((start, 1));
                if let Some(finish) = job.finish {
                    deltas.push((finish, -1));
                }
            }
        }
        deltas.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut steps = vec![(0.0, 0)];
        let mut count = 0i64;
        for (t, delta) in deltas {
            count += delta;
            match steps.last_mut() {
                Some(last) if last.0 == t => last.1 = count.max(0) as usize,
                _ => steps.push((t, count.max(0) as usize)),
            }
        }
        steps
    }
}

pub struct PlanPeriod<'a> {
    pub from: f64,
    pub to: f64,
    pub plan: &'a Plan,
}

fn file_stem(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    let stem = name
        .trim_end_matches(".jsonl")
        .trim_end_matches(".trace")
        .to_string();
    Some(stem)
}

/// The workload (with its seed) and machine a run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Experiment {
    pub workload: String,
    pub seed: Option<u64>,
    pub machine: String,
}

impl Experiment {
    fn of(run: &Run) -> Experiment {
        let s = &run.summary;
        Experiment {
            workload: s.workload.clone(),
            seed: s.seed,
            machine: s.machine.clone(),
        }
    }
}

impl fmt::Display for Experiment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seed {
            Some(seed) => write!(f, "{} seed {seed} on {}", self.workload, self.machine),
            None => write!(f, "{} on {}", self.workload, self.machine),
        }
    }
}

/// Runs of different workloads or machines must not share a table unnoticed: refused, naming the
/// experiments, unless `mixed`, in which case every label says its workload and machine.
pub fn label_experiments(runs: &mut [Run], mixed: bool) -> Result<(), ReportError> {
    let mut experiments: Vec<Experiment> = runs.iter().map(Experiment::of).collect();
    experiments.sort();
    experiments.dedup();
    if experiments.len() < 2 {
        return Ok(());
    }
    if !mixed {
        return Err(ReportError::MixedExperiments { experiments });
    }
    for run in runs.iter_mut() {
        run.label = format!("{} [{}]", run.label, Experiment::of(run));
    }
    Ok(())
}

/// Gives runs that share a policy distinct labels: their file names, else a counter.
pub fn disambiguate_labels(runs: &mut [Run]) {
    for use_file_names in [true, false] {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for run in runs.iter() {
            *counts.entry(run.label.clone()).or_default() += 1;
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for run in runs.iter_mut() {
            if counts[&run.label] < 2 {
                continue;
            }
            let n = seen.entry(run.label.clone()).or_default();
            *n += 1;
            let stem = run.source.as_deref().and_then(file_stem);
            run.label = match stem {
                Some(stem) if use_file_names && stem != run.label => {
                    format!("{} ({stem})", run.summary.policy)
                }
                _ => format!("{} #{n}", run.label),
            };
        }
    }
}
