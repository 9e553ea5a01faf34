//! The real executor: runs a workload's jobs as Linux processes under any [`Policy`], enforces each plan
//! with cgroups, CPU affinity and freezing, measures the jobs, and writes the same trace as the
//! simulator (`executor = real`). `docs/executor.md` explains the mechanisms, safety and permissions.
//!
//! ```no_run
//! use cosched_core::{topology::sysfs, workload::Workload};
//! use cosched_linux::{run, RunOptions};
//!
//! let workload = Workload::load("examples/default.toml".as_ref()).unwrap();
//! let machine = sysfs::discover().unwrap();
//! let policy = cosched_policies::create("eq").unwrap();
//! let report = run(&workload, &machine, policy, &RunOptions::new("eq.jsonl", "eq-out")).unwrap();
//! println!("{} via {}", report.trace.display(), report.mechanism);
//! ```
//!
//! - [`run`] / [`run_observed`] (with a progress callback): launch each job at its arrival time once a plan
//!   places it (`{threads}`, `{bench}`, `{workload_dir}` expanded; `OMP_NUM_THREADS`, `COSCHED_CONTROL`
//!   and `LD_PRELOAD` of the preload library set), one process group and one control page per job, output in `<output_dir>/<job>.stdout|stderr`. Returns a [`RunReport`] with every
//!   job's outcome, the executor's CPU time and the slot-switch skew.
//! - [`RunOptions`]: trace path, output directory, mechanisms ([`Placement`], [`Freezer`]; `None` =
//!   detect), sample interval, isolated times.
//! - [`calibrate`]: each job alone, giving [`IsolatedTimes`], stored next to the workload file and read
//!   back into `RunOptions::isolated` so the trace's `arrival` records carry them.
//! - [`Mechanisms::choose`]: what this machine supports, or why not.
//!
//! [`Policy`]: cosched_core::Policy

pub mod affinity;
mod calibrate;
pub mod cgroup;
mod enforce;
mod executor;
mod interrupt;
mod isolated;
mod launch;
mod measure;
mod mechanism;
pub mod model_runs;
mod priority;
pub mod procfs;
pub mod slurm;
mod watchdog;

pub use calibrate::{calibrate, median_over_rounds, Repeated};
pub use enforce::{Members, ProcessTable};
pub use executor::{
    execute, run, run_observed, Adopt, ArrivingJob, JobOutcome, JobSource, OpenedAsUser, Progress,
    RunOptions, RunReport, RunSetup, RunStats, WorkloadReplay,
};
pub use isolated::{Calibrated, IsolatedTime, IsolatedTimes, ObservedProgram};
pub use launch::InvokingUser;
pub use measure::instruction_counter_status;
pub use mechanism::{Freezer, Mechanisms, Placement};
pub use watchdog::OnDeath;

use cosched_core::{JobId, PlanError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Mechanism(String),
    #[error("{0}")]
    Workload(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("cannot enforce the plan on job {job}: {source}")]
    Enforce { job: JobId, source: std::io::Error },
    #[error("policy {policy:?} {source}")]
    Plan { policy: String, source: PlanError },
    #[error("run interrupted by {0}; every job was stopped and its cgroups removed")]
    Interrupted(&'static str),
    #[error("{0}")]
    Calibration(String),
}
