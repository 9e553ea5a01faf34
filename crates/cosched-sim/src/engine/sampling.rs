//! The samples a simulated job reports, as an executor's monitor would: its progress rate, the CPUs
//! it held and the CPU time it got since its last sample. Both engines keep one window per running
//! job and differ only in how they integrate what goes into it.

use cosched_core::{JobId, RateSource, Sample};

/// What a running job did since its last sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SampleWindow {
    since: f64,
    remaining_then: f64,
    /// CPU-seconds its threads got.
    pub cpu_seconds: f64,
    /// CPU-seconds of the CPUs it held.
    pub held_seconds: f64,
}

impl SampleWindow {
    /// A window opening at `now` on a job with `remaining` work left.
    pub fn open(now: f64, remaining: f64) -> SampleWindow {
        SampleWindow {
            since: now,
            remaining_then: remaining,
            cpu_seconds: 0.0,
            held_seconds: 0.0,
        }
    }

    /// Job `id`'s sample from the window's opening to `now`, with `remaining` work left and
    /// running `threads` threads, and whether it has applied its latest advice; the next window
    /// opens. `None` if no time has passed.
    pub fn close(
        &mut self,
        id: JobId,
        now: f64,
        remaining: f64,
        threads: u32,
        advice_seen: bool,
    ) -> Option<Sample> {
        let interval = now - self.since;
        if interval <= 0.0 {
            return None;
        }
        // Simulated jobs run exactly their thread count and apply advice after their delay.
        let sample = Sample {
            os_threads: Some(threads),
            team_size: Some(threads),
            advice_seen: Some(advice_seen),
            ..Sample::new(
                id,
                (self.remaining_then - remaining) / interval,
                RateSource::Model,
                (self.held_seconds / interval).round() as u32,
                self.cpu_seconds,
                interval,
            )
        };
        *self = SampleWindow::open(now, remaining);
        Some(sample)
    }
}
