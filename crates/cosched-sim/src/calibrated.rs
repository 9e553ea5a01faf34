//! A machine model fitted from short real runs (`cosched calibrate --model`): the model's
//! machine-specific constants, each with the spread of its measurements, in a TOML file kept per machine.
//!
//! The runs themselves are `cosched-linux`'s; this module turns their raw figures into
//! [`ModelParams`] (pure arithmetic, tested on synthetic figures) and reads and writes the file.
//! `docs/simulation-model.md` ("Calibrated constants") says what each constant means and how it is
//! measured.

use crate::model::ModelParams;
use crate::profile::Speedup;
use cosched_core::metrics::Spread;
use cosched_core::names::file_name_part;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Raw figures of the calibration runs, one entry per repetition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurements {
    /// Threads of the spinning team in the co-run runs.
    pub team_threads: u32,
    /// Threads per CPU while the team runs beside its co-runners (the team's own included).
    pub team_load: f64,
    /// The spinning team's progress beside co-runners that block and wake, as a fraction of its
    /// progress alone.
    pub spin_progress: Vec<f64>,
    /// Mean time a CPU-bound thread runs before the OS switches to another on its CPU, seconds.
    pub timeslice: Vec<f64>,
    /// Seconds of `GOMP_SPINCOUNT`'s default 300,000 polls (libgomp's loop: a load and a pause).
    pub gomp_spin: Vec<f64>,
    /// Seconds per switch between two threads on one CPU that wake each other.
    pub context_switch: Vec<f64>,
    /// Seconds to read an LLC's worth of data from memory.
    pub llc_refill: Vec<f64>,
    /// Memory read bandwidth with every CPU reading, GB/s.
    pub bandwidth_gbs: Vec<f64>,
}

/// One fitted constant: the median of its samples and their range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fitted {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    pub samples: usize,
}

impl Fitted {
    fn of(samples: &[f64]) -> Option<Fitted> {
        let spread = Spread::of(samples.iter().copied())?;
        Some(Fitted {
            value: spread.median,
            low: spread.low,
            high: spread.high,
            samples: spread.samples,
        })
    }
}

/// The machine model file: which machine, the constants the simulator uses, and how each was fitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibratedModel {
    /// The machine's name as the topology reports it, and its CPU count: the file's key.
    pub machine: String,
    pub cpus: usize,
    /// The simulator's constants: the fitted ones, the others at their defaults.
    pub params: ModelParams,
    /// Each fitted constant of `params` (same name) with the spread of its measurements.
    pub fitted: BTreeMap<String, Fitted>,
}

/// Bounds of the co-run exponent: 0 is gang-like alignment, beyond 8 the team never co-runs.
const CORUN_RANGE: (f64, f64) = (0.0, 8.0);

impl CalibratedModel {
    /// Fits the constants from `m`; a constant without samples keeps its default and is not listed.
    pub fn fit(machine: &str, cpus: usize, m: &Measurements) -> CalibratedModel {
        let mut params = ModelParams::default();
        let mut fitted = BTreeMap::new();
        let corun: Vec<f64> = (m.spin_progress.iter())
            .map(|&p| corun_exponent(p, m.team_load, m.team_threads))
            .collect();
        let constants: [(&str, &[f64], &mut f64); 6] = [
            ("spin_corun", &corun, &mut params.spin_corun),
            ("os_quantum", &m.timeslice, &mut params.os_quantum),
            ("gomp_spin", &m.gomp_spin, &mut params.gomp_spin),
            (
                "context_switch",
                &m.context_switch,
                &mut params.context_switch,
            ),
            ("llc_refill", &m.llc_refill, &mut params.llc_refill),
            (
                "numa_bandwidth_gbs",
                &m.bandwidth_gbs,
                &mut params.numa_bandwidth_gbs,
            ),
        ];
        for (name, samples, slot) in constants {
            if let Some(f) = Fitted::of(samples) {
                *slot = f.value;
                fitted.insert(name.to_string(), f);
            }
        }
        CalibratedModel {
            machine: machine.to_string(),
            cpus,
            params,
            fitted,
        }
    }

    /// `dir/model-<machine>-<cpus>cpu.toml`: one file per machine, beside the isolated times.
    pub fn path_in(dir: &Path, machine: &str, cpus: usize) -> PathBuf {
        dir.join(format!("model-{}-{cpus}cpu.toml", file_name_part(machine)))
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).expect("a calibrated model always serialises");
        format!(
            "# cosched machine model, written by `cosched calibrate --model`; read by `cosched sim` and\n\
             # `cosched compare --sim` on this machine (`--machine this`). [params] are the simulator's\n\
             # constants (docs/simulation-model.md); [fitted.NAME] gives each measured one's median and\n\
             # range over its runs.\n{body}"
        )
    }

    /// Reads a model file; the error names the file and the way to write a fresh one.
    pub fn load(path: &Path) -> Result<CalibratedModel, ModelFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ModelFileError::Invalid {
            path: path.to_path_buf(),
            reason: e.message().to_string(),
        })
    }
}

/// A machine model file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    #[error("cannot read the machine model {}: {source}; run `cosched calibrate --model` to fit one", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a machine model ({reason}); run `cosched calibrate --model` to write it again", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// The speedup of a job that took `one_thread` seconds alone with one thread on one CPU and `seconds`
/// alone with `threads` threads on as many CPUs of the same machine: the table through (1, 1) and
/// (`threads`, `one_thread` / `seconds`), as measured: better than linear too, where the threads'
/// caches hold what one thread's cannot. A table rather than Amdahl's law because on
/// the machine it was written for, the kernels that scale poorly keep all their threads busy (their CPU
/// time grows with their threads): they have no serial phase that would leave a CPU to others.
/// None without two distinct points.
pub fn measured_speedup(one_thread: f64, threads: u32, seconds: f64) -> Option<Speedup> {
    if threads < 2 || !(one_thread > 0.0 && seconds > 0.0) {
        return None;
    }
    let n = f64::from(threads);
    Some(Speedup::Table {
        traditional: vec![(n, one_thread / seconds)],
        effective: None,
    })
}

/// κ such that a team of `threads` at `load` threads per CPU co-runs L^−(1 + κ(n − 1)) of the time,
/// given the measured `progress` (which is that fraction: the team advances only while co-running).
fn corun_exponent(progress: f64, load: f64, threads: u32) -> f64 {
    if progress.is_nan() || progress <= 0.0 || load <= 1.0 || threads < 2 {
        return CORUN_RANGE.1;
    }
    let exponent = -progress.ln() / load.ln();
    ((exponent - 1.0) / f64::from(threads - 1)).clamp(CORUN_RANGE.0, CORUN_RANGE.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic() -> Measurements {
        Measurements {
            team_threads: 2,
            team_load: 2.0,
            // Co-running a quarter of the time at two threads per CPU is chance alignment (κ = 1);
            // an eighth is worse than chance (κ = 2), a half is in step (κ = 0).
            spin_progress: vec![0.25, 0.125, 0.5],
            timeslice: vec![0.004, 0.003, 0.0035],
            gomp_spin: vec![0.001, 0.0012],
            context_switch: vec![2e-6, 3e-6, 2.5e-6],
            llc_refill: vec![],
            bandwidth_gbs: vec![10.0, 12.0, 11.0],
        }
    }

    #[test]
    fn constants_are_the_medians_with_their_range() {
        let model = CalibratedModel::fit("vm", 2, &synthetic());
        let corun = &model.fitted["spin_corun"];
        assert!((corun.value - 1.0).abs() < 1e-9, "{corun:?}");
        assert!((corun.low - 0.0).abs() < 1e-9 && (corun.high - 2.0).abs() < 1e-9);
        assert_eq!(model.params.spin_corun, corun.value);
        assert_eq!(model.params.os_quantum, 0.0035);
        assert!((model.params.gomp_spin - 0.0011).abs() < 1e-12);
        assert_eq!(model.fitted["numa_bandwidth_gbs"].samples, 3);
        // Nothing measured: the default stays and nothing claims to be fitted.
        assert_eq!(model.params.llc_refill, ModelParams::default().llc_refill);
        assert!(!model.fitted.contains_key("llc_refill"));
    }

    #[test]
    fn the_measured_speedup_goes_through_both_measured_times() {
        let speedup = measured_speedup(6.0, 2, 4.5).unwrap();
        assert_eq!(speedup.traditional(1.0), 1.0);
        assert!((speedup.traditional(2.0) - 6.0 / 4.5).abs() < 1e-12);
        assert!((speedup.traditional(0.5) - 0.5).abs() < 1e-12);
        // Better than linear and slower with more threads both stay as measured.
        assert_eq!(measured_speedup(6.0, 2, 2.5).unwrap().traditional(2.0), 2.4);
        assert!(measured_speedup(6.0, 2, 7.0).unwrap().traditional(2.0) < 1.0);
        assert_eq!(measured_speedup(6.0, 1, 6.0), None);
        assert_eq!(measured_speedup(0.0, 2, 3.0), None);
    }

    #[test]
    fn a_team_that_never_co_runs_gets_the_largest_exponent() {
        assert_eq!(corun_exponent(0.0, 2.0, 2), CORUN_RANGE.1);
        assert_eq!(corun_exponent(1.0, 2.0, 2), CORUN_RANGE.0);
        // Four threads at three per CPU, progress 3^−4: κ = 1.
        assert!((corun_exponent(3f64.powi(-4), 3.0, 4) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_file_reads_back_and_names_its_fix_when_broken() {
        let dir = std::env::temp_dir().join(format!("cosched-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let model = CalibratedModel::fit("my box/1", 2, &synthetic());
        let path = CalibratedModel::path_in(&dir, &model.machine, model.cpus);
        assert_eq!(path.parent(), Some(dir.as_path()));
        std::fs::write(&path, model.to_toml()).unwrap();
        assert_eq!(CalibratedModel::load(&path).unwrap(), model);
        std::fs::write(&path, "machine = 3").unwrap();
        let error = CalibratedModel::load(&path).unwrap_err();
        assert!(error.to_string().contains("calibrate --model"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
