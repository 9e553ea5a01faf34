//! Settings given after a policy's name (`taco:hysteresis=0`, `gang:slice=0.015`) that do not parse.

/// A setting that does not parse; the message names the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("only taco, taco-basic, taco-local, gang and bp take settings after ':'")]
    NotTakingSettings,
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
    #[error("unknown TACO option {0:?}; valid: hysteresis=F, balance=on|off, grace=SECONDS|off, local=on|off, sizes=A/B/..., slice=SECONDS, mpl=JOBS_PER_CPU")]
    UnknownTaco(String),
    #[error("unknown gang option {0:?}; valid: slice=SECONDS, sequential=packed|shared, mpl=ROWS")]
    UnknownGang(String),
    #[error("unknown bp option {0:?}; valid: order=arrival|shortest")]
    UnknownBp(String),
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
