//! The CPU time each runner's threads get in a slot, in its parallel and its serial phase.

use super::{MachineModel, Runner, Scratch};
use crate::profile::{Profile, Speedup};

/// A runner's CPU time in its two phases: all threads runnable, and (Amdahl profiles) the serial phase.
#[derive(Debug, Clone, Copy)]
pub(super) struct Phases {
    /// CPUs' worth the job's threads get while all of them are runnable.
    pub(super) parallel_share: f64,
    /// Fraction of a CPU the job's single thread gets in its serial phase.
    pub(super) serial_speed: f64,
    /// Fraction of the job's time spent in its serial phase at these speeds.
    pub(super) serial_time: f64,
}

impl Phases {
    pub(super) fn mean_share(&self, serial_phase: bool) -> f64 {
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
pub(super) fn load_per_cpu(
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
pub(super) fn runner_phases(
    r: &Runner,
    counted: f64,
    uniform: Option<f64>,
    scratch: &Scratch,
) -> Phases {
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
pub(super) fn serial_phase_rate(profile: &Profile, share: f64, serial_speed: f64) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelParams;
    use cosched_core::CpuSet;

    #[test]
    pub(super) fn runners_on_one_set_of_cpus_get_what_a_walk_over_their_cpus_gives() {
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
}
