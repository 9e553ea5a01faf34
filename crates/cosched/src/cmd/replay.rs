//! `cosched replay`: an archive trace (SWF) through a cluster batch scheduler, with the archive's
//! metrics.

use super::output::prepare_results_dir;
use anyhow::{bail, Context as _};
use cosched_sim::cluster::{self, BatchMetrics, BatchPolicy, Placement};
use cosched_sim::swf::{self, SwfJob};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Replay a Parallel Workloads Archive trace (SWF) under FCFS or EASY backfilling
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Each job of TRACE (Standard Workload Format; .gz is read through gzip) \
becomes a rigid job: its requested processors (allocated ones when unknown) for its recorded run time, \
with its requested time as the estimate EASY reserves by. Jobs whose run time or size is unknown are \
left out and counted. Nodes run their jobs alone: cosched's policies inside nodes are not modelled yet \
(docs/simulation-model.md, \"Cluster replay\").\n\nPrints the archive's metrics: mean and maximum wait, \
bounded slowdown max(1, (wait + run) / max(run, 10 s)), utilisation and makespan.\n\nExamples:\n  \
cosched replay ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz --batch easy\n  \
cosched replay trace.swf --procs 128 --batch fcfs --json\n  \
cosched replay trace.swf -o results/replay-easy"
)]
pub struct Args {
    /// SWF trace file (plain or .gz)
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Batch scheduler: fcfs or easy (EASY backfilling)
    #[arg(long, value_name = "fcfs|easy", default_value = "easy")]
    batch: BatchPolicy,
    /// Processors of the machine (SWF's allocation unit; one per node on KTH's SP2) [default: the
    /// trace header's MaxProcs, else MaxNodes]
    #[arg(long, value_name = "N")]
    procs: Option<u32>,
    /// Print the metrics as JSON
    #[arg(long)]
    json: bool,
    /// Write schedule.csv (one row per job) and metrics.json into DIR
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write into --out even if it holds earlier results
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = read_trace(&args.trace)?;
    let trace = swf::parse(&text, &args.trace.display().to_string())?;
    let Some(procs) = args.procs.or(trace.machine_procs()) else {
        bail!(
            "{} has no `; MaxProcs:` or `; MaxNodes:` header; give the machine's size with --procs N",
            args.trace.display()
        );
    };
    if procs == 0 {
        bail!("the machine needs at least one processor; give --procs N with N > 0");
    }
    let placements = cluster::schedule(&trace.jobs, procs, args.batch)?;
    let metrics = cluster::summarize(&trace.jobs, &placements, procs);
    if let Some(dir) = &args.out {
        prepare_results_dir(dir, args.force)?;
        write_schedule(&dir.join("schedule.csv"), &trace.jobs, &placements)?;
        std::fs::write(
            dir.join("metrics.json"),
            serde_json::to_string_pretty(&metrics)?,
        )
        .with_context(|| format!("cannot write {}", dir.join("metrics.json").display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&metrics)?);
    } else {
        print_metrics(&args, procs, trace.skipped, &metrics);
    }
    Ok(())
}

fn read_trace(path: &Path) -> anyhow::Result<String> {
    if path.extension().is_some_and(|e| e == "gz") {
        let output =
            Command::new("gzip").arg("-dc").arg(path).output().context(
                "cannot run gzip to read a .gz trace; install gzip or decompress it first",
            )?;
        if !output.status.success() {
            bail!(
                "gzip could not decompress {}: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        return String::from_utf8(output.stdout)
            .with_context(|| format!("{} is not text once decompressed", path.display()));
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn write_schedule(path: &Path, jobs: &[SwfJob], placements: &[Placement]) -> anyhow::Result<()> {
    let mut csv = String::from("job,submit,procs,run,estimate,start,end,wait,bounded_slowdown\n");
    for p in placements {
        let job = &jobs[p.job];
        let wait = p.start - job.submit;
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{:.4}\n",
            job.id,
            job.submit,
            job.procs,
            job.run,
            job.estimate,
            p.start,
            p.end,
            wait,
            cluster::metrics::bounded_slowdown(wait, job.run)
        ));
    }
    let mut file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(csv.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn print_metrics(args: &Args, procs: u32, skipped: usize, m: &BatchMetrics) {
    let batch = match args.batch {
        BatchPolicy::Fcfs => "FCFS",
        BatchPolicy::Easy => "EASY",
    };
    println!(
        "{} under {batch} on {procs} processors",
        args.trace.display()
    );
    println!(
        "jobs                   {:>12}  ({skipped} left out: run time or size unknown)",
        m.jobs
    );
    println!("mean wait              {:>12.0} s", m.mean_wait);
    println!("max wait               {:>12.0} s", m.max_wait);
    println!(
        "mean bounded slowdown  {:>12.2}  (10 s threshold)",
        m.mean_bounded_slowdown
    );
    println!("max bounded slowdown   {:>12.1}", m.max_bounded_slowdown);
    println!("utilisation            {:>11.1} %", 100.0 * m.utilisation);
    println!("makespan               {:>12.0} s", m.makespan);
}
