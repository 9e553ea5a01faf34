//! Scheduling policies. Every policy is a pure function of (context, event) → plan and never touches
//! the OS; [`create`] makes one from its name as the command line gives it.
//!
//! The modules, by what they hold:
//! - **the table** — `catalog`: every policy's name, one-line description, settings and
//!   constructor, the one list that names, `cosched policies`, completions and settings parsing read;
//!   `settings`: the settings a policy lists and the errors of those that do not parse.
//! - **one policy each** — `ue`, `bp`, `eq`, `ta`, `gang`, `di`; [`taco`] (`taco`, `taco-basic`,
//!   `taco-local`), `casas` (`casas`, `casas-ts`), [`scalpel`] and `auto`, each a folder of the
//!   parts of one policy.
//! - **a family** — `taskbag`: what the task-bag policies (`fifo`, `rr`, `fifo-global`,
//!   `rr-global`, `lpt`, and the frame of `di` and `scalpel`) share, with the simple ones among them.
//! - **shared by several policies** — `advice_check`: the wrapper every policy runs in, which shows
//!   jobs that ignore thread-count advice as rigid; `users`: fair share among users, then among a
//!   user's jobs; `partitions`: a machine's aligned partitions, computed once.

pub use catalog::{PolicyEntry, POLICIES};
use cosched_core::Policy;
pub use settings::{Setting, SettingError};

mod advice_check;
mod auto;
mod bp;
mod casas;
mod catalog;
mod di;
mod eq;
mod gang;
mod partitions;
pub mod scalpel;
mod settings;
mod ta;
pub mod taco;
mod taskbag;
mod ue;
mod users;

/// The policy `cosched run` and a daemon use when none is named, the one for practitioners:
/// coschedules what needs it, space-shares along the topology, and stays within a few percent of plain
/// Linux where coscheduling buys nothing (README, "Results").
pub const DEFAULT_POLICY: &str = "auto";

/// Names of all policies, for help texts, completions and error messages.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|entry| entry.name).collect()
}

/// Policies for bags of single-threaded tasks: they give every job one core, so they do not suit
/// multithreaded jobs.
pub fn task_bag_policies() -> Vec<&'static str> {
    (POLICIES.iter())
        .filter(|entry| entry.task_bag)
        .map(|entry| entry.name)
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum UnknownPolicy {
    #[error("unknown policy {name:?}; valid policies: {valid}")]
    Name { name: String, valid: String },
    #[error("policy {name:?}: {reason}")]
    Settings { name: String, reason: SettingError },
}

/// The policy called `name`, checking that malleable jobs follow its advice ([`advice_check`]): a job
/// that keeps its threads past the deadline is treated as rigid at the threads it runs.
pub fn create(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    Ok(Box::new(advice_check::AdviceCheck::new(create_unchecked(
        name,
    )?)))
}

/// The policy called `name` as it is, taking every job's label on trust. Policies that take settings
/// take them after a colon (`taco:hysteresis=0:sizes=1/6/24`, `gang:slice=0.015`,
/// `bp:order=shortest`; see docs/policies.md); the policy then reports the full string as its name,
/// so that variants stay apart in traces and tables.
fn create_unchecked(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    let (base, settings) = name.split_once(':').unwrap_or((name, ""));
    if settings.is_empty() {
        // Without settings the whole string must be a name: `taco:` is none.
        return catalog::entry(name)
            .map(PolicyEntry::make)
            .ok_or_else(|| UnknownPolicy::Name {
                name: name.to_string(),
                valid: names().join(", "),
            });
    }
    catalog::build(base, name, settings).map_err(|reason| UnknownPolicy::Settings {
        name: name.to_string(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_in_the_table() {
        assert!(names().contains(&DEFAULT_POLICY));
    }

    #[test]
    fn a_name_with_settings_names_the_policy_and_one_without_is_the_rows() {
        assert_eq!(create("taco").unwrap().name(), "taco");
        assert_eq!(
            create("taco:hysteresis=0").unwrap().name(),
            "taco:hysteresis=0"
        );
        assert!(matches!(
            create_unchecked("taco:"),
            Err(UnknownPolicy::Name { .. })
        ));
        assert!(matches!(
            create_unchecked("nope:slice=1"),
            Err(UnknownPolicy::Settings { .. })
        ));
    }
}
