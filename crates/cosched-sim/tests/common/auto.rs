//! What the tests of `auto` share: the policies it is measured against, and each one's makespan and
//! mean slowdown on a set of jobs.

use cosched_core::metrics::summarize;
use cosched_core::trace::TraceLine;
use cosched_core::Topology;
use cosched_sim::{simulate, SimJob, SimOptions};

/// The policies of the five papers that run multithreaded jobs (the task-bag ones give every job one
/// core), BP shortest first (the baseline a user with the times alone at hand would reach for), and
/// `auto`.
pub const POLICIES: &[&str] = &[
    "ue",
    "bp",
    "bp:order=shortest",
    "eq",
    "ta",
    "taco-basic",
    "taco",
    "taco-local",
    "gang",
    "casas",
    "casas-ts",
    "auto",
];

/// Makespan and mean slowdown of one policy.
#[derive(Debug, Clone)]
pub struct Row {
    pub policy: &'static str,
    pub makespan: f64,
    pub slowdown: f64,
}

/// One policy's row on `jobs`, and its trace.
pub fn run(
    topology: &Topology,
    jobs: &[SimJob],
    options: &SimOptions,
    policy: &'static str,
) -> (Row, Vec<TraceLine>) {
    let mut scheduler = cosched_policies::create(policy).unwrap();
    let trace = simulate(topology, jobs, scheduler.as_mut(), options).unwrap();
    let summary = summarize(&trace);
    let row = Row {
        policy,
        makespan: summary.makespan.unwrap(),
        slowdown: summary.mean_slowdown.unwrap(),
    };
    (row, trace)
}

/// Every policy's row on `jobs`, each printed after `label`.
pub fn table(topology: &Topology, jobs: &[SimJob], options: &SimOptions, label: &str) -> Vec<Row> {
    let rows: Vec<Row> = (POLICIES.iter())
        .map(|p| run(topology, jobs, options, p).0)
        .collect();
    for r in &rows {
        eprintln!(
            "{label:24} {:11} makespan {:8.2}  mean slowdown {:6.3}",
            r.policy, r.makespan, r.slowdown
        );
    }
    rows
}

pub fn row<'r>(rows: &'r [Row], policy: &str) -> &'r Row {
    rows.iter().find(|r| r.policy == policy).unwrap()
}

/// The best of the policies other than `auto` by `of`, lower being better.
pub fn best(rows: &[Row], of: fn(&Row) -> f64) -> f64 {
    (rows.iter().filter(|r| r.policy != "auto"))
        .map(of)
        .fold(f64::INFINITY, f64::min)
}
