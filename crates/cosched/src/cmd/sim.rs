//! `cosched sim`: simulate policies on a workload or a scenario and compare them in one table.

use super::machine_model::{self, ModelArgs};
use super::output::prepare_results_dir;
use super::sim_tables;
use anyhow::{bail, Context as _};
use cosched_core::topology::presets;
use cosched_core::Topology;
use cosched_sim::calibrated::CalibratedModel;
use cosched_sim::jobs::{self, Instance};
use cosched_sim::runner;
use cosched_sim::runner::TraceOut;
use cosched_sim::scenario::{self, ModelConfig, PaperFigures, ScenarioFile};
use cosched_sim::sweep::Sweep;
use cosched_sim::{Mode, TraceLevel};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Simulate policies on a workload or scenario file and compare them
#[derive(clap::Args, Debug)]
#[command(
    after_help = "INPUT is a workload (TOML with [[job]] tables, each with a `profile`; see \
docs/workload-format.md) or a scenario (a [scenario] table; see scenarios/README.md).\n\nPrints one row \
per policy: makespan (mean over seeds), makespan relative to BP on the same workload, mean slowdown, \
ANTT, reconfigurations and, where jobs have LLC footprints (polybench/*, working_set=), the simulated \
LLC miss ratio; a scenario's [paper] figures print beside them. With [[set]]s, those rows per set \
(TACO Table 4's shape); with a [sweep], the measured jobs' completion time per point and policy, and \
its ratio to the sweep's baseline.\n\nRuns go in parallel, one per CPU this process may use; each run \
gives what it gives alone, and `taskset -c 0-3 cosched sim ...` limits them to four at once (each run \
holds its own jobs and plans in memory).\n\nExamples:\n  cosched gen --jobs 40 --rate 9 --mix nas --seed 1 -o w.toml\n  \
cosched sim w.toml --machine taco-opteron8435 --policy ue,bp,eq\n  \
cosched sim w.toml --machine 'package:1 core:32' --memory 64G\n  \
cosched sim w.toml --machine 'package:16 l3:1(size=32MB) core:64' --policy eq --json\n  \
cosched sim scenarios/taco-table4.toml --seeds 8 -o traces/\n  \
cosched sim scenarios/gang-granularity.toml\n  \
cosched sim scenarios/scalpel-23.toml --policy fifo,rr,scalpel\n  \
cosched report --mixed traces/*.jsonl"
)]
pub struct Args {
    /// Workload file or scenario file
    #[arg(value_name = "WORKLOAD|SCENARIO")]
    input: PathBuf,
    /// Machine: a preset (taco-opteron8435, casas-opteron6172, gang-opteron8380, scalpel-xeon-e5620,
    /// this), an `lstopo --of xml` file, or hwloc's synthetic syntax such as
    /// "package:4 l3:1(size=6MB) core:6" [default: the scenario's; for a workload file, this
    /// machine, as `cosched compare --sim`]
    #[arg(long, value_name = "PRESET|FILE|SYNTHETIC")]
    machine: Option<String>,
    /// Policies to compare, comma-separated (`cosched policies` lists them) [default: the scenario's;
    /// else ue,bp,bp:order=shortest,eq,ta,taco,gang,auto, and with only single-threaded jobs the
    /// task-bag policies too, as `cosched compare`]
    #[arg(
        long,
        value_name = "POLICY,...",
        value_delimiter = ',',
        value_parser = super::policies::PolicyName,
        hide_possible_values = true
    )]
    policy: Vec<String>,
    /// Number of generated workloads (consecutive seeds); scenarios with a [generator] or [[set]]s only
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Integrate plans slot by slot instead of as a fluid average (slower; for validation)
    #[arg(long)]
    exact: bool,
    /// The machine's memory for jobs, as SIZE (K, M, G or T): jobs' `mem` requests running at
    /// once fit in it, as the daemon admits them [default: the scenario's [model] memory; for a
    /// workload file on this machine, its memory; else no limit]
    #[arg(long, value_name = "SIZE", value_parser = super::machine::memory_size)]
    memory: Option<u64>,
    /// Print the rows as JSON instead of a table
    #[arg(long)]
    json: bool,
    /// Write one trace per run (JSON Lines) into DIR, for `cosched report`
    #[arg(short, long, value_name = "DIR", alias = "trace-dir")]
    out: Option<PathBuf>,
    /// Write into --out even if it holds earlier traces
    #[arg(long)]
    force: bool,
    /// How much of each run --out keeps: full (every line), jobs (each job's arrival, start and
    /// finish; a large run's plans make nearly all of its trace) or none (no trace file)
    #[arg(
        long,
        value_name = "full|jobs|none",
        default_value = "full",
        requires = "out"
    )]
    trace: TraceLevel,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (scenario, machine_spec) = read_input(&args)?;
    let topology = presets::machine(&machine_spec)?;
    let cpus = topology.num_cpus();
    // Unnamed policies are chosen by the jobs, which generated sets and sweeps make only while they
    // run: those get the default for multithreaded jobs.
    let named = match &scenario {
        Some(file) if args.policy.is_empty() => file.scenario.policies.clone(),
        _ => args.policy.clone(),
    };
    let mut policies = super::compared_policies::chosen(&named, &[])?;
    if let Some(dir) = &args.out {
        prepare_results_dir(dir, args.force)?;
        // Simulated jobs run no command; the record says which build and command line made them.
        super::provenance::write(dir, &super::provenance::collect(&[]))?;
    }
    let (model, fitted) = model_of(&args, scenario.as_ref(), &topology)?;
    let mut progress = Progress::new();
    let paper = scenario.as_ref().and_then(|f| f.paper.as_ref());
    if let Some(file) = scenario.as_ref().filter(|f| !f.sets.is_empty()) {
        return run_sets(&args, file, &topology, &policies, &model, &mut progress);
    }
    if let Some(sweep) = scenario.as_ref().and_then(|f| f.sweep.as_ref()) {
        return run_sweep(
            &args,
            sweep,
            &topology,
            &policies,
            &model,
            paper,
            &mut progress,
        );
    }
    let (instances, model_note) = match &scenario {
        Some(file) => {
            let instances = match (&file.generator, &file.scenario.workload) {
                (Some(generator), _) => runner::generated_instances(
                    generator,
                    args.seeds.unwrap_or(file.scenario.seeds),
                    cpus,
                )?,
                (None, Some(path)) => vec![workload_instance(path, cpus, args.seeds)?.1],
                (None, None) => unreachable!("ScenarioFile::load checks that jobs are given"),
            };
            (instances, String::new())
        }
        None => {
            let (instance, note) = sized_workload(&args, &topology, &model, fitted.as_ref())?;
            (vec![instance], note)
        }
    };
    if named.is_empty() {
        let specs: Vec<_> = (instances.iter())
            .flat_map(|i| i.jobs.iter().map(|j| cosched_core::JobSpec::clone(&j.spec)))
            .collect();
        policies = super::compared_policies::default_for(&specs);
    }
    if !model_note.is_empty() {
        eprintln!("{model_note}");
    }
    let results = runner::run_all(
        &topology,
        &instances,
        &policies,
        &model,
        trace_out(&args),
        &mut |done, total| progress.update(done, total),
    )?;
    progress.finish();
    let rows = runner::rows(&results, &policies);
    let header = format!(
        "machine {} ({cpus} CPUs), {} workload(s): {}",
        topology.name,
        instances.len(),
        instances
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    print_results(&args, &rows, &header, paper, || {
        sim_tables::policy_table(&rows, paper)
    })
}

/// The scenario `args.input` holds, if it holds one, and the machine to simulate: `--machine`,
/// else the scenario's, else this one.
fn read_input(args: &Args) -> anyhow::Result<(Option<ScenarioFile>, String)> {
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    if scenario::is_scenario(&text) {
        let file = ScenarioFile::load(&args.input)?;
        let machine = args
            .machine
            .clone()
            .unwrap_or_else(|| file.scenario.machine.clone());
        return Ok((Some(file), machine));
    }
    let machine = (args.machine.clone()).unwrap_or_else(|| presets::THIS_MACHINE.to_string());
    Ok((None, machine))
}

/// The model the runs use, and the fitted model of the machine where one applies: a scenario
/// names its machine and constants; a workload runs on this machine's fitted model.
fn model_of(
    args: &Args,
    scenario: Option<&ScenarioFile>,
    topology: &Topology,
) -> anyhow::Result<(ModelConfig, Option<CalibratedModel>)> {
    let mut model = scenario.map(|f| f.model.clone()).unwrap_or_default();
    if args.exact {
        model.mode = Mode::Exact;
    }
    model.memory = match scenario {
        Some(_) => args.memory.or(model.memory),
        None => super::compare::simulated_memory(args.memory, args.machine.as_deref()),
    };
    let fitted = match scenario {
        Some(_) if args.model.model.is_none() => None,
        _ => machine_model::chosen(&args.model, args.machine.as_deref(), topology)?,
    };
    if let Some(fitted) = &fitted {
        model.params = fitted.params.clone();
    }
    Ok((model, fitted))
}

/// The workload file `args.input` as one instance, its jobs sized to their measured times where
/// the machine has a `fitted` model; and the note that says which model runs.
fn sized_workload(
    args: &Args,
    topology: &Topology,
    model: &ModelConfig,
    fitted: Option<&CalibratedModel>,
) -> anyhow::Result<(Instance, String)> {
    let (workload, mut instance) = workload_instance(&args.input, topology.num_cpus(), args.seeds)?;
    if fitted.is_none() {
        return Ok((
            instance,
            machine_model::describe(None, args.machine.as_deref(), ""),
        ));
    }
    let isolated = cosched_linux::IsolatedTimes::default_path(&args.input);
    let sizing = machine_model::size_jobs_to_measured(
        &mut instance.jobs,
        &workload,
        topology,
        &model.params,
        &isolated,
    )?;
    let note = machine_model::describe(
        fitted,
        args.machine.as_deref(),
        &sizing.note(instance.jobs.len(), &isolated),
    );
    Ok((instance, note))
}

/// A scenario's sets of generated workloads, each run under every policy for each seed.
fn run_sets(
    args: &Args,
    file: &ScenarioFile,
    topology: &Topology,
    policies: &[String],
    model: &ModelConfig,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let cpus = topology.num_cpus();
    let results = runner::run_sets(
        topology,
        &file.sets,
        args.seeds.unwrap_or(file.scenario.seeds),
        policies,
        model,
        trace_out(args),
        &mut |done, total| progress.update(done, total),
    )?;
    progress.finish();
    let seeds = results.first().map_or(0, |r| r.workloads.len());
    let mut header = format!(
        "machine {} ({cpus} CPUs), {} sets × {seeds} workload(s)",
        topology.name,
        results.len()
    );
    for set in &file.sets {
        header += &format!("\nset {}: {}", set.name, set.description);
    }
    let papers: Vec<_> = file.sets.iter().map(|s| s.paper.as_ref()).collect();
    print_results(args, &results, &header, file.paper.as_ref(), || {
        sim_tables::sets_table(&results, &papers)
    })
}

/// A scenario's sweep: one workload per point, run under every policy.
fn run_sweep(
    args: &Args,
    sweep: &Sweep,
    topology: &Topology,
    policies: &[String],
    model: &ModelConfig,
    paper: Option<&PaperFigures>,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let cpus = topology.num_cpus();
    if args.seeds.is_some() {
        bail!(
            "--seeds applies to generated workloads; a [sweep] scenario has one workload per point"
        );
    }
    sweep
        .validate(policies, cpus)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.input.display()))?;
    let points = runner::run_sweep(
        topology,
        sweep,
        policies,
        model,
        trace_out(args),
        &mut |done, total| progress.update(done, total),
    )?;
    progress.finish();
    let header = format!(
        "machine {} ({cpus} CPUs), {} points",
        topology.name,
        points.len()
    );
    print_results(args, &points, &header, paper, || {
        sim_tables::sweep_tables(sweep, &points, policies)
    })
}

/// `results` as JSON with `--json`; otherwise the header, the table and the closing lines.
fn print_results(
    args: &Args,
    results: &impl serde::Serialize,
    header: &str,
    paper: Option<&PaperFigures>,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(results)?);
        return Ok(());
    }
    println!("{header}");
    print!("{}", table());
    let traces = trace_out(args).filter(|t| t.level != TraceLevel::None);
    print_closing(paper, traces.map(|t| t.dir));
    Ok(())
}

/// Where the runs' traces go, and how much of them.
fn trace_out(args: &Args) -> Option<TraceOut<'_>> {
    args.out.as_deref().map(|dir| TraceOut {
        dir,
        level: args.trace,
    })
}

/// The paper's source and findings, and where the traces went.
fn print_closing(paper: Option<&PaperFigures>, trace_dir: Option<&std::path::Path>) {
    if let Some(paper) = paper {
        println!("paper: {}", paper.source);
        if !paper.finding.is_empty() {
            println!("paper finding: {}", paper.finding);
        }
    }
    if let Some(dir) = trace_dir {
        println!("traces: {}", dir.display());
    }
}

/// A progress bar that appears only once a run has taken more than a second.
struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    fn new() -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, ETA {eta}")
                .expect("valid template"),
        );
        Progress {
            bar,
            started: Instant::now(),
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        if self.started.elapsed() > Duration::from_secs(1) && self.bar.is_hidden() {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn workload_instance(
    path: &std::path::Path,
    cpus: usize,
    seeds: Option<u64>,
) -> anyhow::Result<(cosched_core::workload::Workload, Instance)> {
    if seeds.is_some_and(|n| n > 1) {
        bail!(
            "--seeds needs generated workloads: a workload file is replayed as it is; use a scenario \
with a [generator] table, or `cosched gen --seed N` for each seed"
        );
    }
    let (workload, jobs) = jobs::load(path, cpus)?;
    let instance = Instance {
        name: workload.info.name.clone(),
        seed: None,
        jobs,
    };
    Ok((workload, instance))
}
