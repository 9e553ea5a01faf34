//! `cosched replay`: an archive trace (SWF) on a cluster: a batch scheduler places jobs on nodes and a
//! cosched policy (or none) shares each node; the archive's metrics for each node policy.

use super::output::prepare_results_dir;
use anyhow::{bail, Context as _};
use cosched_core::names::file_name_part;
use cosched_core::topology::cluster::{self, Cluster};
use cosched_core::Policy;
use cosched_sim::cluster::interference::{self, ClassSource};
use cosched_sim::cluster::study::{self, PaperFigure};
use cosched_sim::cluster::{self as replay, BatchMetrics, BatchPolicy, Coordination, NodeSharing};
use cosched_sim::cluster::{Admission, ClusterOptions, Placement};
use cosched_sim::swf::{self, SwfJob, SwfTrace};
use flate2::bufread::GzDecoder;
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The node policy that lets each job have its nodes to itself.
const EXCLUSIVE: &str = "exclusive";

/// Replay a Parallel Workloads Archive trace (SWF) on a cluster: FCFS or EASY backfilling across
/// nodes, a cosched policy inside each node
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Each job of TRACE (Standard Workload Format; .gz is decompressed as it is read) \
becomes a rigid job: its requested processors (allocated ones when unknown) for its recorded run time, \
with its requested time as the estimate EASY reserves by. Jobs whose run time or size is unknown are \
left out and counted. A job of P processors on nodes of C CPUs takes ceil(P/C) whole nodes.\n\n\
--node-policy exclusive (the default) gives each job its nodes alone, as the archive's machines did. \
Any cosched policy (gang, taco, eq, ...) instead shares each node among up to --mpl jobs: the batch \
scheduler places a job on nodes whose policy runs it beside the jobs already there, and the job \
progresses at the share its nodes give it; with --slots coordinated (the default) all of a job's nodes \
run it in the same slot. A comma-separated list compares node policies, one row each \
(docs/simulation-model.md, \"Cluster replay\").\n\nPrints the archive's metrics: mean and maximum \
wait, bounded slowdown max(1, (end - submit) / max(run, 10 s)), utilisation and makespan, and the \
replay's speed in simulated days per wall-clock hour.\n\n\
Examples:\n  \
cosched replay ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz --batch easy\n  \
cosched replay KTH-SP2-1996-2.1-cln.swf.gz --node-policy exclusive,gang,taco,eq\n  \
cosched replay trace.swf --machine 'cluster:128 package:2 core:8' --node-policy eq --mpl 4\n  \
cosched replay trace.swf --node-policy gang --slots uncoordinated --json\n  \
cosched replay trace.swf --procs 128 --batch fcfs -o results/replay-fcfs\n  \
cosched replay trace.swf --machine 'cluster:64 l3:1(size=32MB) core:16' --node-policy eq --mix hpc --admission pairing\n  \
cosched replay scenarios/replay/simakov-node-sharing.toml\n\n\
Interference (--mix or --classes-from): each job gets an application class, compute (no memory traffic), memory (streams more bandwidth than half a node has), cache (a working set of most of the LLC) or sync (synchronises every millisecond, spinning), drawn from the mix by its job number and --seed, or read from an SWF field. Jobs that share a node in one slot then slow each other as the node model says (memory bandwidth, LLC, synchronisation; docs/simulation-model.md). --admission pairing places a job, among the nodes as loaded as the least loaded, where it costs least: a memory-bound job beside a compute-bound one.\n\n\
A replay scenario (TOML, scenarios/README.md) gives the trace and these options, and a paper's figure to print beside ours; options on the command line override it."
)]
pub struct Args {
    /// SWF trace file (plain or .gz), or a replay scenario (.toml)
    #[arg(value_name = "TRACE|SCENARIO")]
    trace: PathBuf,
    /// Batch scheduler: fcfs or easy (EASY backfilling) [default: easy]
    #[arg(long, value_name = "fcfs|easy")]
    batch: Option<BatchPolicy>,
    /// The cluster: `cluster:N NODE` (NODE a preset, hwloc synthetic string or XML file) or a machine
    /// file (docs/machines.md) [default: the header's MaxNodes nodes of MaxProcs/MaxNodes CPUs]
    #[arg(long, value_name = "cluster:N NODE|FILE", conflicts_with = "procs")]
    machine: Option<String>,
    /// N one-CPU nodes (the archive's processors), instead of --machine
    #[arg(long, value_name = "N")]
    procs: Option<u32>,
    /// What shares each node: exclusive, or cosched policies (gang, taco, eq, ...), comma-separated
    /// [default: exclusive]
    #[arg(long, value_name = "exclusive|POLICY,...", value_delimiter = ',')]
    node_policy: Vec<String>,
    /// Most jobs a shared node holds at once (the multiprogramming level) [default: 2]
    #[arg(long, value_name = "N")]
    mpl: Option<u32>,
    /// Slots of a job's nodes: coordinated (global slot boundaries) or uncoordinated (each node on
    /// its own) [default: coordinated]
    #[arg(long, value_name = "coordinated|uncoordinated")]
    slots: Option<Coordination>,
    /// Turn interference on, each job's class drawn from a mix: hpc, balanced, memory, compute, or
    /// weights such as compute=0.6,memory=0.4
    #[arg(long, value_name = "MIX", conflicts_with = "classes_from")]
    mix: Option<String>,
    /// Turn interference on, each job's class read from an SWF field, e.g. 14:1=memory,*=compute
    /// (field 14, the executable number: 1 is memory-bound, any other compute-bound)
    #[arg(long, value_name = "FIELD:VALUE=CLASS,...")]
    classes_from: Option<String>,
    /// Seed of the classes --mix draws (the same seed, the same class for each job) [default: 1]
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Which node takes a job: blind (least loaded first) or pairing (then the one where its
    /// class interferes least; needs --mix or --classes-from) [default: blind]
    #[arg(long, value_name = "blind|pairing")]
    admission: Option<Admission>,
    /// Multiply every submit time by FACTOR: 0.5 offers the same jobs in half the time (a heavier
    /// load) [default: 1]
    #[arg(long, value_name = "FACTOR")]
    submit_scale: Option<f64>,
    /// Print the metrics as JSON (one object per node policy)
    #[arg(long)]
    json: bool,
    /// Write schedule.csv (one row per job and node policy) and metrics.json into DIR
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// What --out keeps besides metrics.json: jobs (schedule.csv, each job's start, end and nodes)
    /// or none
    #[arg(
        long = "trace",
        value_name = "jobs|none",
        default_value = "jobs",
        value_parser = ["jobs", "none"],
        requires = "out"
    )]
    trace_level: String,
    /// Write into --out even if it holds earlier results
    #[arg(long)]
    force: bool,
}

/// One node policy's replay.
#[derive(Serialize)]
struct Row {
    node_policy: String,
    batch: &'static str,
    machine: String,
    mpl: u32,
    slots: &'static str,
    #[serde(flatten)]
    metrics: BatchMetrics,
    /// Node signatures the node policy was consulted on.
    policy_runs: usize,
    /// Wall-clock time of the replay alone (not reading the trace), seconds.
    replay_seconds: f64,
    /// The makespan in days over the replay's wall-clock time in hours: the unit batch simulators
    /// (Slurm's among them) quote their speed in.
    simulated_days_per_hour: f64,
}

/// The options of one replay: the command line's over a scenario's over the defaults.
struct Setup {
    trace: PathBuf,
    batch: BatchPolicy,
    node_policy: Vec<String>,
    mpl: u32,
    slots: Coordination,
    classes: Option<ClassSource>,
    admission: Admission,
    submit_scale: f64,
    jobs: Option<usize>,
    machine: Option<String>,
    paper: Option<PaperFigure>,
    name: Option<String>,
}

fn setup(args: &Args) -> anyhow::Result<Setup> {
    let scenario = if args.trace.extension().is_some_and(|e| e == "toml") {
        Some(study::load(&args.trace)?)
    } else {
        None
    };
    let is_scenario = scenario.is_some();
    let (file, paper) = match scenario {
        Some(s) => (s.replay, s.paper),
        None => (study::Setup::default(), None),
    };
    let node_policy = if !args.node_policy.is_empty() {
        args.node_policy.clone()
    } else if !file.node_policy.is_empty() {
        file.node_policy.clone()
    } else {
        vec![EXCLUSIVE.to_string()]
    };
    let seed = args.seed.or(file.seed).unwrap_or(1);
    // The command line's source of classes replaces the scenario's, whichever each names.
    let (mix, map) = if args.mix.is_some() || args.classes_from.is_some() {
        (&args.mix, &args.classes_from)
    } else {
        (&file.mix, &file.classes_from)
    };
    let classes = match (mix, map) {
        (Some(_), Some(_)) => bail!("the scenario gives both mix and classes_from; keep one"),
        (Some(mix), None) => Some(ClassSource::Drawn {
            weights: interference::parse_mix(mix).context("--mix")?,
            seed,
        }),
        (None, Some(map)) => Some(interference::parse_column_map(map).context("--classes-from")?),
        (None, None) => None,
    };
    let admission = args
        .admission
        .or(file.admission.as_deref().map(|a| a.parse()).transpose()?)
        .unwrap_or_default();
    if admission == Admission::Pairing && classes.is_none() {
        bail!(
            "--admission pairing places jobs by their classes; give them with --mix (e.g. --mix hpc) \
             or --classes-from"
        );
    }
    let submit_scale = args.submit_scale.or(file.submit_scale).unwrap_or(1.0);
    if !(submit_scale.is_finite() && submit_scale > 0.0) {
        bail!("--submit-scale multiplies submit times; give a positive number such as 0.5");
    }
    Ok(Setup {
        trace: if is_scenario {
            file.trace.clone()
        } else {
            args.trace.clone()
        },
        batch: args
            .batch
            .or(file.batch.as_deref().map(|b| b.parse()).transpose()?)
            .unwrap_or(BatchPolicy::Easy),
        node_policy,
        mpl: args.mpl.or(file.mpl).unwrap_or(2),
        slots: args
            .slots
            .or(file.slots.as_deref().map(|s| s.parse()).transpose()?)
            .unwrap_or(Coordination::Coordinated),
        classes,
        admission,
        submit_scale,
        jobs: file.jobs,
        machine: args.machine.clone().or(file.machine),
        paper,
        name: is_scenario.then_some(file.name),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let setup = setup(&args)?;
    let text = read_trace(&setup.trace)?;
    let mut trace = swf::parse(&text, &setup.trace.display().to_string())?;
    if let Some(n) = setup.jobs {
        trace.jobs.truncate(n);
    }
    if setup.submit_scale != 1.0 {
        for job in &mut trace.jobs {
            job.submit *= setup.submit_scale;
        }
    }
    let (machine_spec, cluster) = machine(&args, &setup, &trace)?;
    if setup.mpl == 0 {
        bail!("--mpl is the most jobs a node holds at once; give 1 or more");
    }
    for name in setup.node_policy.iter().filter(|n| *n != EXCLUSIVE) {
        cosched_policies::create(name).map_err(|e| {
            anyhow::anyhow!("--node-policy: {e}; or `{EXCLUSIVE}` for nodes run alone")
        })?;
    }
    let classes = setup
        .classes
        .as_ref()
        .map(|source| interference::assign(&trace.jobs, source, &text))
        .unwrap_or_default();
    let mut rows = Vec::new();
    let mut schedules = Vec::new();
    for name in &setup.node_policy {
        let factory = || -> Box<dyn Policy> { cosched_policies::create(name).expect("checked") };
        let sharing = if name == EXCLUSIVE {
            NodeSharing {
                policy: None,
                mpl: 1,
                switch_cost: 0.0,
                interference: false,
            }
        } else {
            NodeSharing {
                policy: Some(&factory),
                mpl: setup.mpl,
                switch_cost: NodeSharing::default_switch_cost(),
                interference: setup.classes.is_some(),
            }
        };
        let mpl = sharing.mpl;
        let options = ClusterOptions {
            batch: setup.batch,
            sharing,
            coordination: setup.slots,
            classes: &classes,
            admission: setup.admission,
        };
        let clock = Instant::now();
        let result = replay::replay(&trace.jobs, &cluster, &options)?;
        let replay_seconds = clock.elapsed().as_secs_f64();
        let metrics = replay::summarize(&trace.jobs, &result.placements, cluster.num_cpus() as u32);
        rows.push(Row {
            node_policy: name.clone(),
            batch: batch_name(setup.batch),
            machine: machine_spec.clone(),
            mpl,
            slots: slots_name(setup.slots),
            simulated_days_per_hour: metrics.makespan / 86_400.0 / (replay_seconds / 3_600.0),
            metrics,
            policy_runs: result.policy_runs,
            replay_seconds,
        });
        schedules.push(result.placements);
    }
    if let Some(dir) = &args.out {
        prepare_results_dir(dir, args.force)?;
        if args.trace_level == "jobs" {
            write_schedule(&dir.join("schedule.csv"), &trace.jobs, &rows, &schedules)?;
        }
        std::fs::write(
            dir.join("metrics.json"),
            serde_json::to_string_pretty(&rows)?,
        )
        .with_context(|| format!("cannot write {}", dir.join("metrics.json").display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_rows(&setup, &cluster, &machine_spec, &trace, &rows);
        if let Some(paper) = &setup.paper {
            print_paper(paper, &rows)?;
        }
    }
    Ok(())
}

/// The paper's figure beside ours.
fn print_paper(paper: &PaperFigure, rows: &[Row]) -> anyhow::Result<()> {
    let figure = |name: &str| {
        rows.iter()
            .find(|r| r.node_policy == name)
            .map(|r| paper.metric.of(&r.metrics))
            .with_context(|| {
                format!("the scenario's paper compares `{name}`, which it does not run")
            })
    };
    let ours = figure(&paper.policy)? / figure(&paper.baseline)? - 1.0;
    println!(
        "{}: {} of {} against {}: paper {:+.0}%, ours {:+.1}% ({:+.1} points)",
        paper.source,
        paper.metric.name(),
        paper.policy,
        paper.baseline,
        100.0 * paper.change,
        100.0 * ours,
        100.0 * (ours - paper.change)
    );
    if !paper.note.is_empty() {
        println!("{}", paper.note);
    }
    Ok(())
}

/// The cluster to replay on, and how to name it.
fn machine(args: &Args, setup: &Setup, trace: &SwfTrace) -> anyhow::Result<(String, Cluster)> {
    let machine = args
        .procs
        .is_none()
        .then_some(setup.machine.as_ref())
        .flatten();
    let spec = match (machine, args.procs) {
        (Some(spec), _) => spec.clone(),
        (None, Some(0)) => {
            bail!("the machine needs at least one processor; give --procs N with N > 0")
        }
        (None, Some(procs)) => format!("cluster:{procs} core:1"),
        (None, None) => match (trace.max_nodes, trace.machine_procs()) {
            (Some(nodes), Some(procs)) if nodes > 0 && procs % nodes == 0 => {
                format!("cluster:{nodes} core:{}", procs / nodes)
            }
            (_, Some(procs)) if procs > 0 => format!("cluster:{procs} core:1"),
            _ => bail!(
                "{} has no `; MaxProcs:` or `; MaxNodes:` header; give the machine with --machine \
                 'cluster:N NODE' or --procs N",
                setup.trace.display()
            ),
        },
    };
    if !cluster::is_cluster(&spec) {
        bail!(
            "--machine {spec:?} is one machine; a replay needs a cluster: write `cluster:N {spec}` \
             for N such nodes"
        );
    }
    let cluster = cluster::parse(&spec)?;
    Ok((spec, cluster))
}

fn read_trace(path: &Path) -> anyhow::Result<String> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut text = String::new();
    if path.extension().is_some_and(|e| e == "gz") {
        GzDecoder::new(BufReader::new(file))
            .read_to_string(&mut text)
            .with_context(|| {
                format!(
                    "cannot decompress {} (is it a gzip file of text?)",
                    path.display()
                )
            })?;
    } else {
        BufReader::new(file)
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read {} (is it text?)", path.display()))?;
    }
    Ok(text)
}

fn write_schedule(
    path: &Path,
    jobs: &[SwfJob],
    rows: &[Row],
    schedules: &[Vec<Placement>],
) -> anyhow::Result<()> {
    let mut csv = String::from(
        "job_id,submit_s,procs_count,run_s,estimate_s,start_s,end_s,wait_s,bounded_slowdown_ratio,\
node_policy,node_ids\n",
    );
    for (row, placements) in rows.iter().zip(schedules) {
        let policy = file_name_part(&row.node_policy);
        for p in placements {
            let job = &jobs[p.job];
            let nodes: Vec<String> = p.nodes.iter().map(u32::to_string).collect();
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{},{:.4},{policy},{}\n",
                job.id,
                job.submit,
                job.procs,
                job.run,
                job.estimate,
                p.start,
                p.end,
                p.start - job.submit,
                replay::metrics::bounded_slowdown(p.end - job.submit, job.run),
                nodes.join(" ")
            ));
        }
    }
    let mut file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(csv.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn batch_name(batch: BatchPolicy) -> &'static str {
    match batch {
        BatchPolicy::Fcfs => "fcfs",
        BatchPolicy::Easy => "easy",
    }
}

fn slots_name(slots: Coordination) -> &'static str {
    match slots {
        Coordination::Coordinated => "coordinated",
        Coordination::Uncoordinated => "uncoordinated",
    }
}

fn print_rows(setup: &Setup, cluster: &Cluster, spec: &str, trace: &SwfTrace, rows: &[Row]) {
    if let Some(name) = &setup.name {
        println!("scenario {name}");
    }
    println!(
        "{}: {} jobs ({} left out: run time or size unknown)",
        setup.trace.display(),
        trace.jobs.len(),
        trace.skipped
    );
    println!(
        "{} on {spec} ({} nodes of {} CPUs); shared nodes hold up to {} jobs, slots {}",
        batch_name(setup.batch).to_uppercase(),
        cluster.nodes,
        cluster.node.num_cpus(),
        setup.mpl,
        slots_name(setup.slots)
    );
    if setup.classes.is_some() {
        println!(
            "interference on: classes {}; admission {}",
            match &setup.classes {
                Some(ClassSource::Drawn { seed, .. }) => format!("drawn, seed {seed}"),
                _ => "from the trace".to_string(),
            },
            match setup.admission {
                Admission::LeastLoaded => "blind",
                Admission::Pairing => "pairing",
            }
        );
    }
    println!(
        "{:<12} {:>11} {:>11} {:>10} {:>10} {:>7} {:>11} {:>9} {:>10}",
        "node policy",
        "mean wait s",
        "max wait s",
        "mean bsld",
        "max bsld",
        "util %",
        "makespan s",
        "replay s",
        "sim days/h"
    );
    for row in rows {
        let m = &row.metrics;
        println!(
            "{:<12} {:>11.0} {:>11.0} {:>10.2} {:>10.1} {:>7.1} {:>11.0} {:>9.3} {:>10.0}",
            row.node_policy,
            m.mean_wait,
            m.max_wait,
            m.mean_bounded_slowdown,
            m.max_bounded_slowdown,
            100.0 * m.utilisation,
            m.makespan,
            row.replay_seconds,
            row.simulated_days_per_hour
        );
    }
    println!("bsld: bounded slowdown, 10 s threshold");
}
