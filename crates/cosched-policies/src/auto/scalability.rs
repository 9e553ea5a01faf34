//! How well each job scales, measured without probing, and the widths that follow from it.
//!
//! A job whose threads block while they wait (a serial phase, a barrier) leaves CPU time unused, and
//! the CPU time it does use is the work it does: alone on `n` CPUs, CPUs' worth busy = speedup (work
//! conservation; for Amdahl's law with serial fraction s, busy = 1 / (s + (1 − s)/n) exactly). So one
//! sampling interval on dedicated CPUs gives the job's serial fraction, s = (n / busy − 1) / (n − 1),
//! where CaSAS (Tanimoto et al., IPSJ, §3.2) runs each new job alone on several widths while the others
//! wait. A job that spins while it waits looks perfectly scalable, so the estimate errs towards equal
//! shares, never towards starving a job.
//!
//! Widths then minimise the sum of the jobs' normalised turnaround times, as CaSAS's eq. 1 does, but at
//! CPU rather than LLC-domain granularity: NTT(k) = T(k) / T(alone) = (s + (1 − s)/k) / (s + (1 − s)/m)
//! for a job whose widest useful width is m. Amdahl's NTT is convex in k, so handing out one CPU at a
//! time to the job whose NTT drops most is optimal. With every serial fraction zero (nothing measured,
//! or jobs that scale) this is exactly equal shares.

use cosched_core::scaling;
use cosched_core::{ActiveJob, Context, JobId, Plan, Sample};
use std::collections::HashMap;

/// Serial fractions measured so far, per job.
#[derive(Debug, Default)]
pub struct Scalability {
    serial: HashMap<JobId, f64>,
    /// Intervals read per job that could not be used (time-shared, threads not yet matching).
    tries: HashMap<JobId, u32>,
    /// When each job last changed CPUs or threads: an interval spanning a change mixes two widths.
    changed: HashMap<JobId, f64>,
}

/// Intervals after which a job that never ran alone on its CPUs stops being waited for.
const MAX_TRIES: u32 = 3;

impl Scalability {
    /// Records the serial fraction a sample shows, if it covers the job alone on its own CPUs with one
    /// thread per CPU, in the single slot of `plan` (time-shared intervals say nothing about scaling).
    /// The first such interval is kept: later ones would only move widths by a CPU, each move a
    /// reconfiguration.
    pub fn observe(&mut self, now: f64, sample: &Sample, plan: Option<&Plan>) {
        if self.serial.contains_key(&sample.job) || sample.cpus < 2 || sample.interval <= 0.0 {
            return;
        }
        let settled = self
            .changed
            .get(&sample.job)
            .is_none_or(|&at| at <= now - sample.interval + 1e-9);
        let dedicated = plan.is_some_and(|p| {
            p.slots.len() == 1
                && p.cpus_in_slot(0, sample.job).map(|c| c.len()) == Some(sample.cpus as usize)
        });
        let threads = sample.team_size.or(sample.os_threads);
        let one_per_cpu =
            threads.is_none_or(|t| t == sample.cpus) && sample.advice_seen != Some(false);
        if !dedicated || !one_per_cpu || !settled {
            *self.tries.entry(sample.job).or_default() += 1;
            return;
        }
        let busy = sample.cpu_seconds / sample.interval;
        self.serial
            .insert(sample.job, serial_fraction(sample.cpus as usize, busy));
    }

    /// A job's serial fraction: measured, else from its times alone on one CPU and on `full` CPUs
    /// (`hints.one_cpu_runtime` against `hints.runtime`), if known.
    pub fn serial(&self, job: &ActiveJob, full: usize) -> Option<f64> {
        let hinted = || {
            let hints = &job.spec.hints;
            let speedup = hints.one_cpu_runtime? / hints.runtime.filter(|&r| r > 0.0)?;
            Some(serial_fraction(full, speedup))
        };
        self.serial.get(&job.id()).copied().or_else(hinted)
    }

    /// A job's scaling: its times alone at the widths its past runs measured, where it has two or
    /// more, else Amdahl's law by its serial fraction, if known.
    pub fn curve(&self, job: &ActiveJob, full: usize) -> Option<Curve> {
        Curve::measured(&job.spec.hints.times_alone)
            .or_else(|| self.serial(job, full).map(Curve::amdahl))
    }

    /// Seconds of work alone on `full` CPUs that a second on `cpus` CPUs does for `job` (linear
    /// speedup where its scaling is unknown).
    pub fn speed(&self, job: &ActiveJob, cpus: usize, full: usize) -> f64 {
        let curve = self.curve(job, full).unwrap_or(Curve::amdahl(0.0));
        1.0 / curve.time_ratio(cpus.clamp(1, full), full)
    }

    /// Notes when a job's CPUs or threads change.
    pub fn changed(&mut self, now: f64, job: JobId) {
        self.changed.insert(job, now);
    }

    /// Forgets jobs that left.
    pub fn retain(&mut self, ctx: &Context) {
        self.changed.retain(|id, _| ctx.job(*id).is_some());
        self.serial.retain(|id, _| ctx.job(*id).is_some());
        self.tries.retain(|id, _| ctx.job(*id).is_some());
    }

    /// Whether any of `jobs` was measured to have a serial part.
    pub fn any_serial(&self, mut jobs: impl Iterator<Item = JobId>) -> bool {
        jobs.any(|id| self.serial.get(&id).is_some_and(|&s| s > 0.0))
    }

    /// Whether a job's scaling is still to be measured.
    pub fn unknown(&self, id: JobId) -> bool {
        !self.serial.contains_key(&id) && self.tries.get(&id).is_none_or(|&t| t < MAX_TRIES)
    }

    /// Widths for `(job, cap)` pairs sharing `cpus` CPUs (at least one each; needs as many CPUs as
    /// jobs): one CPU at a time to the job whose normalised turnaround drops most, while any drops.
    pub fn widths(&self, jobs: &[(JobId, usize)], cpus: usize) -> Vec<usize> {
        let mut widths = vec![1usize; jobs.len()];
        let gain = |i: usize, k: usize| {
            let (id, cap) = jobs[i];
            if k >= cap {
                return 0.0;
            }
            let s = self.serial.get(&id).copied().unwrap_or(0.0);
            let alone = s + (1.0 - s) / cap as f64;
            (1.0 - s) * (1.0 / k as f64 - 1.0 / (k + 1) as f64) / alone
        };
        for _ in jobs.len()..cpus {
            let best = (0..jobs.len())
                .map(|i| (i, gain(i, widths[i])))
                .filter(|&(_, g)| g > 0.0)
                // Ties to the narrowest, then the first: equal shares when nothing is measured.
                .max_by(|a, b| {
                    a.1.total_cmp(&b.1)
                        .then(widths[b.0].cmp(&widths[a.0]))
                        .then(b.0.cmp(&a.0))
                });
            match best {
                Some((i, _)) => widths[i] += 1,
                None => break,
            }
        }
        widths
    }
}

/// An added CPU is worth giving a job while it speeds the job up by at least this much of a CPU; a
/// CPU that adds less does more for a job waiting for one.
pub const EFFICIENT_GAIN: f64 = 0.5;

/// The Amdahl serial fraction of a job `speedup` times faster on `n` CPUs than on one.
pub fn serial_fraction(n: usize, speedup: f64) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let n = n as f64;
    ((n / speedup.clamp(1.0, n) - 1.0) / (n - 1.0)).clamp(0.0, 1.0)
}

/// How a job's time alone changes with its width: read between the widths its past runs measured
/// (`cosched_core::scaling::time_at`), and by Amdahl's law with `serial` outside them or without.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    serial: f64,
    /// `(width, seconds alone)`, by width.
    points: Vec<(u32, f64)>,
}

impl Curve {
    pub fn amdahl(serial: f64) -> Curve {
        Curve {
            serial,
            points: Vec::new(),
        }
    }

    /// From times alone at two widths or more.
    pub fn measured(times_alone: &[(u32, f64)]) -> Option<Curve> {
        let mut points: Vec<(u32, f64)> = (times_alone.iter())
            .filter(|&&(k, t)| k >= 1 && t > 0.0)
            .copied()
            .collect();
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        (points.len() >= 2).then(|| Curve {
            serial: scaling::serial_through(&points),
            points,
        })
    }

    /// Its time on `k` CPUs over its time on `m` CPUs.
    pub fn time_ratio(&self, k: usize, m: usize) -> f64 {
        let time = |n: usize| scaling::time_at(&self.points, self.serial, n as u32);
        time(k) / time(m)
    }

    /// Whether it is Amdahl's law alone: concave, so that a CPU's gain falls with the width.
    fn smooth(&self) -> bool {
        self.points.is_empty()
    }
}

/// The widest width up to `cap` at which every added CPU still gains at least `EFFICIENT_GAIN`. A
/// measured curve may gain little up to a package boundary and much beyond it: any width may pay
/// off there, and the makespan bound (`widths.rs`) decides.
pub fn efficient_width(curve: &Curve, cap: usize) -> usize {
    if !curve.smooth() {
        return cap.max(1);
    }
    let speedup = |k: usize| curve.time_ratio(1, k);
    1 + (1..cap.max(1))
        .take_while(|&k| speedup(k + 1) - speedup(k) >= EFFICIENT_GAIN)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::{Assignment, CpuSet, RateSource};

    fn alone(job: u32, cpus: &str) -> Plan {
        Plan::space_sharing(vec![Assignment {
            job: JobId(job),
            cpus: cpus.parse::<CpuSet>().unwrap(),
        }])
    }

    /// One second on `cpus` CPUs of a job with Amdahl serial fraction `s`: CPUs' worth busy = speedup.
    fn amdahl_sample(job: u32, cpus: u32, s: f64) -> Sample {
        let busy = 1.0 / (s + (1.0 - s) / cpus as f64);
        Sample::new(JobId(job), 1.0, RateSource::Model, cpus, busy, 1.0)
    }

    #[test]
    fn cpu_time_on_dedicated_cpus_gives_the_serial_fraction() {
        let mut scalability = Scalability::default();
        scalability.observe(2.0, &amdahl_sample(0, 8, 0.2), Some(&alone(0, "0-7")));
        assert!((scalability.serial[&JobId(0)] - 0.2).abs() < 1e-9);
    }

    #[test]
    fn intervals_that_say_nothing_about_scaling_are_not_read() {
        let mut scalability = Scalability::default();
        // Time-shared: two slots.
        let mut shared = alone(0, "0-7");
        shared.slots.push(shared.slots[0].clone());
        scalability.observe(2.0, &amdahl_sample(0, 8, 0.2), Some(&shared));
        // The job's CPUs changed during the interval.
        scalability.changed(1.5, JobId(0));
        scalability.observe(2.0, &amdahl_sample(0, 8, 0.2), Some(&alone(0, "0-7")));
        assert!(scalability.unknown(JobId(0)) && scalability.serial.is_empty());
        scalability.observe(2.0, &amdahl_sample(0, 8, 0.2), Some(&alone(0, "0-7")));
        assert!(
            !scalability.unknown(JobId(0)),
            "gives up after {MAX_TRIES} tries"
        );
    }

    #[test]
    fn a_job_gets_the_cpus_that_each_still_speed_it_up_by_half_a_cpu() {
        let amdahl = |s: f64| Curve::amdahl(s);
        assert_eq!(efficient_width(&amdahl(0.0), 48), 48);
        // 7.1 s on one CPU, 5.1 s on two: the second CPU gains 0.39 of a CPU.
        assert_eq!(
            efficient_width(&amdahl(serial_fraction(2, 7.1 / 5.1)), 2),
            1
        );
        assert_eq!(efficient_width(&amdahl(serial_fraction(2, 1.9)), 2), 2);
        let w = efficient_width(&amdahl(0.01), 48);
        assert!((30..48).contains(&w), "{w}");
    }

    #[test]
    fn widths_are_equal_shares_until_a_job_is_measured_to_scale_poorly() {
        let mut scalability = Scalability::default();
        let jobs = [
            (JobId(0), 48),
            (JobId(1), 48),
            (JobId(2), 48),
            (JobId(3), 48),
        ];
        assert_eq!(scalability.widths(&jobs, 48), vec![12, 12, 12, 12]);
        scalability.serial.insert(JobId(0), 0.005);
        scalability.serial.insert(JobId(1), 0.005);
        scalability.serial.insert(JobId(2), 0.3);
        scalability.serial.insert(JobId(3), 0.3);
        let widths = scalability.widths(&jobs, 48);
        assert_eq!(widths.iter().sum::<usize>(), 48);
        assert!(widths[0] > 12 && widths[2] < 12, "{widths:?}");
        assert_eq!(widths[0], widths[1]);
    }

    #[test]
    fn measured_times_are_read_between_widths_and_amdahl_continues_them() {
        // bt.A of TACO's Table 1: 94 s on one CPU, speedup 2.5 on 3 CPUs, 3.8 on 6, 13.4 on 24.
        let times = [(3, 94.0 / 2.5), (6, 94.0 / 3.8), (24, 94.0 / 13.4)];
        let curve = Curve::measured(&times).unwrap();
        assert!((curve.time_ratio(6, 24) - 13.4 / 3.8).abs() < 1e-9);
        // Speed halfway between 6 and 24 CPUs: halfway between the speedups.
        let halfway = curve.time_ratio(24, 15);
        assert!(
            (halfway - (3.8 + 13.4) / 2.0 / 13.4).abs() < 1e-9,
            "{halfway}"
        );
        // Below 3 CPUs Amdahl's law through 3 and 24 continues it: slower on fewer CPUs.
        assert!(curve.time_ratio(1, 3) > 2.0 && curve.time_ratio(1, 3) < 3.0);
        assert_eq!(efficient_width(&curve, 24), 24);
        assert_eq!(Curve::measured(&times[..1]), None);
    }
}
