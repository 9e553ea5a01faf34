//! A job's state in the engine: where it is in its life and, once started, its progress.

use super::calendar::Due;
use super::rates::Figures;
use super::sampling::SampleWindow;
use super::SimJob;
use crate::model::Effects;
use cosched_core::trace::Record;
use cosched_core::{ActiveJob, CpuSet, JobId};

/// What thread advice does to a running malleable job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Switch {
    /// It already runs, or is switching to, the advised count.
    Unchanged,
    /// It runs the advised count: a switch it was due to make is called off.
    CalledOff,
    /// It switches to this many threads at this time, after its reconfiguration delay.
    At(f64, u32),
}

/// What `advised` threads at `now` do to `job`, running `threads` threads with `pending` switch.
pub(super) fn switch_on_advice(
    job: &SimJob,
    threads: u32,
    pending: Option<(f64, u32)>,
    advised: u32,
    now: f64,
    effects: &Effects,
) -> Switch {
    let advised = advised.clamp(job.spec.min_threads, job.spec.max_threads);
    if advised == threads {
        Switch::CalledOff
    } else if pending.map(|(_, t)| t) != Some(advised) {
        let delay = if effects.reconfig_delay {
            job.profile.reconfig_delay
        } else {
            0.0
        };
        Switch::At(now + delay, advised)
    } else {
        Switch::Unchanged
    }
}

/// Marks the policy's view of job `id` (`active`, where it is still there) started at `now` with
/// `threads`, and returns the trace record that says so: both engines start jobs alike.
pub(super) fn mark_started(
    active: Option<&mut ActiveJob>,
    id: JobId,
    threads: u32,
    now: f64,
) -> Record {
    if let Some(a) = active {
        a.started = Some(now);
        a.threads = threads;
    }
    Record::Start {
        job: id,
        threads,
        pid: None,
    }
}

/// Where a job is in its life.
pub(crate) enum Phase {
    /// Not arrived yet.
    Pending,
    /// Arrived, never placed.
    Waiting,
    Running(Box<Run>),
    Finished,
}

pub(crate) struct JobState {
    pub(super) phase: Phase,
    /// Arrival sequence number: the job's key among the active jobs.
    pub(super) order: u64,
}

impl JobState {
    pub(crate) fn running(&self) -> Option<&Run> {
        match &self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    /// Whether it runs, read without its run.
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running(_))
    }

    pub(super) fn running_mut(&mut self) -> Option<&mut Run> {
        match &mut self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }
}

/// A started job's progress. `remaining` is exact at `since`; from there it falls by `figures.rate`
/// per cycle (after `stall_until`) until the rate changes. Figures are per cycle of the plan's fluid
/// cycle of slots, per second otherwise ([`super::calendar::CycleClock`]).
pub(crate) struct Run {
    /// Start sequence number: simultaneous events of running jobs are handled in start order.
    pub(super) started: u64,
    pub threads: u32,
    /// NUMA nodes holding the job's memory (where it first ran).
    pub home: CpuSet,
    pub(super) figures: Figures,
    pub(super) remaining: f64,
    /// Remaining work under which the job counts as done ([`super::calendar::done_below`]).
    pub(super) done_below: f64,
    /// Whether its profile has a cache footprint, for the LLC's miss counts. (With `done_below`, read
    /// on every move of the job's rate, for thousands of jobs at once, without reaching its profile.)
    pub(super) has_footprint: bool,
    /// Cycle time and squared-cycle time of the last settlement.
    pub(super) since: f64,
    pub(super) since_squared: f64,
    /// Exact mode: no progress before this cycle time (cache refill after a slot switch); exact mode
    /// has no fluid cycle, so its cycle time runs with time.
    pub(super) stall_until: f64,
    /// Thread count a malleable job switches to, and when.
    pub(super) pending: Option<(f64, u32)>,
    /// Versions of the job's finish and thread-change entries in the calendar.
    pub(super) finish_version: u32,
    pub(super) threads_version: u32,
    pub(super) sampling: SampleWindow,
}

/// The versions a calendar entry must carry to be current: what it was computed from has not moved
/// on.
pub(super) struct Standing<'s> {
    pub(super) states: &'s [JobState],
    pub(super) slot_version: u32,
    pub(super) timer_version: u32,
}

impl Standing<'_> {
    pub(super) fn holds(&self, due: &Due) -> bool {
        match *due {
            Due::Finish { job, version } => self.states[job]
                .running()
                .is_some_and(|run| run.finish_version == version),
            Due::Threads { job, version } => self.states[job]
                .running()
                .is_some_and(|run| run.threads_version == version && run.pending.is_some()),
            Due::Arrival => true,
            Due::SlotEnd { version } => version == self.slot_version,
            Due::Timer { version } => version == self.timer_version,
        }
    }
}
