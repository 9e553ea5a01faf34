//! Which policies a comparison runs: those named, or the default for the jobs at hand. `sim` and
//! `compare` share it, so that the same workload gets the same policies from both.

use cosched_core::JobSpec;
use cosched_policies::task_bag_policies;

/// The policies compared when none are named, in this order, as far as they exist; with only
/// single-threaded jobs, the task-bag policies after them. BP shortest-first is the baseline a user
/// with the times alone at hand would reach for.
const DEFAULT_POLICIES: &[&str] = &[
    "ue",
    "bp",
    "bp:order=shortest",
    "eq",
    "ta",
    "taco",
    "gang",
    "auto",
];

/// The named policies, all of which must exist, each named once; or the default for `jobs`.
pub fn chosen(named: &[String], jobs: &[JobSpec]) -> anyhow::Result<Vec<String>> {
    if named.is_empty() {
        return Ok(default_for(jobs));
    }
    let mut unique: Vec<String> = Vec::new();
    for name in named {
        cosched_policies::create(name)?;
        anyhow::ensure!(
            !unique.contains(name),
            "policy {name:?} is named twice in --policy"
        );
        unique.push(name.clone());
    }
    Ok(unique)
}

/// The default list, with the task-bag policies only where every job is single-threaded: on a
/// multithreaded job they would give it one core.
pub fn default_for(jobs: &[JobSpec]) -> Vec<String> {
    let task_bag = !jobs.is_empty() && jobs.iter().all(|j| j.max_threads == 1);
    let known = cosched_policies::names();
    DEFAULT_POLICIES
        .iter()
        .chain(task_bag_policies().iter().filter(|_| task_bag))
        .filter(|p| known.contains(&p.split(':').next().unwrap_or(p)))
        .map(|p| p.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{JobId, JobKind};

    fn job(max_threads: u32) -> JobSpec {
        JobSpec {
            owner: None,
            id: JobId(0),
            name: "j".into(),
            arrival: 0.0,
            kind: JobKind::Rigid,
            min_threads: 1,
            max_threads,
            coschedule: true,
            weight: 1.0,
            hints: Default::default(),
        }
    }

    #[test]
    fn task_bag_policies_only_for_single_threaded_jobs() {
        let parallel = default_for(&[job(1), job(8)]);
        assert!(parallel
            .iter()
            .all(|p| !task_bag_policies().contains(&p.as_str())));
        assert!(parallel.contains(&"taco".to_string()));
        assert!(parallel.contains(&"bp:order=shortest".to_string()));
        for name in &parallel {
            chosen(std::slice::from_ref(name), &[]).unwrap();
        }
        let bag = default_for(&[job(1), job(1)]);
        assert!(bag.contains(&"scalpel".to_string()) && bag.contains(&"bp".to_string()));
    }

    #[test]
    fn a_policy_named_twice_is_refused() {
        let err = chosen(&["ue".into(), "ue".into()], &[]).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }
}
