//! From a workload file to the jobs the simulator runs: each job's spec plus its parsed profile.

use crate::engine::SimJob;
use crate::profile::{self, valid_profiles, ProfileError};
use cosched_core::workload::{Workload, WorkloadError};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("{file}: {}job {job:?}: field `profile`: {reason}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Profile {
        file: String,
        line: Option<usize>,
        job: String,
        reason: Box<ProfileFieldError>,
    },
}

/// What is wrong with a job's `profile` field.
#[derive(Debug, thiserror::Error)]
pub enum ProfileFieldError {
    #[error("missing; the simulator needs one, e.g. profile = \"nas/bt.A\"; valid profiles: {}", valid_profiles().join(", "))]
    Missing,
    #[error(transparent)]
    Invalid(#[from] ProfileError),
}

/// One workload's jobs, named, to replay under every policy.
#[derive(Debug, Clone)]
pub struct Instance {
    pub name: String,
    pub seed: Option<u64>,
    pub jobs: Vec<SimJob>,
}

/// Profiles parsed so far, by name. The jobs that name one profile share it, and so do the workloads
/// read with one map: their runs then share the isolated times, which are kept by profile.
pub type ParsedProfiles = HashMap<String, Arc<profile::Profile>>;

/// Turns a workload into simulator jobs on a machine with `cpus` CPUs. `source` names the workload in
/// errors; `text`, when given, is the file's text, so that errors can name the line.
pub fn sim_jobs(
    workload: &Workload,
    cpus: usize,
    source: &str,
    text: Option<&str>,
) -> Result<Vec<SimJob>, JobsError> {
    sim_jobs_sharing(workload, cpus, source, text, &mut ParsedProfiles::new())
}

/// [`sim_jobs`], taking profiles from `parsed` and adding those it parses.
pub fn sim_jobs_sharing(
    workload: &Workload,
    cpus: usize,
    source: &str,
    text: Option<&str>,
    parsed: &mut ParsedProfiles,
) -> Result<Vec<SimJob>, JobsError> {
    let specs = workload.specs(cpus);
    workload
        .jobs
        .iter()
        .zip(specs)
        .map(|(entry, spec)| {
            let error = |reason: ProfileFieldError| JobsError::Profile {
                file: source.to_string(),
                line: text.and_then(|t| profile_line(t, &entry.name)),
                job: entry.name.clone(),
                reason: Box::new(reason),
            };
            let Some(name) = entry.profile.as_deref() else {
                return Err(error(ProfileFieldError::Missing));
            };
            let profile = match parsed.get(name) {
                Some(p) => p.clone(),
                None => {
                    let p = Arc::new(profile::parse(name).map_err(|e| error(e.into()))?);
                    parsed.insert(name.to_string(), p.clone());
                    p
                }
            };
            Ok(SimJob {
                spec: spec.into(),
                profile,
                mem: entry.mem,
            })
        })
        .collect()
}

/// Reads a workload file and its simulator jobs.
pub fn load(path: &Path, cpus: usize) -> Result<(Workload, Vec<SimJob>), JobsError> {
    let workload = Workload::load(path)?;
    let text = std::fs::read_to_string(path).ok();
    let jobs = sim_jobs(
        &workload,
        cpus,
        &path.display().to_string(),
        text.as_deref(),
    )?;
    Ok((workload, jobs))
}

/// The line of a job's `profile` key (or of its name when it has none), found from its `name = "…"` line.
fn profile_line(text: &str, job: &str) -> Option<usize> {
    let quoted = format!("{job:?}");
    let lines: Vec<&str> = text.lines().collect();
    let name_line = lines.iter().position(|l| {
        l.split_once('=')
            .is_some_and(|(k, v)| k.trim() == "name" && v.trim() == quoted)
    })?;
    let profile = lines[name_line..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with("[[") || l.contains(&quoted))
        .position(|l| l.trim_start().starts_with("profile"));
    Some(name_line + profile.unwrap_or(0) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_profile_names_file_line_job_and_valid_choices() {
        let text = "[workload]\nname = \"w\"\n\n[[job]]\nname = \"a\"\nprofile = \"nas/bt.A\"\n\n[[job]]\nname = \"b\"\narrival = 3.0\nprofile = \"nas/bt.Z\"\n";
        let workload = Workload::parse(text, "w.toml").unwrap();
        let err = sim_jobs(&workload, 24, "w.toml", Some(text))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("w.toml: line 11: job \"b\": field `profile`"),
            "{err}"
        );
        assert!(err.contains("nas/lu.A") && err.contains("amdahl("), "{err}");
    }

    #[test]
    fn jobs_share_parsed_profiles() {
        let text = "[workload]\nname = \"w\"\n[[job]]\nname = \"a\"\nprofile = \"nas/bt.A\"\n[[job]]\nname = \"b\"\nprofile = \"nas/bt.A\"\n";
        let workload = Workload::parse(text, "w.toml").unwrap();
        let jobs = sim_jobs(&workload, 24, "w.toml", None).unwrap();
        assert!(Arc::ptr_eq(&jobs[0].profile, &jobs[1].profile));
        assert_eq!(jobs[1].spec.id, cosched_core::JobId(1));
    }
}
