//! Scheduling policies. Each module is one policy, named as on the command line; every policy is a pure
//! function of (context, event) → plan and never touches the OS.

use cosched_core::Policy;

mod bp;
mod eq;
mod ue;

/// (name, one-line description, constructor). The order is the order `--help` and `compare` list them.
type Entry = (&'static str, &'static str, fn() -> Box<dyn Policy>);

const POLICIES: &[Entry] = &[
    ("ue", "uncontrolled: every job gets all CPUs and one thread per CPU; the OS time-shares them (TACO §4.2)", || Box::new(ue::Uncontrolled)),
    ("bp", "batch: one job at a time on the whole machine, in arrival order (TACO §4.2)", || Box::new(bp::Batch)),
    ("eq", "equipartition: equal CPU shares, grown and shrunk in place without topology (TACO §4.2)", || Box::<eq::Equipartition>::default()),
];

/// Names of all policies, for help texts and error messages.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|(name, _, _)| *name).collect()
}

/// One line per policy: `name  description`.
pub fn descriptions() -> Vec<(&'static str, &'static str)> {
    POLICIES
        .iter()
        .map(|(name, about, _)| (*name, *about))
        .collect()
}

#[derive(Debug, thiserror::Error)]
#[error("unknown policy {name:?}; valid policies: {valid}")]
pub struct UnknownPolicy {
    pub name: String,
    pub valid: String,
}

pub fn create(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    POLICIES
        .iter()
        .find(|(known, _, _)| *known == name)
        .map(|(_, _, make)| make())
        .ok_or_else(|| UnknownPolicy {
            name: name.to_string(),
            valid: names().join(", "),
        })
}
