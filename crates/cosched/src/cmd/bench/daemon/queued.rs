//! `cosched bench daemon --queued N`: a daemon's answers with a long queue (issue #41): N elements of
//! one array submitted behind a job that holds the machine, each submission timed, then `jobs --state
//! running` timed while they wait.

use crate::cmd::bench::common::{start_daemon, Spread};
use cosched_core::topology::sysfs;
use cosched_core::JobKind;
use cosched_service::client::request;
use cosched_service::harness::{self, DaemonProcess};
use cosched_service::protocol::{ArrayElement, JobFilter, JobState, Reply, Request, Submission};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// Gang with one row: the job that holds the machine leaves every element waiting.
const POLICY: &str = "gang:mpl=1";
pub const SUBMIT_P99_TARGET_MS: f64 = 10.0;
pub const LIST_RUNNING_P99_TARGET_MS: f64 = 10.0;
/// `jobs --state running` requests timed.
const LISTINGS: usize = 200;

#[derive(Serialize)]
pub struct QueuedFigures {
    /// Array elements submitted.
    elements: usize,
    /// Of them, still queued in the daemon when the listings were timed.
    queued: usize,
    /// Every element's submission, the queue growing from 0 to `elements`.
    submit_latency_ms: Spread,
    /// The same, of the last tenth, with nine tenths of the queue in front.
    submit_latency_last_tenth_ms: Spread,
    /// `jobs --state running` with the elements queued.
    list_running_latency_ms: Spread,
}

/// A job as wide as the machine that sleeps.
fn wide_sleeper(cpus: u32) -> Submission {
    Submission {
        name: "queued".into(),
        min_threads: Some(cpus),
        max_threads: Some(cpus),
        kind: JobKind::Rigid,
        ..harness::submission(&["sleep", "3600"])
    }
}

/// Times submissions and listings with `elements` array elements queued in `daemon`, which runs
/// [`POLICY`]: one wide job holds the machine, so that every element waits.
fn measure(daemon: &DaemonProcess, elements: usize) -> anyhow::Result<QueuedFigures> {
    let cpus = sysfs::discover()?.num_cpus() as u32;
    let holder = daemon.submit(wide_sleeper(cpus))?;
    let mut ids = vec![holder];
    let mut latencies = Vec::with_capacity(elements);
    let mut first = None;
    for index in 0..elements as u64 {
        let element = Submission {
            array: Some(ArrayElement {
                index,
                of: first,
                limit: None,
            }),
            ..wide_sleeper(cpus)
        };
        let sent = Instant::now();
        let reply = request(&daemon.socket, Request::Submit(element))?;
        latencies.push(sent.elapsed().as_secs_f64());
        match reply {
            Reply::Submitted { id } => {
                first.get_or_insert(id);
                ids.push(id);
            }
            other => anyhow::bail!("the daemon answered {other:?} to element {index}"),
        }
    }
    let running = Request::Jobs {
        all: false,
        filter: JobFilter {
            states: vec![JobState::Running],
            ..Default::default()
        },
    };
    let mut listings = Vec::with_capacity(LISTINGS);
    for _ in 0..LISTINGS {
        let sent = Instant::now();
        let reply = request(&daemon.socket, running.clone())?;
        listings.push(sent.elapsed().as_secs_f64());
        anyhow::ensure!(
            matches!(reply, Reply::Jobs { .. }),
            "the daemon answered {reply:?} to `jobs --state running`"
        );
    }
    let queued = match daemon.ask(Request::Jobs {
        all: false,
        filter: JobFilter {
            states: vec![JobState::Queued],
            ..Default::default()
        },
    })? {
        Reply::Jobs { jobs } => jobs.len(),
        other => anyhow::bail!("the daemon answered {other:?} to `jobs --state queued`"),
    };
    for chunk in ids.chunks(2000) {
        daemon.cancel(chunk)?;
    }
    Ok(QueuedFigures {
        elements,
        queued,
        submit_latency_ms: Spread::of_ms(&latencies),
        submit_latency_last_tenth_ms: Spread::of_ms(&latencies[elements - elements / 10..]),
        list_running_latency_ms: Spread::of_ms(&listings),
    })
}

pub fn print(q: &QueuedFigures) {
    println!(
        "queued: {} array elements submitted behind a job holding the machine ({} still queued when listed)",
        q.elements, q.queued
    );
    println!(
        "  their submissions: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; last tenth p99 {:.2} ms (target p99 < {SUBMIT_P99_TARGET_MS} ms: {:.2}x of target)",
        q.submit_latency_ms.p50,
        q.submit_latency_ms.p99,
        q.submit_latency_ms.max,
        q.submit_latency_last_tenth_ms.p99,
        q.submit_latency_ms.p99 / SUBMIT_P99_TARGET_MS
    );
    println!(
        "  `jobs --state running` meanwhile ({LISTINGS} times): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < {LIST_RUNNING_P99_TARGET_MS} ms: {:.2}x of target)",
        q.list_running_latency_ms.p50,
        q.list_running_latency_ms.p99,
        q.list_running_latency_ms.max,
        q.list_running_latency_ms.p99 / LIST_RUNNING_P99_TARGET_MS
    );
}

/// Starts the daemon for [`measure`] in `dir`, measures, stops it.
pub fn run(dir: &Path, elements: usize) -> anyhow::Result<QueuedFigures> {
    let mut daemon = start_daemon(dir, POLICY)?;
    let figures = measure(&daemon, elements);
    daemon.stop()?;
    figures
}
