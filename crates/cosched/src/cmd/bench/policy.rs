//! `cosched bench policy`: how long a policy takes to decide, per event, on a large machine.

use cosched_core::topology::presets;
use cosched_core::{ActiveJob, Context, Event, JobHints, JobId, JobKind, JobSpec};
use std::time::{Duration, Instant};

/// Decision time per event of a policy with many jobs on a large synthetic machine
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Delivers N arrivals one by one, then N departures in arrival order, and times \
each decision. Every placed job is marked started with its advice, as an executor would. Target for \
TACO with 1,000 jobs on 1,024 CPUs: mean under 1 ms per event.\nBuild with --release for meaningful \
figures.\n\nExamples:\n  cargo run --release -p cosched -- bench policy\n  \
cosched bench policy --policy taco-basic --jobs 5000 --machine 'package:32 l3:1 core:64'"
)]
pub struct PolicyArgs {
    /// Policy to time (`cosched policies` lists them)
    #[arg(
        long,
        value_name = "POLICY",
        default_value = "taco",
        value_parser = crate::cmd::policies::PolicyName,
        hide_possible_values = true
    )]
    policy: String,
    /// Jobs that arrive and then leave
    #[arg(long, default_value_t = 1000)]
    jobs: u32,
    /// Preset or synthetic machine
    #[arg(long, default_value = "package:16 l3:1(size=32MiB) core:64")]
    machine: String,
    /// Print the figures as one JSON object instead of a line
    #[arg(long)]
    json: bool,
}

const TARGET: Duration = Duration::from_millis(1);

pub fn run(args: PolicyArgs) -> anyhow::Result<()> {
    let topology = presets::machine(&args.machine)?;
    let mut policy = cosched_policies::create(&args.policy)?;
    let mut jobs: Vec<ActiveJob> = Vec::with_capacity(args.jobs as usize);
    let mut times = Vec::with_capacity(2 * args.jobs as usize);
    let mut decide = |jobs: &mut Vec<ActiveJob>, now: f64, event: Event| {
        let ctx = Context {
            topology: &topology,
            now,
            jobs,
        };
        let started = Instant::now();
        let plan = policy.decide(&ctx, &event);
        times.push(started.elapsed());
        if let Some(plan) = plan {
            for job in jobs.iter_mut().filter(|j| j.started.is_none()) {
                if let Some(&threads) = plan.advice.get(&job.spec.id) {
                    job.started = Some(now);
                    job.threads = threads;
                }
            }
        }
    };
    let cpus = topology.num_cpus() as u32;
    for id in 0..args.jobs {
        jobs.push(ActiveJob::new(
            JobSpec {
                owner: None,
                id: JobId(id),
                name: format!("job{id}"),
                arrival: id as f64,
                kind: JobKind::Malleable,
                min_threads: 1,
                max_threads: cpus,
                coschedule: true,
                weight: 1.0,
                hints: JobHints::default(),
            }
            .into(),
            None,
            0,
        ));
        decide(&mut jobs, id as f64, Event::Arrived { job: JobId(id) });
    }
    for id in 0..args.jobs {
        jobs.remove(0);
        let now = (args.jobs + id) as f64;
        decide(&mut jobs, now, Event::Finished { job: JobId(id) });
    }
    let total: Duration = times.iter().sum();
    let mean = total / times.len().max(1) as u32;
    let max = times.iter().max().copied().unwrap_or_default();
    if args.json {
        let doc = serde_json::json!({
            "policy": args.policy,
            "machine": args.machine,
            "cpus": topology.num_cpus(),
            "events": times.len(),
            "mean_ms": mean.as_secs_f64() * 1e3,
            "max_ms": max.as_secs_f64() * 1e3,
            "target_mean_ms": TARGET.as_secs_f64() * 1e3,
            "met": mean < TARGET,
        });
        return super::common::print_json_if(true, &doc);
    }
    println!(
        "policy {} on {} ({} CPUs): {} events, mean {:.3} ms, max {:.3} ms per decision; target mean < {} ms: {}",
        args.policy,
        args.machine,
        topology.num_cpus(),
        times.len(),
        mean.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
        TARGET.as_millis(),
        if mean < TARGET { "met" } else { "MISSED" }
    );
    Ok(())
}
