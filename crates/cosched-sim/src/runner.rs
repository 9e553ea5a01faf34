//! The runner behind `cosched sim`: every policy × every seed on identical workloads, each run
//! summarised by `cosched_core::metrics`, for the workloads, sets and sweeps a scenario file describes.
//!
//! The chain is one-way: `sweep` (a `[sweep]` table and its points) ← `scenario` (the file format) ←
//! `runner` (running what they describe).

use crate::engine::{simulate_sharing, IsolatedTimes, SimOptions, SimStats};
use crate::generate::Poisson;
use crate::jobs::{self, Instance};
use crate::parallel::in_parallel;
use crate::scenario::{ModelConfig, ScenarioError, ScenarioProblem, WorkloadSet, REFERENCE_POLICY};
use crate::sink::{in_background, JsonLinesSink, SummarySink, TraceLevel, TraceSink};
use crate::sweep::{PointResult, Sweep};
use cosched_core::metrics::RunSummary;
use cosched_core::names::file_name_part;
use cosched_core::trace::TraceLine;
use cosched_core::Topology;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Generated workloads for `seeds` consecutive seeds starting at the generator's own.
pub fn generated_instances(
    generator: &Poisson,
    seeds: u64,
    cpus: usize,
) -> Result<Vec<Instance>, ScenarioError> {
    // One profile per name across the seeds, so that their runs share isolated times.
    let mut parsed = jobs::ParsedProfiles::new();
    (0..seeds.max(1))
        .map(|k| {
            let poisson = Poisson {
                seed: generator.seed + k,
                ..generator.clone()
            };
            let workload = poisson.generate()?;
            let name = &workload.info.name;
            let jobs = jobs::sim_jobs_sharing(&workload, cpus, name, None, &mut parsed)?;
            Ok(Instance {
                name: workload.info.name,
                seed: Some(poisson.seed),
                jobs,
            })
        })
        .collect()
}

/// One simulated run, summarised.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub policy: String,
    pub workload: String,
    pub seed: Option<u64>,
    pub summary: RunSummary,
    pub stats: SimStats,
}

/// Runs every policy on every instance (in parallel, see [`in_parallel`]), results in that order. When
/// the reference policy (BP) is not among `policies` it is run too, so that makespans can be given
/// relative to it. `progress` hears (runs done, runs in all).
pub fn run_all(
    topology: &Topology,
    instances: &[Instance],
    policies: &[String],
    model: &ModelConfig,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<RunResult>, ScenarioError> {
    let all = with_reference(policies);
    run_each(topology, instances, &all, model, trace, progress)
}

/// Runs each of `policies` on every instance, results in that order.
fn run_each(
    topology: &Topology,
    instances: &[Instance],
    policies: &[String],
    model: &ModelConfig,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<RunResult>, ScenarioError> {
    let runs: Vec<(&Instance, &String)> = instances
        .iter()
        .flat_map(|instance| policies.iter().map(move |policy| (instance, policy)))
        .collect();
    let run = |k: usize, isolated: &IsolatedTimes| {
        let (instance, policy) = runs[k];
        run_one(topology, instance, policy, model, trace, isolated)
    };
    in_parallel(runs.len(), |k| k % policies.len(), run, progress)
}

/// `policies`, followed by the reference policy when they lack it.
fn with_reference(policies: &[String]) -> Vec<String> {
    let mut all = policies.to_vec();
    if !all.iter().any(|p| p == REFERENCE_POLICY) {
        all.push(REFERENCE_POLICY.to_string());
    }
    all
}

/// One policy on one instance, its trace kept as `trace` says when given.
fn run_one(
    topology: &Topology,
    instance: &Instance,
    policy_name: &str,
    model: &ModelConfig,
    trace: Option<TraceOut>,
    isolated: &IsolatedTimes,
) -> Result<RunResult, ScenarioError> {
    let mut policy =
        cosched_policies::create(policy_name).map_err(|e| ScenarioError::Policy(Box::new(e)))?;
    let options = SimOptions {
        mode: model.mode,
        effects: model.effects,
        params: model.params.clone(),
        workload: instance.name.clone(),
        seed: instance.seed,
        min_runs: model.min_runs,
        memory: model.memory,
    };
    let mut file = match trace {
        Some(out) => TraceFile::create(out, &instance.name, policy_name)?,
        None => None,
    };
    let trace_path = file.as_ref().map(|f| f.path.display().to_string());
    let mut sink = SummarySink::new(file.as_mut().map(|f| f as &mut (dyn TraceSink + Send)));
    let mut simulate = |sink: &mut dyn TraceSink| {
        simulate_sharing(
            topology,
            &instance.jobs,
            policy.as_mut(),
            &options,
            sink,
            isolated,
        )
    };
    // A run that writes its trace writes it beside the simulation; the summary is cheap enough
    // without a trace.
    let stats = match trace_path {
        Some(path) => in_background(&mut sink, simulate)
            .map_err(|source| ScenarioError::Trace { path, source })?,
        None => simulate(&mut sink),
    };
    let stats = stats.map_err(|source| ScenarioError::Sim {
        policy: policy_name.to_string(),
        workload: instance.name.clone(),
        source: Box::new(source),
    })?;
    let summary = sink.summary.finish();
    if let Some(file) = file {
        file.close()?;
    }
    Ok(RunResult {
        policy: policy_name.to_string(),
        workload: instance.name.clone(),
        seed: instance.seed,
        summary,
        stats,
    })
}

/// Where runs' traces go and how much of them.
#[derive(Clone, Copy, Debug)]
pub struct TraceOut<'a> {
    pub dir: &'a Path,
    pub level: TraceLevel,
}

/// A trace file being written, `DIR/WORKLOAD-POLICY.jsonl`.
struct TraceFile {
    path: PathBuf,
    sink: JsonLinesSink<std::io::BufWriter<std::fs::File>>,
    level: TraceLevel,
}

impl TraceSink for TraceFile {
    fn record(&mut self, line: TraceLine) -> std::io::Result<()> {
        if !self.level.keeps(&line.record) {
            return Ok(());
        }
        self.sink.record(line)
    }
}

impl TraceFile {
    /// The file for one run; none at level `none`.
    fn create(
        out: TraceOut,
        workload: &str,
        policy: &str,
    ) -> Result<Option<TraceFile>, ScenarioError> {
        if out.level == TraceLevel::None {
            return Ok(None);
        }
        let dir = out.dir;
        let path = dir.join(format!(
            "{}-{}.jsonl",
            file_name_part(workload),
            file_name_part(policy)
        ));
        let file = std::fs::create_dir_all(dir).and_then(|()| std::fs::File::create(&path));
        match file {
            Ok(file) => Ok(Some(TraceFile {
                sink: JsonLinesSink::new(std::io::BufWriter::new(file)),
                path,
                level: out.level,
            })),
            Err(source) => Err(ScenarioError::Trace {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    fn close(self) -> Result<(), ScenarioError> {
        std::io::Write::flush(&mut self.sink.into_inner()).map_err(|source| ScenarioError::Trace {
            path: self.path.display().to_string(),
            source,
        })
    }
}

/// One `[[set]]`'s table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetResult {
    pub set: String,
    pub description: String,
    pub workloads: Vec<String>,
    pub rows: Vec<PolicyRow>,
}

/// Runs every set as [`run_all`] does (`seeds` workloads each) and makes one table per set. Workload
/// names start with the set's name, so traces of different sets do not collide.
pub fn run_sets(
    topology: &Topology,
    sets: &[WorkloadSet],
    seeds: u64,
    policies: &[String],
    model: &ModelConfig,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<SetResult>, ScenarioError> {
    let per_set = with_reference(policies).len();
    let total = sets.len() * seeds.max(1) as usize * per_set;
    let mut done_before = 0;
    sets.iter()
        .map(|set| {
            let mut instances = generated_instances(&set.generator, seeds, topology.num_cpus())?;
            for instance in &mut instances {
                instance.name = format!("{}-{}", set.name, instance.name);
            }
            let results = run_all(
                topology,
                &instances,
                policies,
                model,
                trace,
                &mut |done, _| progress(done_before + done, total),
            )?;
            done_before += results.len();
            Ok(SetResult {
                set: set.name.clone(),
                description: set.description.clone(),
                workloads: instances.into_iter().map(|i| i.name).collect(),
                rows: rows(&results, policies),
            })
        })
        .collect()
}

/// One table row: a policy's figures averaged over the workloads (seeds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyRow {
    pub policy: String,
    pub runs: usize,
    /// Mean makespan, seconds.
    pub makespan: Option<f64>,
    /// Mean over workloads of makespan / BP's makespan on the same workload.
    pub makespan_vs_bp: Option<f64>,
    pub mean_slowdown: Option<f64>,
    pub antt: Option<f64>,
    pub reconfigurations: f64,
    /// Mean over workloads of the simulated LLC miss ratio (`SimStats::llc_miss_rate`).
    pub llc_miss_rate: Option<f64>,
    pub unfinished: usize,
}

/// Rows for `policies` (in that order) from the results of [`run_all`].
pub fn rows(results: &[RunResult], policies: &[String]) -> Vec<PolicyRow> {
    let reference: BTreeMap<&str, f64> = results
        .iter()
        .filter(|r| r.policy == REFERENCE_POLICY)
        .filter_map(|r| Some((r.workload.as_str(), r.summary.makespan?)))
        .collect();
    policies
        .iter()
        .map(|policy| {
            let runs: Vec<&RunResult> = results.iter().filter(|r| &r.policy == policy).collect();
            let mean_of = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                let values: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            };
            PolicyRow {
                policy: policy.clone(),
                runs: runs.len(),
                makespan: mean_of(&|r| r.summary.makespan),
                makespan_vs_bp: mean_of(&|r| {
                    Some(r.summary.makespan? / reference.get(r.workload.as_str())?)
                }),
                mean_slowdown: mean_of(&|r| r.summary.mean_slowdown),
                antt: mean_of(&|r| r.summary.antt),
                reconfigurations: mean_of(&|r| Some(f64::from(r.summary.reconfigurations)))
                    .unwrap_or(0.0),
                llc_miss_rate: mean_of(&|r| r.stats.llc_miss_rate),
                unfinished: runs.iter().map(|r| r.summary.unfinished).sum(),
            }
        })
        .collect()
}

/// Runs every policy at every point of the grid. `progress` hears (runs done, runs in all).
pub fn run_sweep(
    topology: &Topology,
    sweep: &Sweep,
    policies: &[String],
    model: &ModelConfig,
    trace: Option<TraceOut>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<PointResult>, ScenarioError> {
    let points = sweep.points();
    let instances = points
        .iter()
        .map(|(row, column)| {
            sweep
                .instance(row, column.as_deref(), topology.num_cpus())
                .map_err(|e| ScenarioError::Invalid {
                    path: "[sweep]".into(),
                    problem: ScenarioProblem::Sweep(Box::new(e)),
                })
        })
        .collect::<Result<Vec<Instance>, ScenarioError>>()?;
    let results = run_each(topology, &instances, policies, model, trace, progress)?;
    let mut results = results.into_iter();
    Ok(points
        .into_iter()
        .map(|(row, column)| {
            let mut seconds = BTreeMap::new();
            for (policy, result) in policies.iter().zip(results.by_ref()) {
                let finishes: Vec<Option<f64>> = result
                    .summary
                    .jobs
                    .iter()
                    .filter(|j| {
                        j.name.rsplit_once('-').map(|(group, _)| group) == Some(&sweep.measure)
                    })
                    .map(|j| j.finish)
                    .collect();
                let last = finishes
                    .iter()
                    .copied()
                    .collect::<Option<Vec<f64>>>()
                    .and_then(|f| f.into_iter().reduce(f64::max));
                seconds.insert(policy.clone(), last);
            }
            PointResult {
                row,
                column,
                seconds,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::topology::presets;
    use cosched_core::JobKind;

    /// The seeds' workloads share their profiles, and so their runs share the isolated times, which
    /// are kept by profile.
    #[test]
    fn seeds_share_their_profiles() {
        let generator = Poisson {
            jobs: 20,
            rate_per_min: 30.0,
            mix: vec!["nas/lu.A".into()],
            exclude: Vec::new(),
            kind: JobKind::Malleable,
            seed: 1,
        };
        let instances = generated_instances(&generator, 3, 24).unwrap();
        let first = &instances[0].jobs[0].profile;
        for instance in &instances {
            assert!(instance
                .jobs
                .iter()
                .all(|job| std::sync::Arc::ptr_eq(&job.profile, first)));
        }
    }

    /// Sharing a workload's isolated times between its policies' runs must not change any run: each
    /// gives the summary it gives alone (its slowdowns divide by those times).
    #[test]
    fn runs_sharing_isolated_times_summarise_as_runs_alone() {
        let machine = presets::preset("taco-opteron8435").unwrap();
        let generator = Poisson {
            jobs: 12,
            rate_per_min: 30.0,
            mix: vec!["nas".into()],
            exclude: Vec::new(),
            kind: JobKind::Malleable,
            seed: 3,
        };
        let instances = generated_instances(&generator, 2, machine.num_cpus()).unwrap();
        let policies: Vec<String> = ["eq", "taco", "gang"].map(String::from).to_vec();
        let model = ModelConfig::default();
        let together = run_all(
            &machine,
            &instances,
            &policies,
            &model,
            None,
            &mut |_, _| {},
        );
        let together = together.unwrap();
        assert_eq!(
            together.len(),
            2 * 4,
            "three policies and BP on two workloads"
        );
        for shared in &together {
            let instance = instances
                .iter()
                .find(|i| i.name == shared.workload && i.seed == shared.seed)
                .unwrap();
            let fresh = IsolatedTimes::default();
            let alone = run_one(&machine, instance, &shared.policy, &model, None, &fresh);
            // Everything but the wall time the run took.
            let without_overhead = |summary: &RunSummary| RunSummary {
                overhead_seconds: None,
                ..summary.clone()
            };
            assert_eq!(
                without_overhead(&shared.summary),
                without_overhead(&alone.unwrap().summary),
                "{}",
                shared.policy
            );
        }
    }
}
