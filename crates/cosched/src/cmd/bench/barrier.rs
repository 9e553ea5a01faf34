//! `cosched bench barrier`: the spinning penalty of Peter et al. (ETH TR 745, §3.2) on this machine.

use anyhow::{bail, Context};
use std::process::{Child, Command, Stdio};

/// BARRIER alone vs two uncontrolled instances together, per barrier kind
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs the `barrier` benchmark with --threads T alone, then two instances at once \
with no scheduler control, for each barrier kind. ratio = mean iterations/s of an instance together \
/ alone: 0.5 is a fair half of the machine; far below 0.5 is time wasted spinning while the partner \
thread is descheduled (pure spin), which spin-then-block avoids.\n\n\
Example:\n  cosched bench barrier --threads 2 --interval 20 --seconds 3"
)]
pub struct BarrierArgs {
    /// Threads per instance (default: the machine's CPU count)
    #[arg(long)]
    threads: Option<usize>,
    /// Microseconds of work per thread between two barriers
    #[arg(long, default_value_t = 20.0)]
    interval: f64,
    /// Seconds per measurement
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Print one JSON object per barrier kind, in a list, instead of lines
    #[arg(long)]
    json: bool,
}

pub fn run(args: BarrierArgs) -> anyhow::Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let mut kinds = Vec::new();
    for kind in ["spin", "spin-block", "block"] {
        let start = || start_barrier(kind, threads, &args);
        let alone = iterations_per_s(start()?)?;
        let (a, b) = (start()?, start()?);
        let together = [iterations_per_s(a)?, iterations_per_s(b)?];
        let ratio = (together[0] + together[1]) / 2.0 / alone;
        if args.json {
            kinds.push(serde_json::json!({
                "kind": kind,
                "threads": threads,
                "interval_us": args.interval,
                "alone_iterations_per_s": alone,
                "together_iterations_per_s": together,
                "ratio": ratio,
            }));
            continue;
        }
        println!(
            "kind={kind} threads={threads} interval_us={} alone={alone:.0} together={:.0},{:.0} ratio={ratio:.3}",
            args.interval, together[0], together[1]
        );
    }
    super::common::print_json_if(args.json, &serde_json::Value::from(kinds))
}

fn start_barrier(kind: &str, threads: usize, args: &BarrierArgs) -> anyhow::Result<Child> {
    let program = cosched_native::benchmark("barrier");
    Command::new(&program)
        .args(["--kind", kind, "--threads", &threads.to_string()])
        .args(["--interval", &args.interval.to_string()])
        .args(["--duration", &args.seconds.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "cannot run {}; rebuild with `cargo build`",
                program.display()
            )
        })
}

fn iterations_per_s(child: Child) -> anyhow::Result<f64> {
    let output = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("barrier failed ({}): {text}", output.status);
    }
    text.split_whitespace()
        .find_map(|field| field.strip_prefix("iterations_per_s="))
        .and_then(|value| value.parse().ok())
        .with_context(|| format!("no iterations_per_s in barrier output {text:?}"))
}
