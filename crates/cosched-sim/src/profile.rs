//! Job performance profiles: how fast a job runs on `n` cores and how it synchronises.
//!
//! A workload names a profile with a string:
//! - a table profile, `nas/lu.A` (TACO Tables 1–2, `data/nas_profiles.csv`) or `polybench/adi`
//!   (Scalpel Table II, `data/polybench_tasks.csv`);
//! - a parametric one, `amdahl(serial=0.05, runtime=60)` or `downey(A=32, sigma=1, runtime=120)`.
//!
//! Any profile takes overrides in parentheses: `nas/lu.A(sync_interval=0.001)`,
//! `amdahl(serial=0.1, runtime=30, sync=spin, working_set=4)`. See `docs/workload-format.md`.

use crate::footprint::Footprint;
use cosched_core::SyncKind;
use std::sync::LazyLock;

const NAS_CSV: &str = include_str!("../data/nas_profiles.csv");
const NAS_SYNC_CSV: &str = include_str!("../data/nas_sync.csv");
const POLYBENCH_CSV: &str = include_str!("../data/polybench_tasks.csv");

/// Bytes per element of Scalpel's footprints (Table II), to convert them to MB. Eq. 3 sets the window to
/// l = LLC / (element size × C) accesses, and a window of l accesses touches at most l elements; Table II
/// reaches 530,390 elements, above l = 393,216 for 8-byte elements but within l = 786,432 for 4-byte
/// ones, so the table counts 4-byte elements.
const POLYBENCH_ELEMENT_BYTES: f64 = 4.0;
/// Eq. 3's window on the machine Table II was measured on (Xeon E5620: a 12 MB L3 shared by C = 4
/// cores), in elements.
const POLYBENCH_WINDOW: f64 = 12.0 * 1024.0 * 1024.0 / (POLYBENCH_ELEMENT_BYTES * 4.0);
/// Cost of one blocking synchronisation (block + wake-up) on Linux, seconds (Peter et al. §2: 7.4 µs).
pub const BLOCK_COST: f64 = 7.4e-6;

/// Speedup on `n` cores alone on the machine, and optionally under full load (effective speedup).
#[derive(Debug, Clone, PartialEq)]
pub enum Speedup {
    /// Measured points (cores, speedup), ascending; (1, 1) is implied. Flat beyond the last point.
    Table {
        traditional: Vec<(f64, f64)>,
        /// Effective speedup at the same core counts (TACO §3.2): all other cores busy.
        effective: Option<Vec<(f64, f64)>>,
    },
    /// Amdahl's law with serial fraction `serial`.
    Amdahl { serial: f64 },
    /// Downey's model (1997) with average parallelism `a` and coefficient of variation `sigma`.
    Downey { a: f64, sigma: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile string as written in the workload (kept for traces and messages).
    pub name: String,
    /// Sequential run time alone on the machine, seconds: the job's total work.
    pub work: f64,
    pub speedup: Speedup,
    pub sync: SyncKind,
    /// Seconds between two synchronisations while each of its threads has a CPU of its own.
    pub sync_interval: f64,
    /// `sync = block` only: how long a waiting thread spins before it blocks (a spin-then-block barrier,
    /// Peter et al. §3 [Kontothanassis et al.]); zero seconds blocks at once (passive waiting).
    pub spin_limit: SpinLimit,
    /// Seconds from a new thread-count advice until a malleable job uses it (TACO Table 2).
    pub reconfig_delay: f64,
    /// The job's footprint curve, from which the LLC model derives its misses; None when unknown.
    pub footprint: Option<Footprint>,
    /// Memory bandwidth one thread demands at full speed, GB/s; 0 when unknown.
    pub bandwidth_gbs: f64,
}

/// How long a blocking waiter spins first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpinLimit {
    Seconds(f64),
    /// libgomp's default wait policy (no `OMP_WAIT_POLICY`): `GOMP_SPINCOUNT` polls, whose duration is
    /// the machine's (`ModelParams::gomp_spin`), then a futex sleep.
    Gomp,
}

impl SpinLimit {
    pub fn is_zero(&self) -> bool {
        *self == SpinLimit::Seconds(0.0)
    }
}

impl Speedup {
    /// Speedup alone on `n` cores (`n` may be fractional: a share of CPUs).
    pub fn traditional(&self, n: f64) -> f64 {
        let n = n.max(0.0);
        if n < 1.0 {
            return n;
        }
        match self {
            Speedup::Table { traditional, .. } => interpolate(traditional, n),
            Speedup::Amdahl { serial } => 1.0 / (serial + (1.0 - serial) / n),
            Speedup::Downey { a, sigma } => downey(*a, *sigma, n),
        }
    }

    /// How much slower the job runs on `n` cores when every other core of the machine is busy than when
    /// it is alone (≥ 1). Derived from the effective-speedup table: T_loaded(n) / T_alone(n) =
    /// S_eff(top)·S_trad(n) / (S_trad(top)·S_eff(n)), where the top point is the whole machine, loaded by
    /// the job itself. 1 for profiles without an effective table.
    pub fn loaded_slowdown(&self, n: f64) -> f64 {
        let Speedup::Table {
            traditional,
            effective: Some(effective),
        } = self
        else {
            return 1.0;
        };
        let (Some(&(_, trad_top)), Some(&(_, eff_top))) = (traditional.last(), effective.last())
        else {
            return 1.0;
        };
        let n = n.max(1.0);
        let factor = eff_top * interpolate(traditional, n) / (trad_top * interpolate(effective, n));
        // Measured effective speedups are sometimes super-linear (lu.A); a loaded machine is never faster.
        factor.max(1.0)
    }
}

/// Piecewise-linear interpolation through (1, 1) and `points`; flat beyond the last point.
fn interpolate(points: &[(f64, f64)], n: f64) -> f64 {
    let mut previous = (1.0, 1.0);
    for &(cores, speedup) in points {
        if n <= cores {
            let span = cores - previous.0;
            if span <= 0.0 {
                return speedup;
            }
            return previous.1 + (speedup - previous.1) * (n - previous.0) / span;
        }
        previous = (cores, speedup);
    }
    previous.1
}

/// Downey, "A parallel workload model and its implications for processor allocation" (HPDC 1997).
fn downey(a: f64, sigma: f64, n: f64) -> f64 {
    if sigma <= 1.0 {
        if n <= a {
            a * n / (a + sigma * (n - 1.0) / 2.0)
        } else if n <= 2.0 * a - 1.0 {
            a * n / (sigma * (a - 0.5) + n * (1.0 - sigma / 2.0))
        } else {
            a
        }
    } else if n <= a + a * sigma - sigma {
        n * a * (sigma + 1.0) / (sigma * (n + a - 1.0) + a)
    } else {
        a
    }
}

/// A profile string that does not parse, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("profile {profile:?}: {reason}")]
pub struct ProfileError {
    pub profile: String,
    pub reason: ProfileProblem,
}

/// What is wrong with a profile string; each message names what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileProblem {
    #[error("missing closing ')'")]
    Unclosed,
    #[error("parameter {0:?} is not key=value")]
    NotKeyValue(String),
    #[error("no {table} benchmark {name:?}; valid profiles: {}", valid_profiles().join(", "))]
    UnknownBenchmark { table: &'static str, name: String },
    #[error("unknown profile kind; valid profiles: {}", valid_profiles().join(", "))]
    UnknownKind,
    #[error("serial={0} must be within 0..1")]
    SerialOutOfRange(f64),
    #[error("A={a} must be ≥ 1 and sigma={sigma} must be ≥ 0")]
    DowneyOutOfRange { a: f64, sigma: f64 },
    #[error("needs {0}=…")]
    Missing(&'static str),
    #[error("{key}={value} is not a number")]
    NotANumber { key: &'static str, value: String },
    #[error("{key}={value} must be a number ≥ 0")]
    Negative { key: &'static str, value: String },
    #[error("{0} must be > 0 seconds")]
    NotPositive(&'static str),
    #[error("sync={0}: use none, spin or block")]
    UnknownSync(String),
    #[error("sync=spin|block needs sync_interval=SECONDS")]
    SyncWithoutInterval,
    #[error("spin=SECONDS is how long a blocking waiter spins first: it needs sync=block (sync=spin spins without limit)")]
    SpinWithoutBlock,
    #[error("unknown parameter {0:?}; parameters: serial, A, sigma, runtime, sync, sync_interval, spin, reconfig_delay, working_set, bandwidth")]
    UnknownParameter(String),
}

/// Every profile name a workload may use, for error messages and `--help`, and for `cosched gen` to
/// expand a table's name into its profiles.
pub fn valid_profiles() -> &'static [String] {
    static NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut names: Vec<String> = (NAS.iter().map(|(name, _)| format!("nas/{name}")))
            .chain(
                POLYBENCH
                    .iter()
                    .map(|(name, _)| format!("polybench/{name}")),
            )
            .collect();
        names.push("amdahl(serial=F, runtime=S)".into());
        names.push("downey(A=N, sigma=F, runtime=S)".into());
        names
    });
    &NAMES
}

/// Parses a profile string (see the module documentation).
pub fn parse(text: &str) -> Result<Profile, ProfileError> {
    let error = |reason: ProfileProblem| ProfileError {
        profile: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let (base, params) = match trimmed.split_once('(') {
        Some((base, rest)) => {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| error(ProfileProblem::Unclosed))?;
            (base.trim(), parse_params(inner).map_err(error)?)
        }
        None => (trimmed, Vec::new()),
    };
    let mut params = Params {
        items: params,
        used: Vec::new(),
    };
    let mut profile = if let Some(bench) = base.strip_prefix("nas/") {
        table_profile(&NAS, bench).ok_or_else(|| error(unknown_table("nas", bench)))?
    } else if let Some(kernel) = base.strip_prefix("polybench/") {
        table_profile(&POLYBENCH, kernel)
            .ok_or_else(|| error(unknown_table("polybench", kernel)))?
    } else if base == "amdahl" {
        let serial = params.required("serial").map_err(error)?;
        if !(0.0..=1.0).contains(&serial) {
            return Err(error(ProfileProblem::SerialOutOfRange(serial)));
        }
        parametric(Speedup::Amdahl { serial }, &mut params).map_err(error)?
    } else if base == "downey" {
        let a = params.required("A").map_err(error)?;
        let sigma = params.required("sigma").map_err(error)?;
        if a < 1.0 || sigma < 0.0 {
            return Err(error(ProfileProblem::DowneyOutOfRange { a, sigma }));
        }
        parametric(Speedup::Downey { a, sigma }, &mut params).map_err(error)?
    } else {
        return Err(error(ProfileProblem::UnknownKind));
    };
    profile.name = trimmed.to_string();
    params.apply_overrides(&mut profile).map_err(error)?;
    Ok(profile)
}

fn unknown_table(table: &'static str, name: &str) -> ProfileProblem {
    ProfileProblem::UnknownBenchmark {
        table,
        name: name.to_string(),
    }
}

fn parametric(speedup: Speedup, params: &mut Params) -> Result<Profile, ProfileProblem> {
    let work = params.required("runtime")?;
    Ok(Profile {
        name: String::new(),
        work,
        speedup,
        sync: SyncKind::None,
        sync_interval: f64::INFINITY,
        spin_limit: SpinLimit::Seconds(0.0),
        reconfig_delay: 0.0,
        footprint: None,
        bandwidth_gbs: 0.0,
    })
}

struct Params {
    items: Vec<(String, String)>,
    used: Vec<String>,
}

impl Params {
    fn number(&mut self, key: &'static str) -> Result<Option<f64>, ProfileProblem> {
        let Some((_, value)) = self.items.iter().find(|(k, _)| k == key) else {
            return Ok(None);
        };
        self.used.push(key.to_string());
        let number: f64 = value.parse().map_err(|_| ProfileProblem::NotANumber {
            key,
            value: value.clone(),
        })?;
        if !number.is_finite() || number < 0.0 {
            let value = value.clone();
            return Err(ProfileProblem::Negative { key, value });
        }
        Ok(Some(number))
    }

    fn required(&mut self, key: &'static str) -> Result<f64, ProfileProblem> {
        self.number(key)?.ok_or(ProfileProblem::Missing(key))
    }

    fn apply_overrides(&mut self, profile: &mut Profile) -> Result<(), ProfileProblem> {
        if let Some(runtime) = self.number("runtime")? {
            if runtime <= 0.0 {
                return Err(ProfileProblem::NotPositive("runtime"));
            }
            profile.work = runtime;
        }
        if let Some(v) = self.number("sync_interval")? {
            if v <= 0.0 {
                return Err(ProfileProblem::NotPositive("sync_interval"));
            }
            profile.sync_interval = v;
        }
        if let Some((_, value)) = self.items.iter().find(|(k, _)| k == "spin") {
            profile.spin_limit = if value == "gomp" {
                self.used.push("spin".into());
                SpinLimit::Gomp
            } else {
                SpinLimit::Seconds(self.number("spin")?.unwrap_or(0.0))
            };
        }
        if let Some(v) = self.number("reconfig_delay")? {
            profile.reconfig_delay = v;
        }
        if let Some(v) = self.number("working_set")? {
            profile.footprint = (v > 0.0).then_some(Footprint::WorkingSet { mb: v });
        }
        if let Some(v) = self.number("bandwidth")? {
            profile.bandwidth_gbs = v;
        }
        if let Some((_, value)) = self.items.iter().find(|(k, _)| k == "sync") {
            profile.sync = match value.as_str() {
                "none" => SyncKind::None,
                "spin" => SyncKind::Spin,
                "block" => SyncKind::Block,
                other => return Err(ProfileProblem::UnknownSync(other.to_string())),
            };
            self.used.push("sync".into());
        }
        if profile.sync != SyncKind::None && !profile.sync_interval.is_finite() {
            return Err(ProfileProblem::SyncWithoutInterval);
        }
        if !profile.spin_limit.is_zero() && profile.sync != SyncKind::Block {
            return Err(ProfileProblem::SpinWithoutBlock);
        }
        if let Some((key, _)) = self.items.iter().find(|(k, _)| !self.used.contains(k)) {
            return Err(ProfileProblem::UnknownParameter(key.clone()));
        }
        Ok(())
    }
}

fn parse_params(inner: &str) -> Result<Vec<(String, String)>, ProfileProblem> {
    inner
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| ProfileProblem::NotKeyValue(pair.trim().to_string()))?;
            Ok((key.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

fn csv_rows(text: &'static str) -> impl Iterator<Item = Vec<&'static str>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split(',').map(str::trim).collect())
}

fn nas_rows() -> impl Iterator<Item = Vec<&'static str>> {
    csv_rows(NAS_CSV)
}

fn polybench_rows() -> impl Iterator<Item = Vec<&'static str>> {
    csv_rows(POLYBENCH_CSV)
}

/// The tables' profiles by name, read once: a sweep's workloads name them hundreds of times, and reading
/// a row anew splits the table's text up to it.
type Table = LazyLock<Vec<(&'static str, Profile)>>;

static NAS: Table = LazyLock::new(|| nas_rows().map(|row| (row[0], nas(&row))).collect());
static POLYBENCH: Table = LazyLock::new(|| {
    polybench_rows()
        .map(|row| (row[0], polybench(&row)))
        .collect()
});

fn table_profile(table: &Table, name: &str) -> Option<Profile> {
    let (_, profile) = table.iter().find(|(row, _)| *row == name)?;
    Some(profile.clone())
}

/// Table columns: benchmark, description, seq_time_s, trad_s2..24 (5), eff_s2..24 (5), regions,
/// reconf_ms, adapt, active_wait.
fn nas(row: &[&str]) -> Profile {
    let bench = row[0];
    let number = |i: usize| {
        row[i]
            .parse::<f64>()
            .expect("data/nas_profiles.csv is numeric")
    };
    let cores = [2.0, 3.0, 6.0, 12.0, 24.0];
    let traditional: Vec<(f64, f64)> = cores
        .iter()
        .zip(3..8)
        .map(|(&c, i)| (c, number(i)))
        .collect();
    let effective: Vec<(f64, f64)> = cores
        .iter()
        .zip(8..13)
        .map(|(&c, i)| (c, number(i)))
        .collect();
    let work = number(2);
    let active_wait = row[16] == "yes";
    let syncs = nas_sync_count(bench).unwrap_or_else(|| number(13));
    let best = work / traditional.last().map_or(1.0, |p| p.1);
    Profile {
        name: String::new(),
        work,
        speedup: Speedup::Table {
            traditional,
            effective: Some(effective),
        },
        // libgomp's default waiting spins briefly and then sleeps; only lu.A busy-waits in its own code
        // (TACO §4.1).
        sync: if active_wait {
            SyncKind::Spin
        } else {
            SyncKind::Block
        },
        sync_interval: best / syncs,
        // TACO ran libgomp's default wait policy (its UEp, passive waiting, is `spin=0`).
        spin_limit: if active_wait {
            SpinLimit::Seconds(0.0)
        } else {
            SpinLimit::Gomp
        },
        reconfig_delay: number(14) / 1000.0,
        footprint: None,
        bandwidth_gbs: 0.0,
    }
}

/// Synchronisations per run where they are more frequent than parallel regions (`data/nas_sync.csv`).
fn nas_sync_count(bench: &str) -> Option<f64> {
    csv_rows(NAS_SYNC_CSV)
        .find(|row| row[0] == bench)
        .map(|row| row[1].parse().expect("data/nas_sync.csv is numeric"))
}

fn polybench(row: &[&str]) -> Profile {
    let number = |i: usize| {
        row[i]
            .parse::<f64>()
            .expect("data/polybench_tasks.csv is numeric")
    };
    Profile {
        name: String::new(),
        work: number(1),
        // Scalpel's tasks are single-threaded (many-task computing).
        speedup: Speedup::Table {
            traditional: Vec::new(),
            effective: None,
        },
        sync: SyncKind::None,
        sync_interval: f64::INFINITY,
        spin_limit: SpinLimit::Seconds(0.0),
        reconfig_delay: 0.0,
        footprint: Some(Footprint::power_law_through(
            number(2),
            POLYBENCH_WINDOW,
            POLYBENCH_ELEMENT_BYTES,
        )),
        bandwidth_gbs: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nas_table_profiles_carry_the_published_figures() {
        let lu = parse("nas/lu.A").unwrap();
        assert_eq!(lu.work, 75.0);
        assert_eq!(lu.sync, SyncKind::Spin);
        assert!((lu.speedup.traditional(24.0) - 12.9).abs() < 1e-9);
        assert!((lu.speedup.traditional(4.5) - (2.4 + 1.3 * 1.5 / 3.0)).abs() < 1e-9);
        assert!((lu.reconfig_delay - 0.073).abs() < 1e-12);
        let bt = parse("nas/bt.A").unwrap();
        assert_eq!(bt.sync, SyncKind::Block);
        // A single-core instance under full load runs S_eff(24)/S_trad(24) times slower.
        assert!((bt.speedup.loaded_slowdown(1.0) - 17.0 / 13.4).abs() < 1e-9);
        assert_eq!(bt.speedup.loaded_slowdown(24.0), 1.0);
    }

    #[test]
    fn parametric_profiles_follow_their_laws() {
        let p = parse("amdahl(serial=0.5, runtime=10)").unwrap();
        assert_eq!(p.work, 10.0);
        assert!((p.speedup.traditional(2.0) - 4.0 / 3.0).abs() < 1e-12);
        let d = parse("downey(A=8, sigma=0)").unwrap_err();
        assert!(d.reason.to_string().contains("runtime"), "{d}");
        let d = parse("downey(A=8, sigma=0, runtime=5)").unwrap();
        assert!((d.speedup.traditional(4.0) - 4.0).abs() < 1e-12);
        assert!((d.speedup.traditional(100.0) - 8.0).abs() < 1e-12);
    }

    #[test]
    fn overrides_apply_and_typos_are_named() {
        let p = parse("nas/lu.A(sync_interval=0.01, runtime=30)").unwrap();
        assert_eq!((p.sync_interval, p.work), (0.01, 30.0));
        let e = parse("amdahl(serial=0.1, runtime=5, syncinterval=1)").unwrap_err();
        assert!(e.reason.to_string().contains("syncinterval"), "{e}");
        let e = parse("nas/xx.Z").unwrap_err();
        assert!(e.reason.to_string().contains("nas/lu.A"), "{e}");
        let e = parse("amdahl(serial=0.1, runtime=5, sync=spin)").unwrap_err();
        assert!(e.reason.to_string().contains("sync_interval"), "{e}");
        let p = parse("amdahl(serial=0, runtime=5, sync=block, sync_interval=1e-6, spin=5e-5)")
            .unwrap();
        assert_eq!(
            (p.sync_interval, p.spin_limit),
            (1e-6, SpinLimit::Seconds(5e-5))
        );
        let e = parse("amdahl(serial=0, runtime=5, sync=spin, sync_interval=1e-6, spin=5e-5)")
            .unwrap_err();
        assert!(e.reason.to_string().contains("sync=block"), "{e}");
        let p = parse("amdahl(serial=0, runtime=5, sync=block, sync_interval=1e-3, spin=gomp)")
            .unwrap();
        assert_eq!(p.spin_limit, SpinLimit::Gomp);
        assert_eq!(parse("nas/cg.B").unwrap().spin_limit, SpinLimit::Gomp);
        assert!(parse("nas/lu.A").unwrap().spin_limit.is_zero());
    }

    #[test]
    fn polybench_tasks_are_sequential_with_footprints_through_table_2() {
        let adi = parse("polybench/adi").unwrap();
        assert_eq!(adi.speedup.traditional(8.0), 1.0);
        // 423,390 four-byte elements in eq. 3's window of 786,432 accesses.
        let window = 12.0 / 4.0;
        let fp = adi.footprint.unwrap().mb(window);
        assert!(
            (fp - 423_390.47 * 4.0 / (1024.0 * 1024.0)).abs() < 1e-6,
            "{fp}"
        );
        let custom = parse("polybench/adi(working_set=6)").unwrap();
        assert_eq!(custom.footprint, Some(Footprint::WorkingSet { mb: 6.0 }));
    }
}
