//! Parameter sweeps (`[sweep]` in a scenario file, `scenarios/README.md`): a workload written as a
//! template, one or two axes of values substituted into it, and for every point of the grid the time at
//! which one group of its jobs has finished, under every policy.
//!
//! This is the shape of the gang-scheduling experiments: Frachtenberg & Etsion's BSP programs against
//! stressors (Frachtenberg & Etsion §3.2, a surface over programs × stressors) and Peter et al.'s synchronisation
//! granularity (Peter et al. §3.2, a curve over the interval).

use crate::jobs::{self, Instance, JobsError};
use crate::profile::{self, ProfileError};
use cosched_core::workload::{JobEntry, Workload, WorkloadInfo};
use cosched_core::{JobHints, JobKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// The axis down the table.
    pub rows: Axis,
    /// The axis across the table, for a surface.
    #[serde(default)]
    pub columns: Option<Axis>,
    /// Name of the job group whose last finish is each run's figure.
    pub measure: String,
    /// The policy every other policy's figure is divided by.
    pub baseline: String,
    #[serde(rename = "job")]
    pub jobs: Vec<SweepJob>,
}

/// A parameter and the values it takes; `{name}` in a job's `count` or `profile` is replaced by each.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    pub name: String,
    pub values: Vec<AxisValue>,
}

/// A sweep that cannot run, and what to change.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("[sweep] baseline = {baseline:?} is not among the policies ({policies}); add it to `policies`")]
    BaselineNotListed { baseline: String, policies: String },
    #[error("[sweep] measure = {measure:?} names no [[sweep.job]]; give one of: {groups}")]
    MeasureUnknown { measure: String, groups: String },
    #[error("{text:?}: placeholder {placeholder} names no axis; axes: {axes}")]
    UnknownPlaceholder {
        text: String,
        placeholder: String,
        axes: String,
    },
    #[error("{point}: [[sweep.job]] {group:?}: count = {count:?} is not a whole number ≥ 0")]
    BadCount {
        point: String,
        group: String,
        count: String,
    },
    #[error("[[sweep.job]] {group:?}: threads = 0; give at least 1")]
    NoThreads { group: String },
    #[error("{point}: [[sweep.job]] {group:?}: {source}")]
    Profile {
        point: String,
        group: String,
        source: ProfileError,
    },
    #[error(transparent)]
    Jobs(#[from] JobsError),
}

/// A value as written in the file: a number or a string, substituted as text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum AxisValue {
    Integer(i64),
    Float(f64),
    Text(String),
}

impl AxisValue {
    pub fn text(&self) -> String {
        match self {
            AxisValue::Integer(v) => v.to_string(),
            AxisValue::Float(v) => v.to_string(),
            AxisValue::Text(v) => v.clone(),
        }
    }
}

/// A group of identical rigid jobs, all arriving at time 0, named `NAME-0`, `NAME-1`, ….
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepJob {
    pub name: String,
    /// How many: a number, or text such as `"{parallel}"`.
    pub count: AxisValue,
    pub threads: u32,
    /// A profile string (`docs/workload-format.md`), with `{axis}` placeholders.
    pub profile: String,
}

/// One point of the grid and each policy's figure there (seconds until the measured group finished;
/// None when it did not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointResult {
    pub row: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    pub seconds: BTreeMap<String, Option<f64>>,
}

impl PointResult {
    /// `policy`'s figure over `baseline`'s.
    pub fn ratio(&self, policy: &str, baseline: &str) -> Option<f64> {
        let policy = (*self.seconds.get(policy)?)?;
        let baseline = (*self.seconds.get(baseline)?)?;
        (baseline > 0.0).then(|| policy / baseline)
    }
}

impl Sweep {
    /// Checks everything that can be checked before running: the baseline is a listed policy, the
    /// measured group exists, every placeholder names an axis, and every point gives valid counts and
    /// profiles. The message says what to fix.
    pub fn validate(&self, policies: &[String], cpus: usize) -> Result<(), SweepError> {
        if !policies.contains(&self.baseline) {
            return Err(SweepError::BaselineNotListed {
                baseline: self.baseline.clone(),
                policies: policies.join(", "),
            });
        }
        if !self.jobs.iter().any(|j| j.name == self.measure) {
            return Err(SweepError::MeasureUnknown {
                measure: self.measure.clone(),
                groups: self
                    .jobs
                    .iter()
                    .map(|j| j.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        for (row, column) in self.points() {
            self.instance(&row, column.as_deref(), cpus)?;
        }
        Ok(())
    }

    /// Every (row, column) value pair, rows first.
    pub fn points(&self) -> Vec<(String, Option<String>)> {
        let columns: Vec<Option<String>> = match &self.columns {
            Some(axis) => axis.values.iter().map(|v| Some(v.text())).collect(),
            None => vec![None],
        };
        self.rows
            .values
            .iter()
            .flat_map(|row| columns.iter().map(move |c| (row.text(), c.clone())))
            .collect()
    }

    /// The workload at one point of the grid.
    pub fn instance(
        &self,
        row: &str,
        column: Option<&str>,
        cpus: usize,
    ) -> Result<Instance, SweepError> {
        let mut values = vec![(self.rows.name.as_str(), row)];
        if let (Some(axis), Some(value)) = (&self.columns, column) {
            values.push((axis.name.as_str(), value));
        }
        let substitute = |text: &str| -> Result<String, SweepError> {
            let mut out = text.to_string();
            for (name, value) in &values {
                out = out.replace(&format!("{{{name}}}"), value);
            }
            match out.find('{') {
                Some(at) => {
                    let end = out[at..].find('}').map_or(out.len(), |e| at + e + 1);
                    let axes: Vec<String> =
                        values.iter().map(|(n, _)| format!("{{{n}}}")).collect();
                    Err(SweepError::UnknownPlaceholder {
                        text: text.to_string(),
                        placeholder: out[at..end].to_string(),
                        axes: axes.join(", "),
                    })
                }
                None => Ok(out),
            }
        };
        let name = match column {
            Some(column) => format!("{}={row}-{}={column}", self.rows.name, self.column_name()),
            None => format!("{}={row}", self.rows.name),
        };
        let mut entries = Vec::new();
        for group in &self.jobs {
            let count_text = substitute(&group.count.text())?;
            let count: usize = count_text.parse().map_err(|_| SweepError::BadCount {
                point: name.clone(),
                group: group.name.clone(),
                count: count_text.clone(),
            })?;
            if group.threads == 0 {
                return Err(SweepError::NoThreads {
                    group: group.name.clone(),
                });
            }
            let profile = substitute(&group.profile)?;
            // Policies know how a job synchronises (a hint), as for generated workloads.
            let sync = profile::parse(&profile)
                .map_err(|source| SweepError::Profile {
                    point: name.clone(),
                    group: group.name.clone(),
                    source,
                })?
                .sync;
            entries.extend((0..count).map(|i| JobEntry {
                owner: None,
                name: format!("{}-{i}", group.name),
                arrival: 0.0,
                kind: JobKind::Rigid,
                min_threads: group.threads,
                max_threads: Some(group.threads),
                coschedule: true,
                weight: 1.0,
                command: Vec::new(),
                env: BTreeMap::new(),
                profile: Some(profile.clone()),
                hints: JobHints {
                    sync,
                    ..JobHints::default()
                },
                mem: None,
            }));
        }
        let workload = Workload {
            info: WorkloadInfo {
                name: name.clone(),
                description: String::new(),
            },
            jobs: entries,
            dir: Default::default(),
        };
        let jobs = jobs::sim_jobs(&workload, cpus, &name, None)?;
        Ok(Instance {
            name,
            seed: None,
            jobs,
        })
    }

    fn column_name(&self) -> &str {
        self.columns.as_ref().map_or("", |c| c.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(jobs: &str) -> Sweep {
        toml::from_str(&format!(
            "rows = {{ name = \"k\", values = [1, 2] }}\ncolumns = {{ name = \"w\", values = [\"1e-3\", 0.5] }}\nmeasure = \"p\"\nbaseline = \"gang\"\n{jobs}"
        ))
        .unwrap()
    }

    const GOOD: &str = "[[job]]\nname = \"p\"\ncount = \"{k}\"\nthreads = 2\nprofile = \"amdahl(serial=0, runtime=4, sync=block, sync_interval={w})\"\n";

    #[test]
    fn every_point_gets_its_values_substituted() {
        let sweep = sweep(GOOD);
        let points = sweep.points();
        assert_eq!(points.len(), 4);
        assert_eq!(points[1], ("1".to_string(), Some("0.5".to_string())));
        let instance = sweep.instance("2", Some("1e-3"), 4).unwrap();
        assert_eq!(instance.jobs.len(), 2);
        assert_eq!(instance.jobs[1].spec.name, "p-1");
        assert_eq!(instance.jobs[0].profile.sync_interval, 1e-3);
        assert_eq!(instance.jobs[0].spec.max_threads, 2);
    }

    #[test]
    fn mistakes_are_named_before_anything_runs() {
        let policies = ["ue".to_string(), "gang".to_string()];
        let err = sweep(&GOOD.replace("{w}", "{x}"))
            .validate(&policies, 4)
            .unwrap_err();
        let err = err.to_string();
        assert!(err.contains("{x}") && err.contains("{k}, {w}"), "{err}");
        let err = sweep(&GOOD.replace("\"{k}\"", "\"many\""))
            .validate(&policies, 4)
            .unwrap_err();
        let err = err.to_string();
        assert!(err.contains("count") && err.contains("many"), "{err}");
        let err = sweep(GOOD).validate(&policies[..1], 4).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("baseline") && err.contains("gang"), "{err}");
        let err = sweep(&GOOD.replace("name = \"p\"", "name = \"q\""))
            .validate(&policies, 4)
            .unwrap_err();
        let err = err.to_string();
        assert!(err.contains("measure") && err.contains('q'), "{err}");
    }
}
