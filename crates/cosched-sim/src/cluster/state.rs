//! The cluster as a replay holds it at one instant: each node's jobs and the shares its node policy
//! gives them, each started job's progress, and the calendar of finishes. [`super::replay`] moves it
//! from event to event; [`super::batch`] starts jobs in it.
//!
//! A job progresses at one rate on all its nodes, set by the shares its nodes give it:
//! - **coordinated** slots (global slot boundaries; all of a job's nodes run it in the same slot, as
//!   Frachtenberg & Etsion's gang scheduler did on a cluster): the job goes at its smallest share;
//! - **uncoordinated** slots (each node cycles on its own, its slot boundaries unrelated to the other
//!   nodes'): a job whose processes synchronise finely progresses only while all its nodes run it at
//!   once, the product of its shares when the nodes' phases are independent.
//!
//! On an event, only the jobs on the nodes whose jobs changed get a new rate; a job's finish is
//! rescheduled in the calendar when its rate changes. Rates are set at once, after the instant's
//! finishes and at each start, because the batch scheduler reads estimated ends from them in the
//! same pass.

use super::nodes::{ShareBook, Signature, Tenant, EMPTY};
use crate::swf::SwfJob;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Whether the nodes' slot boundaries are global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coordination {
    Coordinated,
    Uncoordinated,
}

/// A slot coordination's name that is none of those known.
#[derive(Debug, thiserror::Error)]
#[error("unknown slot coordination `{0}`; choose coordinated or uncoordinated")]
pub struct UnknownCoordination(String);

impl std::str::FromStr for Coordination {
    type Err = UnknownCoordination;
    fn from_str(s: &str) -> Result<Self, UnknownCoordination> {
        match s {
            "coordinated" => Ok(Self::Coordinated),
            "uncoordinated" => Ok(Self::Uncoordinated),
            _ => Err(UnknownCoordination(s.to_string())),
        }
    }
}

/// Where and when a job ran: the job's index in the input, its start and end, its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub job: usize,
    pub start: f64,
    pub end: f64,
    pub nodes: Vec<u32>,
}

/// A started job's progress: `remaining` seconds of its recorded run are left at `since`, falling
/// at `rate` until the rate changes.
pub(super) struct Running {
    pub nodes: Vec<u32>,
    remaining: f64,
    since: f64,
    pub rate: f64,
    version: u32,
}

/// A finish in the calendar; stale when the job's version moved on.
struct Due {
    time: f64,
    job: usize,
    version: u32,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.job.cmp(&other.job))
            .then(self.version.cmp(&other.version))
    }
}

pub(super) struct State<'a> {
    pub jobs: &'a [SwfJob],
    /// (nodes, threads per node) of each job.
    pub shapes: Vec<(u32, u32)>,
    /// Each job as its nodes see it.
    pub tenants: Vec<Tenant>,
    pub book: ShareBook<'a>,
    coordination: Coordination,
    pub node_sig: Vec<Signature>,
    /// Each node's jobs in the order they started there (the signature's order).
    pub node_jobs: Vec<Vec<usize>>,
    pub running: Vec<Option<Running>>,
    pub queue: VecDeque<usize>,
    calendar: BinaryHeap<Reverse<Due>>,
    /// Nodes whose jobs changed at this instant.
    touched: Vec<u32>,
    placements: Vec<Option<Placement>>,
    pub now: f64,
}

impl<'a> State<'a> {
    /// An empty cluster of `nodes` nodes at time 0, for `jobs` of the given shapes and tenants.
    pub fn new(
        jobs: &'a [SwfJob],
        nodes: u32,
        shapes: Vec<(u32, u32)>,
        tenants: Vec<Tenant>,
        book: ShareBook<'a>,
        coordination: Coordination,
    ) -> State<'a> {
        State {
            jobs,
            shapes,
            tenants,
            book,
            coordination,
            node_sig: vec![EMPTY; nodes as usize],
            node_jobs: vec![Vec::new(); nodes as usize],
            running: (0..jobs.len()).map(|_| None).collect(),
            queue: VecDeque::new(),
            calendar: BinaryHeap::new(),
            touched: Vec::new(),
            placements: vec![None; jobs.len()],
            now: 0.0,
        }
    }

    /// Each job's placement, `None` for a job that never started.
    pub fn into_placements(self) -> Vec<Option<Placement>> {
        self.placements
    }

    fn is_current(&self, due: &Due) -> bool {
        self.running[due.job]
            .as_ref()
            .is_some_and(|r| r.version == due.version)
    }

    pub fn next_finish(&mut self) -> Option<f64> {
        while let Some(Reverse(due)) = self.calendar.peek() {
            if self.is_current(due) {
                return Some(due.time);
            }
            self.calendar.pop();
        }
        None
    }

    /// The next job due to finish by now.
    pub fn pop_finish(&mut self) -> Option<usize> {
        let time = self.next_finish()?;
        (time <= self.now).then(|| self.calendar.pop().expect("peeked").0.job)
    }

    /// Combines a job's shares of its nodes into its rate.
    pub fn combine(&self, shares: impl Iterator<Item = f64>) -> f64 {
        match self.coordination {
            Coordination::Coordinated => shares.fold(f64::INFINITY, f64::min),
            Coordination::Uncoordinated => shares.product(),
        }
    }

    /// Seconds of its recorded run `job` has done by now.
    fn done(&self, job: usize) -> f64 {
        let r = self.running[job].as_ref().expect("a running job");
        self.jobs[job].run - (r.remaining - r.rate * (self.now - r.since))
    }

    /// When `job` ends by its user's estimate, at its current rate; now once it ran past it.
    pub fn estimated_end(&self, job: usize) -> f64 {
        let rate = self.running[job].as_ref().expect("a running job").rate;
        let left = (self.jobs[job].estimate - self.done(job)).max(0.0);
        if left == 0.0 {
            self.now
        } else {
            self.now + left / rate
        }
    }

    pub fn start(&mut self, job: usize, nodes: Vec<u32>) {
        let tenant = self.tenants[job];
        for &n in &nodes {
            let n = n as usize;
            self.node_sig[n] = self.book.with(self.node_sig[n], tenant);
            self.node_jobs[n].push(job);
        }
        self.touched.extend_from_slice(&nodes);
        self.placements[job] = Some(Placement {
            job,
            start: self.now,
            end: f64::INFINITY,
            nodes: nodes.clone(),
        });
        self.running[job] = Some(Running {
            nodes,
            remaining: self.jobs[job].run,
            since: self.now,
            rate: 0.0,
            version: 0,
        });
        self.refresh();
    }

    pub fn finish(&mut self, job: usize) {
        let run = self.running[job].take().expect("a running job finishes");
        for &n in &run.nodes {
            let n = n as usize;
            let position = self.node_jobs[n]
                .iter()
                .position(|&j| j == job)
                .expect("a job is on its nodes");
            self.node_jobs[n].remove(position);
            self.node_sig[n] = self.book.without(self.node_sig[n], position);
        }
        self.touched.extend_from_slice(&run.nodes);
        self.placements[job].as_mut().expect("started").end = self.now;
    }

    /// New rates for the jobs on the nodes whose jobs changed, and their finishes rescheduled.
    pub fn refresh(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        let mut affected: Vec<usize> = touched
            .iter()
            .flat_map(|&n| self.node_jobs[n as usize].iter().copied())
            .collect();
        affected.sort_unstable();
        affected.dedup();
        for job in affected {
            let rate = self.rate(job);
            let now = self.now;
            let r = self.running[job].as_mut().expect("a job on a node runs");
            r.remaining = (r.remaining - r.rate * (now - r.since)).max(0.0);
            r.since = now;
            r.rate = rate;
            r.version += 1;
            if rate > 0.0 {
                self.calendar.push(Reverse(Due {
                    time: now + r.remaining / rate,
                    job,
                    version: r.version,
                }));
            }
        }
        touched.clear();
        self.touched = touched;
    }

    /// The rate `job` gets from its nodes as they are now.
    fn rate(&mut self, job: usize) -> f64 {
        let width = self.running[job].as_ref().expect("running").nodes.len();
        let mut shares = Vec::with_capacity(width);
        for i in 0..width {
            let n = self.running[job].as_ref().expect("running").nodes[i] as usize;
            let position = self.node_jobs[n]
                .iter()
                .position(|&j| j == job)
                .expect("a job is on its nodes");
            shares.push(self.book.shares(self.node_sig[n])[position]);
        }
        self.combine(shares.into_iter())
    }
}
