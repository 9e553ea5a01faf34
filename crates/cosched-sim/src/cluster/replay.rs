//! A trace replayed on a cluster: the batch scheduler ([`super::batch`]) places each job on whole
//! nodes, the node policy shares each node among the jobs placed on it ([`super::nodes`]), and time
//! advances from event to event (arrivals and finishes only).
//!
//! A job with `p` processors on nodes of `C` CPUs takes `ceil(p / C)` nodes and runs the same number of
//! threads on each (`ceil(p / nodes)`). It progresses at one rate on all its nodes, set by the shares
//! its nodes give it:
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

use super::batch::{self, BatchPolicy};
use super::nodes::{NodeSharing, ShareBook, Signature, Tenant, EMPTY};
use crate::swf::SwfJob;
use cosched_core::topology::cluster::Cluster;
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

/// Which of the nodes that take a job the batch scheduler places it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Admission {
    /// Least loaded first, whatever the jobs' classes.
    #[default]
    LeastLoaded,
    /// Least loaded first, and among those as loaded the node where co-runners' interference
    /// costs least (complementary classes together: CaSAS's and Scalpel's idea across nodes).
    Pairing,
}

/// An admission's name that is none of those known.
#[derive(Debug, thiserror::Error)]
#[error("unknown node admission `{0}`; choose blind or pairing")]
pub struct UnknownAdmission(String);

impl std::str::FromStr for Admission {
    type Err = UnknownAdmission;
    fn from_str(s: &str) -> Result<Self, UnknownAdmission> {
        match s {
            "blind" => Ok(Self::LeastLoaded),
            "pairing" => Ok(Self::Pairing),
            _ => Err(UnknownAdmission(s.to_string())),
        }
    }
}

pub struct ClusterOptions<'a> {
    pub batch: BatchPolicy,
    pub sharing: NodeSharing<'a>,
    pub coordination: Coordination,
    /// Each job's application class ([`super::interference`]); empty: all of one class.
    pub classes: &'a [u8],
    pub admission: Admission,
}

/// Where and when a job ran: the job's index in the input, its start and end, its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub job: usize,
    pub start: f64,
    pub end: f64,
    pub nodes: Vec<u32>,
}

/// A replay's schedule and what it cost.
#[derive(Debug)]
pub struct Replay {
    /// In the jobs' order.
    pub placements: Vec<Placement>,
    /// Node signatures the node policy was run on.
    pub policy_runs: usize,
    /// Arrivals and finishes.
    pub events: u64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ClusterError {
    #[error(
        "job {id} needs {procs} processors but the machine has {nodes} nodes of {cpus_per_node} \
CPUs; give a larger machine (--machine cluster:N NODE, or the trace header's MaxProcs) or drop the job"
    )]
    TooWide {
        id: u64,
        procs: u32,
        nodes: u32,
        cpus_per_node: usize,
    },
    #[error(
        "the node policy gives job {id} no share of its nodes once another job left them, so it \
never ends; choose another --node-policy"
    )]
    Stalled { id: u64 },
}

/// The nodes and threads per node of a job of `procs` processors on nodes of `cpus` CPUs.
pub(crate) fn shape(procs: u32, cpus: u32) -> (u32, u32) {
    let nodes = procs.div_ceil(cpus).max(1);
    (nodes, procs.div_ceil(nodes))
}

/// Replays `jobs` on `cluster`. Jobs queue in submit order (file order among equal submit times); at
/// one instant, finishes come before arrivals, and one scheduling pass follows.
pub fn replay(
    jobs: &[SwfJob],
    cluster: &Cluster,
    options: &ClusterOptions,
) -> Result<Replay, ClusterError> {
    let cpus = cluster.node.num_cpus() as u32;
    if let Some(job) = jobs.iter().find(|j| shape(j.procs, cpus).0 > cluster.nodes) {
        return Err(ClusterError::TooWide {
            id: job.id,
            procs: job.procs,
            nodes: cluster.nodes,
            cpus_per_node: cluster.node.num_cpus(),
        });
    }
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|&a, &b| jobs[a].submit.total_cmp(&jobs[b].submit));
    let mut state = State {
        jobs,
        shapes: jobs.iter().map(|j| shape(j.procs, cpus)).collect(),
        tenants: jobs
            .iter()
            .enumerate()
            .map(|(i, j)| Tenant {
                threads: shape(j.procs, cpus).1,
                class: options.classes.get(i).copied().unwrap_or(0),
            })
            .collect(),
        admission: options.admission,
        book: ShareBook::new(&cluster.node, &options.sharing),
        coordination: options.coordination,
        node_sig: vec![EMPTY; cluster.nodes as usize],
        node_jobs: vec![Vec::new(); cluster.nodes as usize],
        running: (0..jobs.len()).map(|_| None).collect(),
        queue: VecDeque::new(),
        calendar: BinaryHeap::new(),
        touched: Vec::new(),
        placements: vec![None; jobs.len()],
        now: 0.0,
    };
    let mut next_arrival = 0;
    let mut events = 0;
    loop {
        let next_finish = state.next_finish();
        let arrival = arrivals.get(next_arrival).map(|&j| jobs[j].submit);
        state.now = match (next_finish, arrival) {
            (Some(f), Some(a)) => f.min(a),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        while let Some(job) = state.pop_finish() {
            state.finish(job);
            events += 1;
        }
        while next_arrival < arrivals.len() && jobs[arrivals[next_arrival]].submit <= state.now {
            state.queue.push_back(arrivals[next_arrival]);
            next_arrival += 1;
            events += 1;
        }
        state.refresh();
        batch::pass(&mut state, options.batch);
    }
    let policy_runs = state.book.policy_runs;
    let placements = state
        .placements
        .into_iter()
        .zip(jobs)
        .map(|(p, job)| {
            p.filter(|p| p.end.is_finite())
                .ok_or(ClusterError::Stalled { id: job.id })
        })
        .collect::<Result<_, _>>()?;
    Ok(Replay {
        placements,
        policy_runs,
        events,
    })
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
    pub admission: Admission,
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

impl State<'_> {
    fn is_current(&self, due: &Due) -> bool {
        self.running[due.job]
            .as_ref()
            .is_some_and(|r| r.version == due.version)
    }

    fn next_finish(&mut self) -> Option<f64> {
        while let Some(Reverse(due)) = self.calendar.peek() {
            if self.is_current(due) {
                return Some(due.time);
            }
            self.calendar.pop();
        }
        None
    }

    /// The next job due to finish by now.
    fn pop_finish(&mut self) -> Option<usize> {
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

    fn finish(&mut self, job: usize) {
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
    fn refresh(&mut self) {
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
