//! Poisson workloads as in TACO §4.1: jobs drawn from a mix of profiles, with exponentially distributed
//! inter-arrival times, from a seed, so that every policy replays the identical workload.

use crate::profile::{self, valid_profiles, ProfileError};
use cosched_core::workload::{JobEntry, Workload, WorkloadInfo};
use cosched_core::{JobHints, JobKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Parameters of a generated workload (also the generator part of a scenario file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Poisson {
    pub jobs: usize,
    /// Mean arrivals per minute.
    pub rate_per_min: f64,
    /// Profiles to draw from, uniformly; `nas` and `polybench` stand for every profile of that table.
    pub mix: Vec<String>,
    /// Profiles removed from the mix after expansion (TACO's set C: all except lu.A).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub kind: JobKind,
    #[serde(default)]
    pub seed: u64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GenerateError {
    #[error("the mix is empty after exclusions; name at least one profile ({valid})")]
    EmptyMix { valid: String },
    #[error("jobs must be at least 1 and rate_per_min a positive number (got {jobs} jobs at {rate}/min)")]
    BadRate { jobs: usize, rate: f64 },
    #[error("mix entry {0}")]
    Profile(#[from] ProfileError),
}

impl Poisson {
    /// The profiles actually drawn from, after expanding table names and removing exclusions.
    pub fn expanded_mix(&self) -> Result<Vec<String>, GenerateError> {
        let mut out = Vec::new();
        for entry in &self.mix {
            let table = format!("{}/", entry.trim());
            let members: Vec<String> = valid_profiles()
                .iter()
                .filter(|p| p.starts_with(&table))
                .cloned()
                .collect();
            if members.is_empty() {
                profile::parse(entry)?;
                out.push(entry.trim().to_string());
            } else {
                out.extend(members);
            }
        }
        out.retain(|p| !self.exclude.iter().any(|x| x.trim() == p));
        if out.is_empty() {
            return Err(GenerateError::EmptyMix {
                valid: valid_profiles().join(", "),
            });
        }
        Ok(out)
    }

    pub fn generate(&self) -> Result<Workload, GenerateError> {
        if self.jobs == 0 || !(self.rate_per_min.is_finite() && self.rate_per_min > 0.0) {
            return Err(GenerateError::BadRate {
                jobs: self.jobs,
                rate: self.rate_per_min,
            });
        }
        let mix = self.expanded_mix()?;
        let syncs: Vec<_> = mix
            .iter()
            .map(|p| profile::parse(p).map(|p| p.sync))
            .collect::<Result<_, _>>()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let per_second = self.rate_per_min / 60.0;
        let mut arrival = 0.0;
        let jobs = (0..self.jobs)
            .map(|i| {
                if i > 0 {
                    let u: f64 = rng.gen();
                    arrival += -(1.0 - u).ln() / per_second;
                }
                let pick = rng.gen_range(0..mix.len());
                JobEntry {
                    owner: None,
                    name: format!("{i:03}-{}", short_name(&mix[pick])),
                    // Millisecond resolution keeps the TOML readable and the replay exact.
                    arrival: (arrival * 1000.0).round() / 1000.0,
                    kind: self.kind,
                    min_threads: 1,
                    max_threads: None,
                    coschedule: true,
                    weight: 1.0,
                    command: Vec::new(),
                    env: BTreeMap::new(),
                    profile: Some(mix[pick].clone()),
                    hints: JobHints {
                        sync: syncs[pick],
                        ..JobHints::default()
                    },
                    mem: None,
                }
            })
            .collect();
        Ok(Workload {
            info: WorkloadInfo {
                name: format!(
                    "poisson-{}jobs-{}pm-seed{}",
                    self.jobs, self.rate_per_min, self.seed
                ),
                description: format!(
                    "{} jobs, Poisson arrivals at {}/min, mix: {}, seed {} (cosched gen)",
                    self.jobs,
                    self.rate_per_min,
                    mix.join(" "),
                    self.seed
                ),
            },
            jobs,
            dir: PathBuf::from("."),
        })
    }
}

/// `nas/lu.A` → `lu.A`; `amdahl(serial=0.1, runtime=5)` → `amdahl`.
fn short_name(profile: &str) -> String {
    let base = profile.split('(').next().unwrap_or(profile);
    let short = base.rsplit('/').next().unwrap_or(base).trim();
    short
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> Poisson {
        Poisson {
            jobs: 400,
            rate_per_min: 9.0,
            mix: vec!["nas".into()],
            exclude: vec!["nas/lu.A".into()],
            kind: JobKind::Malleable,
            seed,
        }
    }

    #[test]
    fn same_seed_same_workload_and_toml_round_trip() {
        let a = spec(7).generate().unwrap();
        assert_eq!(a, spec(7).generate().unwrap());
        assert_ne!(a.jobs, spec(8).generate().unwrap().jobs);
        let again = Workload::parse(&a.to_toml(), "gen.toml").unwrap();
        assert_eq!(again.jobs, a.jobs);
    }

    #[test]
    fn arrivals_follow_the_rate_and_exclusions_hold() {
        let w = spec(1).generate().unwrap();
        let last = w.jobs.last().unwrap().arrival;
        let rate = (w.jobs.len() - 1) as f64 / (last / 60.0);
        assert!((rate - 9.0).abs() < 1.5, "{rate}/min");
        assert!(w
            .jobs
            .iter()
            .all(|j| j.profile.as_deref() != Some("nas/lu.A")));
        assert_eq!(spec(1).expanded_mix().unwrap().len(), 7);
    }

    #[test]
    fn bad_mix_is_named() {
        let mut bad = spec(1);
        bad.mix = vec!["nas/zz.Q".into()];
        assert!(
            matches!(bad.generate(), Err(GenerateError::Profile(e)) if e.profile.contains("zz.Q"))
        );
        bad.mix = vec!["nas/lu.A".into()];
        bad.exclude = vec!["nas/lu.A".into()];
        assert!(matches!(
            bad.generate(),
            Err(GenerateError::EmptyMix { .. })
        ));
    }
}
