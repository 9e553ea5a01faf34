//! `cosched run`: run a workload's jobs for real on this machine under one policy.

use super::output::{default_results_dir, prepare_results_dir};
use super::policies::PolicyName;
use crate::exit::JobsFailed;
use anyhow::Context as _;
use cosched_core::topology::sysfs;
use cosched_core::trace::{read_trace, ExitStatus};
use cosched_core::workload::Workload;
use cosched_core::Topology;
use cosched_linux::{Freezer, IsolatedTimes, Placement, Progress, RunOptions};
use cosched_report::{comparison, results_json, text_table, Run};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Run a workload's jobs for real on this machine under one policy
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Launches each job at its arrival time once the policy places it, keeps it on \
the CPUs of its partition (cgroup cpuset or sched_setaffinity), freezes and thaws it for time slots, \
and writes the trace (trace.jsonl), each job's stdout/stderr, the run's metadata (metadata.json: \
version, host, kernel, command line, …) and a summary into the output directory. \
Whatever ends cosched (Ctrl-C, SIGTERM, a crash, SIGKILL), no job stays frozen and no cgroup is left; \
see docs/executor.md. Under sudo the jobs run as the invoking user. Exits with 1 when a job failed \
(README, \"Exit status\").\n\n\
Run `cosched calibrate WORKLOAD` once first, so that slowdowns can be computed.\n\n\
Examples:\n  cosched run examples/default.toml --policy eq\n  \
cosched run my.toml --policy casas --mechanism affinity --freezer signal -o results/casas\n  \
cosched report results/casas/trace.jsonl"
)]
pub struct Args {
    /// Workload file (TOML; every job needs a `command`)
    #[arg(value_name = "WORKLOAD")]
    workload: PathBuf,
    /// Policy to run (`cosched policies` lists them)
    #[arg(
        long,
        value_name = "POLICY",
        default_value = cosched_policies::DEFAULT_POLICY,
        value_parser = PolicyName,
        hide_possible_values = true
    )]
    policy: String,
    /// Output directory [default: results/<workload>-<policy>-<UTC time>]
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write into --out even if it holds an earlier run's results
    #[arg(long)]
    force: bool,
    /// Print the run's summary with every job's result as JSON instead of a table
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    mechanism: MechanismArgs,
    #[command(flatten)]
    isolated: IsolatedArgs,
    /// Seconds between two measurements of every job
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    sample_interval: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let workload = Workload::load(&args.workload)?;
    let policy = cosched_policies::create(&args.policy)?;
    anyhow::ensure!(
        args.sample_interval > 0.0 && args.sample_interval.is_finite(),
        "--sample-interval must be a positive number of seconds"
    );
    let topology = sysfs::discover()?;
    cosched_native::locate()?;
    let out = (args.out.clone())
        .unwrap_or_else(|| default_results_dir(&[&workload.info.name, &args.policy]));
    prepare_results_dir(&out, args.force)?;
    let metadata = super::provenance::collect(&workload.jobs);
    super::provenance::write(&out, &metadata)?;
    let isolated_path = args
        .isolated
        .file
        .clone()
        .unwrap_or_else(|| IsolatedTimes::default_path(&args.workload));
    let isolated = IsolatedTimes::load(&isolated_path)?;
    let options = RunOptions {
        sample_interval: args.sample_interval,
        isolated,
        ..args
            .mechanism
            .apply(RunOptions::new(out.join("trace.jsonl"), &out))
    };
    let known = workload
        .jobs
        .iter()
        .filter(|j| options.isolated.lookup(&topology, j).is_some())
        .count();
    eprintln!(
        "running {} ({} jobs) under {} on {} ({} CPUs); isolated times for {known} of them{}",
        workload.info.name,
        workload.jobs.len(),
        args.policy,
        topology.name,
        topology.num_cpus(),
        if known < workload.jobs.len() {
            format!(
                " (run `cosched calibrate {}` for slowdowns)",
                args.workload.display()
            )
        } else {
            String::new()
        }
    );
    let bar = progress_bar(workload.jobs.len());
    let report = cosched_linux::run_observed(&workload, &topology, policy, &options, &mut |p| {
        show(&bar, p)
    })
    .with_context(|| format!("run of {} under {} failed", workload.info.name, args.policy))?;
    bar.finish_and_clear();
    eprintln!("mechanism: {}", report.mechanism);
    remember_behaviour(&isolated_path, &topology, &workload, &report.trace);
    let runs = [Run::load(&report.trace)?];
    let failed: Vec<_> = (report.jobs.iter())
        .filter(|j| j.status == ExitStatus::Failed)
        .collect();
    if args.json {
        let rows = comparison(&runs);
        print!("{}", results_json(&runs, &rows, Some(&metadata), &out));
        return JobsFailed::check(failed.len(), report.jobs.len());
    }
    print!("{}", text_table(&comparison(&runs)));
    for job in &failed {
        let why = job
            .error
            .clone()
            .or(job.exit_code.map(|c| format!("exit code {c}")))
            .unwrap_or_default();
        println!("failed: {} ({why}); see {}", job.name, job.stderr.display());
    }
    println!("trace: {}", report.trace.display());
    JobsFailed::check(failed.len(), report.jobs.len())
}

/// Adds what a finished run's samples showed about its programs to the history next to the isolated
/// times, for their next runs. Best effort: a run's results do not depend on it.
pub fn remember_behaviour(store: &Path, topology: &Topology, workload: &Workload, trace: &Path) {
    let learnt = (|| -> anyhow::Result<()> {
        let file = std::fs::File::open(trace)
            .with_context(|| format!("cannot read {}", trace.display()))?;
        let lines = read_trace(std::io::BufReader::new(file), &trace.display().to_string())?;
        let mut history = IsolatedTimes::load(store)?;
        history.learn(topology, &workload.jobs, &lines);
        history.save(store)?;
        Ok(())
    })();
    if let Err(e) = learnt {
        eprintln!("warning: what this run showed about its jobs is not remembered: {e:#}");
    }
}

/// A progress bar on a terminal, nothing otherwise.
pub fn progress_bar(jobs: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(jobs as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} jobs done, {msg}")
            .expect("valid template"),
    );
    bar
}

pub fn show(bar: &ProgressBar, p: &Progress) {
    bar.set_position((p.done + p.failed) as u64);
    bar.set_message(format!(
        "{} running, {} pending, {} failed, {:.0} s elapsed",
        p.running, p.pending, p.failed, p.elapsed
    ));
}

/// How plans are enforced, for every subcommand that runs jobs for real.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MechanismArgs {
    /// How jobs are kept on their CPUs: cgroup-v2, cgroup-v1 (cpuset) or affinity
    /// (sched_setaffinity, no privileges needed) [default: the first that works here, in that order]
    #[arg(long, value_name = "MECHANISM")]
    pub mechanism: Option<Placement>,
    /// How jobs are stopped outside their time slots: cgroup-v2 (cgroup.freeze), cgroup-v1 (freezer)
    /// or signal (SIGSTOP/SIGCONT) [default: the placement's cgroup version, else the first that works]
    #[arg(long, value_name = "FREEZER")]
    pub freezer: Option<Freezer>,
}

/// Where the jobs' isolated times live, for the subcommands that compute slowdowns of real runs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct IsolatedArgs {
    /// Isolated times file [default: WORKLOAD with the extension .isolated.json]
    #[arg(long = "isolated", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

impl MechanismArgs {
    pub fn apply(&self, options: RunOptions) -> RunOptions {
        RunOptions {
            placement: self.mechanism,
            freezer: self.freezer,
            ..options
        }
    }
}
