//! `cosched compare`: the same workload under several policies, back to back, one table, one report.
//! Real runs measure the isolated times they lack first (`cosched calibrate`), so slowdowns are known.

use super::machine_model::{self, ModelArgs};
use super::output::{default_results_dir, prepare_results_dir};
use super::policies::PolicyName;
use super::run::{progress_bar, show, IsolatedArgs, MechanismArgs};
use crate::exit::JobsFailed;
use anyhow::Context as _;
use cosched_core::names::file_name_part;
use cosched_core::topology::{presets, sysfs};
use cosched_core::workload::Workload;
use cosched_core::Topology;
use cosched_linux::{Calibrated, IsolatedTimes, RunOptions};
use cosched_report::{
    comparison, disambiguate_labels, results_json, text_table, write_report, Run,
};
use cosched_sim::{simulate_into, JsonLinesSink, SimJob, SimOptions};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Run one workload under several policies, back to back, and compare them in one table and report
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs the workload's jobs for real on this machine under each policy in turn (or \
simulates them with --sim) and prints one line per policy: makespan (and as % of BP's), mean and max \
slowdown, ANTT, STP, Jain fairness, reconfigurations, failed jobs and executor overhead. Writes the \
traces (<policy>.jsonl), each job's output (<policy>/), report.html with figures, jobs.csv, \
policies.csv, timeline.csv, results.json and metadata.json to the output directory (see `cosched \
report --help`); a job that fails is shown as failed, the \
others go on.\n\n\
Real runs need each job's isolated time (alone on the whole machine) for slowdowns: those missing \
from WORKLOAD.isolated.json are measured first and stored there (see `cosched calibrate`).\n\n\
Examples:\n  cosched compare                                   # bundled workload, this machine\n  \
cosched compare examples/independent.toml --policy ue,taco\n  \
cosched compare my.toml --sim --machine taco-opteron8435 --policy ue,bp,eq,ta,taco\n  \
cosched compare my.toml --sim --machine 'package:2 l3:1(size=8MB) core:8' -o results/big --json\n  \
cosched compare my.toml --sim --memory 16G            # jobs' mem requests wait until they fit"
)]
pub struct Args {
    /// Workload file (TOML) [default: the bundled examples/default.toml, sized to this machine]
    #[arg(value_name = "WORKLOAD")]
    workload: Option<PathBuf>,
    /// Policies to compare, comma-separated, in the order to run them (`cosched policies` lists them)
    /// [default: ue,bp,bp:order=shortest,eq,ta,taco,gang,auto; with only single-threaded jobs, the
    /// task-bag policies too (as `cosched sim`)]
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "POLICY,...",
        value_parser = PolicyName,
        hide_possible_values = true
    )]
    policy: Vec<String>,
    /// Simulate instead of running real processes
    #[arg(long)]
    sim: bool,
    /// The machine to simulate: a preset (taco-opteron8435, casas-opteron6172, gang-opteron8380,
    /// scalpel-xeon-e5620, this), an `lstopo --of xml` file or an hwloc synthetic description
    /// [default: this machine]
    #[arg(long, value_name = "PRESET|FILE|SYNTHETIC", requires = "sim")]
    machine: Option<String>,
    /// Simulations only: the machine's memory for jobs, as SIZE (K, M, G or T): jobs' `mem`
    /// requests running at once fit in it, as the daemon admits them [default: this machine's
    /// memory when simulating it, else no limit]
    #[arg(long, value_name = "SIZE", requires = "sim", value_parser = super::machine::memory_size)]
    memory: Option<u64>,
    /// Simulations only: the machine model's constants
    #[command(flatten)]
    model: ModelArgs,
    /// Directory for traces, report and CSV [default: results/<workload>-<UTC time>]
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write into --out even if it holds an earlier run's results
    #[arg(long)]
    force: bool,
    /// Print the comparison and every run's summary as JSON (results.json) instead of a table
    #[arg(long)]
    json: bool,
    /// Real runs only: how plans are enforced
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Real runs only: where isolated times live
    #[command(flatten)]
    isolated: IsolatedArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.sim || (args.mechanism.mechanism.is_none() && args.mechanism.freezer.is_none()),
        "--mechanism and --freezer apply to real runs only; drop them or drop --sim"
    );
    // A simulation needs the machine before the jobs (profiles are sized to it); a real run, this one.
    let topology = if args.sim {
        presets::machine(args.machine.as_deref().unwrap_or(presets::THIS_MACHINE))?
    } else {
        sysfs::discover()?
    };
    anyhow::ensure!(
        args.sim || args.model.model.is_none(),
        "--model applies to simulations only: add --sim"
    );
    let mut model_note = String::new();
    let fitted = if args.sim {
        machine_model::chosen(&args.model, args.machine.as_deref(), &topology)?
    } else {
        None
    };
    let (workload, simulated_jobs) = if args.sim {
        let (workload, mut jobs) = match &args.workload {
            Some(path) => cosched_sim::jobs::load(path, topology.num_cpus())?,
            None => {
                let workload = bundled_workload();
                let jobs = cosched_sim::jobs::sim_jobs(
                    &workload,
                    topology.num_cpus(),
                    BUNDLED_SOURCE,
                    Some(BUNDLED_WORKLOAD),
                )?;
                (workload, jobs)
            }
        };
        let mut sized = String::new();
        if let Some(model) = &fitted {
            let isolated = isolated_path(&args);
            let sizing = machine_model::size_jobs_to_measured(
                &mut jobs,
                &workload,
                &topology,
                &model.params,
                &isolated,
            )?;
            sized = sizing.note(jobs.len(), &isolated);
        }
        model_note = machine_model::describe(fitted.as_ref(), args.machine.as_deref(), &sized);
        (workload, Some(jobs))
    } else {
        let workload = match &args.workload {
            Some(path) => Workload::load(path)?,
            None => bundled_workload(),
        };
        (workload, None)
    };
    let specs = match &simulated_jobs {
        Some(jobs) => jobs
            .iter()
            .map(|j| cosched_core::JobSpec::clone(&j.spec))
            .collect(),
        None => workload.specs(topology.num_cpus()),
    };
    let policies = super::compared_policies::chosen(&args.policy, &specs)?;
    let out = (args.out.clone()).unwrap_or_else(|| default_results_dir(&[&workload.info.name]));
    prepare_results_dir(&out, args.force)?;
    let metadata = super::provenance::collect(&workload.jobs);
    super::provenance::write(&out, &metadata)?;
    let (mut runs, incomplete) = match simulated_jobs {
        Some(jobs) => (
            compare_simulated(
                &workload,
                &jobs,
                &topology,
                (
                    &SimOptions {
                        workload: workload.info.name.clone(),
                        params: machine_model::params(fitted.as_ref()),
                        memory: simulated_memory(args.memory, args.machine.as_deref()),
                        ..SimOptions::default()
                    },
                    &model_note,
                ),
                &policies,
                &out,
            )?,
            None,
        ),
        None => compare_real(
            &isolated_path(&args),
            &workload,
            &topology,
            &args.mechanism,
            &policies,
            &out,
        )?,
    };
    disambiguate_labels(&mut runs);
    let written = write_report(&runs, &out, Some(&metadata))?;
    let rows = comparison(&runs);
    if args.json {
        print!("{}", results_json(&runs, &rows, Some(&metadata), &out));
    } else {
        print!("{}", text_table(&rows));
        println!("report: {}", written.html.display());
    }
    if let Some(error) = incomplete {
        return Err(error.into());
    }
    let failed = runs.iter().map(|r| r.summary.failed + r.summary.unfinished);
    JobsFailed::check(failed.sum(), runs.len() * workload.jobs.len())
}

fn compare_simulated(
    workload: &Workload,
    jobs: &[SimJob],
    topology: &Topology,
    (options, model_note): (&SimOptions, &str),
    policies: &[String],
    out: &Path,
) -> anyhow::Result<Vec<Run>> {
    eprintln!(
        "comparing {} on {} ({} CPUs, simulated; {model_note}): {}",
        workload.info.name,
        topology.name,
        topology.num_cpus(),
        policies.join(", ")
    );
    let mut runs = Vec::new();
    for (i, policy) in policies.iter().enumerate() {
        let trace = out.join(format!("{}.jsonl", file_name_part(policy)));
        let started = Instant::now();
        eprint!("[{}/{}] {policy} … ", i + 1, policies.len());
        simulate(topology, jobs, options, policy, &trace)?;
        runs.push(finished(&trace, started)?);
    }
    Ok(runs)
}

/// Real runs of every policy, and the error of the first that could not complete (its row is left out).
fn compare_real(
    isolated_path: &Path,
    workload: &Workload,
    topology: &Topology,
    mechanism: &MechanismArgs,
    policies: &[String],
    out: &Path,
) -> anyhow::Result<(Vec<Run>, Option<cosched_linux::Error>)> {
    warn_if_busy();
    cosched_native::locate()?;
    let isolated = isolated_times(isolated_path, workload, topology, mechanism, out)?;
    eprintln!(
        "comparing {} ({} jobs) on {} ({} CPUs), real runs: {}",
        workload.info.name,
        workload.jobs.len(),
        topology.name,
        topology.num_cpus(),
        policies.join(", ")
    );
    let mut runs = Vec::new();
    let mut incomplete = None;
    for (i, name) in policies.iter().enumerate() {
        let file_name = file_name_part(name);
        let trace = out.join(format!("{file_name}.jsonl"));
        let options = RunOptions {
            isolated: isolated.clone(),
            ..mechanism.apply(RunOptions::new(&trace, out.join(&file_name)))
        };
        std::fs::create_dir_all(&options.output_dir)
            .with_context(|| format!("cannot create directory {}", options.output_dir.display()))?;
        let started = Instant::now();
        eprintln!("[{}/{}] {name} …", i + 1, policies.len());
        let bar = progress_bar(workload.jobs.len());
        let policy = cosched_policies::create(name)?;
        let result = cosched_linux::run_observed(workload, topology, policy, &options, &mut |p| {
            show(&bar, p)
        });
        bar.finish_and_clear();
        match result {
            Ok(_) => {
                runs.push(finished(&trace, started)?);
                // For later comparisons; every policy of this one sees the same history.
                super::run::remember_behaviour(isolated_path, topology, workload, &trace);
            }
            // Ctrl-C means stop everything; any other run error spoils only this policy's row.
            Err(e @ cosched_linux::Error::Interrupted(_)) => return Err(e.into()),
            Err(e) => {
                eprintln!("    {name} could not complete: {e}; it is left out of the table");
                incomplete.get_or_insert(e);
            }
        }
    }
    match incomplete {
        Some(e) if runs.is_empty() => {
            Err(anyhow::Error::from(e).context("no policy completed a run; see the errors above"))
        }
        incomplete => Ok((runs, incomplete)),
    }
}

/// The isolated times of every job, measuring (and storing) those the file lacks.
fn isolated_times(
    path: &Path,
    workload: &Workload,
    topology: &Topology,
    mechanism: &MechanismArgs,
    out: &Path,
) -> anyhow::Result<IsolatedTimes> {
    let mut times = IsolatedTimes::load(path)?;
    let missing = Workload {
        jobs: (workload.jobs.iter())
            .filter(|job| times.lookup(topology, job).is_none())
            .cloned()
            .collect(),
        ..workload.clone()
    };
    if missing.jobs.is_empty() {
        eprintln!(
            "isolated times: {} (all {} jobs)",
            path.display(),
            workload.jobs.len()
        );
        return Ok(times);
    }
    eprintln!(
        "measuring the isolated times of {} job(s), each alone on all CPUs (once; stored in {})",
        missing.jobs.len(),
        path.display()
    );
    let results = cosched_linux::calibrate(
        &missing,
        topology,
        topology.cpus(),
        &out.join("isolated"),
        mechanism.mechanism,
        mechanism.freezer,
        &mut |result| match result {
            Calibrated::Time(t) => eprintln!("    {:<24} {:>8.3} s alone", t.job, t.seconds),
            Calibrated::Failed { job, error } => {
                eprintln!("    {job:<24} failed alone ({error}); its slowdown will be missing")
            }
        },
    )?;
    times.record(results);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: a failure to create it shows as the save's error below.
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = times.save(path) {
        eprintln!("    warning: {e}; the times are used for this comparison only");
    }
    Ok(times)
}

/// Loads a finished run's trace and says how it went.
fn finished(trace: &Path, started: Instant) -> anyhow::Result<Run> {
    let run = Run::load(trace)?;
    eprintln!(
        "    done in {:.1} s{}",
        started.elapsed().as_secs_f64(),
        match run.summary.failed {
            0 => String::new(),
            n => format!(", {n} job(s) failed (see the report)"),
        }
    );
    Ok(run)
}

/// Simulates one policy and streams its trace to `trace`.
fn simulate(
    topology: &Topology,
    jobs: &[SimJob],
    options: &SimOptions,
    policy: &str,
    trace: &Path,
) -> anyhow::Result<()> {
    let mut policy = cosched_policies::create(policy)?;
    let file = File::create(trace).with_context(|| format!("cannot write {}", trace.display()))?;
    let mut sink = JsonLinesSink::new(BufWriter::new(file));
    simulate_into(topology, jobs, policy.as_mut(), options, &mut sink)?;
    sink.into_inner()
        .flush()
        .with_context(|| format!("cannot write {}", trace.display()))?;
    Ok(())
}

/// The memory a simulation gives jobs: `asked`, else this machine's when it is the one simulated.
pub(super) fn simulated_memory(asked: Option<u64>, machine: Option<&str>) -> Option<u64> {
    let this_machine = machine.is_none_or(|m| m == presets::THIS_MACHINE);
    asked.or_else(|| {
        this_machine
            .then(cosched_linux::procfs::memory_total)
            .and_then(Result::ok)
    })
}

/// The bundled workload (`examples/default.toml` in the sources), compiled in so that an installed
/// cosched has it.
const BUNDLED_WORKLOAD: &str = include_str!("../../workloads/default.toml");
const BUNDLED_SOURCE: &str = "the bundled workload (examples/default.toml)";

fn bundled_workload() -> Workload {
    Workload::parse(BUNDLED_WORKLOAD, BUNDLED_SOURCE).expect("the bundled workload is valid")
}

/// `--isolated`, else next to the workload file; the bundled workload's in the user's cache
/// directory, since an installed cosched has no writable place of its own.
fn isolated_path(args: &Args) -> PathBuf {
    if let Some(path) = &args.isolated.file {
        return path.clone();
    }
    if let Some(path) = &args.workload {
        return IsolatedTimes::default_path(path);
    }
    match machine_model::cache_dir() {
        Some(dir) => dir.join("default.isolated.json"),
        None => PathBuf::from("results/default.isolated.json"),
    }
}

/// Warns when other work is running: it competes with the jobs and makes every figure noisy.
fn warn_if_busy() {
    let Some(busy) = busy_fraction(Duration::from_millis(500)) else {
        return;
    };
    if busy > 0.1 {
        eprintln!(
            "warning: other work keeps {:.0}% of this machine's CPU time busy; it competes with the \
jobs, so the figures will be noisy",
            busy * 100.0
        );
    }
}

/// The fraction of all CPUs' time spent not idle during `window`, from /proc/stat.
fn busy_fraction(window: Duration) -> Option<f64> {
    let totals = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = (stat.lines().next()?.split_whitespace().skip(1))
            .filter_map(|f| f.parse().ok())
            .collect();
        let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
        Some((fields.iter().sum(), idle))
    };
    let (total_before, idle_before) = totals()?;
    std::thread::sleep(window);
    let (total_after, idle_after) = totals()?;
    let total = total_after.checked_sub(total_before)?;
    (total > 0).then(|| 1.0 - (idle_after - idle_before) as f64 / total as f64)
}
