//! Memory effects: misses in a shared LLC, and the bandwidth of a NUMA node shared by its jobs.

use super::{Effects, MachineModel, ModelParams, Runner, Scratch};
use crate::footprint;

/// (miss ratio in this slot, miss ratio alone) per runner, by composing footprint curves (Scalpel
/// §III-A eq. 4; its ref. [50], Xiang et al.'s higher-order theory of locality). A runner accesses its
/// data in an LLC domain at the rate of the CPUs' worth its threads get there (its threads share its
/// data). Co-runners fill the domain at the window w where Σ fp_j(r_j·w) = LLC, and each one's miss
/// ratio there is its curve's slope at r·w. A job's miss ratio is the mean over its domains weighted by
/// its accesses; alone, it has one domain to itself.
pub(super) fn llc_misses(
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
pub(super) fn bandwidth_factors(
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
