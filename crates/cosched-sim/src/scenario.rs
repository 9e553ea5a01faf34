//! Scenario files (`scenarios/README.md`) and the runner behind `cosched sim`: every policy × every
//! seed on identical workloads, each run summarised by `cosched_core::metrics`. A scenario gives its
//! jobs as a workload file, a `[generator]`, several `[[set]]`s of generated workloads (one table each),
//! or a `[sweep]` (`crate::sweep`).

use crate::engine::{simulate_into, SimError, SimJob, SimOptions, SimStats};
use crate::generate::{GenerateError, Poisson};
use crate::jobs::{self, JobsError};
use crate::model::{Effects, Mode, ModelParams};
use crate::sink::{JsonLinesSink, SummarySink, TraceSink};
use crate::sweep::Sweep;
use cosched_core::metrics::RunSummary;
use cosched_core::names::file_name_part;
use cosched_core::topology::presets;
use cosched_core::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The policy every makespan is compared with (TACO Table 4: BP = 100%).
pub const REFERENCE_POLICY: &str = "bp";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub scenario: ScenarioInfo,
    /// Jobs drawn by the Poisson generator, one workload per seed.
    #[serde(default)]
    pub generator: Option<Poisson>,
    /// Several generated workload sets, each its own table (TACO Table 3's sets A–D).
    #[serde(default, rename = "set")]
    pub sets: Vec<WorkloadSet>,
    #[serde(default)]
    pub sweep: Option<Sweep>,
    #[serde(default)]
    pub model: ModelConfig,
    #[serde(default)]
    pub paper: Option<PaperFigures>,
}

/// `[[set]]`: one set of generated workloads and the paper's figures for it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSet {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub generator: Poisson,
    #[serde(default)]
    pub paper: Option<PaperFigures>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioInfo {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A preset name or a synthetic description (as `--machine`).
    pub machine: String,
    pub policies: Vec<String>,
    /// Number of seeds, counted up from the generator's `seed`.
    #[serde(default = "one")]
    pub seeds: u64,
    /// A workload file, relative to the scenario file (instead of `[generator]`).
    #[serde(default)]
    pub workload: Option<PathBuf>,
}

fn one() -> u64 {
    1
}

/// `[model]`: the simulator's mode, effect switches and constants.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    pub mode: Mode,
    pub effects: Effects,
    pub params: ModelParams,
    /// A closed experiment: jobs run again until each has completed this many runs (`SimOptions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_runs: Option<std::num::NonZeroU32>,
}

/// `[paper]`: published figures to print next to the simulated ones, per policy name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaperFigures {
    /// Where the figures come from: authors, short title, venue, and the table or figure.
    pub source: String,
    /// What the paper reports in words, where its figures are plots without numbers.
    pub finding: String,
    /// Makespan, seconds (Scalpel Fig. 4, Table III).
    pub makespan_s: BTreeMap<String, f64>,
    pub makespan_vs_bp: BTreeMap<String, f64>,
    pub mean_slowdown: BTreeMap<String, f64>,
    pub antt: BTreeMap<String, f64>,
    pub reconfigurations: BTreeMap<String, f64>,
    /// LLC miss rate as a fraction (Scalpel: L3 misses per L3 reference, measured with perf).
    pub llc_miss_rate: BTreeMap<String, f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error(transparent)]
    Jobs(#[from] JobsError),
    #[error("{0}")]
    Generate(#[from] GenerateError),
    #[error("{policy} on {workload}: {source}")]
    Sim {
        policy: String,
        workload: String,
        source: Box<SimError>,
    },
    #[error("cannot write trace {path}: {source}")]
    Trace {
        path: String,
        source: std::io::Error,
    },
}

/// True when a TOML text is a scenario (has a `[scenario]` table) rather than a workload.
pub fn is_scenario(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "[scenario]")
}

impl ScenarioFile {
    pub fn load(path: &Path) -> Result<ScenarioFile, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let invalid = |message: String| ScenarioError::Invalid {
            path: path.display().to_string(),
            message,
        };
        let mut file: ScenarioFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
            invalid(match line {
                Some(line) => format!("line {line}: {}", e.message().trim()),
                None => e.message().trim().to_string(),
            })
        })?;
        let sources = [
            file.scenario.workload.is_some(),
            file.generator.is_some(),
            !file.sets.is_empty(),
            file.sweep.is_some(),
        ];
        match sources.iter().filter(|given| **given).count() {
            1 => {}
            0 => return Err(invalid(
                "no jobs: add `workload = FILE` to [scenario], a [generator] table (jobs, rate_per_min, mix, seed), [[set]] tables or a [sweep] table".into(),
            )),
            _ => return Err(invalid(
                "give only one of `workload = FILE` in [scenario], [generator], [[set]] and [sweep]".into(),
            )),
        }
        if let Some(workload) = &mut file.scenario.workload {
            if workload.is_relative() {
                *workload = path.parent().unwrap_or(Path::new(".")).join(&*workload);
            }
        }
        for policy in &file.scenario.policies {
            cosched_policies::create(policy).map_err(|e| invalid(format!("policies: {e}")))?;
        }
        if let Some(sweep) = &file.sweep {
            let cpus = file
                .topology()
                .map_err(|e| invalid(format!("machine: {e}")))?
                .num_cpus();
            sweep
                .validate(&file.scenario.policies, cpus)
                .map_err(invalid)?;
        }
        Ok(file)
    }

    pub fn topology(&self) -> Result<Topology, cosched_core::TopologyError> {
        presets::machine(&self.scenario.machine)
    }
}

/// One workload to replay under every policy.
#[derive(Debug, Clone)]
pub struct Instance {
    pub name: String,
    pub seed: Option<u64>,
    pub jobs: Vec<SimJob>,
}

/// Generated workloads for `seeds` consecutive seeds starting at the generator's own.
pub fn generated_instances(
    generator: &Poisson,
    seeds: u64,
    cpus: usize,
) -> Result<Vec<Instance>, ScenarioError> {
    (0..seeds.max(1))
        .map(|k| {
            let poisson = Poisson {
                seed: generator.seed + k,
                ..generator.clone()
            };
            let workload = poisson.generate()?;
            let jobs = jobs::sim_jobs(&workload, cpus, &workload.info.name, None)?;
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

/// Runs every policy on every instance. When the reference policy (BP) is not among `policies` it is run
/// too, so that makespans can be given relative to it. `progress` hears (runs done, runs in all).
pub fn run_all(
    topology: &Topology,
    instances: &[Instance],
    policies: &[String],
    model: &ModelConfig,
    trace_dir: Option<&Path>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<RunResult>, ScenarioError> {
    let all = with_reference(policies);
    let total = all.len() * instances.len();
    let mut results = Vec::with_capacity(total);
    for instance in instances {
        for policy in &all {
            results.push(run_one(topology, instance, policy, model, trace_dir)?);
            progress(results.len(), total);
        }
    }
    Ok(results)
}

/// `policies`, followed by the reference policy when they lack it.
fn with_reference(policies: &[String]) -> Vec<String> {
    let mut all = policies.to_vec();
    if !all.iter().any(|p| p == REFERENCE_POLICY) {
        all.push(REFERENCE_POLICY.to_string());
    }
    all
}

/// One policy on one instance, its trace kept in `trace_dir` when given.
pub fn run_one(
    topology: &Topology,
    instance: &Instance,
    policy_name: &str,
    model: &ModelConfig,
    trace_dir: Option<&Path>,
) -> Result<RunResult, ScenarioError> {
    let mut policy = cosched_policies::create(policy_name).map_err(|e| ScenarioError::Invalid {
        path: "--policy".into(),
        message: e.to_string(),
    })?;
    let options = SimOptions {
        mode: model.mode,
        effects: model.effects,
        params: model.params.clone(),
        workload: instance.name.clone(),
        seed: instance.seed,
        min_runs: model.min_runs,
    };
    let mut file = match trace_dir {
        Some(dir) => Some(TraceFile::create(dir, &instance.name, policy_name)?),
        None => None,
    };
    let mut sink = SummarySink::new(file.as_mut().map(|f| &mut f.sink as &mut dyn TraceSink));
    let stats = simulate_into(
        topology,
        &instance.jobs,
        policy.as_mut(),
        &options,
        &mut sink,
    )
    .map_err(|source| ScenarioError::Sim {
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

/// A trace file being written, `DIR/WORKLOAD-POLICY.jsonl`.
struct TraceFile {
    path: PathBuf,
    sink: JsonLinesSink<std::io::BufWriter<std::fs::File>>,
}

impl TraceFile {
    fn create(dir: &Path, workload: &str, policy: &str) -> Result<TraceFile, ScenarioError> {
        let path = dir.join(format!(
            "{}-{}.jsonl",
            file_name_part(workload),
            file_name_part(policy)
        ));
        let file = std::fs::create_dir_all(dir).and_then(|()| std::fs::File::create(&path));
        match file {
            Ok(file) => Ok(TraceFile {
                sink: JsonLinesSink::new(std::io::BufWriter::new(file)),
                path,
            }),
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
    trace_dir: Option<&Path>,
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
                trace_dir,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_scenarios_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                ScenarioFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let table4 = ScenarioFile::load(&dir.join("taco-table4.toml")).unwrap();
        let names: Vec<&str> = table4.sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "C", "D"]);
        assert!(table4.sets.iter().all(|s| s.paper.is_some()));
        assert_eq!(table4.topology().unwrap().num_cpus(), 24);
    }

    fn load_text(text: &str) -> String {
        let dir = std::env::temp_dir().join(format!("cosched-scenario-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.toml");
        std::fs::write(&path, text).unwrap();
        ScenarioFile::load(&path).unwrap_err().to_string()
    }

    #[test]
    fn mistakes_name_the_line_or_the_fix() {
        let head = "[scenario]\nname = \"x\"\nmachine = \"core:4\"\npolicies = [\"bp\"]\n";
        let err = load_text(&format!("{head}seeds = \"many\"\n[generator]\njobs = 1\n"));
        assert!(err.contains("line 5"), "{err}");
        let err = load_text(head);
        assert!(
            err.contains("[generator]") && err.contains("[sweep]"),
            "{err}"
        );
        let generator = "[generator]\njobs = 4\nrate_per_min = 2.0\nmix = [\"nas\"]\n";
        let err = load_text(&format!(
            "{}{generator}",
            head.replace("\"bp\"", "\"nope\"")
        ));
        assert!(err.contains("nope") && err.contains("bp"), "{err}");
    }
}
