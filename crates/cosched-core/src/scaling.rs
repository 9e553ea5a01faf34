//! How a program's speed grows with the CPUs it is given, learnt from its own runs.
//!
//! A run teaches it in two ways, both read from elapsed time, never from CPU time (a job whose threads
//! spin while they wait keeps every CPU busy however little it gains from it, and a memory-bound job
//! keeps them busy while it waits for memory):
//!
//! - **A whole run on CPUs of its own** (alone on its CPUs from start to finish, however many it held
//!   at each moment) did all of the job's work: Σ seconds(k) / T(k) = 1 over the widths k it held,
//!   where T(k) is its time alone on k CPUs. Runs at different widths (a run alone on the whole
//!   machine and one on one CPU, as `cosched calibrate --scaling` makes) pin the curve down.
//! - **Progress rates at several widths within one run**, where the job reports its progress
//!   (regions completed, from the control page of the preload library, or the simulator's model):
//!   the rate at k CPUs over the rate at j CPUs is T(j) / T(k).
//!
//! The curve is Amdahl's law, T(k) = T(1) × (s + (1 − s) / k), whose speedup k / (1 + s (k − 1))
//! saturates at 1 / s: it fits a job with a serial part and, approximately, one limited by memory
//! bandwidth. The serial fraction s minimises the squared logarithmic error of the observations; the
//! root of its mean (about the relative error of a predicted time) and the number of observations
//! say how far to trust it.

use crate::event::{RateSource, Sample};
use crate::job::JobId;
use crate::plan::Plan;
use crate::plan_change::PlanReplay;
use crate::trace::{ExitStatus, Record, TraceLine};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Time a job spent on CPUs of its own at one width during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spell {
    /// CPUs it held, none shared with another job.
    pub width: u32,
    /// Threads it ran (its team size). More threads than CPUs (a team not yet shrunk to advice)
    /// share them: the job progresses about as on `width` CPUs.
    pub threads: u32,
    /// Elapsed seconds.
    pub seconds: f64,
    /// CPU seconds its processes used, where samples covered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Progress per second (regions and heartbeats from the control page, or the model's), over the
    /// part of the spell that samples with such a source covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

impl Spell {
    /// The CPUs it could use: its threads, where fewer than its CPUs.
    pub fn used_width(&self) -> u32 {
        self.width.min(self.threads).max(1)
    }
}

/// What one run of a job showed about its scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingRun {
    pub spells: Vec<Spell>,
    /// The spells cover the job from start to successful finish: they did all of its work.
    pub whole: bool,
}

impl ScalingRun {
    /// A whole run alone on `width` CPUs with `threads` threads that took `seconds` (a calibration).
    pub fn alone(width: u32, threads: u32, seconds: f64) -> ScalingRun {
        ScalingRun {
            spells: vec![Spell {
                width,
                threads,
                seconds,
                cpu_seconds: None,
                rate: None,
            }],
            whole: true,
        }
    }

    /// Whether the run can teach anything: it did all of the job's work or reported progress.
    pub fn informative(&self) -> bool {
        self.whole || self.spells.iter().any(|s| s.rate.is_some())
    }
}

/// A fitted speedup curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingFit {
    /// Amdahl's serial fraction.
    pub serial: f64,
    /// Its time alone on one CPU, where some whole run fixed the scale.
    pub one_cpu_seconds: Option<f64>,
    /// Root mean squared logarithmic error of the observations (≈ relative error of a time).
    pub residual: f64,
    /// Observations the fit used.
    pub samples: usize,
}

/// A fit whose observations stray further than this (root mean squared log error, about a relative
/// error) from its curve is not trusted: the program does not scale as Amdahl's law has it (a
/// speedup that jumps where a job spans another package), or the machine was busy while it ran. A
/// tenth is the spread at which `cosched calibrate` stops trusting repeated runs.
pub const TRUSTED_RESIDUAL: f64 = 0.1;

impl ScalingFit {
    /// Whether its observations lie close enough to its curve to act on it.
    pub fn trusted(&self) -> bool {
        self.residual <= TRUSTED_RESIDUAL
    }

    /// Speedup on `k` CPUs over one CPU.
    pub fn speedup(&self, k: u32) -> f64 {
        speedup(self.serial, k)
    }

    /// Its time on `k` CPUs, given its time `seconds` on `m` CPUs.
    pub fn scale(&self, seconds: f64, m: u32, k: u32) -> f64 {
        seconds * self.speedup(m) / self.speedup(k)
    }
}

/// Amdahl's speedup on `k` CPUs of a job with serial fraction `serial`.
pub fn speedup(serial: f64, k: u32) -> f64 {
    let k = f64::from(k.max(1));
    k / (1.0 + serial * (k - 1.0))
}

/// Spells shorter than this are too noisy to show a rate (one sampling interval).
const MIN_RATE_SECONDS: f64 = 1.0;

/// Steps of the serial fraction searched in [0, 1].
const GRID: u32 = 1000;

/// Fits Amdahl's law to `runs`; `None` while they cannot tell serial fractions apart (every whole run
/// at one width, no run with rates at two widths).
pub fn fit(runs: &[ScalingRun]) -> Option<ScalingFit> {
    let whole: Vec<&ScalingRun> = runs.iter().filter(|r| r.whole).collect();
    let rated: Vec<Vec<(u32, f64)>> = runs
        .iter()
        .map(|r| {
            r.spells
                .iter()
                .filter(|s| s.seconds >= MIN_RATE_SECONDS)
                .filter_map(|s| Some((s.used_width(), s.rate.filter(|&x| x > 0.0)?)))
                .collect::<Vec<_>>()
        })
        .filter(|spells| spells.len() >= 2)
        .collect();
    // Each group shares one unknown scale: ln T(1) for whole runs, ln of the progress unit per run.
    let groups = |serial: f64| -> Vec<Vec<f64>> {
        let mut groups = vec![whole
            .iter()
            .map(|r| {
                let work: f64 = (r.spells.iter())
                    .map(|s| s.seconds * speedup(serial, s.used_width()))
                    .sum();
                work.max(f64::MIN_POSITIVE).ln()
            })
            .collect::<Vec<_>>()];
        groups.extend(rated.iter().map(|spells| {
            (spells.iter())
                .map(|&(k, rate)| rate.ln() - speedup(serial, k).ln())
                .collect()
        }));
        groups
    };
    let error = |serial: f64| -> f64 { groups(serial).iter().map(|g| squared_deviation(g)).sum() };
    let degrees: usize = groups(0.0).iter().map(|g| g.len().saturating_sub(1)).sum();
    if degrees == 0 {
        return None;
    }
    let errors: Vec<(f64, f64)> = (0..=GRID)
        .map(|i| {
            let serial = f64::from(i) / f64::from(GRID);
            (serial, error(serial))
        })
        .collect();
    let (serial, least) = errors
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.total_cmp(&b.0)))?;
    let most = errors.iter().map(|e| e.1).fold(0.0, f64::max);
    if most - least <= 1e-12 * (1.0 + most) {
        return None;
    }
    let scales = &groups(serial)[0];
    let one_cpu_seconds =
        (!scales.is_empty()).then(|| (scales.iter().sum::<f64>() / scales.len() as f64).exp());
    Some(ScalingFit {
        serial,
        one_cpu_seconds,
        residual: (least / degrees as f64).sqrt(),
        samples: scales.len() + rated.iter().map(Vec::len).sum::<usize>(),
    })
}

/// A job's time alone on its CPUs at one width, read straight from its runs rather than from a curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeAlone {
    pub width: u32,
    /// Geometric mean of the estimates.
    pub seconds: f64,
    /// Root mean squared logarithmic deviation of the estimates from it (0 for one estimate).
    pub spread: f64,
    pub estimates: usize,
}

/// The job's time alone at each width its runs show. A whole run at one width took that long. A
/// whole run whose spells at some widths reported progress rates r(k) took u / r(k) at those widths
/// for one unknown u (its progress in all), found where its spells add up to all of its work, the
/// times at its other widths read between the points known (`time_at`). Measured speedups that jump
/// where a job spans another package (TACO's Table 1) fit no smooth curve; these points keep them.
/// Widths whose estimates spread more than `TRUSTED_RESIDUAL` are left out.
pub fn times_alone(runs: &[ScalingRun]) -> Vec<TimeAlone> {
    let mut estimates: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let whole = || runs.iter().filter(|r| r.whole);
    for run in whole() {
        if let [spell] = run.spells.as_slice() {
            let at = estimates.entry(spell.used_width()).or_default();
            at.push(spell.seconds);
        }
    }
    let known: Vec<(u32, f64)> = (estimates.iter())
        .map(|(&k, seconds)| (k, geometric_mean(seconds)))
        .collect();
    for run in whole().filter(|r| r.spells.len() > 1) {
        let mut rates: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
        for spell in &run.spells {
            if let Some(rate) = spell.rate.filter(|&r| r > 0.0) {
                if spell.seconds >= MIN_RATE_SECONDS {
                    let at = rates.entry(spell.used_width()).or_default();
                    *at = (at.0 + rate * spell.seconds, at.1 + spell.seconds);
                }
            }
        }
        let rates: Vec<(u32, f64)> = (rates.into_iter()).map(|(k, (p, s))| (k, p / s)).collect();
        if rates.is_empty() {
            continue;
        }
        let points = |progress: f64| -> Vec<(u32, f64)> {
            let mut points: Vec<(u32, f64)> =
                rates.iter().map(|&(k, r)| (k, progress / r)).collect();
            points.extend(known.iter().filter(|p| rates.iter().all(|r| r.0 != p.0)));
            points.sort_by_key(|p| p.0);
            points
        };
        let work = |progress: f64| -> f64 {
            let points = points(progress);
            let serial = serial_through(&points);
            (run.spells.iter())
                .map(|s| s.seconds / time_at(&points, serial, s.used_width()))
                .sum()
        };
        // The work done falls as the progress unit grows: bisection on its logarithm.
        let total: f64 = run.spells.iter().map(|s| s.seconds).sum();
        let (mut low, mut high) = ((total * 1e-3).ln(), (total * 1e3 * 64.0).ln());
        for _ in 0..100 {
            let middle = (low + high) / 2.0;
            if work(middle.exp()) > 1.0 {
                low = middle;
            } else {
                high = middle;
            }
        }
        let progress = ((low + high) / 2.0).exp();
        for &(k, rate) in &rates {
            estimates.entry(k).or_default().push(progress / rate);
        }
    }
    (estimates.into_iter())
        .filter_map(|(width, seconds)| {
            let logs: Vec<f64> = (seconds.iter())
                .map(|s| s.max(f64::MIN_POSITIVE).ln())
                .collect();
            let spread = (squared_deviation(&logs) / logs.len() as f64).sqrt();
            (spread <= TRUSTED_RESIDUAL).then_some(TimeAlone {
                width,
                seconds: geometric_mean(&seconds),
                spread,
                estimates: logs.len(),
            })
        })
        .collect()
}

fn geometric_mean(values: &[f64]) -> f64 {
    let logs = values.iter().map(|v| v.max(f64::MIN_POSITIVE).ln());
    (logs.sum::<f64>() / values.len().max(1) as f64).exp()
}

/// Amdahl's serial fraction through the narrowest and the widest of `points` (`(width, seconds
/// alone)` by width), 0 with fewer than two widths.
pub fn serial_through(points: &[(u32, f64)]) -> f64 {
    let (Some(&(a, ta)), Some(&(b, tb))) = (points.first(), points.last()) else {
        return 0.0;
    };
    if a == b {
        return 0.0;
    }
    // Amdahl's T(a) / T(b) = R solved for the serial fraction.
    let (a, b, ratio) = (f64::from(a), f64::from(b), ta / tb);
    let serial = (ratio / b - 1.0 / a) / (1.0 - 1.0 / a - ratio + ratio / b);
    if serial.is_finite() {
        serial.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Time alone on `k` CPUs read from `points` (`(width, seconds alone)` by width): between two of
/// them, speed linear in the width, as speedup tables are read (a jump at a package boundary stays
/// a jump); outside them, Amdahl's law with `serial` through the nearest. With no points, in units of
/// the time on one CPU.
pub fn time_at(points: &[(u32, f64)], serial: f64, k: u32) -> f64 {
    let k = k.max(1);
    let amdahl = |(m, t): (u32, f64)| t * speedup(serial, m) / speedup(serial, k);
    let (Some(&first), Some(&last)) = (points.first(), points.last()) else {
        return amdahl((1, 1.0));
    };
    if k <= first.0 {
        return amdahl(first);
    }
    if k >= last.0 {
        return amdahl(last);
    }
    let after = points.partition_point(|p| p.0 < k);
    let ((a, ta), (b, tb)) = (points[after - 1], points[after]);
    let share = f64::from(k - a) / f64::from(b - a);
    1.0 / (1.0 / ta + share * (1.0 / tb - 1.0 / ta))
}

fn squared_deviation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    values.iter().map(|v| (v - mean).powi(2)).sum()
}

/// What each job of a run (a trace, in order) showed about its scaling: its spells
/// alone on its CPUs, and whether they cover it from start to successful finish.
pub fn runs_from_trace(lines: &[TraceLine]) -> BTreeMap<JobId, ScalingRun> {
    let mut tracker = RunTracker::default();
    let mut finished: BTreeMap<JobId, ScalingRun> = (lines.iter())
        .filter_map(|line| tracker.observe(line.t, &line.record))
        .collect();
    // Jobs still running when the trace ends (an interrupted run) taught only their rates.
    finished.extend(tracker.unfinished(lines.last().map_or(0.0, |l| l.t)));
    finished.retain(|_, run| !run.spells.is_empty());
    finished
}

/// Follows a run's records as they come, for a run that never ends (a daemon's): each job's spells
/// alone on its CPUs since its start.
#[derive(Default)]
pub struct RunTracker {
    jobs: BTreeMap<JobId, Tracked>,
    plans: PlanReplay,
}

impl RunTracker {
    /// Takes in the record written at `now` (seconds on the run's clock); at a job's finish, what its
    /// run showed.
    pub fn observe(&mut self, now: f64, record: &Record) -> Option<(JobId, ScalingRun)> {
        match record {
            Record::Plan { plan: next } => {
                self.plans.replace(next);
                for (&id, job) in &mut self.jobs {
                    job.moved(now, placed(self.plans.current(), id), None);
                }
            }
            Record::PlanChange(change) => {
                let plan = self.plans.apply(change);
                for (&id, job) in &mut self.jobs {
                    job.moved(now, placed(plan, id), None);
                }
            }
            Record::Start { job, threads, .. } => {
                let tracked = self.jobs.entry(*job).or_insert_with(|| Tracked::new(now));
                tracked.threads = *threads;
                tracked.moved(now, placed(self.plans.current(), *job), None);
            }
            Record::Threads { job, threads } => {
                if let Some(tracked) = self.jobs.get_mut(job) {
                    let place = tracked.place;
                    tracked.moved(now, place, Some(*threads));
                }
            }
            Record::Sample(sample) => {
                if let Some(tracked) = self.jobs.get_mut(&sample.job) {
                    tracked.sampled(now, sample);
                }
            }
            Record::Finish { job, status, .. } => {
                let mut tracked = self.jobs.remove(job)?;
                tracked.moved(now, Placed::Frozen, None);
                return Some((*job, tracked.into_run(*status == ExitStatus::Ok)));
            }
            _ => {}
        }
        None
    }

    /// What the jobs still running at `end` showed so far: never whole runs.
    pub fn unfinished(self, end: f64) -> impl Iterator<Item = (JobId, ScalingRun)> {
        (self.jobs.into_iter()).map(move |(id, mut tracked)| {
            tracked.moved(end, Placed::Frozen, None);
            (id, tracked.into_run(false))
        })
    }
}

/// Where a job is under a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    /// In no slot: frozen, it does no work.
    Frozen,
    /// On this many CPUs of its own in every moment of the cycle (one slot, or pinned).
    Alone(u32),
    /// Time-shared, or beside another job on some of its CPUs.
    Shared,
}

fn placed(plan: &Plan, job: JobId) -> Placed {
    let pinned = plan.pinned.iter().any(|a| a.job == job);
    let slotted = (plan.slots.iter()).any(|s| s.assignments.iter().any(|a| a.job == job));
    if !pinned && !slotted {
        return Placed::Frozen;
    }
    if !pinned && plan.slots.len() != 1 {
        return Placed::Shared;
    }
    let Some(cpus) = plan.cpus_in_slot(0, job) else {
        return Placed::Shared;
    };
    let others = (plan.pinned.iter())
        .chain(plan.slots.iter().flat_map(|s| &s.assignments))
        .filter(|a| a.job != job);
    for other in others {
        if !other.cpus.is_disjoint(cpus) {
            return Placed::Shared;
        }
    }
    Placed::Alone(cpus.len() as u32)
}

/// One job's spells so far, and the segment it is in.
struct Tracked {
    /// When its CPUs or threads last changed.
    since: f64,
    /// Up to when its time is counted.
    accounted: f64,
    /// Where it is in the current segment.
    place: Placed,
    threads: u32,
    /// Some moment was not on CPUs of its own.
    gaps: bool,
    spells: BTreeMap<(u32, u32), Accumulated>,
}

#[derive(Default)]
struct Accumulated {
    seconds: f64,
    cpu_seconds: f64,
    cpu_sampled: bool,
    progress: f64,
    progress_seconds: f64,
}

impl Tracked {
    fn new(now: f64) -> Tracked {
        Tracked {
            since: now,
            accounted: now,
            place: Placed::Frozen,
            threads: 1,
            gaps: false,
            spells: BTreeMap::new(),
        }
    }

    fn current(&self) -> Option<(u32, u32)> {
        match self.place {
            Placed::Alone(width) => Some((width, self.threads)),
            Placed::Frozen | Placed::Shared => None,
        }
    }

    /// Accounts the time up to `now` and goes on `place`d (with `threads` threads, where they
    /// changed). Frozen time did no work, so it leaves a whole run whole.
    fn moved(&mut self, now: f64, place: Placed, threads: Option<u32>) {
        let seconds = now - self.accounted;
        if seconds > 0.0 {
            match (self.current(), self.place) {
                (Some(key), _) => self.spells.entry(key).or_default().seconds += seconds,
                (None, Placed::Shared) => self.gaps = true,
                (None, _) => {}
            }
            self.accounted = now;
        }
        let threads = threads.unwrap_or(self.threads);
        if (place, threads) != (self.place, self.threads) {
            self.since = now;
            self.place = place;
            self.threads = threads;
        }
    }

    fn sampled(&mut self, now: f64, sample: &Sample) {
        if let Some(team) = sample.team_size.filter(|&t| t > 0) {
            // The team changed at some point of the interval: counted from its start.
            let at = (now - sample.interval).max(self.since);
            let place = self.place;
            self.moved(at, place, Some(team));
        }
        let Some(key) = self.current() else { return };
        let inside = self.since <= now - sample.interval + 1e-9;
        if !inside || sample.cpus != key.0 || sample.interval <= 0.0 {
            return;
        }
        let spell = self.spells.entry(key).or_default();
        spell.cpu_seconds += sample.cpu_seconds;
        spell.cpu_sampled = true;
        // CPU time and instructions count spinning as progress; only real progress shows scaling.
        if matches!(sample.source, RateSource::ControlPage | RateSource::Model) {
            spell.progress += sample.rate * sample.interval;
            spell.progress_seconds += sample.interval;
        }
    }

    fn into_run(self, finished_ok: bool) -> ScalingRun {
        let spells = (self.spells.into_iter())
            .filter(|(_, a)| a.seconds > 0.0)
            .map(|((width, threads), a)| Spell {
                width,
                threads,
                seconds: a.seconds,
                cpu_seconds: a.cpu_sampled.then_some(a.cpu_seconds),
                rate: (a.progress_seconds >= MIN_RATE_SECONDS)
                    .then(|| a.progress / a.progress_seconds),
            })
            .collect();
        ScalingRun {
            spells,
            whole: finished_ok && !self.gaps,
        }
    }
}

#[cfg(test)]
mod tests;
