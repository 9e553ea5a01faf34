//! Durations written as Slurm writes them: `--time` limits (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
//! `D-HH:MM`, `D-HH:MM:SS`, as `sbatch --time` reads them) and elapsed times (`H:MM:SS`, with
//! `D-` in front past a day, as `squeue` shows them).

use anyhow::Context as _;

/// Seconds of a `--time` limit; `None` for no limit (`0`, `UNLIMITED`, `INFINITE`, as in Slurm).
pub fn parse_time_limit(text: &str) -> anyhow::Result<Option<u64>> {
    let hint = "write MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (Slurm's --time formats)";
    let trimmed = text.trim();
    if ["UNLIMITED", "INFINITE"].contains(&trimmed.to_ascii_uppercase().as_str()) {
        return Ok(None);
    }
    let number = |part: &str| {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u64>().ok())
            .flatten()
            .with_context(|| format!("--time {text}: {part:?} is not a whole number; {hint}"))
    };
    let (days, rest) = match trimmed.split_once('-') {
        Some((days, rest)) => (Some(number(days)?), rest),
        None => (None, trimmed),
    };
    let parts = rest
        .split(':')
        .map(number)
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let seconds = match (days, parts.as_slice()) {
        (None, [minutes]) => minutes * 60,
        (None, [minutes, seconds]) => minutes * 60 + seconds,
        (None, [hours, minutes, seconds]) => hours * 3600 + minutes * 60 + seconds,
        (Some(days), [hours]) => days * 86400 + hours * 3600,
        (Some(days), [hours, minutes]) => days * 86400 + hours * 3600 + minutes * 60,
        (Some(days), [hours, minutes, seconds]) => {
            days * 86400 + hours * 3600 + minutes * 60 + seconds
        }
        _ => anyhow::bail!("--time {text}: {hint}"),
    };
    Ok((seconds > 0).then_some(seconds))
}

/// The Unix time `--begin TEXT` names, read as sbatch reads it, in `zone`, at `now` (Unix
/// seconds): `now[+COUNT[seconds|minutes|hours|days|weeks]]` (seconds without a unit),
/// `HH:MM[:SS]` (its next coming), `YYYY-MM-DD[THH:MM[:SS]]`, `midnight`, `noon`, `teatime`
/// (16:00), `today`, `tomorrow`.
pub fn parse_begin(text: &str, now: f64, zone: &jiff::tz::TimeZone) -> anyhow::Result<f64> {
    use jiff::civil::{DateTime, Time};
    let hint = "write now+COUNT[seconds|minutes|hours|days|weeks], HH:MM[:SS], \
                YYYY-MM-DD[THH:MM[:SS]], midnight, noon, teatime, today or tomorrow (Slurm's \
                --begin formats)";
    let word = text.trim().to_ascii_lowercase();
    if let Some(rest) = word.strip_prefix("now") {
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(now);
        }
        let rest = rest
            .strip_prefix('+')
            .with_context(|| format!("--begin {text}: {hint}"))?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let count: f64 = rest[..digits]
            .parse()
            .with_context(|| format!("--begin {text}: no count after now+; {hint}"))?;
        let unit = match &rest[digits..] {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86400.0,
            "w" | "week" | "weeks" => 7.0 * 86400.0,
            other => anyhow::bail!("--begin {text}: {other:?} is not a unit; {hint}"),
        };
        return Ok(now + count * unit);
    }
    let at = jiff::Timestamp::from_second(now as i64)?;
    let today = zone.to_datetime(at).date();
    let unix = |civil: DateTime| -> anyhow::Result<f64> {
        Ok(zone.to_timestamp(civil)?.as_second() as f64)
    };
    // A time of day alone is its next coming: today's if still to come, else tomorrow's.
    let next = |time: Time| -> anyhow::Result<f64> {
        let t = unix(today.to_datetime(time))?;
        match t >= now {
            true => Ok(t),
            false => unix(today.tomorrow()?.to_datetime(time)),
        }
    };
    match word.as_str() {
        "midnight" => return unix(today.tomorrow()?.to_datetime(Time::midnight())),
        "noon" => return next(Time::constant(12, 0, 0, 0)),
        "teatime" => return next(Time::constant(16, 0, 0, 0)),
        "today" => return unix(today.to_datetime(Time::midnight())),
        "tomorrow" => return unix(today.tomorrow()?.to_datetime(Time::midnight())),
        _ => {}
    }
    let trimmed = text.trim();
    // A date first: jiff reads the time of day alone out of a whole date and time too.
    if let Ok(civil) = trimmed.parse::<DateTime>() {
        return unix(civil);
    }
    if let Ok(date) = trimmed.parse::<jiff::civil::Date>() {
        return unix(date.to_datetime(Time::midnight()));
    }
    if let Ok(time) = trimmed.parse::<Time>() {
        return next(time);
    }
    anyhow::bail!("--begin {text}: {hint}")
}

/// `H:MM:SS`, or `D-HH:MM:SS` from a day on; whole seconds, rounded down.
pub fn format_duration(seconds: f64) -> String {
    let total = seconds.max(0.0) as u64;
    let (days, rest) = (total / 86400, total % 86400);
    let (hours, minutes, seconds) = (rest / 3600, rest % 3600 / 60, rest % 60);
    match days {
        0 => format!("{hours}:{minutes:02}:{seconds:02}"),
        _ => format!("{days}-{hours:02}:{minutes:02}:{seconds:02}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slurm_time_format_reads_as_sbatch_reads_it() {
        for (text, seconds) in [
            ("90", 5400),
            ("0:02", 2),
            ("2:30", 150),
            ("1:02:03", 3723),
            ("2-3", 2 * 86400 + 3 * 3600),
            ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60),
            ("1-00:00:05", 86405),
        ] {
            assert_eq!(parse_time_limit(text).unwrap(), Some(seconds), "{text}");
        }
        for unlimited in ["0", "UNLIMITED", "infinite", "0:00"] {
            assert_eq!(parse_time_limit(unlimited).unwrap(), None, "{unlimited}");
        }
        for bad in ["", "1h", "1:2:3:4", "-5", "1-", "1-2:3:4:5", "a:b", "1:-2"] {
            let message = parse_time_limit(bad).unwrap_err().to_string();
            assert!(message.contains("--time"), "{bad}: {message}");
        }
    }

    #[test]
    fn begin_times_read_as_sbatch_reads_them() {
        let zone = jiff::tz::TimeZone::UTC;
        // 2026-12-02T13:30:00Z
        let now = 1_796_218_200.0;
        let at = |text: &str| parse_begin(text, now, &zone).unwrap();
        assert_eq!(at("now"), now);
        assert_eq!(at("now+30"), now + 30.0);
        assert_eq!(at("now+1hour"), now + 3600.0);
        assert_eq!(at("now+2days"), now + 2.0 * 86400.0);
        assert_eq!(at("16:00"), now + 2.5 * 3600.0);
        assert_eq!(at("teatime"), now + 2.5 * 3600.0);
        // Past today: tomorrow's.
        assert_eq!(at("12:30"), now + 23.0 * 3600.0);
        assert_eq!(at("midnight"), now + 10.5 * 3600.0);
        assert_eq!(at("2026-12-24T12:00"), 1_798_113_600.0);
        assert_eq!(at("2026-12-24"), 1_798_070_400.0);
        for bad in ["", "later", "now+", "now+5years", "25:00", "2026-13-01"] {
            let message = parse_begin(bad, now, &zone).unwrap_err().to_string();
            assert!(message.contains("--begin"), "{bad}: {message}");
        }
    }

    #[test]
    fn durations_show_as_squeue_shows_them() {
        assert_eq!(format_duration(0.4), "0:00:00");
        assert_eq!(format_duration(61.9), "0:01:01");
        assert_eq!(format_duration(3723.0), "1:02:03");
        assert_eq!(format_duration(86400.0 + 3723.0), "1-01:02:03");
    }
}
