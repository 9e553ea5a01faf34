//! `cosched compare`: the same workload under several policies, back to back, one table, one report.

use super::machine::MachineArgs;
use anyhow::Context as _;
use cosched_core::workload::Workload;
use cosched_core::Topology;
use cosched_report::{comparison, disambiguate_labels, text_table, write_report, Run};
use cosched_sim::{simulate_into, JsonLinesSink, SimJob, SimOptions};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The policies compared when none are named, in this order, as far as they exist.
const DEFAULT_POLICIES: &[&str] = &["ue", "bp", "eq", "ta", "taco", "gang"];

/// Run one workload under several policies, back to back, and compare them in one table and report
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Prints one line per policy: makespan (and as % of BP's), mean and max \
slowdown, ANTT, STP, Jain fairness, reconfigurations, failed jobs and executor overhead. Writes the \
traces, report.html with figures, jobs.csv, policies.csv and results.json to the output directory.\n\n\
Examples:\n  cosched compare my.toml --sim --policy ue,bp,eq\n  \
cosched compare my.toml --sim --preset taco-opteron8435 --out results/taco"
)]
pub struct Args {
    /// Workload file (TOML) [default: the bundled examples/default.toml, sized to this machine]
    #[arg(value_name = "WORKLOAD")]
    workload: Option<PathBuf>,
    /// Policies to compare, comma-separated, in the order to run them [default: those of
    /// ue,bp,eq,ta,taco,gang that exist]
    #[arg(long, value_delimiter = ',', value_name = "P1,P2,...")]
    policy: Vec<String>,
    /// Simulate instead of running real processes (required for now: real runs are not wired yet)
    #[arg(long)]
    sim: bool,
    /// The machine to simulate (only with --sim; real runs use this machine)
    #[command(flatten)]
    machine: MachineArgs,
    /// Directory for traces, report and CSV [default: results/<workload>-<UTC time>]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let policies = chosen_policies(&args.policy)?;
    anyhow::ensure!(
        args.sim,
        "real runs are not available in this build yet (the real executor is not wired into compare); \
add --sim to simulate"
    );
    let workload_path = args.workload.clone().unwrap_or_else(default_workload);
    let topology = args.machine.topology()?;
    let (workload, jobs) = cosched_sim::jobs::load(&workload_path, topology.num_cpus())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&workload.info.name));
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    eprintln!(
        "comparing {} on {} ({} CPUs, simulated): {}",
        workload.info.name,
        topology.name,
        topology.num_cpus(),
        policies.join(", ")
    );
    let mut runs = Vec::new();
    for (i, policy) in policies.iter().enumerate() {
        let trace = out.join(format!("{policy}.jsonl"));
        let started = Instant::now();
        eprint!("[{}/{}] {policy} … ", i + 1, policies.len());
        simulate(&topology, &jobs, &workload, policy, &trace)?;
        let run = Run::load(&trace)?;
        eprintln!(
            "done in {:.1} s{}",
            started.elapsed().as_secs_f64(),
            match run.summary.failed {
                0 => String::new(),
                n => format!(", {n} job(s) failed (see the report)"),
            }
        );
        runs.push(run);
    }
    disambiguate_labels(&mut runs);
    let written = write_report(&runs, &out)?;
    print!("{}", text_table(&comparison(&runs)));
    println!("report: {}", written.html.display());
    Ok(())
}

/// Simulates one policy and streams its trace to `trace`.
fn simulate(
    topology: &Topology,
    jobs: &[SimJob],
    workload: &Workload,
    policy: &str,
    trace: &Path,
) -> anyhow::Result<()> {
    let mut policy = cosched_policies::create(policy)?;
    let options = SimOptions {
        workload: workload.info.name.clone(),
        ..SimOptions::default()
    };
    let file = File::create(trace).with_context(|| format!("cannot write {}", trace.display()))?;
    let mut sink = JsonLinesSink::new(BufWriter::new(file));
    simulate_into(topology, jobs, policy.as_mut(), &options, &mut sink)?;
    sink.into_inner()
        .flush()
        .with_context(|| format!("cannot write {}", trace.display()))?;
    Ok(())
}

/// The named policies, all of which must exist; or the default list, as far as it exists.
fn chosen_policies(named: &[String]) -> anyhow::Result<Vec<String>> {
    if named.is_empty() {
        let known = cosched_policies::names();
        let defaults: Vec<String> = DEFAULT_POLICIES
            .iter()
            .filter(|p| known.contains(p))
            .map(|p| p.to_string())
            .collect();
        anyhow::ensure!(
            !defaults.is_empty(),
            "no policy of the default list ({}) is available; name some with --policy",
            DEFAULT_POLICIES.join(",")
        );
        return Ok(defaults);
    }
    for name in named {
        cosched_policies::create(name)?;
    }
    let mut unique: Vec<String> = Vec::new();
    for name in named {
        anyhow::ensure!(
            !unique.contains(name),
            "policy {name:?} is named twice in --policy"
        );
        unique.push(name.clone());
    }
    Ok(unique)
}

fn default_workload() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/default.toml")
}

fn default_out_dir(workload: &str) -> PathBuf {
    let name: String = workload
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("results").join(format!("{name}-{}", utc_timestamp(now)))
}

/// `YYYYMMDD-HHMMSS` in UTC for seconds since the epoch, for directory names that sort by time.
fn utc_timestamp(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "19700101-000000");
        assert_eq!(utc_timestamp(951_782_400 + 3_723), "20000229-010203");
        assert_eq!(utc_timestamp(1_767_225_599), "20251231-235959");
    }
}
