//! The scenario file format (`scenarios/README.md`): a machine, policies and seeds, and the jobs as a
//! workload file, a `[generator]`, several `[[set]]`s of generated workloads (one table each), or a
//! `[sweep]` (`crate::sweep`). `crate::runner` runs what a scenario describes.

use crate::engine::SimError;
use crate::generate::{GenerateError, Poisson};
use crate::jobs::JobsError;
use crate::model::{Effects, Mode, ModelParams};
use crate::sweep::{Sweep, SweepError};
use cosched_core::topology::presets;
use cosched_core::Topology;
use cosched_core::TopologyError;
use cosched_policies::UnknownPolicy;
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
    /// The machine's memory for jobs (`memory = "64G"`): jobs' `mem` requests running at once fit
    /// in it, as the daemon admits them (`SimOptions`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "cosched_core::memory::size_text"
    )]
    pub memory: Option<u64>,
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
    #[error("{path}: {problem}")]
    Invalid {
        path: String,
        problem: ScenarioProblem,
    },
    #[error("--policy: {0}")]
    Policy(Box<UnknownPolicy>),
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

/// What is wrong in a scenario file; each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioProblem {
    #[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Toml {
        line: Option<usize>,
        message: String,
    },
    #[error("no jobs: add `workload = FILE` to [scenario], a [generator] table (jobs, rate_per_min, mix, seed), [[set]] tables or a [sweep] table")]
    NoJobs,
    #[error("give only one of `workload = FILE` in [scenario], [generator], [[set]] and [sweep]")]
    SeveralSources,
    #[error("policies: {0}")]
    Policy(Box<UnknownPolicy>),
    #[error("machine: {0}")]
    Machine(Box<TopologyError>),
    #[error(transparent)]
    Sweep(Box<SweepError>),
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
        let invalid = |problem: ScenarioProblem| ScenarioError::Invalid {
            path: path.display().to_string(),
            problem,
        };
        let mut file: ScenarioFile = toml::from_str(&text).map_err(|e| {
            invalid(ScenarioProblem::Toml {
                line: e.span().map(|s| text[..s.start].matches('\n').count() + 1),
                message: e.message().trim().to_string(),
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
            0 => return Err(invalid(ScenarioProblem::NoJobs)),
            _ => return Err(invalid(ScenarioProblem::SeveralSources)),
        }
        if let Some(workload) = &mut file.scenario.workload {
            if workload.is_relative() {
                *workload = path.parent().unwrap_or(Path::new(".")).join(&*workload);
            }
        }
        for policy in &file.scenario.policies {
            cosched_policies::create(policy)
                .map_err(|e| invalid(ScenarioProblem::Policy(Box::new(e))))?;
        }
        if let Some(sweep) = &file.sweep {
            let cpus = file
                .topology()
                .map_err(|e| invalid(ScenarioProblem::Machine(Box::new(e))))?
                .num_cpus();
            sweep
                .validate(&file.scenario.policies, cpus)
                .map_err(|e| invalid(ScenarioProblem::Sweep(Box::new(e))))?;
        }
        Ok(file)
    }

    pub fn topology(&self) -> Result<Topology, cosched_core::TopologyError> {
        presets::machine(&self.scenario.machine)
    }
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
        let generator = "[generator]\njobs = 4\nrate_per_min = 2.0\nmix = [\"nas\"]\n";
        let err = load_text(&format!("{head}seeds = \"many\"\n{generator}"));
        assert!(err.contains("line 5"), "{err}");
        let err = load_text(head);
        assert!(
            err.contains("[generator]") && err.contains("[sweep]"),
            "{err}"
        );
        let err = load_text(&format!(
            "{}{generator}",
            head.replace("\"bp\"", "\"nope\"")
        ));
        assert!(err.contains("nope") && err.contains("bp"), "{err}");
    }
}
