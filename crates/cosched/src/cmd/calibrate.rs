//! `cosched calibrate`: each job of a workload alone on this machine, for slowdown and NTT; with
//! `--model`, the simulator's machine-specific constants from short runs of the bundled benchmarks.

use super::run::{IsolatedArgs, MechanismArgs};
use crate::exit::JobsFailed;
use cosched_core::topology::sysfs;
use cosched_core::workload::Workload;
use cosched_core::CpuSet;
use cosched_linux::{median_over_rounds, Calibrated, IsolatedTimes, Repeated};
use std::path::PathBuf;

/// Run each job of a workload alone on the whole machine and store its isolated time
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs the jobs one after another, each alone with all CPUs and the widest \
thread count its bounds allow, and stores the times (keyed by machine, job name and command) in \
WORKLOAD with the extension .isolated.json, where `cosched run` and `cosched compare` find them: they \
are the denominators of slowdown and NTT (TACO §4, CaSAS eq. 1). Each job runs --repeat times (3) \
and keeps its median; a range over a tenth of it is flagged, as the machine's speed moved between \
runs. Jobs that fail are reported and left out.\n\nWith --scaling, each job also runs alone on one CPU (one thread where its bounds allow): the \
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
    /// Also run each job alone on one CPU, to measure how it scales here (for `auto` and the
    /// simulator; real runs add to what is known of it)
    #[arg(long, conflicts_with = "model")]
    scaling: bool,
    /// Fit the simulator's machine model on this machine instead of timing a workload's jobs
    #[arg(long)]
    model: bool,
    /// Runs per job and width, or with --model per constant (the median is kept, the range reported)
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Directory for each calibration run's trace and output [default: results/calibrate-<workload>];
    /// with --model, the model file to write
    #[arg(short, long, value_name = "DIR|FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    mechanism: MechanismArgs,
    #[command(flatten)]
    isolated: IsolatedArgs,
    /// Print the medians (or with --model the fitted constants) as one JSON object instead of tables
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(workload_path) = &args.workload else {
        return super::calibrate_model::run(args.out.as_deref(), args.repeat, args.json);
    };
    let workload = Workload::load(workload_path)?;
    let topology = sysfs::discover()?;
    cosched_native::locate()?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("calibrate-{}", workload.info.name))
    });
    let path = args
        .isolated
        .file
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
    let json = args.json;
    let mut print = |result: &Calibrated| match result {
        _ if json => {}
        Calibrated::Time(t) => println!(
            "{:<24} {:>9.3} s  ({} threads)",
            t.job, t.seconds, t.threads
        ),
        Calibrated::Failed { job, error } => println!("{job:<24} failed: {error}"),
    };
    let first_cpu: CpuSet = topology.cpus().iter().next().into_iter().collect();
    let mut widths = vec![("all CPUs", topology.cpus().clone(), PathBuf::new())];
    if args.scaling {
        widths.push((
            "one CPU, to see how they scale here",
            first_cpu,
            "one-cpu".into(),
        ));
    }
    // Rounds alternate the widths, so that a phase in which the machine runs slower falls on both
    // and the medians stay comparable.
    let mut rounds: Vec<Vec<Vec<Calibrated>>> = vec![Vec::new(); widths.len()];
    for round in 1..=args.repeat {
        let round_dir = if args.repeat > 1 {
            out.join(format!("round-{round}"))
        } else {
            out.clone()
        };
        for ((what, cpus, subdir), results) in widths.iter().zip(&mut rounds) {
            eprintln!("[{round}/{}] alone on {what}", args.repeat);
            results.push(cosched_linux::calibrate(
                &workload,
                &topology,
                cpus,
                &round_dir.join(subdir),
                args.mechanism.mechanism,
                args.mechanism.freezer,
                &mut print,
            )?);
        }
    }
    let mut failed = 0;
    let mut json_widths = Vec::new();
    for ((what, _, _), results) in widths.iter().zip(&rounds) {
        let medians = median_over_rounds(results);
        if json {
            json_widths.push(serde_json::json!({
                "alone_on": if what.starts_with("all") { "all CPUs" } else { "one CPU" },
                "jobs": medians.iter().map(median_json).collect::<Vec<_>>(),
            }));
        } else if args.repeat > 1 {
            println!("median of {} runs alone on {what}:", args.repeat);
            for m in &medians {
                report_median(m);
            }
        }
        let results = medians.into_iter().map(|m| m.result).collect();
        failed += if what.starts_with("all") {
            times.record(results)
        } else {
            times.record_one_cpu(results)
        };
    }
    times.save(&path)?;
    if json {
        let doc = serde_json::json!({
            "isolated_times": path.display().to_string(),
            "repeat": args.repeat,
            "widths": json_widths,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("isolated times: {}", path.display());
    }
    if failed > 0 {
        eprintln!(
            "{failed} job(s) failed alone (see above and {}); the times of the others are stored",
            out.display()
        );
    }
    let runs = workload.jobs.len() * widths.len();
    JobsFailed::check(failed, runs)
}

/// A job's median with its range, and a warning when its runs differ by more than a tenth.
fn report_median(m: &Repeated) {
    let Calibrated::Time(t) = &m.result else {
        return;
    };
    let spread = m.spread();
    let warning = if spread > MAX_SPREAD {
        "  the machine's speed changed between the runs: calibrate again on an idle machine"
    } else {
        ""
    };
    println!(
        "{:<24} {:>9.3} s  ({:.3}–{:.3}, {:.0}%){warning}",
        t.job,
        t.seconds,
        m.low,
        m.high,
        spread * 100.0
    );
}

/// A job's median as JSON: seconds and threads with the range, or the error of a job that failed.
fn median_json(m: &Repeated) -> serde_json::Value {
    match &m.result {
        Calibrated::Time(t) => serde_json::json!({
            "job": t.job,
            "seconds": t.seconds,
            "threads": t.threads,
            "low_seconds": m.low,
            "high_seconds": m.high,
        }),
        Calibrated::Failed { job, error } => serde_json::json!({ "job": job, "error": error }),
    }
}

/// Range over median beyond which a job's calibration runs are not trusted.
const MAX_SPREAD: f64 = 0.1;
