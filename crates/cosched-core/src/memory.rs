//! Memory requests: sizes as users write them (`--mem 64M`, `mem = "2G"`), and the admission rule
//! the daemon and the simulator share: the requests of the jobs running at once never add up to more
//! than the node's memory for jobs.

use std::fmt;

/// A size that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid memory size {text:?}: write a whole number with an optional unit K, M, G or T \
     (powers of 1024; no unit: megabytes), e.g. 64M or 2G"
)]
pub struct SizeError {
    pub text: String,
}

/// Bytes in `text`: a whole number and an optional unit `K`, `M`, `G` or `T` (powers of 1024, as
/// in Slurm's `--mem`), megabytes without one. An optional trailing `B` (`64MB`) is accepted; zero
/// is not a request.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let error = || SizeError { text: text.into() };
    let trimmed = text.trim();
    let unitless = trimmed
        .strip_suffix(['B', 'b'])
        .filter(|rest| rest.ends_with(|c: char| c.is_ascii_alphabetic()))
        .unwrap_or(trimmed);
    let (digits, shift) = match unitless.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => {
            let shift = match unit.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(error()),
            };
            (&unitless[..at], shift)
        }
        _ => (unitless, 20),
    };
    let number: u64 = digits.parse().map_err(|_| error())?;
    match number.checked_mul(1 << shift) {
        Some(bytes) if bytes > 0 => Ok(bytes),
        _ => Err(error()),
    }
}

/// A byte count written in the largest unit that keeps it whole, or to one decimal from a
/// gibibyte up (`64M`, `1.5G`): for listings and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')];
        for (shift, unit) in units {
            let scale = 1u64 << shift;
            if self.0 >= scale {
                return match self.0 % scale {
                    0 => write!(f, "{}{unit}", self.0 >> shift),
                    _ if shift >= 30 => write!(f, "{:.1}{unit}", self.0 as f64 / scale as f64),
                    _ => write!(f, "{}{unit}", self.0.div_ceil(scale)),
                };
            }
        }
        write!(f, "{}", self.0)
    }
}

/// Whether a job asking for `request` bytes may start now beside running jobs whose requests add up
/// to `in_use`, on a node with `capacity` bytes for jobs. A job that asks for nothing always may;
/// one that asks for more than `capacity` never may (refuse it when it is submitted).
pub fn admits(capacity: u64, in_use: u64, request: Option<u64>) -> bool {
    request.is_none_or(|r| in_use.checked_add(r).is_some_and(|total| total <= capacity))
}

/// An optional size as text in a file (`mem = "2G"`), for serde's `with`.
pub mod size_text {
    use super::{parse_size, Size};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Option<u64>, serializer: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_str(&exact(*bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<u64>, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_size(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }

    /// `bytes` in the largest unit that holds it exactly, so that it reads back the same.
    fn exact(bytes: u64) -> String {
        match Size(bytes).to_string() {
            text if !text.contains('.') && parse_size(&text) == Ok(bytes) => text,
            // Sizes are read in kibibytes at the finest.
            _ => format!("{}K", bytes.div_ceil(1024)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_slurm_reads_them() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("64"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("400MB"), Ok(400 << 20));
        for bad in ["", "0", "M", "1.5G", "-1G", "3X", "99999999999T", "1 G B"] {
            let err = parse_size(bad).unwrap_err().to_string();
            assert!(err.contains("e.g. 64M"), "{bad}: {err}");
        }
    }

    #[test]
    fn sizes_print_in_their_largest_whole_unit() {
        assert_eq!(Size(64 << 20).to_string(), "64M");
        assert_eq!(Size(3 << 29).to_string(), "1.5G");
        assert_eq!(Size(1000).to_string(), "1000");
        assert_eq!(Size((1 << 20) + 1).to_string(), "2M");
    }

    #[test]
    fn jobs_are_admitted_while_the_requests_fit() {
        let gib = 1u64 << 30;
        assert!(admits(4 * gib, 0, Some(4 * gib)));
        assert!(admits(4 * gib, 3 * gib, Some(gib)));
        assert!(!admits(4 * gib, 3 * gib, Some(gib + 1)));
        assert!(admits(4 * gib, 5 * gib, None));
        assert!(!admits(4 * gib, u64::MAX, Some(1)));
    }
}
