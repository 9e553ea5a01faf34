//! What several bench subcommands share: JSON output, quantiles and their spread, and a daemon of
//! this executable to measure.

use cosched_service::harness::{DaemonProcess, Launch};
use serde::Serialize;
use std::path::Path;

/// Prints `doc` as pretty JSON when `json`; the text was printed as it came otherwise.
pub(super) fn print_json_if(json: bool, doc: &serde_json::Value) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(doc)?);
    }
    Ok(())
}

#[derive(Serialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of_ms(seconds: &[f64]) -> Spread {
        Spread {
            p50: quantile(seconds, 0.5) * 1e3,
            p99: quantile(seconds, 0.99) * 1e3,
            max: quantile(seconds, 1.0) * 1e3,
        }
    }
}

/// The `q` quantile of `values` (nearest rank); NaN for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A daemon of this executable on its own socket and state directory; its stderr goes to a file so
/// that the figures stay readable.
pub fn start_daemon(dir: &Path, policy: &str) -> anyhow::Result<DaemonProcess> {
    std::fs::create_dir_all(dir)?;
    let launch = Launch::new(&std::env::current_exe()?, dir, "state")
        .args(["--policy", policy, "--idle-timeout", "2"])
        .log_to(&dir.join("daemon.log"));
    Ok(launch.start()?)
}
