//! `cosched sim`: simulate policies on a workload or a scenario and compare them in one table.

use anyhow::{bail, Context as _};
use cosched_core::topology::presets;
use cosched_sim::scenario::{self, Instance, ModelConfig, PaperFigures, PolicyRow, ScenarioFile};
use cosched_sim::{jobs, Mode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Simulate policies on a workload or scenario file and compare them
#[derive(clap::Args, Debug)]
#[command(
    after_help = "INPUT is a workload (TOML with [[job]] tables, each with a `profile`; see \
docs/workload-format.md) or a scenario (a [scenario] table; see scenarios/README.md).\n\nPrints one row \
per policy: makespan (mean over seeds), makespan relative to BP on the same workload, mean slowdown, \
ANTT and reconfigurations.\n\nExamples:\n  cosched gen --jobs 40 --rate 9 --mix nas --seed 1 -o w.toml\n  \
cosched sim w.toml --machine taco-opteron8435 --policy ue,bp,eq\n  \
cosched sim w.toml --machine 'package:16 l3:1(size=32MB) core:64' --policy eq --json\n  \
cosched sim scenarios/taco-set-b.toml --seeds 8 --trace-dir traces/\n  \
cosched report traces/*.jsonl"
)]
pub struct Args {
    /// Workload file or scenario file
    #[arg(value_name = "WORKLOAD|SCENARIO")]
    input: PathBuf,
    /// Machine: a preset (taco-opteron8435, casas-opteron6172, gang-opteron8380, scalpel-xeon-e5620) or
    /// a synthetic description such as "package:4 l3:1(size=6MB) core:6" [default: the scenario's]
    #[arg(long, value_name = "PRESET|SYNTHETIC")]
    machine: Option<String>,
    /// Policies to compare, comma-separated [default: the scenario's, else every policy]
    #[arg(long, value_name = "P[,P...]", value_delimiter = ',')]
    policy: Vec<String>,
    /// Number of generated workloads (consecutive seeds); scenarios with a [generator] only
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Integrate plans slot by slot instead of as a fluid average (slower; for validation)
    #[arg(long)]
    exact: bool,
    /// Print the rows as JSON instead of a table
    #[arg(long)]
    json: bool,
    /// Write one trace per run (JSON Lines) into DIR, for `cosched report`
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    let (scenario, machine_spec) = if scenario::is_scenario(&text) {
        let file = ScenarioFile::load(&args.input)?;
        let machine = args
            .machine
            .clone()
            .unwrap_or_else(|| file.scenario.machine.clone());
        (Some(file), machine)
    } else {
        let Some(machine) = args.machine.clone() else {
            bail!(
                "--machine is required with a workload file, e.g. --machine taco-opteron8435 \
(presets: {})",
                presets::preset_names().join(", ")
            );
        };
        (None, machine)
    };
    let topology = presets::machine(&machine_spec)?;
    let cpus = topology.num_cpus();
    let instances = match &scenario {
        Some(file) => match (&file.generator, &file.scenario.workload) {
            (Some(generator), _) => scenario::generated_instances(
                generator,
                args.seeds.unwrap_or(file.scenario.seeds),
                cpus,
            )?,
            (None, Some(path)) => vec![workload_instance(path, cpus, args.seeds)?],
            (None, None) => unreachable!("ScenarioFile::load checks that jobs are given"),
        },
        None => vec![workload_instance(&args.input, cpus, args.seeds)?],
    };
    let policies: Vec<String> = if !args.policy.is_empty() {
        args.policy.clone()
    } else if let Some(file) = &scenario {
        file.scenario.policies.clone()
    } else {
        cosched_policies::names()
            .into_iter()
            .map(String::from)
            .collect()
    };
    for policy in &policies {
        cosched_policies::create(policy)?;
    }
    let mut model = scenario
        .as_ref()
        .map(|f| f.model.clone())
        .unwrap_or_else(ModelConfig::default);
    if args.exact {
        model.mode = Mode::Exact;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, ETA {eta}")
            .expect("valid template"),
    );
    let started = Instant::now();
    let results = scenario::run_all(
        &topology,
        &instances,
        &policies,
        &model,
        args.trace_dir.as_deref(),
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            // Only sweeps that take a while earn a progress bar.
            if started.elapsed() > Duration::from_secs(1) && bar.is_hidden() {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        },
    )?;
    bar.finish_and_clear();
    let rows = scenario::rows(&results, &policies);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let paper = scenario.as_ref().and_then(|f| f.paper.as_ref());
    println!(
        "machine {} ({cpus} CPUs), {} workload(s): {}",
        topology.name,
        instances.len(),
        instances
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    print!("{}", table(&rows, paper));
    if let Some(paper) = paper {
        println!("paper: {}", paper.source);
    }
    if let Some(dir) = &args.trace_dir {
        println!("traces: {}", dir.display());
    }
    Ok(())
}

fn workload_instance(
    path: &std::path::Path,
    cpus: usize,
    seeds: Option<u64>,
) -> anyhow::Result<Instance> {
    if seeds.is_some_and(|n| n > 1) {
        bail!(
            "--seeds needs generated workloads: a workload file is replayed as it is; use a scenario \
with a [generator] table, or `cosched gen --seed N` for each seed"
        );
    }
    let (workload, jobs) = jobs::load(path, cpus)?;
    Ok(Instance {
        name: workload.info.name,
        seed: None,
        jobs,
    })
}

fn table(rows: &[PolicyRow], paper: Option<&PaperFigures>) -> String {
    let number =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let percent = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0}%", v * 100.0));
    let mut header = vec![
        "policy",
        "runs",
        "makespan s",
        "vs BP",
        "mean slowdown",
        "ANTT",
        "reconfigs",
    ];
    if paper.is_some() {
        header.extend(["paper vs BP", "paper slowdown"]);
    }
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for row in rows {
        let mut line = vec![
            row.policy.clone(),
            row.runs.to_string(),
            number(row.makespan, 1),
            percent(row.makespan_vs_bp),
            number(row.mean_slowdown, 2),
            number(row.antt, 2),
            format!("{:.0}", row.reconfigurations),
        ];
        if let Some(paper) = paper {
            line.push(percent(paper.makespan_vs_bp.get(&row.policy).copied()));
            line.push(number(paper.mean_slowdown.get(&row.policy).copied(), 1));
        }
        if row.unfinished > 0 {
            line[0] = format!("{} ({} unfinished)", row.policy, row.unfinished);
        }
        lines.push(line);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
