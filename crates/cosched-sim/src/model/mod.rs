//! The performance model: how fast each job progresses while a set of jobs shares the machine in one
//! slot. `docs/simulation-model.md` explains every effect, its source and its switch in [`Effects`].
//!
//! This module turns a slot's runners into rates; `machine` holds what the model knows of the machine,
//! `cpu_time` the CPU time threads get, `sync` what synchronisation costs under time sharing, and
//! `memory` the shared LLC's misses and a NUMA node's bandwidth.

mod cpu_time;
mod machine;
mod memory;
mod sync;

use crate::footprint::Footprint;
use crate::profile::Profile;
use cosched_core::CpuSet;
use cpu_time::{load_per_cpu, runner_phases, serial_phase_rate, Phases};
pub(crate) use machine::MachineModel;
use memory::{bandwidth_factors, llc_misses};
use serde::{Deserialize, Serialize};
use sync::{corun_possible, SyncCost};

/// How a plan's cycle of slots is integrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Each job runs at its cycle-average rate, minus the cost of its slot switches (fast).
    #[default]
    Fluid,
    /// Slot by slot, with the refill stall at each slot entry (for validation).
    Exact,
}

/// Speedup used for a job's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeedupModel {
    /// Speedup measured alone (TACO Table 1, left): co-runners cost nothing.
    Traditional,
    /// Between traditional (machine otherwise idle) and effective (all other cores busy, TACO §3.2),
    /// by how busy the rest of the machine is. Profiles without an effective table use traditional.
    #[default]
    Effective,
}

/// One switch per effect of the model; all on by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Effects {
    pub speedup: SpeedupModel,
    pub reconfig_delay: bool,
    pub sync: bool,
    pub serial_phase: bool,
    pub llc: bool,
    pub bandwidth: bool,
    pub numa: bool,
    pub switch_cost: bool,
}

impl Default for Effects {
    fn default() -> Self {
        Effects {
            speedup: SpeedupModel::Effective,
            reconfig_delay: true,
            sync: true,
            serial_phase: true,
            llc: true,
            bandwidth: true,
            numa: true,
            switch_cost: true,
        }
    }
}

/// Constants of the model; defaults carry their sources in `docs/simulation-model.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    /// Average time slice of the OS scheduler when threads share a CPU, seconds (Peter et al. §3: 15 ms).
    pub os_quantum: f64,
    /// How the OS lines up the time slices of one spinning team's threads on different CPUs: the team
    /// runs all its `n` threads at once a fraction L^−(1 + κ(n − 1)) of the time (L threads per CPU).
    /// κ = 1: independent slices; κ = 0: slices in step, as if gang-scheduled; above 1, worse than chance
    /// (load balancing stacks the team's threads on one CPU).
    pub spin_corun: f64,
    /// Seconds libgomp's default wait (no `OMP_WAIT_POLICY`, `GOMP_SPINCOUNT` = 300,000 polls) spins
    /// before its futex sleep, for profiles with `spin=gomp`.
    pub gomp_spin: f64,
    /// Direct cost of one context switch, seconds (TACO §3.3: single-digit microseconds).
    pub context_switch: f64,
    /// Time to refill a whole LLC after a slot switch, seconds (TACO §3.3: about 1 ms).
    pub llc_refill: f64,
    /// LLC size in MB where the topology does not say.
    pub llc_mb: f64,
    /// Slowdown per unit of extra LLC miss ratio: time = alone × (1 + penalty × Δmiss).
    pub llc_miss_penalty: f64,
    /// Memory bandwidth of one NUMA node, GB/s.
    pub numa_bandwidth_gbs: f64,
    /// Slowdown when all of a job's memory is on remote NUMA nodes: time × (1 + penalty × remote share).
    pub numa_remote_penalty: f64,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            os_quantum: 0.015,
            spin_corun: 1.0,
            gomp_spin: 0.01,
            context_switch: 5e-6,
            llc_refill: 1e-3,
            llc_mb: 6.0,
            llc_miss_penalty: 1.0,
            numa_bandwidth_gbs: 8.5,
            numa_remote_penalty: 0.1,
        }
    }
}

/// A job running in a slot, as the model sees it.
#[derive(Clone)]
pub(crate) struct Runner<'a> {
    pub cpus: &'a CpuSet,
    /// How many CPUs `cpus` holds, counted once: the model asks often.
    pub width: usize,
    pub threads: u32,
    pub profile: &'a Profile,
    /// NUMA nodes holding the job's memory.
    pub home: &'a CpuSet,
}

impl<'a> Runner<'a> {
    pub fn new(cpus: &'a CpuSet, threads: u32, profile: &'a Profile, home: &'a CpuSet) -> Self {
        Runner {
            cpus,
            width: cpus.len(),
            threads,
            profile,
            home,
        }
    }
}

/// The model's answer for one runner in one slot.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SlotRate {
    /// Work (sequential seconds) done per second.
    pub rate: f64,
    /// CPUs' worth of time the job's threads get (spinning included).
    pub cpu_share: f64,
    pub llc_miss: f64,
}

impl SlotRate {
    /// The same figures to the bit: then whatever is computed from them is too.
    pub fn same_bits(&self, other: &SlotRate) -> bool {
        let bits = |r: &SlotRate| {
            [
                r.rate.to_bits(),
                r.cpu_share.to_bits(),
                r.llc_miss.to_bits(),
            ]
        };
        bits(self) == bits(other)
    }
}

/// Scratch buffers reused across calls, so that an event costs no allocation proportional to the machine.
#[derive(Default)]
pub(crate) struct Scratch {
    load: Vec<f64>,
    /// CPUs' worth of each runner in each LLC domain, runner-major.
    domain_share: Vec<f64>,
    /// (footprint curve, access rate) of the runners sharing one LLC domain.
    sharers: Vec<(Footprint, f64)>,
    /// Per LLC domain: the window at which its sharers fill it (None: their data fits).
    fill_window: Vec<Option<f64>>,
    numa_demand: Vec<f64>,
    /// Per runner of the group being evaluated: its threads counted in the load, its phases, its
    /// parallel share, its (miss ratio, miss ratio alone) and its bandwidth factor.
    counted: Vec<f64>,
    phases: Vec<Phases>,
    shares: Vec<f64>,
    llc_miss: Vec<(f64, f64)>,
    bandwidth: Vec<f64>,
}

/// Rates of all runners sharing the machine in one slot.
pub(crate) fn slot_rates(
    machine: &MachineModel,
    runners: &[Runner],
    effects: &Effects,
    params: &ModelParams,
    scratch: &mut Scratch,
) -> Vec<SlotRate> {
    group_rates(machine, runners, effects, params, scratch, 0.0).0
}

/// Rates of the runners of one slot in a group of [regions](MachineModel::regions_of) that no
/// other runner of the slot touches, with `busy_elsewhere` CPUs kept busy by those others. Also
/// returns the CPUs the group keeps busy, which the rates do not depend on.
pub(crate) fn group_rates(
    machine: &MachineModel,
    runners: &[Runner],
    effects: &Effects,
    params: &ModelParams,
    scratch: &mut Scratch,
    busy_elsewhere: f64,
) -> (Vec<SlotRate>, f64) {
    let mut bases = Vec::new();
    let busy_here = group_bases(machine, runners, effects, params, scratch, &mut bases);
    let busy_total = busy_elsewhere + busy_here;
    let rates = bases
        .iter()
        .map(|b| b.loaded(machine, busy_total))
        .collect();
    (rates, busy_here)
}

/// What a runner's rate in its group depends on apart from the slot's load: everything the model
/// derives from the group itself. When a job moves elsewhere in the slot only the load changes, and
/// the rate follows from this in a few operations ([`Basis::loaded`]), the same ones in the same
/// order as a whole evaluation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Basis {
    /// The rate before the slowdowns of load, synchronisation, cache, bandwidth and NUMA.
    rate: f64,
    share: f64,
    /// Effective speedup model: the job's slowdown on a fully loaded machine, less one.
    load_excess: Option<f64>,
    sync: SyncCost,
    llc_divisor: Option<f64>,
    bandwidth: f64,
    numa_divisor: Option<f64>,
    cpu_share: f64,
    llc_miss: f64,
}

impl Basis {
    /// The runner's rate with `busy_total` CPUs of the slot busy, its group's included.
    pub(crate) fn loaded(&self, machine: &MachineModel, busy_total: f64) -> SlotRate {
        let mut rate = self.rate;
        if let Some(excess) = self.load_excess {
            let rest = machine.cpus as f64 - self.share;
            let busy = if rest > 1e-9 {
                ((busy_total - self.share) / rest).clamp(0.0, 1.0)
            } else {
                0.0
            };
            rate /= 1.0 + excess * busy;
        }
        rate *= self.sync.factor(rate);
        if let Some(divisor) = self.llc_divisor {
            rate /= divisor;
        }
        rate *= self.bandwidth;
        if let Some(divisor) = self.numa_divisor {
            rate /= divisor;
        }
        SlotRate {
            rate,
            cpu_share: self.cpu_share,
            llc_miss: self.llc_miss,
        }
    }
}

/// The [`Basis`] of each runner of a group, into `bases`; returns the CPUs the group keeps busy.
pub(crate) fn group_bases(
    machine: &MachineModel,
    runners: &[Runner],
    effects: &Effects,
    params: &ModelParams,
    scratch: &mut Scratch,
    bases: &mut Vec<Basis>,
) -> f64 {
    // Pass 1: every thread runnable. Pass 2 (serial-phase effect): a job in its serial phase runs one
    // thread and leaves the CPUs of its blocked threads to the others, so the load each job sees is the
    // others' time-averaged runnable threads (one step of the fixed point, see `docs/simulation-model.md`).
    let mut counted = std::mem::take(&mut scratch.counted);
    counted.clear();
    counted.extend(runners.iter().map(|r| r.threads as f64));
    // A runner alone in its group, or runners that all hold the same CPUs (uncontrolled Linux: every
    // job on every CPU), load each CPU alike, and that one load does for every CPU.
    let one_set = runners.iter().all(|r| r.cpus == runners[0].cpus);
    let uniform = load_per_cpu(machine, runners, &counted, one_set, scratch);
    let mut phases = std::mem::take(&mut scratch.phases);
    let find_phases =
        |phases: &mut Vec<Phases>, counted: &[f64], uniform: Option<f64>, scratch: &Scratch| {
            phases.clear();
            phases.extend(
                runners
                    .iter()
                    .zip(counted)
                    .map(|(r, &c)| runner_phases(r, c, uniform, scratch)),
            );
        };
    find_phases(&mut phases, &counted, uniform, scratch);
    if effects.serial_phase && phases.iter().any(|p| p.serial_time > 0.0) {
        for ((c, r), p) in counted.iter_mut().zip(runners).zip(&phases) {
            let serial = p.serial_time;
            *c = r.threads as f64 * (1.0 - serial) + serial.min(r.threads as f64);
        }
        let uniform = load_per_cpu(machine, runners, &counted, one_set, scratch);
        find_phases(&mut phases, &counted, uniform, scratch);
    }
    let mut shares = std::mem::take(&mut scratch.shares);
    shares.clear();
    shares.extend(phases.iter().map(|p| p.parallel_share));
    let busy_here: f64 = shares.iter().sum();
    let mut llc_miss = std::mem::take(&mut scratch.llc_miss);
    llc_misses(machine, runners, &counted, effects, scratch, &mut llc_miss);
    let mut bandwidth = std::mem::take(&mut scratch.bandwidth);
    bandwidth_factors(
        machine,
        runners,
        &shares,
        effects,
        params,
        scratch,
        &mut bandwidth,
    );
    bases.clear();
    bases.extend(runners.iter().enumerate().map(|(i, r)| {
        let share = shares[i];
        let mut rate = r.profile.speedup.traditional(share);
        if effects.serial_phase {
            rate = serial_phase_rate(r.profile, share, phases[i].serial_speed).unwrap_or(rate);
        }
        let load_excess = (effects.speedup == SpeedupModel::Effective)
            .then(|| r.profile.speedup.loaded_slowdown(share) - 1.0);
        let sync = if effects.sync {
            SyncCost::new(r, share, params, || corun_possible(runners, i, params))
        } else {
            SyncCost::Free
        };
        let (miss, alone_miss) = llc_miss[i];
        let llc_divisor = effects
            .llc
            .then(|| 1.0 + params.llc_miss_penalty * (miss - alone_miss).max(0.0));
        let numa_divisor = (effects.numa && !r.home.is_empty()).then(|| {
            let remote = machine.remote_cpus(r.cpus, r.home) as f64 / r.width.max(1) as f64;
            1.0 + params.numa_remote_penalty * remote
        });
        Basis {
            rate,
            share,
            load_excess,
            sync,
            llc_divisor,
            bandwidth: bandwidth[i],
            numa_divisor,
            cpu_share: phases[i].mean_share(effects.serial_phase),
            llc_miss: miss,
        }
    }));
    scratch.counted = counted;
    scratch.phases = phases;
    scratch.shares = shares;
    scratch.llc_miss = llc_miss;
    scratch.bandwidth = bandwidth;
    busy_here
}
