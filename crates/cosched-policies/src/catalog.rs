//! The table of policies: one row per policy with its name, its one-line description, whether it
//! suits only bags of single-threaded tasks, the settings it takes after its name and how it is made.
//! Names, `cosched policies`, shell completions, error messages and settings parsing all read it.

use crate::settings::{Setting, SettingError};
use crate::{auto, bp, casas, di, eq, gang, scalpel, ta, taco, taskbag, ue};
use cosched_core::Policy;

/// One policy as the command line names it.
pub struct PolicyEntry {
    pub name: &'static str,
    /// One line for `cosched policies`.
    pub about: &'static str,
    /// It gives every job one core, so it suits single-threaded jobs only.
    pub task_bag: bool,
    /// The policy with no settings given.
    make: fn() -> Box<dyn Policy>,
    /// `None` for a policy that takes no settings.
    configurable: Option<Configurable>,
}

/// A policy made from its whole name and the settings after its first ':'.
type Built = Result<Box<dyn Policy>, SettingError>;

/// What a policy that takes `KEY=VALUE` settings after its name adds to its row.
struct Configurable {
    /// Its settings, with this policy's defaults.
    settings: fn() -> Vec<Setting>,
    /// The policy named by the whole string `name` (so that variants stay apart in traces and
    /// tables), with `settings`, the text after the first ':'.
    build: fn(name: &str, settings: &str) -> Built,
}

impl PolicyEntry {
    /// The settings it takes after a colon, with its defaults; empty where it takes none.
    pub fn settings(&self) -> Vec<Setting> {
        self.configurable
            .as_ref()
            .map_or_else(Vec::new, |c| (c.settings)())
    }

    /// The policy as the row describes it.
    pub(crate) fn make(&self) -> Box<dyn Policy> {
        (self.make)()
    }
}

/// TACO's variant `options` with `settings` applied.
fn taco_with(name: &str, mut options: taco::TacoOptions, settings: &str) -> Built {
    options.apply(settings)?;
    Ok(Box::new(taco::Taco::new(name, options)))
}

/// The order `--help`, `cosched policies` and `compare` list them.
pub const POLICIES: &[PolicyEntry] = &[
    PolicyEntry {
        name: "ue",
        about: "uncontrolled: every job gets all CPUs and one thread per CPU; the OS time-shares them (TACO §4.2)",
        task_bag: false,
        make: || Box::new(ue::Uncontrolled),
        configurable: None,
    },
    PolicyEntry {
        name: "bp",
        about: "batch: one job at a time on the whole machine, in arrival order (TACO §4.2); bp:order=shortest takes the shortest known time alone first",
        task_bag: false,
        make: || Box::new(bp::Batch::default()),
        configurable: Some(Configurable {
            settings: bp::setting_list,
            build: |name, settings| Ok(Box::new(bp::Batch::with_settings(name, settings)?)),
        }),
    },
    PolicyEntry {
        name: "eq",
        about: "equipartition: equal CPU shares, grown and shrunk in place without topology (TACO §4.2)",
        task_bag: false,
        make: || Box::<eq::Equipartition>::default(),
        configurable: None,
    },
    PolicyEntry {
        name: "ta",
        about: "topology-aware equipartition: one aligned partition per job, all of one size, minimal moves (TACO §4.2)",
        task_bag: false,
        make: || Box::<ta::TopologyAware>::default(),
        configurable: None,
    },
    PolicyEntry {
        name: "taco",
        about: "TACO with hysteresis, equal CPU time across levels, grace periods, opt-out (TACO §2); settings: taco:KEY=VALUE:...",
        task_bag: false,
        make: || Box::new(taco::Taco::new("taco", taco::TacoOptions::full())),
        configurable: Some(Configurable {
            settings: || taco::TacoOptions::full().setting_list(),
            build: |name, settings| taco_with(name, taco::TacoOptions::full(), settings),
        }),
    },
    PolicyEntry {
        name: "taco-basic",
        about: "TACO as measured in the paper: level thresholds, coscheduling inside partitions, nothing else (TACO §4.2)",
        task_bag: false,
        make: || Box::new(taco::Taco::new("taco-basic", taco::TacoOptions::basic())),
        configurable: Some(Configurable {
            settings: || taco::TacoOptions::basic().setting_list(),
            build: |name, settings| taco_with(name, taco::TacoOptions::basic(), settings),
        }),
    },
    PolicyEntry {
        name: "taco-local",
        about: "TACO's local variant: each unit splits and merges on its own job count (TACO §2.1)",
        task_bag: false,
        make: || Box::new(taco::Taco::new("taco-local", taco::TacoOptions::local())),
        configurable: Some(Configurable {
            settings: || taco::TacoOptions::local().setting_list(),
            build: |name, settings| taco_with(name, taco::TacoOptions::local(), settings),
        }),
    },
    PolicyEntry {
        name: "gang",
        about: "gang scheduling, Ousterhout matrix: rows of aligned partitions, round robin, slot length x weight (Frachtenberg & Etsion; Peter et al.); gang:slice=S, gang:sequential=shared (stressors share one slot)",
        task_bag: false,
        make: || Box::<gang::Gang>::default(),
        configurable: Some(Configurable {
            settings: gang::setting_list,
            build: |name, settings| Ok(Box::new(gang::Gang::with_settings(name, settings)?)),
        }),
    },
    PolicyEntry {
        name: "fifo",
        about: "task bag: tasks bound to cores in turn on arrival, each core runs its queue in order, as Scalpel ran Linux SCHED_FIFO (§VI-A/B)",
        task_bag: true,
        make: || Box::new(taskbag::TaskBag::new(taskbag::Fifo::default())),
        configurable: None,
    },
    PolicyEntry {
        name: "rr",
        about: "task bag: tasks bound to cores in turn on arrival, each core time-slices its tasks, as Scalpel ran Linux SCHED_RR (§VI-A/B)",
        task_bag: true,
        make: || Box::<taskbag::RoundRobin>::default(),
        configurable: None,
    },
    PolicyEntry {
        name: "fifo-global",
        about: "task bag: the oldest waiting task takes the lowest free core and runs to completion (SCHED_FIFO without affinity)",
        task_bag: true,
        make: || Box::new(taskbag::TaskBag::new(taskbag::GlobalFifo)),
        configurable: None,
    },
    PolicyEntry {
        name: "rr-global",
        about: "task bag: every task on every core, time-sliced by the OS (SCHED_RR without affinity)",
        task_bag: true,
        make: || Box::new(taskbag::GlobalRoundRobin),
        configurable: None,
    },
    PolicyEntry {
        name: "lpt",
        about: "task bag: longest waiting task first onto free cores, no grouping; Scalpel's longer_first (§VI-C)",
        task_bag: true,
        make: || Box::new(taskbag::TaskBag::new(taskbag::LongerFirst)),
        configurable: None,
    },
    PolicyEntry {
        name: "di",
        about: "task bag: Distributed Intensity, spreads LLC-intensive tasks over LLC domains (Zhuravlev et al. ASPLOS'10)",
        task_bag: true,
        make: || Box::new(taskbag::TaskBag::new(di::DistributedIntensity::default())),
        configurable: None,
    },
    PolicyEntry {
        name: "scalpel",
        about: "task bag: footprint-balanced groups per LLC, two-level LPT dispatch (Scalpel Alg. 1-2)",
        task_bag: true,
        make: || Box::new(taskbag::TaskBag::new(scalpel::Scalpel::default())),
        configurable: None,
    },
    PolicyEntry {
        name: "casas",
        about: "probes each new job on 1..D LLC domains, then gives whole domains to minimise ANTT; surplus jobs wait (CaSAS §3)",
        task_bag: false,
        make: || Box::new(casas::Casas::space_sharing()),
        configurable: None,
    },
    PolicyEntry {
        name: "casas-ts",
        about: "CaSAS, time-sharing slots of domain allocations when jobs outnumber LLC domains",
        task_bag: false,
        make: || Box::new(casas::Casas::time_sharing()),
        configurable: None,
    },
    PolicyEntry {
        name: "auto",
        about: "beyond the papers: coschedules jobs at the threads they really run, space-shares those that follow advice (widths by the scalability their CPU time shows, at most 6 side by side), least estimated remaining work first with aging when run times are known (docs/policies.md)",
        task_bag: false,
        make: || Box::<auto::Auto>::default(),
        configurable: None,
    },
];

/// The row of the policy called `name` (without settings).
pub(crate) fn entry(name: &str) -> Option<&'static PolicyEntry> {
    POLICIES.iter().find(|entry| entry.name == name)
}

/// The policy `base` with `settings` (non-empty) after its name, called by the whole string `name`.
/// Any `base` that takes no settings, known or not, gets the list of those that do.
pub(crate) fn build(base: &str, name: &str, settings: &str) -> Built {
    match entry(base).and_then(|entry| entry.configurable.as_ref()) {
        Some(configurable) => (configurable.build)(name, settings),
        None => Err(SettingError::NotTakingSettings {
            taking: taking_settings(),
        }),
    }
}

/// The policies that take settings, as a sentence's list: `a, b and c`.
fn taking_settings() -> String {
    let names: Vec<&str> = (POLICIES.iter())
        .filter(|entry| entry.configurable.is_some())
        .map(|entry| entry.name)
        .collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed setting is one the policy's parser takes, with its example and its default.
    #[test]
    fn every_listed_setting_is_accepted_by_its_policy() {
        let mut listed = 0;
        for entry in POLICIES {
            let name = entry.name;
            for setting in entry.settings() {
                listed += 1;
                let mut values = vec![setting.example.to_string()];
                if !setting.default.contains(' ') {
                    values.push(setting.default.clone());
                }
                for value in values {
                    let spec = format!("{name}:{}={value}", setting.key);
                    assert!(crate::create(&spec).is_ok(), "{spec} is refused");
                }
            }
        }
        assert_eq!(listed, 3 * 7 + 3 + 1);
    }

    #[test]
    fn policies_without_settings_refuse_them() {
        for entry in POLICIES {
            if entry.settings().is_empty() {
                let name = entry.name;
                let err = crate::create(&format!("{name}:slice=1")).err();
                let err = err.map(|e| e.to_string()).unwrap_or_default();
                assert!(
                    err.contains("only bp, taco, taco-basic, taco-local and gang take settings"),
                    "{name}: {err}"
                );
            }
        }
    }

    #[test]
    fn an_unknown_setting_is_named_with_the_valid_ones() {
        for (spec, expected) in [
            ("gang:width=2", "unknown gang option \"width=2\"; valid: slice=SECONDS, sequential=packed|shared, mpl=ROWS"),
            ("bp:order=longest", "unknown bp option \"order=longest\"; valid: order=arrival|shortest"),
            ("taco-local:rows=2", "unknown TACO option \"rows\"; valid: hysteresis=FRACTION, balance=on|off"),
        ] {
            let err = crate::create(spec).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(expected), "{spec}: {err}");
        }
    }

    #[test]
    fn task_bag_rows_are_those_described_as_task_bags() {
        for entry in POLICIES {
            assert_eq!(
                entry.task_bag,
                entry.about.starts_with("task bag"),
                "{}",
                entry.name
            );
        }
    }
}
