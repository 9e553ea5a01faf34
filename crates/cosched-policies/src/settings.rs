//! Settings given after a policy's name (`taco:hysteresis=0`, `gang:slice=0.015`): what a policy
//! lists of each, and what is wrong with one that does not parse. Each policy that takes settings
//! lists them beside its parser; the catalog (`crate::catalog`) shows them.

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

/// A setting that does not parse; the message names the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("only {taking} take settings after ':'")]
    NotTakingSettings { taking: String },
    #[error("{key}={value}: use on or off")]
    NotOnOff { key: String, value: String },
    #[error("{key}={value}: give a fraction ≥ 0 (0.25 = a quarter more jobs) or off")]
    NotAFraction { key: String, value: String },
    #[error("{key}={value}: give a positive number of seconds")]
    NotSeconds { key: String, value: String },
    #[error("sizes={0}: give CPU counts separated by '/', e.g. sizes=1/6/24")]
    Sizes(String),
    #[error("mpl={0}: give a whole number of jobs per CPU ≥ 1")]
    JobsPerCpu(String),
    #[error("mpl={0}: give a whole number of rows ≥ 1")]
    Rows(String),
    #[error("unknown {policy} option {setting:?}; valid: {valid}")]
    Unknown {
        policy: &'static str,
        setting: String,
        valid: String,
    },
}

/// `setting` is none of `policy`'s `settings`; the message lists those as `KEY=VALUES`.
pub(crate) fn unknown(policy: &'static str, setting: &str, settings: &[Setting]) -> SettingError {
    let valid: Vec<String> = (settings.iter())
        .map(|s| format!("{}={}", s.key, s.values))
        .collect();
    SettingError::Unknown {
        policy,
        setting: setting.to_string(),
        valid: valid.join(", "),
    }
}

/// A number of seconds > 0.
pub(crate) fn seconds(key: &str, value: &str) -> Result<f64, SettingError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f > 0.0)
        .ok_or_else(|| SettingError::NotSeconds {
            key: key.to_string(),
            value: value.to_string(),
        })
}
