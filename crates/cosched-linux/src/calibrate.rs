//! Calibration: each job of a workload alone on the whole machine (or on one CPU, to see how it
//! scales here), one after another, giving the isolated times stored by [`crate::isolated`].

use crate::executor::{run, RunOptions};
use crate::isolated::{Calibrated, IsolatedTime};
use crate::{Error, Freezer, Placement};
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
