//! How a job is described to the policy and shown: the flags `submit` and `attach` share.

use anyhow::Context as _;
use cosched_core::{JobHints, JobKind};
use std::collections::BTreeMap;

/// How a job is described to the policy and shown, for `submit` and `attach` alike.
#[derive(clap::Args, Debug)]
pub struct JobArgs {
    /// Job name, shown by `jobs` [default: the program's (or script's) file name]
    #[arg(short = 'J', long, visible_alias = "job-name")]
    pub name: Option<String>,
    /// Thread bounds, MIN:MAX (or N for both)
    #[arg(long, value_name = "MIN:MAX")]
    threads: Option<String>,
    /// rigid, moldable or malleable. Malleable, the default here as in workload files and `cosched
    /// gen`, follows the advised thread count at its next parallel region, as the preload library
    /// makes OpenMP programs do; a job that does not follow advice is held to the threads it runs
    #[arg(long, value_name = "KIND", default_value = "malleable")]
    kind: String,
    /// Share of CPU time relative to other jobs
    #[arg(long, default_value_t = 1.0)]
    pub weight: f64,
    /// Never freeze this job (it is pinned to its CPUs instead)
    #[arg(long)]
    pub no_coschedule: bool,
    /// Hints for policies, KEY=VALUE[,KEY=VALUE…] (runtime, footprint_mb, mpki, sync), e.g.
    /// --hint runtime=60,mpki=2
    #[arg(long, value_name = "KEY=VALUE,...")]
    hint: Vec<String>,
    /// Labels shown with the job, KEY=VALUE[,KEY=VALUE…] (e.g. slurm_job=42,slurm_step=0)
    #[arg(long, value_name = "KEY=VALUE,...")]
    label: Vec<String>,
}

impl JobArgs {
    pub fn threads(&self) -> anyhow::Result<(Option<u32>, Option<u32>)> {
        Ok(threads(&self.threads)?.map_or((None, None), |(min, max)| (Some(min), Some(max))))
    }

    pub fn kind(&self) -> anyhow::Result<JobKind> {
        kind(&self.kind)
    }

    pub fn hints(&self) -> anyhow::Result<JobHints> {
        hints(&self.hint)
    }

    pub fn labels(&self) -> anyhow::Result<Labels> {
        let mut labels = BTreeMap::new();
        for pair in self.label.iter().flat_map(|l| l.split(',')) {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("--label {pair}: write KEY=VALUE"))?;
            labels.insert(key.to_string(), value.to_string());
        }
        Ok(labels)
    }
}

/// A job's labels, KEY to VALUE (`--label KEY=VALUE`).
pub type Labels = BTreeMap<String, String>;

fn threads(text: &Option<String>) -> anyhow::Result<Option<(u32, u32)>> {
    let Some(text) = text else { return Ok(None) };
    let parse = |s: &str| {
        s.parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .with_context(|| format!("--threads {text}: {s:?} is not a positive whole number"))
    };
    let (min, max) = match text.split_once(':') {
        Some((min, max)) => (parse(min)?, parse(max)?),
        None => (parse(text)?, parse(text)?),
    };
    anyhow::ensure!(min <= max, "--threads {text}: MIN must not exceed MAX");
    Ok(Some((min, max)))
}

fn kind(text: &str) -> anyhow::Result<JobKind> {
    serde_json::from_value(serde_json::Value::String(text.into()))
        .map_err(|_| anyhow::anyhow!("--kind {text}: use rigid, moldable or malleable"))
}

fn hints(pairs: &[String]) -> anyhow::Result<JobHints> {
    let mut map = serde_json::Map::new();
    for pair in pairs.iter().flat_map(|p| p.split(',')) {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--hint {pair}: write KEY=VALUE"))?;
        let value = value
            .parse::<f64>()
            .map(serde_json::Value::from)
            .unwrap_or_else(|_| serde_json::Value::String(value.into()));
        map.insert(key.into(), value);
    }
    serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| {
        anyhow::anyhow!("--hint: {e}; keys are runtime, footprint_mb, mpki, sync (spin|block|none)")
    })
}
