//! Calibration: each job of a workload alone on the whole machine (or on one CPU, to see how it
//! scales here), one after another, giving the isolated times stored by [`crate::isolated`]; repeated
//! rounds give each job its median time ([`median_over_rounds`]).

use crate::executor::{run, RunOptions};
use crate::isolated::{Calibrated, IsolatedTime};
use crate::{Error, Freezer, Placement};
use cosched_core::metrics::Spread;
use cosched_core::trace::ExitStatus;
use cosched_core::workload::{JobEntry, Workload};
use cosched_core::{Assignment, Context, CpuSet, Event, Plan, Policy, Topology};
use std::path::Path;

/// Gives the one job of a calibration run its CPUs.
struct Alone {
    cpus: CpuSet,
}

impl Policy for Alone {
    fn name(&self) -> &str {
        "alone"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let Event::Arrived { job } = event else {
            return None;
        };
        let threads = ctx.job(*job)?.spec.threads_for(self.cpus.len());
        let mut plan = Plan::space_sharing(vec![Assignment {
            job: *job,
            cpus: self.cpus.clone(),
        }]);
        plan.advice.insert(*job, threads);
        Some(plan)
    }
}

/// Runs every job of `workload` alone on `cpus` (the whole machine for isolated times), one after
/// another, with the widest thread count its bounds allow there; each run's trace and output go to
/// `output_dir/<job>/`. `each` is called after every job.
pub fn calibrate(
    workload: &Workload,
    topology: &Topology,
    cpus: &CpuSet,
    output_dir: &Path,
    placement: Option<Placement>,
    freezer: Option<Freezer>,
    each: &mut dyn FnMut(&Calibrated),
) -> Result<Vec<Calibrated>, Error> {
    let mut results = Vec::new();
    for entry in &workload.jobs {
        let alone = Workload {
            info: workload.info.clone(),
            jobs: vec![JobEntry {
                owner: None,
                arrival: 0.0,
                ..entry.clone()
            }],
            dir: workload.dir.clone(),
        };
        let dir = output_dir.join(&entry.name);
        let job_options = RunOptions {
            placement,
            freezer,
            ..RunOptions::new(dir.join("trace.jsonl"), &dir)
        };
        std::fs::create_dir_all(&job_options.output_dir).map_err(|source| Error::Io {
            what: format!("cannot create {}", job_options.output_dir.display()),
            source,
        })?;
        let policy = Alone { cpus: cpus.clone() };
        let report = run(&alone, topology, Box::new(policy), &job_options)?;
        let outcome = &report.jobs[0];
        let result = match (outcome.status.clone(), outcome.started, outcome.finished) {
            (ExitStatus::Ok, Some(start), Some(end)) => Calibrated::Time(IsolatedTime {
                machine: topology.name.clone(),
                cpus: topology.num_cpus(),
                job: entry.name.clone(),
                command: entry.command.clone(),
                threads: outcome.threads,
                seconds: end - start,
            }),
            _ => Calibrated::Failed {
                job: entry.name.clone(),
                error: outcome
                    .error
                    .clone()
                    .or(outcome.exit_code.map(|c| format!("exit code {c}")))
                    .unwrap_or_else(|| "failed".into()),
            },
        };
        each(&result);
        results.push(result);
    }
    Ok(results)
}

/// A job's median time over repeated calibration rounds, with the range of its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeated {
    /// The median run (a failure if the job failed in any round).
    pub result: Calibrated,
    /// Shortest and longest run, seconds.
    pub low: f64,
    pub high: f64,
}

impl Repeated {
    /// Range over median: how far the machine's speed moved between the rounds.
    pub fn spread(&self) -> f64 {
        match &self.result {
            Calibrated::Time(t) if t.seconds > 0.0 => (self.high - self.low) / t.seconds,
            _ => 0.0,
        }
    }
}

/// Each job's median over `rounds` (each the results of one [`calibrate`] pass over the same jobs,
/// in the same order). One run per job is not enough on a virtual machine whose host is shared: on
/// the VM this was written on, memory-bound kernels ran 1.5 times slower for minutes at a time
/// (`docs/simulation-model.md`), and a calibration taken in such a phase mis-sizes every simulated
/// job. A job that failed in any round is reported failed.
pub fn median_over_rounds(rounds: &[Vec<Calibrated>]) -> Vec<Repeated> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|index| {
            let runs: Vec<&Calibrated> = rounds.iter().filter_map(|r| r.get(index)).collect();
            if let Some(failed) = runs.iter().find(|r| matches!(r, Calibrated::Failed { .. })) {
                return Repeated {
                    result: (*failed).clone(),
                    low: 0.0,
                    high: 0.0,
                };
            }
            let times: Vec<&IsolatedTime> = (runs.iter())
                .filter_map(|r| match r {
                    Calibrated::Time(t) => Some(t),
                    Calibrated::Failed { .. } => None,
                })
                .collect();
            let spread = Spread::of(times.iter().map(|t| t.seconds)).expect("a run per round");
            Repeated {
                result: Calibrated::Time(IsolatedTime {
                    seconds: spread.median,
                    ..times[0].clone()
                }),
                low: spread.low,
                high: spread.high,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(job: &str, seconds: f64) -> Calibrated {
        Calibrated::Time(IsolatedTime {
            machine: "vm".into(),
            cpus: 2,
            job: job.into(),
            command: vec![job.into()],
            threads: 2,
            seconds,
        })
    }

    #[test]
    fn each_job_gets_its_median_run_and_its_range() {
        let rounds = vec![
            vec![time("a", 9.3), time("b", 3.0)],
            vec![time("a", 6.1), time("b", 3.2)],
            vec![time("a", 6.5), time("b", 3.1)],
        ];
        let medians = median_over_rounds(&rounds);
        assert_eq!(medians[0].result, time("a", 6.5));
        assert_eq!((medians[0].low, medians[0].high), (6.1, 9.3));
        assert!((medians[0].spread() - 3.2 / 6.5).abs() < 1e-12);
        assert_eq!(medians[1].result, time("b", 3.1));
        // Two rounds: the mean of both.
        let medians = median_over_rounds(&rounds[..2]);
        assert_eq!(medians[1].result, time("b", 3.1));
    }

    #[test]
    fn a_job_that_failed_once_is_failed() {
        let failed = Calibrated::Failed {
            job: "a".into(),
            error: "exit code 1".into(),
        };
        let rounds = vec![
            vec![time("a", 2.0)],
            vec![failed.clone()],
            vec![time("a", 2.0)],
        ];
        assert_eq!(median_over_rounds(&rounds)[0].result, failed);
        assert!(median_over_rounds(&[]).is_empty());
    }
}
