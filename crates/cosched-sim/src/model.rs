//! The performance model: how fast each job progresses while a set of jobs shares the machine in one
//! slot. `docs/simulation-model.md` explains every effect, its source and its switch in [`Effects`].

use crate::footprint::{self, Footprint};
use crate::profile::{Profile, Speedup, SpinLimit, BLOCK_COST};
use cosched_core::{CpuSet, Level, SyncKind, Topology};
use serde::{Deserialize, Serialize};

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

/// What the model needs to know of the machine, indexed by CPU number.
pub(crate) struct MachineModel {
    pub cpus: usize,
    llc_of_cpu: Vec<u32>,
    llc_domains: usize,
    llc_mb: f64,
    numa_of_cpu: Vec<u32>,
    numa_domains: usize,
    numa_by_word: DomainsByWord,
    /// Every NUMA node's index: the home of most jobs on a machine of one node, shared by all of them
    /// so that every runner's evaluation reads the same memory.
    all_nodes: CpuSet,
    /// How many regions: CPUs that share an LLC or a NUMA node, and so on transitively (an LLC alone
    /// after [`MachineModel::uncouple_memory`]). Jobs in different regions affect each other only
    /// through the machine's total load.
    pub regions: usize,
    /// Each CPU's region.
    regions_by_word: DomainsByWord,
}

/// Which domains (LLCs, NUMA nodes, regions) each 64-CPU word of a CPU set reaches, and through which
/// bits: a job on a whole machine of a thousand CPUs spans a few domains but a thousand CPUs, and the
/// model asks which domains for every runner it evaluates.
struct DomainsByWord {
    /// For each word of the machine's bitmap, (domain, its CPUs in that word).
    words: Vec<Vec<(u32, u64)>>,
}

impl DomainsByWord {
    fn of(domain_of_cpu: &[u32]) -> DomainsByWord {
        let mut words: Vec<Vec<(u32, u64)>> = vec![Vec::new(); domain_of_cpu.len().div_ceil(64)];
        for (cpu, &domain) in domain_of_cpu.iter().enumerate() {
            let word = &mut words[cpu / 64];
            let bit = 1u64 << (cpu % 64);
            match word.iter_mut().find(|(d, _)| *d == domain) {
                Some((_, mask)) => *mask |= bit,
                None => word.push((domain, bit)),
            }
        }
        DomainsByWord { words }
    }

    /// Each domain `cpus` reaches and its CPUs of `cpus` in one word, word by word.
    fn reached<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = (u32, u64)> + 'a {
        cpus.words()
            .iter()
            .zip(&self.words)
            .filter(|(bits, _)| **bits != 0)
            .flat_map(|(&bits, domains)| {
                domains
                    .iter()
                    .map(move |&(domain, mask)| (domain, bits & mask))
                    .filter(|&(_, bits)| bits != 0)
            })
    }

    /// The domains `cpus` reaches, each once per word it reaches it in.
    fn of_set<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = u32> + 'a {
        self.reached(cpus).map(|(domain, _)| domain)
    }

    /// How many of `cpus` lie in domains for which `outside` holds.
    fn count_where(&self, cpus: &CpuSet, outside: impl Fn(u32) -> bool) -> usize {
        self.reached(cpus)
            .filter(|&(domain, _)| outside(domain))
            .map(|(_, bits)| bits.count_ones() as usize)
            .sum()
    }
}

impl MachineModel {
    pub fn new(topology: &Topology, params: &ModelParams) -> MachineModel {
        let max_cpu = topology.cpus().iter().max().unwrap_or(0) as usize;
        let index = |domains: &[CpuSet]| {
            let mut of_cpu = vec![0u32; max_cpu + 1];
            for (i, set) in domains.iter().enumerate() {
                for cpu in set.iter() {
                    of_cpu[cpu as usize] = i as u32;
                }
            }
            of_cpu
        };
        let llc = topology.llc_domains();
        let numa = topology.numa_domains();
        let has_llc = [Level::L3, Level::L2, Level::L1]
            .iter()
            .any(|l| topology.nodes_at(*l).next().is_some());
        let (region_of_cpu, regions) = coupled_regions(max_cpu + 1, &[&llc, &numa]);
        let numa_of_cpu = index(&numa);
        MachineModel {
            cpus: topology.num_cpus(),
            llc_of_cpu: index(&llc),
            llc_domains: llc.len(),
            llc_mb: topology
                .llc_bytes()
                .filter(|_| has_llc)
                .map_or(params.llc_mb, |b| b as f64 / (1024.0 * 1024.0)),
            numa_by_word: DomainsByWord::of(&numa_of_cpu),
            numa_of_cpu,
            numa_domains: numa.len(),
            all_nodes: (0..numa.len() as u32).collect(),
            regions_by_word: DomainsByWord::of(&region_of_cpu),
            regions,
        }
    }

    /// Regions by LLC alone, for a run in which no job demands memory bandwidth: the bandwidth model
    /// is then the only thing that a NUMA node's jobs share, and it slows nobody. A machine whose
    /// CPUs share one memory node would otherwise be one region, and every start or finish would
    /// evaluate all of its jobs again.
    pub fn uncouple_memory(mut self, topology: &Topology) -> MachineModel {
        let cpus = self.llc_of_cpu.len();
        let (region_of_cpu, regions) = coupled_regions(cpus, &[&topology.llc_domains()]);
        self.regions = regions;
        self.regions_by_word = DomainsByWord::of(&region_of_cpu);
        self
    }

    /// The regions `cpus` reaches (some more than once).
    pub fn regions_of<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = u32> + 'a {
        self.regions_by_word.of_set(cpus)
    }

    /// NUMA nodes a CPU set touches, as a set of node indices.
    pub fn numa_nodes(&self, cpus: &CpuSet) -> CpuSet {
        let nodes: CpuSet = self.numa_by_word.of_set(cpus).collect();
        if nodes == self.all_nodes {
            return self.all_nodes.clone();
        }
        nodes
    }

    /// How many of `cpus` lie outside the NUMA nodes `home` (node indices). Every evaluation of a
    /// runner asks, and on a machine of one node the answer needs no walk over its CPUs.
    pub fn remote_cpus(&self, cpus: &CpuSet, home: &CpuSet) -> usize {
        if self.numa_domains == 1 {
            return if home.contains(0) { 0 } else { cpus.len() };
        }
        self.numa_by_word
            .count_where(cpus, |node| !home.contains(node))
    }

    pub fn llc_mb(&self) -> f64 {
        self.llc_mb
    }
}

/// Numbers the connected groups of CPUs (0, 1, …) that the domains of any of the `partitions` join,
/// and returns each CPU's group and how many there are.
fn coupled_regions(cpus: usize, partitions: &[&[CpuSet]]) -> (Vec<u32>, usize) {
    let mut parent: Vec<usize> = (0..cpus).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for domain in partitions.iter().flat_map(|p| p.iter()) {
        let mut members = domain.iter().map(|c| c as usize);
        let Some(first) = members.next() else {
            continue;
        };
        for cpu in members {
            let (a, b) = (root(&mut parent, first), root(&mut parent, cpu));
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut number = vec![u32::MAX; cpus];
    let mut regions = 0;
    let region_of_cpu = (0..cpus)
        .map(|cpu| {
            let r = root(&mut parent, cpu);
            if number[r] == u32::MAX {
                number[r] = regions;
                regions += 1;
            }
            number[r]
        })
        .collect();
    (region_of_cpu, regions as usize)
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

/// A runner's CPU time in its two phases: all threads runnable, and (Amdahl profiles) the serial phase.
#[derive(Debug, Clone, Copy)]
struct Phases {
    /// CPUs' worth the job's threads get while all of them are runnable.
    parallel_share: f64,
    /// Fraction of a CPU the job's single thread gets in its serial phase.
    serial_speed: f64,
    /// Fraction of the job's time spent in its serial phase at these speeds.
    serial_time: f64,
}

impl Phases {
    fn mean_share(&self, serial_phase: bool) -> f64 {
        if serial_phase {
            self.serial_time * self.serial_speed + (1.0 - self.serial_time) * self.parallel_share
        } else {
            self.parallel_share
        }
    }
}

/// Runnable threads per CPU, each runner's `threads[i]` spread evenly over its CPUs. When the runners
/// all hold the same CPUs (`one_set`), returns the load they all carry: the same sum, in the same
/// order, as on each CPU.
fn load_per_cpu(
    machine: &MachineModel,
    runners: &[Runner],
    threads: &[f64],
    one_set: bool,
    scratch: &mut Scratch,
) -> Option<f64> {
    scratch.load.clear();
    scratch.load.resize(machine.llc_of_cpu.len(), 0.0);
    let per_cpu = |(r, t): (&Runner, &f64)| t / r.width.max(1) as f64;
    if one_set {
        let load = runners
            .iter()
            .zip(threads)
            .map(per_cpu)
            .fold(0.0, |sum, p| sum + p);
        for cpu in runners.first()?.cpus.iter() {
            scratch.load[cpu as usize] = load;
        }
        return Some(load);
    }
    for (r, t) in runners.iter().zip(threads) {
        let per_cpu = per_cpu((r, t));
        for cpu in r.cpus.iter() {
            scratch.load[cpu as usize] += per_cpu;
        }
    }
    None
}

/// A runner's phases against the load in `scratch` (`uniform` on each of its CPUs, if given), to
/// which it contributed `counted` threads. Threads time-share a CPU fairly (OS fair sharing); a lone
/// serial thread runs on the least loaded of its CPUs (the OS wakes it where it waits least), sharing
/// it with the other jobs' threads there.
fn runner_phases(r: &Runner, counted: f64, uniform: Option<f64>, scratch: &Scratch) -> Phases {
    let n = r.width.max(1) as f64;
    let own = r.threads as f64 / n;
    let counted = counted / n;
    let mut parallel_share = 0.0;
    let mut least_other = f64::INFINITY;
    match uniform {
        // Added once per CPU, as the walk below would.
        Some(load) if r.width > 0 => {
            let other = (load - counted).max(0.0);
            let share = own / (own + other).max(1.0);
            for _ in 0..r.width {
                parallel_share += share;
            }
            least_other = other;
        }
        Some(_) => {}
        None => {
            // Neighbouring CPUs mostly carry the same load (a partition's jobs spread evenly over
            // it): the share found on the last one is taken again rather than divided again, the
            // same bits either way.
            let mut last: Option<(u64, f64)> = None;
            for cpu in r.cpus.iter() {
                let load = scratch.load[cpu as usize];
                let other = (load - counted).max(0.0);
                let share = match last {
                    Some((bits, share)) if bits == load.to_bits() => share,
                    _ => own / (own + other).max(1.0),
                };
                last = Some((load.to_bits(), share));
                parallel_share += share;
                least_other = least_other.min(other);
            }
        }
    }
    let serial_speed = if least_other.is_finite() {
        1.0 / (1.0 + least_other)
    } else {
        0.0
    };
    let serial_time = match r.profile.speedup {
        Speedup::Amdahl { serial }
            if serial > 0.0 && parallel_share > 0.0 && serial_speed > 0.0 =>
        {
            let serial_part = serial / serial_speed;
            serial_part / (serial_part + (1.0 - serial) / parallel_share)
        }
        _ => 0.0,
    };
    Phases {
        parallel_share,
        serial_speed,
        serial_time,
    }
}

/// Amdahl rate when the serial phase runs at `serial_speed` of a CPU and the parallel phase on `share`
/// CPUs: time per unit of work is serial / serial_speed + (1 − serial) / share. None for other profiles.
fn serial_phase_rate(profile: &Profile, share: f64, serial_speed: f64) -> Option<f64> {
    let Speedup::Amdahl { serial } = profile.speedup else {
        return None;
    };
    if share <= 0.0 || serial_speed <= 0.0 {
        return Some(0.0);
    }
    if share < 1.0 {
        // Fewer than one CPU's worth: both phases run on the same fraction of a CPU.
        return None;
    }
    Some(1.0 / (serial / serial_speed.min(1.0) + (1.0 - serial) / share))
}

/// Progress lost to synchronisation when a job's threads are time-shared without coordination.
///
/// Each synchronisation waits for the slowest thread, which under time sharing is usually descheduled
/// (TACO §4.3 on lu.A; Peter et al. §3). A spinning waiter holds its CPU until its slice ends, half a
/// slice on average, and the straggler runs meanwhile: each synchronisation costs every thread Q/2 of
/// CPU time (never more than the straggler's wait, (L − 1)·Q), out of the fair share the job gets
/// anyway. Its synchronisations can go faster only if all its threads happen to hold a CPU at once (the
/// co-run fraction, `ModelParams::spin_corun`), which needs co-runners that leave their CPUs within a
/// slice (`corun_possible`). A blocking job only pays the block/wake-up cost (Peter et al. §2), since
/// the CPU time it leaves goes to the others and comes back to it by fair sharing; a spin-then-block
/// job (Peter et al. §3, 50 µs; libgomp's default wait) spins up to its limit first, then blocks.
///
/// What the loss depends on apart from the job's rate is fixed by its group, so it is kept as a
/// [`SyncCost`]; `corun` is asked only for an oversubscribed spinning team: it looks at every other
/// runner.
#[derive(Debug, Clone, Copy)]
enum SyncCost {
    /// No synchronisation, or every thread has a CPU of its own.
    Free,
    /// Each synchronisation ends with the slice (`slice_end`, the fraction of time that progresses);
    /// with `corun`, the progress when all threads happen to run at once is the dedicated speed of
    /// the co-run fraction, per unit of rate.
    Spin { slice_end: f64, corun: Option<f64> },
    /// The synchronisation interval at the dedicated speed (per unit of rate), and the wait added to
    /// each: the spin before blocking, at most the straggler's.
    Block { interval: f64, wait: f64 },
}

impl SyncCost {
    fn new(r: &Runner, share: f64, params: &ModelParams, corun: impl FnOnce() -> bool) -> SyncCost {
        let oversubscription = r.threads as f64 / share.max(1e-12);
        if r.profile.sync == SyncKind::None || oversubscription <= 1.0 + 1e-9 {
            return SyncCost::Free;
        }
        let dedicated = r.profile.speedup.traditional(r.threads as f64);
        let straggler_wait = (oversubscription - 1.0) * params.os_quantum;
        match r.profile.sync {
            SyncKind::Spin => {
                // CPU time per thread between synchronisations: the profile's interval, each thread on
                // its own CPU.
                let work = r.profile.sync_interval;
                SyncCost::Spin {
                    slice_end: work / (work + straggler_wait.min(params.os_quantum / 2.0)),
                    corun: corun().then(|| corun_fraction(oversubscription, r, params) * dedicated),
                }
            }
            // The profile's interval holds when every thread has its own CPU; at a lower rate it
            // stretches.
            SyncKind::Block => SyncCost::Block {
                interval: r.profile.sync_interval * dedicated,
                wait: spin_seconds(r.profile, params).min(straggler_wait),
            },
            SyncKind::None => SyncCost::Free,
        }
    }

    /// The factor of progress kept at `rate`.
    fn factor(&self, rate: f64) -> f64 {
        if rate <= 0.0 {
            return 1.0;
        }
        match *self {
            SyncCost::Free => 1.0,
            SyncCost::Spin { slice_end, corun } => match corun {
                Some(corun) => slice_end.max(corun / rate),
                None => slice_end,
            },
            SyncCost::Block { interval, wait } => {
                let interval = interval / rate;
                interval / (interval + wait + BLOCK_COST)
            }
        }
    }
}

fn spin_seconds(profile: &Profile, params: &ModelParams) -> f64 {
    match profile.spin_limit {
        SpinLimit::Seconds(s) => s,
        SpinLimit::Gomp => params.gomp_spin,
    }
}

/// Whether runner `i`'s spinning team can ever run all its threads at once: only when every other job
/// on its CPUs leaves its CPU within a slice (blocks, or spins less than a slice first); beside threads
/// that keep their CPUs (no synchronisation, spinning, or libgomp's default wait when it outlasts the
/// slice) the real traces show the team's threads taking turns (`docs/simulation-model.md`).
fn corun_possible(runners: &[Runner], i: usize, params: &ModelParams) -> bool {
    runners.iter().enumerate().all(|(j, other)| {
        j == i
            || other.cpus.is_disjoint(runners[i].cpus)
            || (other.profile.sync == SyncKind::Block
                && spin_seconds(other.profile, params) < params.os_quantum)
    })
}

/// Fraction of the time all threads of a team run at once when each holds 1/`oversubscription` of its
/// CPU and the OS slices them without coordination; never, when two of them share a CPU.
fn corun_fraction(oversubscription: f64, r: &Runner, params: &ModelParams) -> f64 {
    if r.threads as usize > r.width {
        return 0.0;
    }
    let exponent = 1.0 + params.spin_corun * (f64::from(r.threads) - 1.0);
    oversubscription.powf(-exponent)
}

/// (miss ratio in this slot, miss ratio alone) per runner, by composing footprint curves (Scalpel
/// §III-A eq. 4; its ref. [50], Xiang et al.'s higher-order theory of locality). A runner accesses its
/// data in an LLC domain at the rate of the CPUs' worth its threads get there (its threads share its
/// data). Co-runners fill the domain at the window w where Σ fp_j(r_j·w) = LLC, and each one's miss
/// ratio there is its curve's slope at r·w. A job's miss ratio is the mean over its domains weighted by
/// its accesses; alone, it has one domain to itself.
fn llc_misses(
    machine: &MachineModel,
    runners: &[Runner],
    counted: &[f64],
    effects: &Effects,
    scratch: &mut Scratch,
    misses: &mut Vec<(f64, f64)>,
) {
    misses.clear();
    if !effects.llc || runners.iter().all(|r| r.profile.footprint.is_none()) {
        misses.resize(runners.len(), (0.0, 0.0));
        return;
    }
    let domains = machine.llc_domains;
    scratch.domain_share.clear();
    scratch.domain_share.resize(domains * runners.len(), 0.0);
    for (i, r) in runners.iter().enumerate() {
        let n = r.width.max(1) as f64;
        let own = r.threads as f64 / n;
        let counted = counted[i] / n;
        let row = &mut scratch.domain_share[i * domains..(i + 1) * domains];
        for cpu in r.cpus.iter() {
            let other = (scratch.load[cpu as usize] - counted).max(0.0);
            row[machine.llc_of_cpu[cpu as usize] as usize] += own / (own + other).max(1.0);
        }
    }
    let llc = machine.llc_mb;
    scratch.fill_window.clear();
    for d in 0..domains {
        scratch.sharers.clear();
        for (i, r) in runners.iter().enumerate() {
            let rate = scratch.domain_share[i * domains + d];
            if let Some(curve) = r.profile.footprint.filter(|_| rate > 0.0) {
                scratch.sharers.push((curve, rate));
            }
        }
        scratch
            .fill_window
            .push(footprint::fill_window(&scratch.sharers, llc));
    }
    misses.extend(runners.iter().enumerate().map(|(i, r)| {
        let Some(curve) = r.profile.footprint else {
            return (0.0, 0.0);
        };
        let row = &scratch.domain_share[i * domains..(i + 1) * domains];
        let accesses: f64 = row.iter().sum();
        let miss = if accesses > 0.0 {
            row.iter()
                .zip(&scratch.fill_window)
                .filter_map(|(&rate, window)| Some(rate * curve.miss_ratio(rate * (*window)?)))
                .sum::<f64>()
                / accesses
        } else {
            0.0
        };
        (miss, curve.miss_ratio_alone(llc))
    }));
}

/// Factor ≤ 1 per runner: when the jobs on a NUMA node demand more bandwidth than it has, each gets its
/// proportional part.
fn bandwidth_factors(
    machine: &MachineModel,
    runners: &[Runner],
    shares: &[f64],
    effects: &Effects,
    params: &ModelParams,
    scratch: &mut Scratch,
    factors: &mut Vec<f64>,
) {
    factors.clear();
    if !effects.bandwidth || runners.iter().all(|r| r.profile.bandwidth_gbs <= 0.0) {
        factors.resize(runners.len(), 1.0);
        return;
    }
    scratch.numa_demand.clear();
    scratch.numa_demand.resize(machine.numa_domains, 0.0);
    for (r, share) in runners.iter().zip(shares) {
        let per_cpu = r.profile.bandwidth_gbs * share / r.width.max(1) as f64;
        for cpu in r.cpus.iter() {
            scratch.numa_demand[machine.numa_of_cpu[cpu as usize] as usize] += per_cpu;
        }
    }
    factors.extend(runners.iter().map(|r| {
        if r.profile.bandwidth_gbs <= 0.0 {
            return 1.0;
        }
        let n = r.width.max(1) as f64;
        r.cpus
            .iter()
            .map(|cpu| {
                let demand = scratch.numa_demand[machine.numa_of_cpu[cpu as usize] as usize];
                (params.numa_bandwidth_gbs / demand).min(1.0) / n
            })
            .sum::<f64>()
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn runners_on_one_set_of_cpus_get_what_a_walk_over_their_cpus_gives() {
        let topology = cosched_core::topology::presets::preset("taco-opteron8435").unwrap();
        let machine = MachineModel::new(&topology, &ModelParams::default());
        let profiles = ["nas/cg.B", "nas/is.C", "amdahl(serial=0.1, runtime=60)"]
            .map(|p| crate::profile::parse(p).unwrap());
        let (cpus, home): (CpuSet, CpuSet) = ("3-17".parse().unwrap(), CpuSet::new());
        let runners: Vec<Runner> = profiles
            .iter()
            .zip([7, 15, 40])
            .map(|(profile, threads)| Runner::new(&cpus, threads, profile, &home))
            .collect();
        let counted = [7.0, 3.5, 40.0];
        let (mut walked, mut once) = (Scratch::default(), Scratch::default());
        assert_eq!(
            load_per_cpu(&machine, &runners, &counted, false, &mut walked),
            None
        );
        let uniform = load_per_cpu(&machine, &runners, &counted, true, &mut once);
        assert!(uniform.is_some());
        let bits = |loads: &[f64]| loads.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&walked.load), bits(&once.load));
        for (r, &c) in runners.iter().zip(&counted) {
            let (a, b) = (
                runner_phases(r, c, None, &walked),
                runner_phases(r, c, uniform, &once),
            );
            assert_eq!(
                bits(&[a.parallel_share, a.serial_speed, a.serial_time]),
                bits(&[b.parallel_share, b.serial_speed, b.serial_time])
            );
        }
    }

    #[test]
    fn domains_by_word_find_the_domains_and_counts_that_the_cpus_give() {
        // Domains of six CPUs over 200 CPUs: some lie across two words.
        let domain_of_cpu: Vec<u32> = (0..200).map(|cpu| cpu / 6).collect();
        let table = DomainsByWord::of(&domain_of_cpu);
        for text in ["0", "5-6", "60-70", "63-64,127-128,199", "0-199", ""] {
            let cpus: CpuSet = text.parse().unwrap();
            let expected: BTreeSet<u32> = cpus.iter().map(|c| domain_of_cpu[c as usize]).collect();
            let found: BTreeSet<u32> = table.of_set(&cpus).collect();
            assert_eq!(found, expected, "{text}");
            let odd = |d: u32| d % 2 == 1;
            let by_cpu = cpus
                .iter()
                .filter(|&c| odd(domain_of_cpu[c as usize]))
                .count();
            assert_eq!(table.count_where(&cpus, odd), by_cpu, "{text}");
        }
    }
}
