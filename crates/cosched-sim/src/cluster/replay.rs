//! A trace replayed on a cluster: the batch scheduler ([`super::batch`]) places each job on whole
//! nodes, the node policy shares each node among the jobs placed on it ([`super::nodes`]), and time
//! advances from event to event (arrivals and finishes only), each job at the rate its nodes give it
//! ([`super::state`]).
//!
//! A job with `p` processors on nodes of `C` CPUs takes `ceil(p / C)` nodes and runs the same number of
//! threads on each (`ceil(p / nodes)`).

use super::batch::{self, Admission, BatchPolicy};
use super::nodes::{NodeSharing, ShareBook, Tenant};
use super::state::{Coordination, Placement, State};
use crate::swf::SwfJob;
use cosched_core::topology::cluster::Cluster;

pub struct ClusterOptions<'a> {
    pub batch: BatchPolicy,
    pub sharing: NodeSharing<'a>,
    pub coordination: Coordination,
    /// Each job's application class ([`super::interference`]); empty: all of one class.
    pub classes: &'a [u8],
    pub admission: Admission,
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
    let tenants = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| Tenant {
            threads: shape(j.procs, cpus).1,
            class: options.classes.get(i).copied().unwrap_or(0),
        })
        .collect();
    let mut state = State::new(
        jobs,
        cluster.nodes,
        jobs.iter().map(|j| shape(j.procs, cpus)).collect(),
        tenants,
        ShareBook::new(&cluster.node, &options.sharing),
        options.coordination,
    );
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
        batch::pass(&mut state, options.batch, options.admission);
    }
    let policy_runs = state.book.policy_runs;
    let placements = state
        .into_placements()
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
