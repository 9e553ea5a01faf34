//! Jobs for tests, with the `test-util` feature: a [`JobSpec`] builder whose defaults most tests
//! share, so that a test names only what matters to it; and [`wait`], for tests that wait on what
//! they observe.

pub mod wait;

use crate::job::{JobHints, JobId, JobKind, JobSpec, Owner};
use crate::policy::ActiveJob;

/// Job `j<id>`: arriving at 0, malleable, one thread, coscheduled, of weight 1, without hints.
pub fn job(id: u32) -> JobBuilder {
    JobBuilder(JobSpec {
        owner: None,
        id: JobId(id),
        name: format!("j{id}"),
        arrival: 0.0,
        kind: JobKind::Malleable,
        min_threads: 1,
        max_threads: 1,
        coschedule: true,
        weight: 1.0,
        hints: JobHints::default(),
    })
}

/// Job `j<id>` of `kind`, arriving at `id` seconds, not started, with thread bounds
/// `min_threads..=max_threads`: the policies' tests meet jobs in arrival order.
pub fn waiting(id: u32, kind: JobKind, min_threads: u32, max_threads: u32) -> ActiveJob {
    job(id)
        .arrival(f64::from(id))
        .kind(kind)
        .threads(min_threads, max_threads)
        .waiting()
}

/// A [`JobSpec`] under construction; see [`job`].
#[derive(Debug, Clone)]
pub struct JobBuilder(JobSpec);

impl JobBuilder {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.0.name = name.into();
        self
    }

    pub fn arrival(mut self, seconds: f64) -> Self {
        self.0.arrival = seconds;
        self
    }

    pub fn kind(mut self, kind: JobKind) -> Self {
        self.0.kind = kind;
        self
    }

    /// Thread bounds `min..=max`.
    pub fn threads(mut self, min: u32, max: u32) -> Self {
        self.0.min_threads = min;
        self.0.max_threads = max;
        self
    }

    /// At most `max` threads, at least one.
    pub fn max_threads(self, max: u32) -> Self {
        self.threads(1, max)
    }

    pub fn weight(mut self, weight: f64) -> Self {
        self.0.weight = weight;
        self
    }

    /// Owned by `user`, whose share of the machine is `share`.
    pub fn owner(mut self, user: u32, share: f64) -> Self {
        self.0.owner = Some(Owner { user, share });
        self
    }

    pub fn hints(mut self, hints: JobHints) -> Self {
        self.0.hints = hints;
        self
    }

    pub fn spec(self) -> JobSpec {
        self.0
    }

    /// The job active and not started yet.
    pub fn waiting(self) -> ActiveJob {
        ActiveJob::new(self.0.into(), None, 0)
    }

    /// The job active, started at `started` with `threads` threads.
    pub fn running(self, started: f64, threads: u32) -> ActiveJob {
        ActiveJob::new(self.0.into(), Some(started), threads)
    }
}
