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
    fn durations_show_as_squeue_shows_them() {
        assert_eq!(format_duration(0.4), "0:00:00");
        assert_eq!(format_duration(61.9), "0:01:01");
        assert_eq!(format_duration(3723.0), "1:02:03");
        assert_eq!(format_duration(86400.0 + 3723.0), "1-01:02:03");
    }
}
