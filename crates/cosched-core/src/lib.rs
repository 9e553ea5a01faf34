//! The shared vocabulary of cosched: the machine topology, jobs, events, plans, the `Policy` trait, the
//! trace that every executor writes, and the workload files that feed them.

pub mod cpuset;
pub mod cycle;
pub mod event;
pub mod guard;
pub mod job;
pub mod memory;
pub mod metrics;
pub mod names;
pub mod observe;
pub mod plan;
pub mod plan_change;
pub mod policy;
pub mod scaling;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod topology;
pub mod trace;
pub mod workload;

pub use cpuset::CpuSet;
pub use event::{Event, RateSource, Sample};
pub use guard::{check_stall, PlanError, TimerLoopGuard};
pub use job::{JobHints, JobId, JobKind, JobSpec, Owner, SyncKind};
pub use plan::{Assignment, Plan, Slot};
pub use plan_change::{PlanChange, PlanReplay};
pub use policy::{take_over, ActiveJob, Context, Policy};
pub use topology::{Level, Topology, TopologyError};
