//! Cluster-level batch scheduling of rigid jobs on a machine of identical processors, as the Parallel
//! Workloads Archive's logs record it: [`batch`] places jobs (FCFS, EASY backfilling), [`metrics`]
//! computes the archive's usual figures from the placements.
//!
//! Nodes run their jobs alone here; cosched's policies inside each node are not modelled yet
//! (`docs/simulation-model.md`, "Cluster replay").

pub mod batch;
pub mod metrics;

pub use batch::{schedule, BatchError, BatchPolicy, Placement};
pub use metrics::{summarize, BatchMetrics};
