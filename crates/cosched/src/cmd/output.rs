//! Where results go: the default results directory of a run, and the rule that an earlier run's
//! results are never overwritten unless `--force` says so.

use anyhow::Context as _;
use cosched_core::names::file_name_part;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// `results/<part>-<part>-…-<UTC time>`, each part made a safe file-name part.
pub fn default_results_dir(parts: &[&str]) -> PathBuf {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name: Vec<String> = parts.iter().map(|p| file_name_part(p)).collect();
    name.push(utc_timestamp(now));
    PathBuf::from("results").join(name.join("-"))
}

/// Creates `dir` for a run's results. An existing directory that is not empty holds an earlier run's
/// results: refused, unless `force`, in which case files of the same name are replaced.
pub fn prepare_results_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
    if !force && holds_something(dir) {
        anyhow::bail!(
            "{} already exists and is not empty; choose another -o/--out, or add --force to \
write into it (files of the same name are replaced)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))
}

fn holds_something(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        // A file of that name, or one we cannot read, must not be written over either.
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// `YYYYMMDD-HHMMSS` in UTC for seconds since the epoch, for directory names that sort by time.
fn utc_timestamp(secs: u64) -> String {
    let (year, month, day, rem) = utc_date(secs);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch.
pub fn rfc3339_utc(secs: u64) -> String {
    let (year, month, day, rem) = utc_date(secs);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The civil date in UTC of seconds since the epoch, and the seconds since that day's midnight.
fn utc_date(secs: u64) -> (i64, i64, i64, u64) {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "19700101-000000");
        assert_eq!(utc_timestamp(951_782_400 + 3_723), "20000229-010203");
        assert_eq!(utc_timestamp(1_767_225_599), "20251231-235959");
        assert_eq!(rfc3339_utc(951_782_400 + 3_723), "2000-02-29T01:02:03Z");
    }

    #[test]
    fn an_earlier_runs_results_are_kept_unless_forced() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("out");
        prepare_results_dir(&dir, false).unwrap();
        prepare_results_dir(&dir, false).unwrap();
        std::fs::write(dir.join("trace.jsonl"), "").unwrap();
        let err = prepare_results_dir(&dir, false).unwrap_err().to_string();
        assert!(err.contains("--force"), "{err}");
        prepare_results_dir(&dir, true).unwrap();
    }

    #[test]
    fn default_directory_stays_under_results() {
        let dir = default_results_dir(&["../../etc/x", "taco:sizes=1/6/24"]);
        assert_eq!(dir.components().count(), 2, "{}", dir.display());
        assert!(dir.starts_with("results"));
    }
}
