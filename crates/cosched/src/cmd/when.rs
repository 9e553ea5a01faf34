//! WHEN, as `--since` and `--until` read it: a time back from now, a local time or
//! @UNIX-SECONDS; `jobs` and `report` share it, so that both read a time alike.

use anyhow::Context as _;

/// Unix seconds of WHEN: a duration back from `now` (`90s`, `30m`, `1h`, `2d`), `@SECONDS`, or a
/// local date and time `YYYY-MM-DD[ T]HH:MM[:SS]`.
pub fn when(text: &str, now: f64) -> anyhow::Result<f64> {
    let text = text.trim();
    if let Some(seconds) = text.strip_prefix('@') {
        return seconds
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite())
            .context("write @ and Unix seconds");
    }
    let units = [('s', 1.0), ('m', 60.0), ('h', 3600.0), ('d', 86400.0)];
    if let Some((unit, scale)) = units.iter().find(|(u, _)| text.ends_with(*u)) {
        if let Ok(count) = text[..text.len() - unit.len_utf8()].parse::<f64>() {
            anyhow::ensure!(
                count.is_finite() && count >= 0.0,
                "a duration must not be negative"
            );
            return Ok(now - count * scale);
        }
    }
    local_time(text).context(
        "write a time back from now (90s, 30m, 1h, 2d), a local time (2026-11-23 14:00) or @UNIX-SECONDS",
    )
}

/// `YYYY-MM-DD[ T]HH:MM[:SS]` in the local time zone, as Unix seconds.
fn local_time(text: &str) -> Option<f64> {
    // A date alone would parse as its midnight; a window edge names its time of day.
    if !text.contains([' ', 'T']) {
        return None;
    }
    let civil: jiff::civil::DateTime = text.replacen(' ', "T", 1).parse().ok()?;
    let instant = jiff::tz::TimeZone::system().to_timestamp(civil).ok()?;
    Some(instant.as_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_reads_durations_unix_seconds_and_local_times() {
        assert_eq!(when("1h", 10_000.0).unwrap(), 6_400.0);
        assert_eq!(when("90s", 10_000.0).unwrap(), 9_910.0);
        assert_eq!(when("2d", 200_000.0).unwrap(), 27_200.0);
        assert_eq!(when("@1234.5", 0.0).unwrap(), 1234.5);
        let a = when("2026-11-23 14:00", 0.0).unwrap();
        let b = when("2026-11-23T14:00:30", 0.0).unwrap();
        assert_eq!(b - a, 30.0);
        for bad in [
            "",
            "1x",
            "-1h",
            "yesterday",
            "2026-13-01 10:00",
            "2026-11-23",
            "2026-02-30 10:00",
        ] {
            assert!(when(bad, 0.0).is_err(), "{bad}");
        }
    }
}
