//! `cosched bench`: speed figures of cosched's parts, each against its target.

use cosched_core::metrics::summarize;
use cosched_core::topology::{presets, synthetic};
use cosched_core::JobKind;
use cosched_sim::generate::Poisson;
use cosched_sim::scenario::{self, ModelConfig};
use cosched_sim::{jobs, simulate_into, OutcomeSink, SimOptions};
use std::time::Instant;

/// Measure how fast cosched's parts run, against their targets
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand, Debug)]
enum BenchCommand {
    Sim(SimArgs),
    Barrier(super::bench_barrier::BarrierArgs),
    Executor(super::bench_executor::ExecutorArgs),
    Policy(super::bench_policy::PolicyArgs),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Sim(args) => sim(args),
        BenchCommand::Barrier(args) => super::bench_barrier::run(args),
        BenchCommand::Executor(args) => super::bench_executor::run(args),
        BenchCommand::Policy(args) => super::bench_policy::run(args),
    }
}

/// Simulator speed: a TACO-sized sweep and a 100,000-job run on a 1,024-CPU machine
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sweep: 40 NAS jobs (9/min) on taco-opteron8435, 5 policies x 5 seeds; target \
under 1 s.\nLarge: N jobs on 'package:16 l3:1(size=32MiB) core:64' under EQ, plans not kept; targets \
under 30 s and under 1 GiB peak memory (getrusage).\nBuild with --release for meaningful figures.\n\n\
Example:\n  cargo run --release -p cosched -- bench sim"
)]
struct SimArgs {
    /// Jobs in the large run
    #[arg(long, default_value_t = 100_000)]
    jobs: usize,
    /// Skip the large run
    #[arg(long)]
    sweep_only: bool,
}

const SWEEP_TARGET_S: f64 = 1.0;
const LARGE_TARGET_S: f64 = 30.0;
const LARGE_MEMORY_TARGET_MIB: f64 = 1024.0;

fn sim(args: SimArgs) -> anyhow::Result<()> {
    let taco = presets::preset("taco-opteron8435")?;
    let mut policies: Vec<String> = cosched_policies::names()
        .into_iter()
        .map(String::from)
        .collect();
    policies.truncate(5);
    let generator = Poisson {
        jobs: 40,
        rate_per_min: 9.0,
        mix: vec!["nas".into()],
        exclude: Vec::new(),
        kind: JobKind::Malleable,
        seed: 1,
    };
    let started = Instant::now();
    let instances = scenario::generated_instances(&generator, 5, taco.num_cpus())?;
    let results = scenario::run_all(
        &taco,
        &instances,
        &policies,
        &ModelConfig::default(),
        None,
        &mut |_, _| {},
    )?;
    let wall = started.elapsed().as_secs_f64();
    let events: u64 = results.iter().map(|r| r.stats.events).sum();
    println!(
        "sweep: 40 jobs x 24 CPUs x {} policies ({}) x 5 seeds: {} runs, {events} events, {wall:.3} s wall, \
{:.0} events/s; target < {SWEEP_TARGET_S} s: {:.2}x of target",
        policies.len(),
        policies.join(","),
        results.len(),
        events as f64 / wall,
        wall / SWEEP_TARGET_S
    );
    if args.sweep_only {
        return Ok(());
    }
    let machine = synthetic::parse("package:16 l3:1(size=32MiB) core:64")?;
    // About 300 NAS jobs a minute keep the 1,024 CPUs busy without an ever-growing queue.
    let generator = Poisson {
        jobs: args.jobs,
        rate_per_min: 300.0,
        ..generator
    };
    let started = Instant::now();
    let workload = generator.generate()?;
    let sim_jobs = jobs::sim_jobs(&workload, machine.num_cpus(), &workload.info.name, None)?;
    let generated = started.elapsed().as_secs_f64();
    let mut policy = cosched_policies::create("eq")?;
    let mut sink = OutcomeSink::default();
    let stats = simulate_into(
        &machine,
        &sim_jobs,
        policy.as_mut(),
        &SimOptions {
            workload: workload.info.name.clone(),
            ..SimOptions::default()
        },
        &mut sink,
    )?;
    let wall = started.elapsed().as_secs_f64();
    let summary = summarize(&sink.lines);
    let peak_mib = peak_rss_mib();
    println!(
        "large: {} jobs on 1024 CPUs under eq: {} events, {wall:.2} s wall ({generated:.2} s generating), \
{:.0} events/s, {:.1} simulated hours, mean slowdown {:.2}; target < {LARGE_TARGET_S} s: {:.2}x of target",
        args.jobs,
        stats.events,
        stats.events as f64 / stats.wall_seconds,
        stats.sim_time / 3600.0,
        summary.mean_slowdown.unwrap_or(f64::NAN),
        wall / LARGE_TARGET_S
    );
    println!(
        "peak memory (getrusage maxrss, whole process): {peak_mib:.0} MiB; target < {LARGE_MEMORY_TARGET_MIB} MiB: {:.2}x of target",
        peak_mib / LARGE_MEMORY_TARGET_MIB
    );
    Ok(())
}

fn peak_rss_mib() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    // Linux reports ru_maxrss in KiB.
    usage.ru_maxrss as f64 / 1024.0
}
