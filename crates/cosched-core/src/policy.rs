//! The one interface every scheduling policy implements.
//!
//! A policy is pure: it sees the machine, the jobs that have arrived and not finished, the time and one
//! event, and answers with a plan. It never touches the OS and never knows whether it is simulated.

use crate::event::Event;
use crate::job::{JobId, JobSpec};
use crate::plan::Plan;
use crate::topology::Topology;

/// A job the executor currently holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveJob {
    pub spec: JobSpec,
    /// When its processes were started; `None` while it waits for its first placement.
    pub started: Option<f64>,
    /// Threads it runs with now (its start advice for moldable jobs, the applied advice for malleable).
    pub threads: u32,
}

/// Everything a policy may look at when it decides.
pub struct Context<'a> {
    pub topology: &'a Topology,
    pub now: f64,
    /// Active jobs in arrival order.
    pub jobs: &'a [ActiveJob],
}

impl Context<'_> {
    pub fn job(&self, id: JobId) -> Option<&ActiveJob> {
        self.jobs.iter().find(|j| j.spec.id == id)
    }
}

pub trait Policy: Send {
    /// Short name used on the command line and in traces (`taco`, `eq`, …).
    fn name(&self) -> &str;

    /// Reacts to one event. Returns the plan to enforce from now on, or `None` to keep the current one.
    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan>;

    /// How many waiting jobs (arrived, never started), oldest first, the next decision can read; `None`
    /// (the default): all of them. Asked again after every decision, so it may follow the policy's
    /// state. An executor may show the policy only the started jobs and that many waiting ones, and
    /// deliver a hidden job's `Arrived` event when it comes into view; a first-come-first-served policy
    /// then pays nothing for a long queue behind the head. Showing every job is always correct.
    fn queue_window(&self, _topology: &Topology) -> Option<usize> {
        None
    }
}
