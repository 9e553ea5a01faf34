//! What a policy knows about a job: never its command line, only its shape and what was declared or
//! measured about it.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a job's thread count can be chosen (Feitelson's classification, used by TACO §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Uses a fixed number of threads, whatever it is given.
    Rigid,
    /// Takes the advised thread count at start and keeps it.
    Moldable,
    /// Follows the advised thread count at run time (at its next parallel region).
    #[default]
    Malleable,
}

/// How a job's threads wait for each other; decides how much it suffers from not being coscheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SyncKind {
    /// Independent threads, or synchronisation too rare to matter.
    #[default]
    None,
    /// Threads busy-wait at barriers (OpenMP with `OMP_WAIT_POLICY=active`, spin barriers).
    Spin,
    /// Threads spin briefly, then sleep (libgomp's default, competitive barriers).
    Block,
}

/// Facts declared in the workload or learnt by measurement, that some policies use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobHints {
    /// Expected run time alone on the whole machine, seconds (LPT-style policies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<f64>,
    /// Expected run time alone on one CPU with one thread, seconds (`cosched calibrate --scaling`, or
    /// fitted to the job's past runs, `crate::scaling`): beside `runtime`, how well the job scales
    /// here (`auto` gives it no CPU it cannot use well).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_cpu_runtime: Option<f64>,
    /// Seconds alone on `k` CPUs, as `(k, seconds)` pairs, at the widths its past runs measured
    /// (`crate::scaling::times_alone`): `auto` reads its scaling between them from these points
    /// rather than from a curve through `one_cpu_runtime`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times_alone: Vec<(u32, f64)>,
    /// Average cache footprint in MB (Scalpel, DI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint_mb: Option<f64>,
    /// LLC misses per thousand instructions (DI's intensity), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpki: Option<f64>,
    #[serde(default)]
    pub sync: SyncKind,
}

impl JobHints {
    /// Takes the times alone `measured` in earlier runs (none: the declared ones stay): a
    /// measurement of this machine outweighs what a workload file or a user declared.
    pub fn take_measured_times_alone(&mut self, measured: Vec<(u32, f64)>) {
        if !measured.is_empty() {
            self.times_alone = measured;
        }
    }
}

/// The user a job belongs to, for sharing the machine among users before jobs: policies split CPUs
/// and time among the owners present by `share`, then among each owner's jobs by their weights.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// Opaque id (a uid): jobs with the same id belong to the same user.
    pub user: u32,
    /// The user's part of the machine relative to other users' (Slurm's fair-share shares), 1.0 by
    /// default.
    #[serde(default = "unit_share")]
    pub share: f64,
}

fn unit_share() -> f64 {
    1.0
}

/// A job as policies see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub id: JobId,
    pub name: String,
    /// Seconds after the start of the run.
    pub arrival: f64,
    pub kind: JobKind,
    pub min_threads: u32,
    pub max_threads: u32,
    /// False opts the job out of coscheduling: it is pinned but never frozen (TACO §2.4).
    pub coschedule: bool,
    /// Share of CPU time relative to other jobs (TACO §2.4), 1.0 by default; relative to its owner's
    /// other jobs where it has an owner.
    pub weight: f64,
    pub hints: JobHints,
    /// Whose it is; `None` for a single-user workload, where jobs share the machine by weight alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

impl JobSpec {
    /// The thread count the job should use on `cpus` CPUs, within its bounds.
    pub fn threads_for(&self, cpus: usize) -> u32 {
        (cpus as u32).clamp(self.min_threads.max(1), self.max_threads.max(1))
    }
}
