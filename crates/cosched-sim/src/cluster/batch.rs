//! FCFS and EASY backfilling over identical processors.
//!
//! EASY is Lifka's scheduler ("The ANL/IBM SP scheduling system", JSSPP 1995), as Mu'alem & Feitelson
//! describe it (IEEE TPDS 12(6), 2001): the first queued job gets a reservation at the earliest time
//! enough processors free up, judged from the running jobs' estimated ends; a later job may start now
//! if it fits now and either ends (by its estimate) before that reservation or uses only processors
//! the reservation leaves over.
//!
//! Here machines are nodes that a node policy may share ([`super::nodes`]): a job needs whole nodes
//! that take it now, and a node's time to take the head is when enough of its jobs have ended by
//! their estimates, at their current rates. Nodes are chosen least loaded first, and a backfilled job
//! that outlasts the reservation takes first the nodes the head can do without.

use super::nodes::Tenant;
use super::state::State;
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPolicy {
    /// Strict first-come first-served: no job passes the queue's head.
    Fcfs,
    /// EASY backfilling: only the queue's head holds a reservation.
    Easy,
}

/// A batch policy's name that is none of those known.
#[derive(Debug, thiserror::Error)]
#[error("unknown batch policy `{0}`; choose fcfs or easy")]
pub struct UnknownBatchPolicy(String);

impl std::str::FromStr for BatchPolicy {
    type Err = UnknownBatchPolicy;
    fn from_str(s: &str) -> Result<Self, UnknownBatchPolicy> {
        match s {
            "fcfs" => Ok(Self::Fcfs),
            "easy" => Ok(Self::Easy),
            _ => Err(UnknownBatchPolicy(s.to_string())),
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

/// Starts what `policy` allows at `now`: queued jobs in order while the head fits, then (EASY)
/// backfilling behind the head's reservation; each on the nodes `admission` prefers.
pub(super) fn pass(state: &mut State, policy: BatchPolicy, admission: Admission) {
    let mut accepting = Accepting {
        admission,
        nodes: HashMap::new(),
    };
    while let Some(&head) = state.queue.front() {
        let (width, threads) = (state.shapes[head].0, state.tenants[head]);
        let nodes = accepting.nodes(state, threads);
        if nodes.len() < width as usize {
            break;
        }
        let nodes = nodes[..width as usize].to_vec();
        state.queue.pop_front();
        accepting.start(state, head, nodes);
    }
    if policy == BatchPolicy::Easy && !state.queue.is_empty() {
        backfill(state, &mut accepting);
    }
}

/// The nodes that take one more job of a given thread count now, in the admission's order, kept
/// until the next start (a queue holds jobs of few distinct widths).
struct Accepting {
    admission: Admission,
    nodes: HashMap<Tenant, Vec<u32>>,
}

impl Accepting {
    fn nodes(&mut self, state: &mut State, threads: Tenant) -> &[u32] {
        let admission = self.admission;
        self.nodes.entry(threads).or_insert_with(|| {
            let mut nodes: Vec<u32> = (0..state.node_sig.len() as u32)
                .filter(|&n| state.book.accepts(state.node_sig[n as usize], threads))
                .collect();
            match admission {
                Admission::LeastLoaded => {
                    nodes.sort_by_key(|&n| state.node_jobs[n as usize].len());
                }
                Admission::Pairing => {
                    // Among nodes as loaded, the one where the job's class costs its co-runners
                    // and itself least: a memory-bound job beside a compute-bound one.
                    let mut keyed: Vec<(usize, f64, u32)> = nodes
                        .iter()
                        .map(|&n| {
                            let sig = state.node_sig[n as usize];
                            let next = state.book.with(sig, threads);
                            let cost = state.book.interference_loss(next)
                                - state.book.interference_loss(sig);
                            (state.node_jobs[n as usize].len(), cost, n)
                        })
                        .collect();
                    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
                    nodes = keyed.into_iter().map(|(_, _, n)| n).collect();
                }
            }
            nodes
        })
    }

    fn start(&mut self, state: &mut State, job: usize, nodes: Vec<u32>) {
        self.nodes.clear();
        state.start(job, nodes);
    }
}

fn backfill(state: &mut State, accepting: &mut Accepting) {
    let head = state
        .queue
        .pop_front()
        .expect("backfill needs a queue head");
    let mut reservation: Option<Reservation> = None;
    let mut waiting = VecDeque::with_capacity(state.queue.len() + 1);
    waiting.push_back(head);
    while let Some(job) = state.queue.pop_front() {
        let (width, threads) = (state.shapes[job].0, state.tenants[job]);
        let nodes = accepting.nodes(state, threads);
        if nodes.len() < width as usize {
            waiting.push_back(job);
            continue;
        }
        let nodes = nodes.to_vec();
        // Only once some job fits now is the head's reservation worth working out.
        let r = reservation.get_or_insert_with(|| Reservation::of(state, head));
        let rate = rate_if_started(state, &nodes[..width as usize], threads);
        if state.now + state.jobs[job].estimate / rate <= r.shadow {
            accepting.start(state, job, nodes[..width as usize].to_vec());
            continue;
        }
        // A job that outlasts the reservation may only take nodes the head can do without.
        let mut costs: Vec<(u32, u32)> = nodes
            .iter()
            .map(|&n| {
                let needed = r.free_at[n as usize] <= r.shadow
                    && !still_available(state, n as usize, threads, r.head_threads, r.shadow);
                (n, u32::from(needed))
            })
            .collect();
        costs.sort_by_key(|&(_, cost)| cost);
        costs.truncate(width as usize);
        let cost: u32 = costs.iter().map(|&(_, cost)| cost).sum();
        if cost > r.extra {
            waiting.push_back(job);
            continue;
        }
        r.extra -= cost;
        for &(n, c) in &costs {
            if c > 0 {
                r.free_at[n as usize] = f64::INFINITY;
            }
        }
        accepting.start(state, job, costs.into_iter().map(|(n, _)| n).collect());
    }
    state.queue = waiting;
}

/// The queue head's reservation.
struct Reservation {
    head_threads: Tenant,
    /// Each node's earliest time it takes the head.
    free_at: Vec<f64>,
    /// When enough nodes take the head.
    shadow: f64,
    /// Nodes beyond the head's need that take it by the shadow time.
    extra: u32,
}

impl Reservation {
    fn of(state: &mut State, head: usize) -> Reservation {
        let (width, head_threads) = (state.shapes[head].0, state.tenants[head]);
        let free_at: Vec<f64> = (0..state.node_sig.len())
            .map(|n| available_at(state, n, head_threads))
            .collect();
        let (shadow, extra) = reservation(&free_at, width as usize);
        Reservation {
            head_threads,
            free_at,
            shadow,
            extra,
        }
    }
}

/// The head's reservation from each node's earliest time it takes the head: the shadow time (when
/// `width` nodes do) and how many nodes beyond `width` do by then.
fn reservation(free_at: &[f64], width: usize) -> (f64, u32) {
    let mut times = free_at.to_vec();
    times.sort_by(f64::total_cmp);
    let shadow = times[width - 1];
    let by_shadow = times.iter().take_while(|&&t| t <= shadow).count();
    (shadow, (by_shadow - width) as u32)
}

/// When node `n` takes a job of `threads` threads, judged by its jobs' estimated ends.
fn available_at(state: &mut State, n: usize, threads: Tenant) -> f64 {
    let mut sig = state.node_sig[n];
    if state.book.accepts(sig, threads) {
        return state.now;
    }
    let mut jobs = state.node_jobs[n].clone();
    let mut by_end: Vec<(f64, usize)> = jobs.iter().map(|&j| (state.estimated_end(j), j)).collect();
    by_end.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (end, job) in by_end {
        let position = jobs.iter().position(|&j| j == job).expect("on the node");
        jobs.remove(position);
        sig = state.book.without(sig, position);
        if state.book.accepts(sig, threads) {
            return end;
        }
    }
    f64::INFINITY
}

/// Whether node `n`, given one more job of `threads` threads that outlasts `shadow`, still takes
/// the head (`head_threads`) by `shadow`.
fn still_available(
    state: &mut State,
    n: usize,
    threads: Tenant,
    head_threads: Tenant,
    shadow: f64,
) -> bool {
    let mut sig = state.book.with(state.node_sig[n], threads);
    let mut jobs = state.node_jobs[n].clone();
    let ended: Vec<usize> = jobs
        .iter()
        .copied()
        .filter(|&j| state.estimated_end(j) <= shadow)
        .collect();
    for job in ended {
        let position = jobs.iter().position(|&j| j == job).expect("on the node");
        jobs.remove(position);
        sig = state.book.without(sig, position);
    }
    state.book.accepts(sig, head_threads)
}

/// The rate a job of `threads` threads would start at on `nodes`.
fn rate_if_started(state: &mut State, nodes: &[u32], threads: Tenant) -> f64 {
    let shares: Vec<f64> = nodes
        .iter()
        .map(|&n| {
            let sig = state.book.with(state.node_sig[n as usize], threads);
            *state.book.shares(sig).last().expect("the new job")
        })
        .collect();
    state.combine(shares.into_iter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests::{exclusive, on_cluster, starts};
    use crate::cluster::{reference, ClusterError};
    use crate::swf::{self, SwfJob};
    use proptest::prelude::*;

    /// Seven jobs on 4 processors (fields: number, submit, wait, run, allocated, cpu, memory,
    /// requested processors, requested time, ...).
    const TRACE: &str = "\
; MaxProcs: 4
1  0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
2  1 -1  5 -1 -1 -1 4  5 -1 1 1 1 -1 -1 -1 -1 -1
3  2 -1  3 -1 -1 -1 1  3 -1 1 1 1 -1 -1 -1 -1 -1
4  3 -1 20 -1 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1
5  4 -1  4 -1 -1 -1 1  5 -1 1 1 1 -1 -1 -1 -1 -1
6  5 -1  2 -1 -1 -1 3  2 -1 1 1 1 -1 -1 -1 -1 -1
7 16 -1 30 -1 -1 -1 1 30 -1 1 1 1 -1 -1 -1 -1 -1
";

    fn easy_starts(trace: &str, machine: &str) -> Vec<f64> {
        let jobs = swf::parse(trace, "hand.swf").unwrap().jobs;
        starts(&on_cluster(&jobs, machine, BatchPolicy::Easy, exclusive()).unwrap())
    }

    fn exclusive_starts(policy: BatchPolicy) -> Vec<f64> {
        let trace = swf::parse(TRACE, "hand.swf").unwrap();
        starts(&on_cluster(&trace.jobs, "cluster:4 core:1", policy, exclusive()).unwrap())
    }

    #[test]
    fn fcfs_never_passes_the_head() {
        // t0: 1 starts (2 free). 2 (4 procs) waits from t1, and 3..6 behind it.
        // t10: 1 ends, 2 starts (0 free). t15: 2 ends; 3, 4, 5 start (0 free); 6 (3) waits.
        // t16: 7 queues behind 6. t18, t19: 3 and 5 end (2 free). t35: 4 ends; 6 and 7 start.
        assert_eq!(
            exclusive_starts(BatchPolicy::Fcfs),
            [0.0, 10.0, 15.0, 15.0, 15.0, 35.0, 35.0]
        );
    }

    #[test]
    fn easy_backfills_only_what_leaves_the_heads_reservation_alone() {
        // t0: 1 starts (2 free). t1: 2 (4) waits; reservation at 10 (1's end), 0 extra.
        // t2: 3 (1 proc, est. 3) ends by 5 <= 10: backfilled (1 free).
        // t3: 4 (2) does not fit now. t4: 5 (1, est. 5) ends by 9 <= 10: backfilled (0 free).
        // t5: 3 ends (1 free); 6 (3) arrives, does not fit. t8: 5 ends (2 free); 4 would end at 28
        //     > 10 and the reservation has no extra processor: it waits.
        // t10: 1 ends, 2 starts. t15: 2 ends, 4 starts (2 free); 6 (3) is the head, reservation at
        //      35 with 1 extra processor.
        // t16: 7 (1 proc, est. 30) ends at 46 > 35 but fits in the extra processor: starts.
        // t35: 4 ends, 3 free: 6 starts on its reservation.
        assert_eq!(
            exclusive_starts(BatchPolicy::Easy),
            [0.0, 10.0, 2.0, 15.0, 4.0, 35.0, 16.0]
        );
    }

    #[test]
    fn every_node_free_by_the_shadow_time_counts_beyond_the_heads_need() {
        // Three nodes. t0: 1 and 2 (1 node, 10 s each) start. t1: 3 needs 2 nodes, 1 is free:
        // reservation at 10, when 1 and 2 both end, and then 3 nodes are free: 1 extra.
        // t2: 4 (1 node, 20 s) outlasts the reservation but takes only the extra node: it starts,
        // and 3 still starts at 10.
        let trace = "\
1 0 -1 10 -1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 10 -1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1
3 1 -1  5 -1 -1 -1 2  5 -1 1 1 1 -1 -1 -1 -1 -1
4 2 -1 20 -1 -1 -1 1 20 -1 1 1 1 -1 -1 -1 -1 -1
";
        assert_eq!(
            easy_starts(trace, "cluster:3 core:1"),
            [0.0, 0.0, 10.0, 2.0]
        );
    }

    #[test]
    fn a_job_started_in_the_pass_counts_by_its_estimate_in_the_reservation() {
        // t10: 1 ends, 2 (2 nodes, 5 s) starts; 3 (4 nodes) is the head, reserved at 15 when 2
        // ends, with no node to spare: 4 (1 node, 100 s) waits for 3 to start and end.
        let trace = "\
1 0 -1  10 -1 -1 -1 4  10 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1   5 -1 -1 -1 2   5 -1 1 1 1 -1 -1 -1 -1 -1
3 2 -1   5 -1 -1 -1 4   5 -1 1 1 1 -1 -1 -1 -1 -1
4 3 -1 100 -1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1
";
        assert_eq!(
            easy_starts(trace, "cluster:4 core:1"),
            [0.0, 10.0, 15.0, 20.0]
        );
    }

    /// Small traces with equal submit times and estimates above and below the run times.
    fn small_traces() -> impl Strategy<Value = (u32, u32, Vec<SwfJob>)> {
        (1u32..=5, 1u32..=2).prop_flat_map(|(nodes, cpus)| {
            let job = (0u32..12, 1u32..15, 1..=nodes * cpus, 1u32..20).prop_map(
                |(submit, run, procs, estimate)| SwfJob {
                    id: 0,
                    submit: f64::from(submit),
                    run: f64::from(run),
                    procs,
                    estimate: f64::from(estimate),
                },
            );
            (Just(nodes), Just(cpus), prop::collection::vec(job, 1..10))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]
        #[test]
        fn exclusive_nodes_start_every_job_when_the_textbook_scheduler_does(
            (nodes, cpus, jobs) in small_traces(),
            easy in any::<bool>(),
        ) {
            let policy = if easy { BatchPolicy::Easy } else { BatchPolicy::Fcfs };
            let machine = format!("cluster:{nodes} core:{cpus}");
            let replay = on_cluster(&jobs, &machine, policy, exclusive()).unwrap();
            prop_assert_eq!(starts(&replay), reference::starts(&jobs, nodes, cpus, policy));
        }
    }

    /// The archive's KTH-SP2 log where the project's shared data holds it: a whole log's starts,
    /// FCFS and EASY, against the textbook scheduler's.
    #[test]
    fn kth_sp2_starts_every_job_when_the_textbook_scheduler_does() {
        use std::io::Read as _;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz"
        );
        let Ok(file) = std::fs::File::open(path) else {
            eprintln!("SKIPPED: {path} not found");
            return;
        };
        let mut text = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .unwrap();
        let jobs = swf::parse(&text, path).unwrap().jobs;
        for policy in [BatchPolicy::Fcfs, BatchPolicy::Easy] {
            let replay = on_cluster(&jobs, "cluster:100 core:1", policy, exclusive()).unwrap();
            let textbook = reference::starts(&jobs, 100, 1, policy);
            let differ = starts(&replay)
                .iter()
                .zip(&textbook)
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(
                differ,
                0,
                "{policy:?}: {differ} of {} starts differ",
                jobs.len()
            );
        }
    }

    #[test]
    fn a_job_wider_than_the_machine_is_refused() {
        let trace = swf::parse(TRACE, "hand.swf").unwrap();
        let err = on_cluster(
            &trace.jobs,
            "cluster:3 core:1",
            BatchPolicy::Easy,
            exclusive(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            ClusterError::TooWide {
                id: 2,
                procs: 4,
                nodes: 3,
                cpus_per_node: 1
            }
        );
        assert!(err.to_string().contains("MaxProcs"));
    }
}
