//! A job's time alone on the whole machine with its best thread count: the denominator of slowdown and
//! NTT, from the same model the engine integrates.

use super::{SimJob, SimOptions};
use crate::model::{slot_rates, MachineModel, Runner, Scratch};
use crate::profile::Profile;
use cosched_core::{JobKind, Topology};
use rustc_hash::FxHashMap as HashMap;
use std::sync::{Arc, Mutex};

/// The isolated time of `job` on `topology`.
pub fn isolated_time(topology: &Topology, job: &SimJob, options: &SimOptions) -> f64 {
    let machine = MachineModel::new(topology, &options.params);
    let mut scratch = Scratch::default();
    isolated(&machine, topology, job, options, &mut scratch)
}

pub(crate) fn isolated(
    machine: &MachineModel,
    topology: &Topology,
    job: &SimJob,
    options: &SimOptions,
    scratch: &mut Scratch,
) -> f64 {
    let cpus = machine.cpus as u32;
    let (low, high) = match job.spec.kind {
        JobKind::Rigid => (job.spec.max_threads, job.spec.max_threads),
        _ => (job.spec.min_threads.max(1), job.spec.max_threads.max(1)),
    };
    let best_rate = thread_candidates(low, high, cpus)
        .into_iter()
        .map(|threads| {
            let set = topology.cpus().take(threads.min(cpus).max(1) as usize);
            let home = machine.numa_nodes(&set);
            let runner = Runner::new(&set, threads, &job.profile, &home);
            slot_rates(
                machine,
                &[runner],
                &options.effects,
                &options.params,
                scratch,
            )[0]
            .rate
        })
        .fold(0.0, f64::max);
    job.profile.work / best_rate
}

/// Thread counts worth trying: all of them on small machines, powers of two and the bounds on big ones.
fn thread_candidates(low: u32, high: u32, cpus: u32) -> Vec<u32> {
    let high = high.max(low);
    let top = high.min(cpus.max(low));
    if top - low <= 256 {
        return (low..=top).collect();
    }
    let mut out: Vec<u32> = std::iter::successors(Some(1u32), |n| n.checked_mul(2))
        .take_while(|n| *n <= top)
        .filter(|n| *n >= low)
        .collect();
    out.extend([low, top]);
    out
}

/// Isolated times of jobs with one profile and shape are equal; generated workloads repeat a few, and
/// the runs of one workload under several policies share them, from several threads. For one machine
/// and model only: the runner keeps one per run of `cosched sim`.
#[derive(Default)]
pub(crate) struct IsolatedTimes {
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    times: HashMap<(usize, JobKind, u32, u32), f64>,
    /// The profiles whose addresses are keys, kept alive so that no other profile takes one.
    profiles: Vec<Arc<Profile>>,
}

impl IsolatedTimes {
    pub(super) fn get(
        &self,
        machine: &MachineModel,
        topology: &Topology,
        job: &SimJob,
        options: &SimOptions,
        scratch: &mut Scratch,
    ) -> f64 {
        let key = (
            Arc::as_ptr(&job.profile) as usize,
            job.spec.kind,
            job.spec.min_threads,
            job.spec.max_threads,
        );
        if let Some(&time) = self.lock().times.get(&key) {
            return time;
        }
        // Worked out unlocked: two runs that both miss find the same time.
        let time = isolated(machine, topology, job, options, scratch);
        let mut known = self.lock();
        if known.times.insert(key, time).is_none() {
            known.profiles.push(job.profile.clone());
        }
        time
    }

    /// The times known; a run that panicked while holding them left them whole (an insert is one
    /// step), so they are read on.
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
