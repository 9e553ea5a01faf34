//! `cosched calibrate`: each job of a workload alone on this machine, for slowdown and NTT; with
//! `--model`, the simulator's machine-specific constants from short runs of the bundled benchmarks.

use super::run::MechanismArgs;
use crate::exit::JobsFailed;
use cosched_core::topology::sysfs;
use cosched_core::workload::Workload;
use cosched_linux::{Calibrated, IsolatedTimes};
use std::path::PathBuf;

/// Run each job of a workload alone on the whole machine and store its isolated time
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs the jobs one after another, each alone with all CPUs and the widest \
thread count its bounds allow, and stores the times (keyed by machine, job name and command) in \
WORKLOAD with the extension .isolated.json, where `cosched run` and `cosched compare` find them: they \
are the denominators of slowdown and NTT (TACO §4, CaSAS eq. 1). Jobs that fail are reported and left \
out.\n\nWith --scaling, each job also runs alone on one CPU (one thread where its bounds allow): the \
two times say how it scales on this machine, which `cosched compare --sim` fits instead of the \
profile's speedup (docs/simulation-model.md).\n\nWith --model (no WORKLOAD), fits the simulator's machine-specific constants instead, from short \
runs on this machine (about 20 s; run it on an idle machine): how a spinning team progresses \
beside threads that block and wake, the OS time slice, libgomp's spin time, the context-switch, LLC-refill and memory \
bandwidth figures, each the median of 3 runs with its range. It writes a machine model file (default: \
~/.cache/cosched/model-<machine>-<cpus>cpu.toml) that `cosched sim` and `cosched compare --sim` use on \
this machine (docs/simulation-model.md).\n\nExamples:\n  cosched calibrate examples/default.toml\n  \
cosched calibrate my.toml --isolated my-times.json -o results/calibration\n  \
cosched calibrate examples/independent.toml --scaling\n  \
cosched calibrate --model\n  cosched calibrate --model -o box.model.toml"
)]
pub struct Args {
    /// Workload file (TOML; every job needs a `command`)
    #[arg(
        value_name = "WORKLOAD",
        required_unless_present = "model",
        conflicts_with = "model"
    )]
    workload: Option<PathBuf>,
    /// Also run each job alone on one CPU, to measure how it scales here (for the simulator)
    #[arg(long, conflicts_with = "model")]
    scaling: bool,
    /// Fit the simulator's machine model on this machine instead of timing a workload's jobs
    #[arg(long)]
    model: bool,
    /// With --model: runs per constant (the median is kept, the range reported)
    #[arg(long, value_name = "N", default_value_t = 3, requires = "model", value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Directory for each calibration run's trace and output [default: results/calibrate-<workload>];
    /// with --model, the model file to write
    #[arg(short, long, value_name = "DIR|FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    mechanism: MechanismArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(workload_path) = &args.workload else {
        return super::calibrate_model::run(args.out.as_deref(), args.repeat);
    };
    let workload = Workload::load(workload_path)?;
    let topology = sysfs::discover()?;
    cosched_native::locate().map_err(anyhow::Error::msg)?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("calibrate-{}", workload.info.name))
    });
    let path = args
        .mechanism
        .isolated
        .clone()
        .unwrap_or_else(|| IsolatedTimes::default_path(workload_path));
    let mut times = IsolatedTimes::load(&path)?;
    eprintln!(
        "calibrating {} jobs of {} alone on {} ({} CPUs)",
        workload.jobs.len(),
        workload.info.name,
        topology.name,
        topology.num_cpus()
    );
    let mut print = |result: &Calibrated| match result {
        Calibrated::Time(t) => println!(
            "{:<24} {:>9.3} s  ({} threads)",
            t.job, t.seconds, t.threads
        ),
        Calibrated::Failed { job, error } => println!("{job:<24} failed: {error}"),
    };
    let results = cosched_linux::calibrate(
        &workload,
        &topology,
        topology.cpus(),
        &out,
        args.mechanism.mechanism,
        args.mechanism.freezer,
        &mut print,
    )?;
    let mut failed = times.record(results);
    if args.scaling {
        let first_cpu = topology.cpus().iter().next().into_iter().collect();
        eprintln!("the same jobs alone on one CPU, to see how they scale here");
        let results = cosched_linux::calibrate(
            &workload,
            &topology,
            &first_cpu,
            &out.join("one-cpu"),
            args.mechanism.mechanism,
            args.mechanism.freezer,
            &mut print,
        )?;
        failed += times.record_one_cpu(results);
    }
    times.save(&path)?;
    println!("isolated times: {}", path.display());
    if failed > 0 {
        eprintln!(
            "{failed} job(s) failed alone (see above and {}); the times of the others are stored",
            out.display()
        );
    }
    let runs = workload.jobs.len() * if args.scaling { 2 } else { 1 };
    JobsFailed::check(failed, runs)
}
