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
mod output_file;
mod priority;
pub mod procfs;
pub mod slurm;
mod vfork_exec;
mod watchdog;

pub use calibrate::{calibrate, median_over_rounds, Repeated};
pub use enforce::{Members, ProcessTable};
pub use executor::{
    execute, run, run_observed, Adopt, ArrivingJob, JobOutcome, JobSource, OpenedAsUser, Progress,
    RunOptions, RunReport, RunSetup, RunStats, WorkloadReplay,
};
pub use interrupt::Interrupts;
pub use isolated::{Calibrated, IsolatedTime, IsolatedTimes, ObservedProgram};
pub use launch::InvokingUser;
pub use measure::instruction_counter_status;
pub use mechanism::{Freezer, Mechanisms, Placement, Unavailable, UnknownMechanism};
pub use watchdog::OnDeath;

use cosched_core::PlanError;
use std::path::PathBuf;
use std::process::ExitStatus;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Mechanism(#[from] Unavailable),
    #[error(
        "job {job:?} has no `command`, so it can only be simulated; add a command or use --sim"
    )]
    NoCommand { job: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("policy {policy:?} {source}")]
    Plan { policy: String, source: PlanError },
    #[error("run interrupted by {0}; every job was stopped and its cgroups removed")]
    Interrupted(&'static str),
    #[error(
        "{} is not an isolated-times file of this cosched; delete it and run `cosched calibrate` again",
        path.display()
    )]
    IsolatedTimes {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{program} gave no iterations_per_s= ({status}); it printed {stdout:?}")]
    NoRate {
        program: String,
        status: ExitStatus,
        stdout: String,
    },
    #[error(
        "no time slices in /proc/thread-self/schedstat; the model needs a kernel built with \
         CONFIG_SCHEDSTATS"
    )]
    NoSchedstat,
    #[error("the context-switch ping-pong between two threads pinned to CPU {cpu} failed")]
    PingPong { cpu: u32 },
}
