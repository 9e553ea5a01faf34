//! Which model constants a simulation uses: the papers' defaults for named machines, and for this
//! machine the model `cosched calibrate --model` fitted here (with job sizes from the isolated times
//! measured here).

use cosched_core::topology::presets::THIS_MACHINE;
use cosched_core::workload::Workload;
use cosched_core::Topology;
use cosched_linux::IsolatedTimes;
use cosched_sim::calibrated::{self, CalibratedModel};
use cosched_sim::{isolated_time, ModelParams, SimJob, SimOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `--model FILE`, shared by `sim` and `compare --sim`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Machine model file written by `cosched calibrate --model` [default: with `--machine this`,
    /// the one fitted on this machine; for other machines, the papers' constants]
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
}

/// cosched's cache directory (`$XDG_CACHE_HOME/cosched` or `~/.cache/cosched`), where the bundled
/// workload's isolated times and the machine models live.
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("cosched"))
}

/// Where this machine's fitted model is kept.
pub fn default_model_path(topology: &Topology) -> PathBuf {
    let dir = cache_dir().unwrap_or_else(|| PathBuf::from("results"));
    CalibratedModel::path_in(&dir, &topology.name, topology.num_cpus())
}

/// The fitted model to simulate `topology` with, if any: `--model FILE`; else for this machine its
/// stored model, which an explicit `--machine this` requires (the default machine falls back to the
/// papers' constants; [`describe`] says so).
pub fn chosen(
    args: &ModelArgs,
    machine: Option<&str>,
    topology: &Topology,
) -> anyhow::Result<Option<CalibratedModel>> {
    if let Some(path) = &args.model {
        return Ok(Some(
            CalibratedModel::load(path).map_err(anyhow::Error::msg)?,
        ));
    }
    if machine.is_some_and(|m| m != THIS_MACHINE) {
        return Ok(None);
    }
    let path = default_model_path(topology);
    if path.exists() {
        return Ok(Some(
            CalibratedModel::load(&path).map_err(anyhow::Error::msg)?,
        ));
    }
    if machine.is_some() {
        anyhow::bail!(
            "no machine model fitted for this machine ({}, {} CPUs) yet: run `cosched calibrate --model` \
(about 20 s) to write {}, or give --model FILE",
            topology.name,
            topology.num_cpus(),
            path.display()
        );
    }
    Ok(None)
}

/// One line for the user: which constants the simulation uses, and how many jobs were sized.
pub fn describe(fitted: Option<&CalibratedModel>, machine: Option<&str>, sized: &str) -> String {
    match fitted {
        Some(m) => format!("machine model of {} ({} CPUs){sized}", m.machine, m.cpus),
        None if machine.is_none() => "no machine model fitted here yet: the papers' constants \
(`cosched calibrate --model` fits this machine's)"
            .to_string(),
        None => "the papers' constants".to_string(),
    }
}

/// The constants of `model`, or the defaults.
pub fn params(model: Option<&CalibratedModel>) -> ModelParams {
    model.map(|m| m.params.clone()).unwrap_or_default()
}

/// How [`size_jobs_to_measured`] changed the jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Jobs whose work was set from their measured isolated time.
    pub resized: usize,
    /// Jobs whose speedup was set from their measured one-CPU time too.
    pub scaled: usize,
}

impl Sizing {
    /// The note for the user: how many of `jobs` jobs were sized from `isolated`.
    pub fn note(&self, jobs: usize, isolated: &Path) -> String {
        format!(
            "; {} of {jobs} jobs sized by the isolated times in {}, {} with their scaling measured here",
            self.resized,
            isolated.display(),
            self.scaled
        )
    }
}

/// Gives each job the work that makes its simulated isolated time the one measured for it on this
/// machine (`isolated`, stored by `cosched calibrate WORKLOAD` or a real `compare`), and stretches the
/// time between its synchronisations alike: the profiles' runtimes were measured once, on some
/// machine, while the model's constants describe how jobs share this one. Where `cosched calibrate
/// --scaling` also measured the job on one CPU with one thread, its speedup is first replaced by the
/// one both times give ([`calibrated::measured_speedup`]): how the job scales on this machine, which
/// its profile, measured elsewhere, need not say. The policies then see what a real run's would: the
/// measured time as the job's run-time estimate and the behaviour past runs remembered
/// (`IsolatedTimes::behaviour`).
pub fn size_jobs_to_measured(
    jobs: &mut [SimJob],
    workload: &Workload,
    topology: &Topology,
    params: &ModelParams,
    isolated: &Path,
) -> anyhow::Result<Sizing> {
    let times = IsolatedTimes::load(isolated)?;
    let options = SimOptions {
        params: params.clone(),
        ..SimOptions::default()
    };
    let mut sizing = Sizing {
        resized: 0,
        scaled: 0,
    };
    for job in jobs.iter_mut() {
        let Some(entry) = workload.jobs.iter().find(|e| e.name == job.spec.name) else {
            continue;
        };
        let Some(measured) = times.entry(topology, entry) else {
            continue;
        };
        let one_thread = times.one_thread_seconds(topology, entry);
        let speedup = one_thread
            .and_then(|one| calibrated::measured_speedup(one, measured.threads, measured.seconds));
        if let Some(speedup) = speedup {
            Arc::make_mut(&mut job.profile).speedup = speedup;
            sizing.scaled += 1;
        }
        let simulated = isolated_time(topology, job, &options);
        if simulated > 0.0 && measured.seconds > 0.0 {
            // The program synchronises as often as before (its iterations are fixed), so the time
            // between its synchronisations stretches with its work.
            let profile = Arc::make_mut(&mut job.profile);
            profile.work *= measured.seconds / simulated;
            profile.sync_interval *= measured.seconds / simulated;
            // As in a real run, the measured time is the job's run-time estimate.
            let hints = &mut Arc::make_mut(&mut job.spec).hints;
            hints.runtime = Some(measured.seconds);
            hints.one_cpu_runtime = one_thread.or(hints.one_cpu_runtime);
            sizing.resized += 1;
        }
        if let Some(known) = times.behaviour(topology, &entry.command) {
            known.apply(Arc::make_mut(&mut job.spec));
        }
    }
    Ok(sizing)
}
