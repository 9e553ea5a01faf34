//! What a run teaches never makes the next run slower. Each mix runs under every policy twice, as two
//! `cosched compare` in a row do: first with each job's time alone known (the calibration `compare`
//! makes first), then with the history all the first runs left (how each program took advice, how it
//! scaled). No policy's second run may be more than 5% slower than its first. And `auto` reaches the
//! best schedule its knowledge allows on both runs: its makespan within 3% of the better of BP
//! shortest-first and Gang, its mean slowdown within 10% of the best policy's.

mod common {
    // The table and its comparisons are for the tests of `auto`.
    #[allow(dead_code)]
    pub mod auto;
    pub mod history;
}

use common::auto::{best, job, npb_mix, row, run, Row, POLICIES};
use common::history::{calibrated, learnt};
use cosched_core::topology::synthetic;
use cosched_core::trace::{Record, TraceLine};
use cosched_core::{JobKind, Topology};
use cosched_sim::{SimJob, SimOptions};
use std::path::Path;

/// A second run may be this much slower than the first (the probes and reconfigurations of runs
/// that learn differ).
const NOISE: f64 = 1.05;

/// A malleable-labelled OpenMP program whose whole computation is one parallel region: it takes the
/// threads it is given at start and never applies advice after that.
fn long_region(id: u32, one_cpu_seconds: f64) -> SimJob {
    let text = format!(
        "amdahl(serial=0.01, runtime={one_cpu_seconds}, sync=spin, sync_interval=0.001, \
         reconfig_delay=1e9)"
    );
    job(id, &text, JobKind::Malleable, 2)
}

/// Eight such programs arriving together on two CPUs, each alone 0.6 to 17 s (the mix).
fn long_regions() -> Vec<SimJob> {
    [1.2, 2.0, 4.0, 6.5, 9.0, 14.0, 22.0, 34.0]
        .into_iter()
        .enumerate()
        .map(|(i, seconds)| long_region(i as u32, seconds))
        .collect()
}

/// Every policy's rows on a first run and on the run after it, and the jobs as the second run saw
/// them.
fn twice(
    topology: &Topology,
    jobs: &[SimJob],
    options: &SimOptions,
) -> (Vec<Row>, Vec<Row>, Vec<SimJob>) {
    let first_jobs = calibrated(topology, jobs, options);
    let (first, traces): (Vec<Row>, Vec<Vec<TraceLine>>) = (POLICIES.iter())
        .map(|p| run(topology, &first_jobs, options, p))
        .unzip();
    let traces: Vec<&[TraceLine]> = traces.iter().map(Vec::as_slice).collect();
    let second_jobs = learnt(topology, &first_jobs, &traces);
    let second: Vec<Row> = (POLICIES.iter())
        .map(|p| run(topology, &second_jobs, options, p).0)
        .collect();
    (first, second, second_jobs)
}

/// Fails where a policy's second run is more than `NOISE` times slower than its first.
fn never_slower(topology: &Topology, jobs: &[SimJob], options: &SimOptions, label: &str) {
    let (first, second, _) = twice(topology, jobs, options);
    let mut slower = Vec::new();
    for (a, b) in first.iter().zip(&second) {
        eprintln!(
            "{label:28} {:18} makespan {:8.2} then {:8.2}  mean slowdown {:6.3} then {:6.3}",
            a.policy, a.makespan, b.makespan, a.slowdown, b.slowdown
        );
        if b.makespan > NOISE * a.makespan {
            slower.push(format!(
                "{} {:.2} s → {:.2} s",
                a.policy, a.makespan, b.makespan
            ));
        }
    }
    assert!(
        slower.is_empty(),
        "{label}: slower the second time: {slower:?}"
    );
}

fn two_cpus() -> Topology {
    synthetic::parse("package:1 core:2").unwrap()
}

#[test]
fn one_long_region_started_on_one_cpu_runs_at_full_width_under_bp_next_time() {
    let topology = two_cpus();
    let options = SimOptions::default();
    let single = job(0, "amdahl(serial=0, runtime=4)", JobKind::Rigid, 1);
    let jobs = calibrated(&topology, &[single, long_region(1, 8.0)], &options);
    // Beside a single-threaded job it starts with one thread; when that job ends it is widened and
    // keeps its one thread.
    let (_, shared) = run(&topology, &jobs, &options, "eq");
    let starts = |trace: &[TraceLine]| -> Vec<u32> {
        (trace.iter())
            .filter_map(|line| match line.record {
                Record::Start { threads, .. } => Some(threads),
                _ => None,
            })
            .collect()
    };
    assert_eq!(starts(&shared), [1, 1]);
    let next = learnt(&topology, &jobs, &[&shared]);
    assert_eq!(
        (next[1].spec.kind, next[1].spec.max_threads),
        (JobKind::Moldable, 2)
    );
    let (batch, trace) = run(&topology, &next, &options, "bp");
    assert_eq!(starts(&trace), [1, 2], "alone on both CPUs");
    let (cold, _) = run(&topology, &jobs, &options, "bp");
    assert!(batch.makespan <= cold.makespan * (1.0 + 1e-9));
}

#[test]
fn programs_of_one_long_region_run_as_fast_the_second_time() {
    let topology = two_cpus();
    never_slower(
        &topology,
        &long_regions(),
        &SimOptions::default(),
        "long regions",
    );
}

#[test]
fn every_example_runs_as_fast_the_second_time() {
    let topology = two_cpus();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = (std::fs::read_dir(&dir).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        let (_, jobs) = cosched_sim::jobs::load(&file, topology.num_cpus()).unwrap();
        let label = file.file_name().unwrap().to_string_lossy().to_string();
        never_slower(&topology, &jobs, &SimOptions::default(), &label);
    }
}

#[test]
fn an_npb_mix_runs_as_fast_the_second_time() {
    let (topology, jobs, options) = npb_mix();
    never_slower(&topology, &jobs, &options, "NPB");
}

/// `auto` against the others on one run: makespan within 3% of the better of BP shortest-first and
/// Gang, mean slowdown within 10% of the best; the ratios where it is not.
fn auto_misses(rows: &[Row], label: &str) -> Vec<String> {
    let auto = row(rows, "auto");
    let baseline = f64::min(
        row(rows, "bp:order=shortest").makespan,
        row(rows, "gang").makespan,
    );
    let makespan = auto.makespan / baseline;
    let slowdown = auto.slowdown / best(rows, |r| r.slowdown);
    eprintln!("{label}: auto's makespan {makespan:.3} × the baseline's, mean slowdown {slowdown:.3} × the best");
    let mut misses = Vec::new();
    if makespan > 1.03 {
        misses.push(format!(
            "{label}: makespan {makespan:.3} × min(BP shortest, Gang)"
        ));
    }
    if slowdown > 1.10 {
        misses.push(format!("{label}: mean slowdown {slowdown:.3} × the best"));
    }
    misses
}

#[test]
fn auto_is_within_the_targets_cold_and_warm() {
    let topology = two_cpus();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut mixes: Vec<(String, Topology, Vec<SimJob>, SimOptions)> = ["default", "scaling"]
        .into_iter()
        .map(|name| {
            let file = examples.join(format!("{name}.toml"));
            let (_, jobs) = cosched_sim::jobs::load(&file, topology.num_cpus()).unwrap();
            (
                name.to_string(),
                topology.clone(),
                jobs,
                SimOptions::default(),
            )
        })
        .collect();
    let (npb_topology, npb_jobs, npb_options) = npb_mix();
    mixes.push(("NPB".to_string(), npb_topology, npb_jobs, npb_options));
    mixes.push((
        "long regions".to_string(),
        topology.clone(),
        long_regions(),
        SimOptions::default(),
    ));
    let mut misses = Vec::new();
    for (label, topology, jobs, options) in &mixes {
        let (first, second, _) = twice(topology, jobs, options);
        misses.extend(auto_misses(&first, &format!("{label}, first run")));
        misses.extend(auto_misses(&second, &format!("{label}, warm")));
    }
    assert!(misses.is_empty(), "{misses:#?}");
}
