//! What happens to the executor that a policy must hear about.

use crate::job::JobId;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The job was submitted and is now known to the policy.
    Arrived { job: JobId },
    /// The job's processes all exited (successfully or not).
    Finished { job: JobId },
    /// A malleable job now runs with this many threads (its next parallel region applied the advice).
    ThreadsChanged { job: JobId, threads: u32 },
    /// A measurement of a running job.
    Sample(Sample),
    /// The time the policy asked for in its last plan has come. Just before it, every executor delivers
    /// one `Sample` per running job, covering the time since that job's previous sample; this is how a
    /// policy that probes or monitors jobs (CaSAS, adaptive) gets measurements, real or simulated.
    Timer,
}

/// Where a progress rate was measured; rates of different sources are not comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateSource {
    /// Hardware instruction counter (`perf_event_open`).
    Instructions,
    /// Regions completed and heartbeats from the control page of the preload library.
    ControlPage,
    /// CPU time from procfs (counts spinning as progress, so it is the weakest source).
    CpuTime,
    /// The simulator's performance model.
    Model,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub job: JobId,
    /// Progress per second over the sampling interval, in the unit of `source`.
    pub rate: f64,
    pub source: RateSource,
    /// Number of CPUs the job held during the interval.
    pub cpus: u32,
    /// Seconds of CPU time the job used during the interval.
    pub cpu_seconds: f64,
    /// Length of the interval, seconds.
    pub interval: f64,
}
