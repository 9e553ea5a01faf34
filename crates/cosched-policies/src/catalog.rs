//! What `cosched policies` lists of each policy beyond its description: the settings it takes after
//! its name (`taco:hysteresis=0:sizes=1/6/24`, `gang:slice=0.05`, `bp:order=shortest`). The parsers
//! are [`crate::taco::TacoOptions::apply`], `Gang::with_settings` and `Batch::with_settings`; a test
//! holds this list to them.

use crate::gang;
use crate::taco::TacoOptions;

/// One `KEY=VALUE` a policy accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub key: &'static str,
    /// The values it takes, as a pattern: `SECONDS|off`, `on|off`, `A/B/...`.
    pub values: &'static str,
    /// Its value when not given, for this policy.
    pub default: String,
    /// A value it accepts, for examples.
    pub example: &'static str,
    pub about: &'static str,
}

/// The settings of the policy named `base` (without settings); empty for policies that take none.
pub fn settings(base: &str) -> Vec<Setting> {
    let taco = match base {
        "taco" => TacoOptions::full(),
        "taco-basic" => TacoOptions::basic(),
        "taco-local" => TacoOptions::local(),
        "gang" => return gang_settings(),
        "bp" => return bp_settings(),
        _ => return Vec::new(),
    };
    let on_off = |on: bool| if on { "on" } else { "off" }.to_string();
    vec![
        Setting {
            key: "hysteresis",
            values: "FRACTION",
            default: taco.hysteresis.to_string(),
            example: "0",
            about: "extra jobs, as a fraction of the finer level's partitions, before switching down to it (§2.1)",
        },
        Setting {
            key: "balance",
            values: "on|off",
            default: on_off(taco.balance_levels),
            example: "off",
            about: "equal load on every partition of a level, odd jobs coscheduled on coarser levels (§2.2)",
        },
        Setting {
            key: "grace",
            values: "SECONDS|off",
            default: taco.grace.map_or("off".to_string(), |g| g.to_string()),
            example: "1.5",
            about: "how long a malleable job keeps its old partition after new advice (§2.3)",
        },
        Setting {
            key: "local",
            values: "on|off",
            default: on_off(taco.local),
            example: "on",
            about: "each unit of the hierarchy splits and merges on its own job count (§2.1)",
        },
        Setting {
            key: "sizes",
            values: "A/B/...",
            default: taco.sizes.map_or("the machine's nested sizes".to_string(), |s| {
                s.iter().map(ToString::to_string).collect::<Vec<_>>().join("/")
            }),
            example: "1/2",
            about: "the only partition sizes, in CPUs (§4.4)",
        },
        Setting {
            key: "slice",
            values: "SECONDS",
            default: taco.slice.to_string(),
            example: "0.05",
            about: "length of a coscheduling time slot (§3.3)",
        },
        Setting {
            key: "mpl",
            values: "JOBS_PER_CPU",
            default: taco.mpl.to_string(),
            example: "2",
            about: "most jobs admitted per CPU; later ones wait in arrival order (fair-share order across users)",
        },
    ]
}

fn bp_settings() -> Vec<Setting> {
    vec![Setting {
        key: "order",
        values: "arrival|shortest",
        default: "arrival".to_string(),
        example: "shortest",
        about: "which waiting job goes next: the oldest, or the shortest known time alone",
    }]
}

fn gang_settings() -> Vec<Setting> {
    vec![
        Setting {
            key: "slice",
            values: "SECONDS",
            default: gang::DEFAULT_SLICE.to_string(),
            example: "0.015",
            about: "length of a row's time slot, times the job's weight",
        },
        Setting {
            key: "sequential",
            values: "packed|shared",
            default: "packed".to_string(),
            example: "shared",
            about: "shared: single-threaded stressors share one slot",
        },
        Setting {
            key: "mpl",
            values: "ROWS",
            default: gang::DEFAULT_MPL.to_string(),
            example: "4",
            about: "most rows of the Ousterhout matrix; later jobs wait",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed setting is one the policy's parser takes, with its example and its default.
    #[test]
    fn every_listed_setting_is_accepted_by_its_policy() {
        let mut listed = 0;
        for name in crate::names() {
            for setting in settings(name) {
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
        for name in crate::names() {
            if settings(name).is_empty() {
                assert!(crate::create(&format!("{name}:slice=1")).is_err(), "{name}");
            }
        }
    }
}
