//! `cosched bench sim`: the simulator's speed, a sweep in process and `cosched sim` itself on
//! growing overloaded workloads.

use super::common::print_json_if;
use cosched_core::topology::presets;
use cosched_core::JobKind;
use cosched_sim::generate::Poisson;
use cosched_sim::runner;
use cosched_sim::scenario::ModelConfig;
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

/// Simulator speed: a TACO-sized sweep, then `cosched sim` itself on growing overloaded workloads
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Sweep: 40 NAS jobs (9/min) on taco-opteron8435, 5 policies x 5 seeds, in process as \
`cosched sim` runs them (in parallel, one run per CPU), five times over (the median): its wall time and \
its events per second of wall time, targets under 1 s and at least 1,000,000 events/s; also each \
engine's own rate (events over the seconds its runs took, with the range).\nLarge: for each size, Poisson NAS jobs at 6,000/min \
(an overloaded queue) on --machine (1,024 CPUs by default), run as a user runs it: \
`cosched sim FILE --machine M --policy P --out DIR` in a child process, trace written (sim also \
runs BP, its reference). Prints wall time, peak memory (the child's maxrss), time and trace bytes per \
job and trace records/s; targets at 100,000 jobs: under 10 s and 1 GiB per policy, time per job flat \
across sizes.\nBuild with --release for meaningful figures; measure on an idle machine.\n\n\
Examples:\n  cargo run --release -p cosched -- bench sim --sizes 10000,20000,50000,100000\n  \
cosched bench sim --machine 'package:16 [numa] l3:1(size=32MiB) core:64'   # a NUMA node per package"
)]
pub struct SimArgs {
    /// Job counts of the large runs, comma-separated
    #[arg(
        long,
        value_name = "JOBS,...",
        value_delimiter = ',',
        default_value = "10000,20000,50000,100000"
    )]
    sizes: Vec<usize>,
    /// Policies of the large runs, comma-separated (`cosched policies` lists them)
    #[arg(
        long,
        value_name = "POLICY,...",
        value_delimiter = ',',
        default_value = "eq,taco,gang",
        value_parser = crate::cmd::policies::PolicyName,
        hide_possible_values = true
    )]
    policy: Vec<String>,
    /// Machine of the large runs. Without a NUMA level the model gives all CPUs one memory node,
    /// whose bandwidth then couples every job to every other
    #[arg(long, default_value = LARGE_MACHINE)]
    machine: String,
    /// Skip the large runs
    #[arg(long)]
    sweep_only: bool,
    /// Print the figures as one JSON object (sweep, large) instead of lines
    #[arg(long)]
    json: bool,
}

const SWEEP_TARGET_S: f64 = 1.0;
const SWEEP_REPEATS: usize = 5;
const SWEEP_TARGET_EVENTS_PER_S: f64 = 1e6;
const LARGE_TARGET_S: f64 = 10.0;
const LARGE_MEMORY_TARGET_MIB: f64 = 1024.0;
const LARGE_MACHINE: &str = "package:16 l3:1(size=32MiB) core:64";

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let generator = Poisson {
        jobs: 40,
        rate_per_min: 9.0,
        mix: vec!["nas".into()],
        exclude: Vec::new(),
        kind: JobKind::Malleable,
        seed: 1,
    };
    let Sweep {
        policies,
        runs,
        events,
        wall,
        rate,
        rates,
    } = sweep(&generator)?;
    let cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Figures from two machines compare only beside what each machine is.
    let cpus = match processor_name() {
        Some(name) => format!("{cpu_count} CPUs ({name})"),
        None => format!("{cpu_count} CPUs"),
    };
    let mut doc = serde_json::json!({
        "cpus": cpu_count,
        "processor": processor_name(),
        "sweep": {
            "policies": policies,
            "runs": runs,
            "events": events,
            "repeats": SWEEP_REPEATS,
            "wall_s": wall,
            "target_wall_s": SWEEP_TARGET_S,
            "events_per_s": events as f64 / wall,
            "target_events_per_s": SWEEP_TARGET_EVENTS_PER_S,
            "engine_events_per_s": rate,
            "engine_events_per_s_range": [rates[0], rates[SWEEP_REPEATS - 1]],
        },
        "large": [],
    });
    if !args.json {
        println!(
        "sweep: 40 jobs x 24 CPUs x {} policies ({}) x 5 seeds: {runs} runs, {events} events, on \
{cpus}; median of {SWEEP_REPEATS}: {wall:.3} s wall, target < {SWEEP_TARGET_S} s: {:.2}x of target; {:.0} \
events/s, target >= {SWEEP_TARGET_EVENTS_PER_S:.0}: {:.2}x of target; one engine: {rate:.0} events/s \
({:.0} to {:.0})",
        policies.len(),
        policies.join(","),
        wall / SWEEP_TARGET_S,
        events as f64 / wall,
        events as f64 / wall / SWEEP_TARGET_EVENTS_PER_S,
        rates[0],
        rates[SWEEP_REPEATS - 1],
    );
    }
    if !args.sweep_only {
        large_runs(&args, &generator, &mut doc)?;
    }
    print_json_if(args.json, &doc)
}

/// The sweep's figures over its repeats.
struct Sweep {
    policies: Vec<String>,
    runs: usize,
    events: u64,
    /// The median wall time of a repeat, seconds.
    wall: f64,
    /// The median of the engines' own events per second.
    rate: f64,
    /// Every repeat's engine rate, in ascending order.
    rates: Vec<f64>,
}

/// The first five policies on taco-opteron8435, five seeds of `generator`, as `cosched sim` runs
/// them, [`SWEEP_REPEATS`] times over.
fn sweep(generator: &Poisson) -> anyhow::Result<Sweep> {
    let taco = presets::preset("taco-opteron8435")?;
    let mut policies: Vec<String> = cosched_policies::names()
        .into_iter()
        .map(String::from)
        .collect();
    policies.truncate(5);
    // A sweep lasts tens of milliseconds, where one run says little: the median of several.
    let mut walls = Vec::with_capacity(SWEEP_REPEATS);
    let mut rates = Vec::with_capacity(SWEEP_REPEATS);
    let mut counts = (0, 0);
    for _ in 0..SWEEP_REPEATS {
        let started = Instant::now();
        let instances = runner::generated_instances(generator, 5, taco.num_cpus())?;
        let results = runner::run_all(
            &taco,
            &instances,
            &policies,
            &ModelConfig::default(),
            None,
            &mut |_, _| {},
        )?;
        walls.push(started.elapsed().as_secs_f64());
        let events: u64 = results.iter().map(|r| r.stats.events).sum();
        let sim_seconds: f64 = results.iter().map(|r| r.stats.wall_seconds).sum();
        rates.push(events as f64 / sim_seconds);
        counts = (results.len(), events);
    }
    let (runs, events) = counts;
    let wall = median(&mut walls);
    let rate = median(&mut rates);
    Ok(Sweep {
        policies,
        runs,
        events,
        wall,
        rate,
        rates,
    })
}

/// The large runs: each size of `generator` at 6,000 jobs/min under each policy, by `cosched sim`
/// in a child process; printed as they come, or added to `doc` with `--json`.
fn large_runs(
    args: &SimArgs,
    generator: &Poisson,
    doc: &mut serde_json::Value,
) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("cosched-bench-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    if !args.json {
        println!(
            "large: NAS jobs at 6000/min on {:?}, `cosched sim` with its trace written",
            args.machine
        );
        println!("policy     jobs   wall s  peak MiB  ms/job  trace B/job  records/s");
    }
    for &jobs in &args.sizes {
        let workload = Poisson {
            jobs,
            rate_per_min: 6000.0,
            ..generator.clone()
        }
        .generate()?;
        let file = dir.join(format!("w{jobs}.toml"));
        std::fs::write(&file, workload.to_toml())?;
        for policy in &args.policy {
            let traces = dir.join(format!("traces-{jobs}-{policy}"));
            let run = run_child_sim(&file, &args.machine, policy, &traces)?;
            let (bytes, records) = trace_size(&traces, policy)?;
            if args.json {
                doc["large"]
                    .as_array_mut()
                    .expect("large is an array")
                    .push(serde_json::json!({
                        "policy": policy,
                        "machine": args.machine,
                        "jobs": jobs,
                        "wall_s": run.wall,
                        "peak_mib": run.peak_mib,
                        "trace_bytes": bytes,
                        "trace_records": records,
                        "target_wall_s": (jobs == 100_000).then_some(LARGE_TARGET_S),
                        "target_peak_mib": (jobs == 100_000).then_some(LARGE_MEMORY_TARGET_MIB),
                    }));
                std::fs::remove_dir_all(&traces)?;
                continue;
            }
            println!(
                "{policy:<8} {jobs:>6} {:>8.2} {:>9.0} {:>7.3} {:>12.0} {:>10.0}{}",
                run.wall,
                run.peak_mib,
                run.wall * 1e3 / jobs as f64,
                bytes as f64 / jobs as f64,
                records as f64 / run.wall,
                if jobs == 100_000 {
                    format!(
                        "   target < {LARGE_TARGET_S} s: {:.2}x, < {LARGE_MEMORY_TARGET_MIB} MiB: {:.2}x",
                        run.wall / LARGE_TARGET_S,
                        run.peak_mib / LARGE_MEMORY_TARGET_MIB
                    )
                } else {
                    String::new()
                }
            );
            std::fs::remove_dir_all(&traces)?;
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The bytes and records of the trace `cosched sim` wrote for `policy` into `traces`.
fn trace_size(traces: &Path, policy: &str) -> anyhow::Result<(u64, usize)> {
    let trace = std::fs::read_dir(traces)?
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(&format!("-{policy}.jsonl"))
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cosched sim wrote no trace for {policy} in {}",
                traces.display()
            )
        })?;
    let bytes = trace.metadata()?.len();
    let records = std::io::BufReader::new(std::fs::File::open(trace.path())?)
        .lines()
        .count();
    Ok((bytes, records))
}

struct ChildRun {
    wall: f64,
    peak_mib: f64,
}

/// The processor's name, as `/proc/cpuinfo` gives it where it does.
fn processor_name() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|line| {
        let (key, name) = line.split_once(':')?;
        (key.trim() == "model name").then(|| name.trim().to_owned())
    })
}

/// The middle value of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs `cosched sim` (this executable) as a user would and measures it.
fn run_child_sim(
    workload: &std::path::Path,
    machine: &str,
    policy: &str,
    traces: &std::path::Path,
) -> anyhow::Result<ChildRun> {
    // Its notes (which model it runs) would break the table; kept for the error if it fails.
    let notes_path = traces.with_extension("stderr");
    let notes = std::fs::File::create(&notes_path)?;
    let started = Instant::now();
    let child = std::process::Command::new(std::env::current_exe()?)
        .arg("sim")
        .arg(workload)
        .args(["--machine", machine, "--policy", policy, "--out"])
        .arg(traces)
        .stdout(std::process::Stdio::null())
        .stderr(notes)
        .spawn()?;
    let mut status = 0;
    // The child's own peak memory is only in wait4's usage (RUSAGE_CHILDREN is the peak of all
    // children so far), and neither std nor nix wraps wait4.
    // SAFETY: rusage is plain integers, valid zeroed; wait4 writes only into `status` and `usage`,
    // which outlive the call, and the child is ours and not yet reaped.
    let (pid, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        (pid, usage)
    };
    let wall = started.elapsed().as_secs_f64();
    if pid < 0 {
        anyhow::bail!(
            "waiting for cosched sim: {}",
            std::io::Error::last_os_error()
        );
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let said = std::fs::read_to_string(&notes_path).unwrap_or_default();
        anyhow::bail!(
            "cosched sim {} --policy {policy} failed (wait status {status}): {}",
            workload.display(),
            said.trim()
        );
    }
    // Linux reports ru_maxrss in KiB.
    Ok(ChildRun {
        wall,
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}
