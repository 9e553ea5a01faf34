//! Replay scenarios: a TOML file that gives `cosched replay` its trace and options, and the
//! published figure it reproduces (`scenarios/README.md`, "Replay scenarios").

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A replay scenario as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    pub replay: Setup,
    pub paper: Option<PaperFigure>,
}

/// The replay's options; those left out take `cosched replay`'s defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The SWF log, relative to the scenario file.
    pub trace: PathBuf,
    pub machine: Option<String>,
    pub batch: Option<String>,
    #[serde(default)]
    pub node_policy: Vec<String>,
    pub mpl: Option<u32>,
    pub slots: Option<String>,
    pub mix: Option<String>,
    pub classes_from: Option<String>,
    pub seed: Option<u64>,
    pub admission: Option<String>,
    /// Submit times multiplied by this (below 1 compresses the log into a heavier load).
    pub submit_scale: Option<f64>,
    /// Only the log's first so many jobs.
    pub jobs: Option<usize>,
}

/// A paper's headline figure: `metric` under `policy` relative to `baseline`, as a change (−0.07:
/// 7% less).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperFigure {
    /// Authors, title, venue, table or figure.
    pub source: String,
    pub metric: Metric,
    pub policy: String,
    pub baseline: String,
    pub change: f64,
    /// What the paper does not give, or does differently, that the replay assumes.
    #[serde(default)]
    pub note: String,
}

/// A figure of [`super::BatchMetrics`] a paper is compared on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Makespan,
    MeanWait,
    MeanTurnaround,
    MeanBoundedSlowdown,
}

impl Metric {
    pub fn of(self, m: &super::BatchMetrics) -> f64 {
        match self {
            Metric::Makespan => m.makespan,
            Metric::MeanWait => m.mean_wait,
            Metric::MeanTurnaround => m.mean_turnaround,
            Metric::MeanBoundedSlowdown => m.mean_bounded_slowdown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Makespan => "makespan",
            Metric::MeanWait => "mean wait",
            Metric::MeanTurnaround => "mean turnaround",
            Metric::MeanBoundedSlowdown => "mean bounded slowdown",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("cannot read replay scenario {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("replay scenario {path}: {source}")]
    Toml {
        path: String,
        source: Box<toml::de::Error>,
    },
    #[error(
        "replay scenario {path}: submit_scale must be a positive number (0.5 halves every submit \
time), not {value}"
    )]
    SubmitScale { path: String, value: f64 },
}

/// A scenario read, its trace's path made relative to the working directory.
pub fn load(path: &Path) -> Result<StudyFile, StudyError> {
    let text = std::fs::read_to_string(path).map_err(|source| StudyError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut study: StudyFile = toml::from_str(&text).map_err(|source| StudyError::Toml {
        path: path.display().to_string(),
        source: Box::new(source),
    })?;
    if let Some(value) = study
        .replay
        .submit_scale
        .filter(|s| !(s.is_finite() && *s > 0.0))
    {
        return Err(StudyError::SubmitScale {
            path: path.display().to_string(),
            value,
        });
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    study.replay.trace = dir.join(&study.replay.trace);
    Ok(study)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every replay scenario shipped under `scenarios/replay/` parses, with its paper's figure.
    #[test]
    fn shipped_replay_scenarios_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/replay");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".toml") {
                continue;
            }
            let study = load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(study.paper.is_some(), "{name} gives no paper figure");
            assert!(!study.replay.node_policy.is_empty(), "{name}");
            seen += 1;
        }
        assert!(seen >= 4, "{seen} replay scenarios");
    }
}
