//! Discrete-event simulator and performance model driving cosched policies.
//!
//! The simulator is the second executor: it drives any [`Policy`](cosched_core::Policy) with the same
//! events the real executor delivers and writes the same trace records, but integrates a performance
//! model ([`model`], `docs/simulation-model.md`) instead of running processes.
//!
//! ```no_run
//! use cosched_core::topology::presets;
//! use cosched_sim::{jobs, simulate, SimOptions};
//!
//! let machine = presets::preset("taco-opteron8435").unwrap();
//! let (workload, jobs) = jobs::load("workload.toml".as_ref(), machine.num_cpus()).unwrap();
//! let mut policy = cosched_policies::create("eq").unwrap();
//! let options = SimOptions { workload: workload.info.name.clone(), ..SimOptions::default() };
//! let trace = simulate(&machine, &jobs, policy.as_mut(), &options).unwrap();
//! let summary = cosched_core::metrics::summarize(&trace);
//! println!("makespan {:?}", summary.makespan);
//! ```
//!
//! - [`simulate`] returns the trace; [`simulate_into`] streams it to a [`TraceSink`]
//!   ([`JsonLinesSink`] for files, [`OutcomeSink`] for runs too large to keep their plans).
//! - [`SimJob`] = `JobSpec` + [`Profile`]; [`jobs::sim_jobs`] / [`jobs::load`] build them from a workload
//!   with errors naming file, line, job and the valid profiles; [`profile::parse`] reads one profile string.
//! - [`isolated_time`] is the denominator of slowdown (also written into each `arrival` record).
//! - [`generate`] makes Poisson workloads (TACO §4.1); [`scenario`] reads scenario files
//!   (`scenarios/README.md`), [`sweep`] their parameter sweeps, and [`runner`] runs them: policies ×
//!   seeds (× workload sets, × sweep points), summarised with `cosched_core::metrics`.
//! - [`SimOptions`] holds the mode ([`Mode::Fluid`] or [`Mode::Exact`]), one switch per model effect
//!   ([`Effects`]) and the model's constants ([`ModelParams`]).
//!
//! New model features belong in new modules called from [`model`], each with a switch in [`Effects`].

pub mod calibrated;
pub mod cluster;
mod engine;
pub mod footprint;
pub mod generate;
pub mod jobs;
pub mod model;
mod parallel;
pub mod profile;
pub mod runner;
pub mod scenario;
mod sink;
pub mod sweep;
pub mod swf;

pub use engine::{isolated_time, simulate, simulate_into, SimError, SimJob, SimOptions, SimStats};
pub use footprint::Footprint;
pub use model::{Effects, Mode, ModelParams, SpeedupModel};
pub use profile::Profile;
pub use sink::{JsonLinesSink, OutcomeSink, SummarySink, TraceLevel, TraceSink};
