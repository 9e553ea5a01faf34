//! `auto` learning how each program scales from its own runs, in simulation. A first run knows each
//! job's time alone on the whole machine (as `cosched compare` measures it first) but not how it
//! scales; its trace is what the run history keeps (`cosched_core::scaling`), and the second run
//! starts with the fitted curves, as a real run's jobs do from the store beside the isolated times.
//! The targets are the for real runs: with history, `auto`'s makespan within 3% of the better
//! of BP shortest-first's and Gang's and its mean slowdown within 10% of the best (5% of BP's for
//! two copies of one job that scales perfectly); without, its makespan never more than 5% above
//! `gang`'s.

/// Only the part of the shared fixtures that these tests use.
mod common {
    pub mod auto;
    pub mod history;
}

use common::auto::{best, job, npb_mix, row, run, table, Row};
use common::history::{calibrated, learnt};
use cosched_core::scaling::{fit, runs_from_trace, ScalingRun};
use cosched_core::topology::synthetic;
use cosched_core::{JobId, JobKind, Topology};
use cosched_sim::{SimJob, SimOptions};
use std::path::Path;

/// First run, then the run with history: both tables.
fn first_and_second(
    topology: &Topology,
    jobs: &[SimJob],
    options: &SimOptions,
    label: &str,
) -> (Vec<Row>, Vec<Row>) {
    let first_jobs = calibrated(topology, jobs, options);
    let first = table(
        topology,
        &first_jobs,
        options,
        &format!("{label}, first run"),
    );
    let (_, trace) = run(topology, &first_jobs, options, "auto");
    let second_jobs = learnt(topology, &first_jobs, &[&trace]);
    let second = table(
        topology,
        &second_jobs,
        options,
        &format!("{label}, with history"),
    );
    (first, second)
}

fn check_first_run(first: &[Row]) {
    let auto = row(first, "auto");
    let gang = row(first, "gang");
    assert!(
        auto.makespan <= 1.05 * gang.makespan,
        "first run: auto's makespan {:.2} over 1.05 × gang's {:.2}",
        auto.makespan,
        gang.makespan
    );
}

fn check_with_history(second: &[Row]) {
    let auto = row(second, "auto");
    let baseline = f64::min(
        row(second, "bp:order=shortest").makespan,
        row(second, "gang").makespan,
    );
    let makespan = auto.makespan / baseline;
    let slowdown = auto.slowdown / best(second, |r| r.slowdown);
    eprintln!("with history, auto: makespan {makespan:.3} × the baseline's, mean slowdown {slowdown:.3} × the best");
    assert!(makespan <= 1.03, "makespan {makespan:.3} × the baseline's");
    assert!(slowdown <= 1.10, "mean slowdown {slowdown:.3} × the best");
}

#[test]
fn two_copies_of_a_job_that_scales_perfectly_run_one_after_the_other_once_known() {
    let topology = synthetic::parse("package:1 core:2").unwrap();
    let spinning = "amdahl(serial=0, runtime=20, sync=spin, sync_interval=0.0001)";
    let jobs = [
        job(0, spinning, JobKind::Malleable, 2),
        job(1, spinning, JobKind::Malleable, 2),
    ];
    let (first, second) = first_and_second(
        &topology,
        &jobs,
        &SimOptions::default(),
        "two spinning copies",
    );
    check_first_run(&first);
    check_bps_slowdown(&second);
}

/// With history, `auto`'s mean slowdown within 5% of BP's.
fn check_bps_slowdown(second: &[Row]) {
    let auto = row(second, "auto");
    let bp = row(second, "bp");
    assert!(
        auto.slowdown <= 1.05 * bp.slowdown,
        "auto's mean slowdown {:.3} over 1.05 × BP's {:.3}",
        auto.slowdown,
        bp.slowdown
    );
}

#[test]
fn the_moldable_twins_of_the_example_run_one_after_the_other_once_known() {
    // Moldable: never probed, they learn from the first run, side by side on one CPU each.
    let topology = synthetic::parse("package:1 core:2").unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twins.toml");
    let (_, jobs) = cosched_sim::jobs::load(&path, topology.num_cpus()).unwrap();
    let (first, second) = first_and_second(
        &topology,
        &jobs,
        &SimOptions::default(),
        "examples/twins.toml",
    );
    check_first_run(&first);
    check_bps_slowdown(&second);
}

#[test]
fn the_scaling_example_with_history_is_within_the_targets_of_the_best_policy() {
    let topology = synthetic::parse("package:1 core:2").unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scaling.toml");
    let (_, jobs) = cosched_sim::jobs::load(&path, topology.num_cpus()).unwrap();
    let (first, second) = first_and_second(
        &topology,
        &jobs,
        &SimOptions::default(),
        "examples/scaling.toml",
    );
    check_first_run(&first);
    check_with_history(&second);
}

#[test]
fn an_npb_mix_run_first_is_within_five_percent_of_gang() {
    let (topology, jobs, options) = npb_mix();
    let first = table(
        &topology,
        &calibrated(&topology, &jobs, &options),
        &options,
        "NPB",
    );
    check_first_run(&first);
}

#[test]
fn an_npb_mix_with_history_is_within_the_targets_of_the_best_policy() {
    let (topology, jobs, options) = npb_mix();
    let (_, second) = first_and_second(&topology, &jobs, &options, "NPB");
    check_with_history(&second);
}

#[test]
fn the_default_example_with_history_is_within_the_targets_of_the_best_policy() {
    let topology = synthetic::parse("package:1 core:2").unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/default.toml");
    let (_, jobs) = cosched_sim::jobs::load(&path, topology.num_cpus()).unwrap();
    let (first, second) = first_and_second(
        &topology,
        &jobs,
        &SimOptions::default(),
        "examples/default.toml",
    );
    check_first_run(&first);
    check_with_history(&second);
}

#[test]
fn a_long_job_run_alone_first_is_probed_at_another_width_and_the_next_run_knows_it() {
    let topology = synthetic::parse("package:1 core:2").unwrap();
    let options = SimOptions::default();
    let spinning = "amdahl(serial=0, runtime=100, sync=spin, sync_interval=0.0001)";
    // First run: the job alone, its scaling unknown; it would hold both CPUs throughout.
    let alone = calibrated(
        &topology,
        &[job(0, spinning, JobKind::Malleable, 2)],
        &options,
    );
    let (first, trace) = run(&topology, &alone, &options, "auto");
    let spells = runs_from_trace(&trace).remove(&JobId(0)).unwrap();
    let widths: Vec<u32> = spells.spells.iter().map(|s| s.used_width()).collect();
    assert!(
        widths.contains(&1) && widths.contains(&2),
        "spells at {widths:?}"
    );
    let runtime = alone[0].spec.hints.runtime.unwrap();
    eprintln!(
        "first run alone: {:.2} s against {runtime:.2} s alone unprobed",
        first.makespan
    );
    assert!(
        first.makespan <= 1.03 * runtime,
        "the probe costs at most 2.5% (and the reconfigurations)"
    );
    // The history: its calibration and that run. Its fit finds it scales.
    let history = [ScalingRun::alone(2, 2, runtime), spells];
    let fitted = fit(&history).unwrap();
    assert!(fitted.trusted() && fitted.serial < 0.05, "{fitted:?}");
    // A job with a serial part, probed alike, is fitted with it.
    let serial = "amdahl(serial=0.3, runtime=100, sync=block, sync_interval=0.01)";
    let alone = calibrated(
        &topology,
        &[job(0, serial, JobKind::Malleable, 2)],
        &options,
    );
    let (_, trace) = run(&topology, &alone, &options, "auto");
    let history = [
        ScalingRun::alone(2, 2, alone[0].spec.hints.runtime.unwrap()),
        runs_from_trace(&trace).remove(&JobId(0)).unwrap(),
    ];
    let part = fit(&history).unwrap();
    eprintln!("probed: serial fraction {:.3} of 0.3", part.serial);
    assert!(
        part.trusted() && (part.serial - 0.3).abs() < 0.05,
        "{part:?}"
    );
    // Next run: two copies arrive together. Known to scale or not, they run one after another at
    // full width, as BP does.
    let pair: Vec<SimJob> = [0, 1]
        .into_iter()
        .map(|id| job(id, spinning, JobKind::Malleable, 2))
        .collect();
    let unknown = calibrated(&topology, &pair, &options);
    let knowing: Vec<SimJob> = (unknown.iter())
        .map(|job| {
            let mut spec = (*job.spec).clone();
            spec.hints.one_cpu_runtime = fitted.one_cpu_seconds;
            SimJob {
                spec: spec.into(),
                profile: job.profile.clone(),
                mem: job.mem,
            }
        })
        .collect();
    let (blind, _) = run(&topology, &unknown, &options, "auto");
    let (informed, _) = run(&topology, &knowing, &options, "auto");
    let (bp, _) = run(&topology, &knowing, &options, "bp");
    eprintln!(
        "two copies: auto {:.3} unknown, {:.3} known, bp {:.3} (mean slowdown)",
        blind.slowdown, informed.slowdown, bp.slowdown
    );
    assert!(informed.slowdown <= 1.05 * bp.slowdown);
    assert!(blind.slowdown <= 1.05 * bp.slowdown);
}
