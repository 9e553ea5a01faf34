//! `cosched calibrate`: each job of a workload alone on this machine, for slowdown and NTT.

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
out.\n\nExamples:\n  cosched calibrate examples/default.toml\n  \
cosched calibrate my.toml --isolated my-times.json -o results/calibration"
)]
pub struct Args {
    /// Workload file (TOML; every job needs a `command`)
    #[arg(value_name = "WORKLOAD")]
    workload: PathBuf,
    /// Directory for each calibration run's trace and output [default: results/calibrate-<workload>]
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    mechanism: MechanismArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let workload = Workload::load(&args.workload)?;
    let topology = sysfs::discover()?;
    cosched_native::locate().map_err(anyhow::Error::msg)?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("calibrate-{}", workload.info.name))
    });
    let path = args
        .mechanism
        .isolated
        .clone()
        .unwrap_or_else(|| IsolatedTimes::default_path(&args.workload));
    let mut times = IsolatedTimes::load(&path)?;
    eprintln!(
        "calibrating {} jobs of {} alone on {} ({} CPUs)",
        workload.jobs.len(),
        workload.info.name,
        topology.name,
        topology.num_cpus()
    );
    let results = cosched_linux::calibrate(
        &workload,
        &topology,
        &out,
        args.mechanism.mechanism,
        args.mechanism.freezer,
        &mut |result| match result {
            Calibrated::Time(t) => println!(
                "{:<24} {:>9.3} s  ({} threads)",
                t.job, t.seconds, t.threads
            ),
            Calibrated::Failed { job, error } => println!("{job:<24} failed: {error}"),
        },
    )?;
    let failed = times.record(results);
    times.save(&path)?;
    println!("isolated times: {}", path.display());
    if failed > 0 {
        eprintln!(
            "{failed} job(s) failed alone (see above and {}); the times of the others are stored",
            out.display()
        );
    }
    JobsFailed::check(failed, workload.jobs.len())
}
