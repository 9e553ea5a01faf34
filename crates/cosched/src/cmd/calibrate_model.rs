//! `cosched calibrate --model`: short real runs that fit the simulator's machine-specific constants,
//! written as this machine's model file (`cosched_sim::calibrated`).

use super::machine_model::default_model_path;
use anyhow::Context as _;
use cosched_core::topology::sysfs;
use cosched_linux::model_runs;
use cosched_sim::calibrated::{CalibratedModel, Measurements};
use std::path::Path;
use std::time::Instant;

/// Seconds of each spinning-team run (alone, then beside the co-runners): long enough for the OS to
/// move threads between CPUs a few times.
const SPIN_RUN_SECONDS: f64 = 2.0;
/// Seconds two CPU-bound threads share one CPU to count their time slices.
const TIMESLICE_SECONDS: f64 = 0.5;
const SWITCH_ROUND_TRIPS: u32 = 20_000;
const BANDWIDTH_MB_PER_THREAD: usize = 64;
/// LLC size to refill where the topology does not say, bytes.
const DEFAULT_LLC_BYTES: u64 = 8 << 20;

pub fn run(out: Option<&Path>, repeat: u32, json: bool) -> anyhow::Result<()> {
    let topology = sysfs::discover()?;
    let cpus = topology.num_cpus();
    anyhow::ensure!(
        cpus >= 2,
        "a machine model needs at least 2 CPUs (this one has {cpus}): a spinning team must be able to run on CPUs of its own"
    );
    let bench = cosched_native::locate()?;
    let team = cpus.min(u32::MAX as usize) as u32;
    let mut m = Measurements {
        team_threads: team,
        // The team's threads and as many co-runners, over all CPUs.
        team_load: 2.0,
        ..Measurements::default()
    };
    let llc = topology.llc_bytes().unwrap_or(DEFAULT_LLC_BYTES) as usize;
    let started = Instant::now();
    eprintln!(
        "fitting the machine model of {} ({cpus} CPUs), {repeat} run(s) per constant; other work on \
the machine skews the figures",
        topology.name
    );
    for round in 1..=repeat {
        let step = |what: &str| eprintln!("[{round}/{repeat}] {what} …");
        step("a spinning team beside threads that block and wake");
        m.spin_progress
            .push(model_runs::spin_progress(&bench, team, SPIN_RUN_SECONDS)?);
        step("time slices of two threads on one CPU");
        m.timeslice
            .push(model_runs::timeslice(0, TIMESLICE_SECONDS)?);
        step("libgomp's spin, context switch, LLC refill, memory bandwidth");
        m.gomp_spin.push(model_runs::gomp_spin());
        m.context_switch
            .push(model_runs::context_switch(0, SWITCH_ROUND_TRIPS)?);
        m.llc_refill.push(model_runs::llc_refill(llc));
        m.bandwidth_gbs
            .push(model_runs::bandwidth_gbs(team, BANDWIDTH_MB_PER_THREAD));
    }
    let model = CalibratedModel::fit(&topology.name, cpus, &m);
    let path = out.map_or_else(|| default_model_path(&topology), Path::to_path_buf);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, model.to_toml())
        .with_context(|| format!("cannot write {}", path.display()))?;
    if json {
        let constants: serde_json::Map<String, serde_json::Value> = (model.fitted.iter())
            .map(|(name, f)| {
                let fitted = serde_json::json!({ "value": f.value, "low": f.low, "high": f.high });
                (name.clone(), fitted)
            })
            .collect();
        let doc = serde_json::json!({
            "model": path.display().to_string(),
            "seconds": started.elapsed().as_secs_f64(),
            "constants": constants,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!("{:<20} {:>12} {:>25}", "constant", "value", "range");
    for (name, f) in &model.fitted {
        println!(
            "{name:<20} {:>12.4e} {:>12.4e} – {:<10.4e}",
            f.value, f.low, f.high
        );
    }
    println!(
        "machine model: {} ({:.0} s)",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
