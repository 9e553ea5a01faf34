//! TACO's switches, one per refinement of §2, parsed from the policy name: `taco:hysteresis=0:grace=off`.

use crate::settings::{self, Setting, SettingError};

/// Slot length, seconds. TACO §3.3: refilling the whole L3 takes about 1 ms on the paper's machine, so
/// keeping that cost near 1% of a slot needs slices of about 50-100 ms; we take the upper end.
pub const DEFAULT_SLICE: f64 = 0.1;
/// Extra jobs, as a fraction of the partitions of the finer level, needed before TACO switches down to
/// it (§2.1). On the paper's 2 × 2 example this asks for three jobs, not two, before splitting the system.
pub const DEFAULT_HYSTERESIS: f64 = 0.25;
/// How long a malleable job keeps its old partition after being asked to change its thread count
/// (§2.3). TACO gives no figure; Table 2's slowest benchmark (is.C) adapts in 1.6 s on average, so 2 s
/// covers the NAS programs without holding a partition long after a fast one has adapted.
pub const DEFAULT_GRACE: f64 = 2.0;
/// Jobs TACO admits per CPU, the multiprogramming level of its finest partitions. TACO (§2) coschedules
/// when there are more jobs than partitions but gives no upper bound; four per CPU is well above the
/// paper's experiments (40 jobs on 24 cores) and keeps an overloaded machine from slicing every job thin.
pub const DEFAULT_MPL: usize = 4;

#[derive(Debug, Clone, PartialEq)]
pub struct TacoOptions {
    /// §2.1 hysteresis, see [`DEFAULT_HYSTERESIS`]; 0 makes the thresholds for switching up and down equal.
    pub hysteresis: f64,
    /// §2.2: keep every partition of a level equally loaded and coschedule the odd jobs on coarser levels,
    /// weighted so that every job gets the same CPU time.
    pub balance_levels: bool,
    /// §2.3 grace period in seconds; `None` enforces a new partition at once.
    pub grace: Option<f64>,
    /// §2.1 local variant: each unit of the hierarchy splits and merges on its own job count.
    pub local: bool,
    /// §4.4 restricted partition sizes; `None` takes the finest chain of nested sizes the machine has.
    pub sizes: Option<Vec<usize>>,
    /// §3.3 slot length, see [`DEFAULT_SLICE`].
    pub slice: f64,
    /// Most jobs admitted per CPU, see [`DEFAULT_MPL`]; later ones wait in arrival order (in
    /// fair-share order where they belong to several users).
    pub mpl: usize,
}

impl TacoOptions {
    /// Every refinement of §2 on.
    pub fn full() -> TacoOptions {
        TacoOptions {
            hysteresis: DEFAULT_HYSTERESIS,
            balance_levels: true,
            grace: Some(DEFAULT_GRACE),
            local: false,
            sizes: None,
            slice: DEFAULT_SLICE,
            mpl: DEFAULT_MPL,
        }
    }

    /// The version measured in TACO §4.2-4.3: no hysteresis, no §2.2-2.4 extras.
    pub fn basic() -> TacoOptions {
        TacoOptions {
            hysteresis: 0.0,
            balance_levels: false,
            grace: None,
            ..TacoOptions::full()
        }
    }

    /// The local variant of §2.1, with hysteresis.
    pub fn local() -> TacoOptions {
        TacoOptions {
            local: true,
            balance_levels: false,
            grace: None,
            ..TacoOptions::full()
        }
    }

    /// The settings `apply` takes, with these options' values as their defaults.
    pub fn setting_list(&self) -> Vec<Setting> {
        let on_off = |on: bool| if on { "on" } else { "off" }.to_string();
        vec![
            Setting {
                key: "hysteresis",
                values: "FRACTION",
                default: self.hysteresis.to_string(),
                example: "0",
                about: "extra jobs, as a fraction of the finer level's partitions, before switching down to it (§2.1)",
            },
            Setting {
                key: "balance",
                values: "on|off",
                default: on_off(self.balance_levels),
                example: "off",
                about: "equal load on every partition of a level, odd jobs coscheduled on coarser levels (§2.2)",
            },
            Setting {
                key: "grace",
                values: "SECONDS|off",
                default: self.grace.map_or("off".to_string(), |g| g.to_string()),
                example: "1.5",
                about: "how long a malleable job keeps its old partition after new advice (§2.3)",
            },
            Setting {
                key: "local",
                values: "on|off",
                default: on_off(self.local),
                example: "on",
                about: "each unit of the hierarchy splits and merges on its own job count (§2.1)",
            },
            Setting {
                key: "sizes",
                values: "A/B/...",
                default: self.sizes.as_ref().map_or("the machine's nested sizes".to_string(), |s| {
                    s.iter().map(ToString::to_string).collect::<Vec<_>>().join("/")
                }),
                example: "1/2",
                about: "the only partition sizes, in CPUs (§4.4)",
            },
            Setting {
                key: "slice",
                values: "SECONDS",
                default: self.slice.to_string(),
                example: "0.05",
                about: "length of a coscheduling time slot (§3.3)",
            },
            Setting {
                key: "mpl",
                values: "JOBS_PER_CPU",
                default: self.mpl.to_string(),
                example: "2",
                about: "most jobs admitted per CPU; later ones wait in arrival order (fair-share order across users)",
            },
        ]
    }

    /// Applies `key=value` settings separated by `:`, e.g. `hysteresis=0:sizes=1/6/24:slice=0.05`.
    pub fn apply(&mut self, settings: &str) -> Result<(), SettingError> {
        for setting in settings.split(':').filter(|s| !s.is_empty()) {
            let (key, value) = setting.split_once('=').unwrap_or((setting, "on"));
            match key {
                "hysteresis" => self.hysteresis = fraction(key, value)?,
                "balance" => self.balance_levels = switch(key, value)?,
                "local" => self.local = switch(key, value)?,
                "grace" => {
                    self.grace = match value {
                        "off" => None,
                        seconds => Some(settings::seconds(key, seconds)?),
                    }
                }
                "sizes" => {
                    let sizes = value
                        .split('/')
                        .map(|s| s.parse::<usize>().ok().filter(|n| *n > 0))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| SettingError::Sizes(value.to_string()))?;
                    self.sizes = Some(sizes);
                }
                "slice" => self.slice = settings::seconds(key, value)?,
                "mpl" => {
                    self.mpl = value
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| SettingError::JobsPerCpu(value.to_string()))?
                }
                _ => return Err(settings::unknown("TACO", key, &self.setting_list())),
            }
        }
        Ok(())
    }
}

fn switch(key: &str, value: &str) -> Result<bool, SettingError> {
    match value {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(SettingError::NotOnOff {
            key: key.to_string(),
            value: value.to_string(),
        }),
    }
}

fn fraction(key: &str, value: &str) -> Result<f64, SettingError> {
    if value == "off" {
        return Ok(0.0);
    }
    value
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f >= 0.0)
        .ok_or_else(|| SettingError::NotAFraction {
            key: key.to_string(),
            value: value.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_override_the_defaults() {
        let mut options = TacoOptions::full();
        options
            .apply("hysteresis=0:grace=off:sizes=1/6/24:slice=0.05:local:mpl=2")
            .unwrap();
        assert_eq!(options.hysteresis, 0.0);
        assert_eq!(options.grace, None);
        assert_eq!(options.sizes, Some(vec![1, 6, 24]));
        assert_eq!(options.slice, 0.05);
        assert!(options.local);
        assert_eq!(options.mpl, 2);
    }

    #[test]
    fn mistakes_name_the_option_and_the_fix() {
        let mut options = TacoOptions::full();
        assert!(options
            .apply("sizes=1,6")
            .unwrap_err()
            .to_string()
            .contains("'/'"));
        assert!(options
            .apply("slice=-1")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert!(options
            .apply("colour=red")
            .unwrap_err()
            .to_string()
            .contains("valid"));
    }
}
