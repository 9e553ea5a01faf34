//! Jobs for the policies' unit tests.

use cosched_core::{ActiveJob, JobHints, JobId, JobKind, JobSpec};

/// Job `j<id>`, arriving at `id` seconds, not started, with thread bounds `min_threads..=max_threads`.
pub fn waiting(id: u32, kind: JobKind, min_threads: u32, max_threads: u32) -> ActiveJob {
    ActiveJob::new(
        JobSpec {
            id: JobId(id),
            name: format!("j{id}"),
            arrival: id as f64,
            kind,
            min_threads,
            max_threads,
            coschedule: true,
            weight: 1.0,
            hints: JobHints::default(),
        }
        .into(),
        None,
        0,
    )
}
