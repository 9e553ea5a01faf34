//! Scheduling policies. Each module is one policy, named as on the command line; every policy is a pure
//! function of (context, event) → plan and never touches the OS.

use cosched_core::Policy;
pub use settings::SettingError;

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

pub use catalog::{settings, Setting};

/// (name, one-line description, constructor). The order is the order `--help` and `compare` list them.
type Entry = (&'static str, &'static str, fn() -> Box<dyn Policy>);

const POLICIES: &[Entry] = &[
    ("ue", "uncontrolled: every job gets all CPUs and one thread per CPU; the OS time-shares them (TACO §4.2)", || Box::new(ue::Uncontrolled)),
    ("bp", "batch: one job at a time on the whole machine, in arrival order (TACO §4.2); bp:order=shortest takes the shortest known time alone first", || Box::new(bp::Batch::default())),
    ("eq", "equipartition: equal CPU shares, grown and shrunk in place without topology (TACO §4.2)", || Box::<eq::Equipartition>::default()),
    ("ta", "topology-aware equipartition: one aligned partition per job, all of one size, minimal moves (TACO §4.2)", || Box::<ta::TopologyAware>::default()),
    ("taco", "TACO with hysteresis, equal CPU time across levels, grace periods, opt-out (TACO §2); settings: taco:KEY=VALUE:...", || Box::new(taco::Taco::new("taco", taco::TacoOptions::full()))),
    ("taco-basic", "TACO as measured in the paper: level thresholds, coscheduling inside partitions, nothing else (TACO §4.2)", || Box::new(taco::Taco::new("taco-basic", taco::TacoOptions::basic()))),
    ("taco-local", "TACO's local variant: each unit splits and merges on its own job count (TACO §2.1)", || Box::new(taco::Taco::new("taco-local", taco::TacoOptions::local()))),
    ("gang", "gang scheduling, Ousterhout matrix: rows of aligned partitions, round robin, slot length x weight (Frachtenberg & Etsion; Peter et al.); gang:slice=S, gang:sequential=shared (stressors share one slot)", || Box::<gang::Gang>::default()),
    ("fifo", "task bag: tasks bound to cores in turn on arrival, each core runs its queue in order, as Scalpel ran Linux SCHED_FIFO (§VI-A/B)", || Box::new(taskbag::TaskBag::new(taskbag::Fifo::default()))),
    ("rr", "task bag: tasks bound to cores in turn on arrival, each core time-slices its tasks, as Scalpel ran Linux SCHED_RR (§VI-A/B)", || Box::<taskbag::RoundRobin>::default()),
    ("fifo-global", "task bag: the oldest waiting task takes the lowest free core and runs to completion (SCHED_FIFO without affinity)", || Box::new(taskbag::TaskBag::new(taskbag::GlobalFifo))),
    ("rr-global", "task bag: every task on every core, time-sliced by the OS (SCHED_RR without affinity)", || Box::new(taskbag::GlobalRoundRobin)),
    ("lpt", "task bag: longest waiting task first onto free cores, no grouping; Scalpel's longer_first (§VI-C)", || Box::new(taskbag::TaskBag::new(taskbag::LongerFirst))),
    ("di", "task bag: Distributed Intensity, spreads LLC-intensive tasks over LLC domains (Zhuravlev et al. ASPLOS'10)", || Box::new(taskbag::TaskBag::new(di::DistributedIntensity::default()))),
    ("scalpel", "task bag: footprint-balanced groups per LLC, two-level LPT dispatch (Scalpel Alg. 1-2)", || Box::new(taskbag::TaskBag::new(scalpel::Scalpel::default()))),
    ("casas", "probes each new job on 1..D LLC domains, then gives whole domains to minimise ANTT; surplus jobs wait (CaSAS §3)", || Box::new(casas::Casas::space_sharing())),
    ("casas-ts", "CaSAS, time-sharing slots of domain allocations when jobs outnumber LLC domains", || Box::new(casas::Casas::time_sharing())),
    ("auto", "beyond the papers: coschedules jobs at the threads they really run, space-shares those that follow advice (widths by the scalability their CPU time shows, at most 6 side by side), least estimated remaining work first with aging when run times are known (docs/policies.md)", || Box::<auto::Auto>::default()),
];

/// The policy `cosched run` and a daemon use when none is named, the one for practitioners:
/// coschedules what needs it, space-shares along the topology, and stays within a few percent of plain
/// Linux where coscheduling buys nothing (README, "Results").
pub const DEFAULT_POLICY: &str = "auto";

/// Names of all policies, for help texts and error messages.
/// Policies for bags of single-threaded tasks: they give every job one core, so they do not suit
/// multithreaded jobs.
pub const TASK_BAG_POLICIES: &[&str] = &[
    "fifo",
    "rr",
    "fifo-global",
    "rr-global",
    "lpt",
    "di",
    "scalpel",
];

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

/// The policy called `name` as it is, taking every job's label on trust. TACO's variants, `gang` and
/// `bp` also take settings after a colon (`taco:hysteresis=0:sizes=1/6/24`, `gang:slice=0.015`,
/// `bp:order=shortest`; see docs/policies.md); the policy then
/// reports the full string as its name, so that variants stay apart in traces and tables.
fn create_unchecked(name: &str) -> Result<Box<dyn Policy>, UnknownPolicy> {
    let (base, settings) = name.split_once(':').unwrap_or((name, ""));
    let bad_settings = |reason: SettingError| UnknownPolicy::Settings {
        name: name.to_string(),
        reason,
    };
    if !settings.is_empty() {
        let mut options = match base {
            "taco" => taco::TacoOptions::full(),
            "taco-basic" => taco::TacoOptions::basic(),
            "taco-local" => taco::TacoOptions::local(),
            "gang" => {
                return Ok(Box::new(
                    gang::Gang::with_settings(name, settings).map_err(bad_settings)?,
                ))
            }
            "bp" => {
                return Ok(Box::new(
                    bp::Batch::with_settings(name, settings).map_err(bad_settings)?,
                ))
            }
            _ => return Err(bad_settings(SettingError::NotTakingSettings)),
        };
        options.apply(settings).map_err(bad_settings)?;
        return Ok(Box::new(taco::Taco::new(name, options)));
    }
    POLICIES
        .iter()
        .find(|(known, _, _)| *known == name)
        .map(|(_, _, make)| make())
        .ok_or_else(|| UnknownPolicy::Name {
            name: name.to_string(),
            valid: names().join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_bag_list_matches_the_descriptions() {
        let described: Vec<&str> = descriptions()
            .into_iter()
            .filter(|(_, about)| about.starts_with("task bag"))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(described, TASK_BAG_POLICIES);
    }
}
