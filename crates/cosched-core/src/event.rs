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

/// One interval of a running job. The fields after `interval` say what the job really did, for
/// `crate::observe`; they are absent where the executor cannot see them (traces written before they
/// existed read as absent too).
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
    /// Threads of the job's processes at the end of the interval (procfs; idle pool threads included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_threads: Option<u32>,
    /// Team size of the job's latest top-level parallel region (control page `last_team_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_size: Option<u32>,
    /// Top-level parallel regions started during the interval (control page `regions_started`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regions_started: Option<u64>,
    /// Whether the job had applied the latest advice by the end of the interval (control page
    /// `seen_generation` against `generation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice_seen: Option<bool>,
}

impl Sample {
    /// A sample with only the measurements every executor has.
    pub fn new(
        job: JobId,
        rate: f64,
        source: RateSource,
        cpus: u32,
        cpu_seconds: f64,
        interval: f64,
    ) -> Sample {
        Sample {
            job,
            rate,
            source,
            cpus,
            cpu_seconds,
            interval,
            os_threads: None,
            team_size: None,
            regions_started: None,
            advice_seen: None,
        }
    }
}
