//! `cosched bench executor`: the real executor's own CPU use and slot-switch skew.

use super::common::quantile;
use crate::cmd::run::MechanismArgs;
use cosched_core::topology::sysfs;
use cosched_core::workload::Workload;
use cosched_core::{Assignment, Context, Event, JobId, Plan, Policy, Slot};
use cosched_linux::{RunOptions, RunReport};

/// Executor overhead: CPU use and slot-switch skew of a gang of CPU-bound jobs
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs JOBS CPU-bound jobs (the `stress` benchmark) in two time slots of SLOT-MS \
each, every job on all CPUs, for SECONDS; then 2 x JOBS jobs so that JOBS are thawed at every switch. \
Reports the executor's CPU time as a share of one CPU (target < 1% with 8 jobs and 50 ms slots), the \
slot-switch skew, from the first job thawed to the last (target < 1 ms for 8 jobs), and how late \
switches were against their absolute deadlines.\nBuild with --release for meaningful figures.\n\n\
Example:\n  cargo run --release -p cosched -- bench executor --mechanism cgroup-v1"
)]
pub struct ExecutorArgs {
    /// Jobs of the first run (the second runs twice as many)
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// Slot length, milliseconds
    #[arg(long, default_value_t = 50.0)]
    slot_ms: f64,
    /// Length of each run, seconds
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Print one JSON object per run, in a list, instead of lines
    #[arg(long)]
    json: bool,
}

const CPU_TARGET_PERCENT: f64 = 1.0;
const SKEW_TARGET_MS: f64 = 1.0;

pub fn run(args: ExecutorArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.jobs >= 2, "--jobs must be at least 2 (one per slot)");
    let topology = sysfs::discover()?;
    let stress = cosched_native::benchmark("stress");
    anyhow::ensure!(
        stress.is_file(),
        "the stress benchmark is missing at {}; build the workspace (cargo build) or set {}",
        stress.display(),
        cosched_native::NATIVE_DIR_ENV
    );
    let dir = std::env::temp_dir().join(format!("cosched-bench-executor-{}", std::process::id()));
    let mut figures = Vec::new();
    for jobs in [args.jobs, 2 * args.jobs] {
        let mut text = String::from("[workload]\nname = \"bench-executor\"\n");
        for i in 0..jobs {
            text += &format!(
                "[[job]]\nname = \"stress-{i}\"\nkind = \"rigid\"\nmax_threads = 1\ncommand = [{:?}, \"--kind\", \"cpu\", \"--threads\", \"1\", \"--duration\", \"{}\"]\n",
                stress.display().to_string(),
                args.seconds
            );
        }
        let workload = Workload::parse(&text, "bench-executor")?;
        let options = args
            .mechanism
            .apply(RunOptions::new(dir.join("trace.jsonl"), &dir));
        let policy = Box::new(TwoSlots {
            jobs,
            length: args.slot_ms / 1000.0,
        });
        let report = cosched_linux::run(&workload, &topology, policy, &options)?;
        if args.json {
            figures.push(figures_json(jobs, &args, &report));
        } else {
            print_figures(jobs, &args, &report);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    super::common::print_json_if(args.json, &serde_json::Value::from(figures))
}

fn figures_json(jobs: usize, args: &ExecutorArgs, report: &RunReport) -> serde_json::Value {
    let ms = |v: &[f64], q: f64| quantile(v, q) * 1e3;
    let spread = |v: &[f64]| serde_json::json!({ "median": ms(v, 0.5), "p99": ms(v, 0.99), "max": ms(v, 1.0) });
    serde_json::json!({
        "jobs": jobs,
        "slot_ms": args.slot_ms,
        "wall_s": report.wall_seconds,
        "mechanism": report.mechanism,
        "executor_cpu_s": report.overhead_seconds,
        "executor_cpu_pct": 100.0 * report.overhead_seconds / report.wall_seconds,
        "target_cpu_pct": CPU_TARGET_PERCENT,
        "switches": report.switch_skew.len(),
        "skew_ms": spread(&report.switch_skew),
        "target_skew_ms": SKEW_TARGET_MS,
        "lateness_ms": spread(&report.switch_lateness),
    })
}

fn print_figures(jobs: usize, args: &ExecutorArgs, report: &RunReport) {
    let cpu_percent = 100.0 * report.overhead_seconds / report.wall_seconds;
    let ms = |v: &[f64], q: f64| quantile(v, q) * 1e3;
    println!(
        "{jobs} jobs, 2 slots of {} ms, {:.1} s ({}): executor CPU {:.3} s = {cpu_percent:.2}% of one CPU \
(target < {CPU_TARGET_PERCENT}%: {:.2}x of target)",
        args.slot_ms,
        report.wall_seconds,
        report.mechanism.split(';').next().unwrap_or(""),
        report.overhead_seconds,
        cpu_percent / CPU_TARGET_PERCENT
    );
    println!(
        "  skew ({} jobs thawed per switch, {} switches): median {:.3} ms, p99 {:.3} ms, max {:.3} ms \
(target < {SKEW_TARGET_MS} ms: median {:.2}x, p99 {:.2}x of target)",
        jobs / 2,
        report.switch_skew.len(),
        ms(&report.switch_skew, 0.5),
        ms(&report.switch_skew, 0.99),
        ms(&report.switch_skew, 1.0),
        ms(&report.switch_skew, 0.5) / SKEW_TARGET_MS,
        ms(&report.switch_skew, 0.99) / SKEW_TARGET_MS
    );
    println!(
        "  switch lateness against the deadline: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ms(&report.switch_lateness, 0.5),
        ms(&report.switch_lateness, 0.99),
        ms(&report.switch_lateness, 1.0)
    );
}

/// First half of the jobs in one slot, the rest in the other, each on every CPU.
struct TwoSlots {
    jobs: usize,
    length: f64,
}

impl Policy for TwoSlots {
    fn name(&self) -> &str {
        "two-slots"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. }) || ctx.jobs.len() < self.jobs {
            return None;
        }
        let all = ctx.topology.cpus();
        let slot = |range: std::ops::Range<usize>| Slot {
            length: self.length,
            assignments: range
                .map(|i| Assignment {
                    job: JobId(i as u32),
                    cpus: all.clone(),
                })
                .collect(),
        };
        Some(Plan {
            slots: vec![slot(0..self.jobs / 2), slot(self.jobs / 2..self.jobs)],
            ..Plan::default()
        })
    }
}
