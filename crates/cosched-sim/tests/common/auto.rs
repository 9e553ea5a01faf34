//! What the tests of `auto` share: the policies it is measured against, each one's makespan and mean
//! slowdown on a set of jobs, and the mixes they run.

use cosched_core::metrics::summarize;
use cosched_core::topology::presets;
use cosched_core::trace::TraceLine;
use cosched_core::{JobHints, JobId, JobKind, JobSpec, Topology};
use cosched_sim::{profile, simulate, SimJob, SimOptions, SpeedupModel};
use std::sync::Arc;

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

/// Job `id` of `profile_text`, arriving at 0.
pub fn job(id: u32, profile_text: &str, kind: JobKind, max_threads: u32) -> SimJob {
    let profile = profile::parse(profile_text).unwrap();
    SimJob {
        spec: JobSpec {
            owner: None,
            id: JobId(id),
            name: format!("{id}-{profile_text}"),
            arrival: 0.0,
            kind,
            min_threads: 1,
            max_threads,
            coschedule: true,
            weight: 1.0,
            hints: JobHints {
                sync: profile.sync,
                ..JobHints::default()
            },
        }
        .into(),
        profile: Arc::new(profile),
        mem: None,
    }
}

/// TACO's Table 1 codes, all arriving at once on the machine they were measured on, each scaling as
/// its traditional speedups there (Table 1, left).
pub fn npb_mix() -> (Topology, Vec<SimJob>, SimOptions) {
    let topology = presets::preset("taco-opteron8435").unwrap();
    let mut options = SimOptions::default();
    options.effects.speedup = SpeedupModel::Traditional;
    let names = [
        "bt.A", "cg.B", "ft.B", "is.C", "lu.A", "mg.B", "sp.A", "ua.A",
    ];
    let jobs: Vec<SimJob> = (names.iter().enumerate())
        .map(|(i, name)| job(i as u32, &format!("nas/{name}"), JobKind::Malleable, 24))
        .collect();
    (topology, jobs, options)
}
