//! What running jobs really do, derived from the executor's samples and events: the threads a job
//! runs, whether and how fast it follows thread-count advice, whether its threads spin or block when
//! they time-share CPUs, whether it is stuck in one long parallel region, and its progress rate at each
//! width it has held. Pure code, fed the same way by the real executor and the simulator, so that every
//! policy can check what it assumes about a job (a `malleable` label is a promise the program may not
//! keep: a team already running a long region, or an OpenMP runtime without the preload library, keeps
//! its threads whatever it is advised).

use crate::event::{Event, Sample};
use crate::job::{JobId, JobKind, JobSpec, SyncKind};
use crate::policy::ActiveJob;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How long a malleable job may take to apply new advice before it is treated as fixed at the threads
/// it runs, seconds. TACO's grace period (§2.3) is the time a malleable job is given to adapt; this is
/// the same allowance.
pub const ADVICE_DEADLINE: f64 = 2.0;

/// Share of its CPUs a job must keep busy, while its threads outnumber them, to count as spinning.
const SPIN_BUSY: f64 = 0.9;
/// A spinning job's progress per CPU-second falls below this fraction of its uncrowded figure.
const SPIN_STALL: f64 = 0.5;
/// Below this share of busy CPUs while crowded, waiting threads sleep: the job blocks.
const BLOCK_BUSY: f64 = 0.75;

/// How a job's threads behave when they outnumber the CPUs they are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Waiting {
    /// Not yet seen crowded.
    #[default]
    Unknown,
    /// CPUs stay busy while progress stalls: threads busy-wait for descheduled partners.
    Spins,
    /// Waiting threads sleep and leave CPUs idle.
    Blocks,
}

/// Whether a job applies the thread counts it is advised.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Following {
    /// Never advised a change while running (or not malleable).
    #[default]
    Untested,
    /// Advice given at `since` is not applied yet; the deadline has not passed.
    Pending { since: f64, threads: u32 },
    /// Applied its latest change after `lag` seconds.
    Follows { lag: f64 },
    /// Kept its threads past the deadline of the advice given at `since`.
    Ignores { since: f64 },
}

/// Everything observed about one job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobObservation {
    /// Threads of its processes (procfs), where the executor reads them.
    pub os_threads: Option<u32>,
    /// Team size of its latest parallel region, where it reports one.
    pub team_size: Option<u32>,
    pub following: Following,
    pub waiting: Waiting,
    /// Seconds of running since a parallel region last started; grows while the job stays inside one.
    pub region_age: Option<f64>,
    /// Progress rate by CPUs held, as a running mean over samples (its measured scalability).
    pub rate_by_cpus: BTreeMap<u32, f64>,
    /// Total progress and CPU time observed so far, in the units of its samples.
    pub progress: f64,
    pub cpu_seconds: f64,
    spin_evidence: i32,
    uncrowded_efficiency: Option<f64>,
    /// Running seconds since its samples last showed the latest advice applied.
    advice_unseen_for: Option<f64>,
    /// Its samples showed advice unapplied for at least the deadline / applied after a change.
    advice_overdue: bool,
    advice_applied: bool,
    samples_by_cpus: BTreeMap<u32, u32>,
}

impl JobObservation {
    /// The threads the job really runs: its region's team, else its processes' threads, else what the
    /// executor last reported.
    pub fn threads(&self, reported: u32) -> u32 {
        self.team_size
            .or(self.os_threads)
            .unwrap_or(reported)
            .max(1)
    }

    /// Whether it has stayed inside one parallel region for at least the advice deadline.
    pub fn in_long_region(&self) -> bool {
        self.region_age.is_some_and(|age| age >= ADVICE_DEADLINE)
    }

    /// What this run taught about the job, to remember for its next run.
    pub fn behaviour(&self) -> Behaviour {
        let follows_advice = match self.following {
            Following::Ignores { .. } => Some(false),
            _ if self.advice_overdue => Some(false),
            Following::Follows { .. } => Some(true),
            _ if self.advice_applied => Some(true),
            _ => None,
        };
        Behaviour {
            follows_advice,
            spins: match self.waiting {
                Waiting::Spins => Some(true),
                Waiting::Blocks => Some(false),
                Waiting::Unknown => None,
            },
            threads: self.team_size.or(self.os_threads),
        }
    }

    fn add(&mut self, s: &Sample) {
        match s.advice_seen {
            Some(false) => {
                let unseen = self.advice_unseen_for.get_or_insert(0.0);
                *unseen += s.interval;
                self.advice_overdue |= *unseen >= ADVICE_DEADLINE - 1e-9;
            }
            Some(true) => self.advice_applied |= self.advice_unseen_for.take().is_some(),
            None => {}
        }
        self.os_threads = s.os_threads.or(self.os_threads);
        self.team_size = s.team_size.filter(|&t| t > 0).or(self.team_size);
        match s.regions_started {
            Some(0) if self.team_size.is_some() => {
                *self.region_age.get_or_insert(0.0) += s.interval;
            }
            Some(_) => self.region_age = Some(0.0),
            None => {}
        }
        self.progress += s.rate * s.interval;
        self.cpu_seconds += s.cpu_seconds;
        if s.cpus > 0 && s.interval > 0.0 {
            let n = self.samples_by_cpus.entry(s.cpus).or_default();
            *n += 1;
            let mean = self.rate_by_cpus.entry(s.cpus).or_default();
            *mean += (s.rate - *mean) / f64::from(*n);
        }
        self.classify_waiting(s);
    }

    /// Spinning shows as busy CPUs whose work stalls once threads outnumber CPUs; blocking as CPUs left
    /// idle then. Each crowded sample is one piece of evidence; the sign of their sum decides.
    fn classify_waiting(&mut self, s: &Sample) {
        let threads = self.threads(0);
        if s.cpus == 0 || s.interval <= 0.0 || threads == 0 {
            return;
        }
        let busy = s.cpu_seconds / (s.interval * f64::from(s.cpus.min(threads)));
        let efficiency = (s.cpu_seconds > 0.0).then(|| s.rate / s.cpu_seconds);
        if threads <= s.cpus {
            if let Some(e) = efficiency.filter(|_| busy >= SPIN_BUSY) {
                self.uncrowded_efficiency = Some(self.uncrowded_efficiency.map_or(e, |u| u.max(e)));
            }
            return;
        }
        let stalled = match (efficiency, self.uncrowded_efficiency) {
            (Some(e), Some(reference)) => e < SPIN_STALL * reference,
            (Some(_), None) => s.rate == 0.0,
            (None, _) => false,
        };
        if busy >= SPIN_BUSY && stalled {
            self.spin_evidence += 1;
        } else if busy < BLOCK_BUSY {
            self.spin_evidence -= 1;
        }
        self.waiting = match self.spin_evidence {
            e if e > 0 => Waiting::Spins,
            e if e < 0 => Waiting::Blocks,
            _ => self.waiting,
        };
    }
}

/// What past runs of a program showed, remembered with its run time (the run history). Each field is
/// `None` where no run tested it, so what is unknown is never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Behaviour {
    /// Whether it applied thread-count advice within the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows_advice: Option<bool>,
    /// Whether its threads spin (true) or block (false) when they outnumber their CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spins: Option<bool>,
    /// The threads it really ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

impl Behaviour {
    /// Takes in a newer run's findings: what it tested replaces what an older run found.
    pub fn merge(&mut self, newer: Behaviour) {
        self.follows_advice = newer.follows_advice.or(self.follows_advice);
        self.spins = newer.spins.or(self.spins);
        self.threads = newer.threads.or(self.threads);
    }

    /// What a policy should assume about the job from the start: a malleable job known not to follow
    /// advice is rigid at the threads it ran (as `advice_check` would find 2 s later), and observed
    /// spinning replaces a declared `sync`. Seen not to spin, a job keeps what it declared: a job
    /// that never waits for its threads and one that blocks look the same under crowding, so the
    /// observation cannot make a declared `none` into `block` (which would have `auto` hold it back
    /// for its full width). Only observed facts change the spec, so a job with no history is seen as
    /// declared.
    pub fn apply(&self, spec: &mut JobSpec) {
        if let (Some(false), Some(threads), JobKind::Malleable) =
            (self.follows_advice, self.threads, spec.kind)
        {
            spec.kind = JobKind::Rigid;
            spec.min_threads = threads.max(1);
            spec.max_threads = threads.max(1);
        }
        if self.spins == Some(true) {
            spec.hints.sync = SyncKind::Spin;
        }
    }
}

/// What the samples of one run show about each job (a trace's `sample` records, in order).
pub fn behaviours<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> BTreeMap<JobId, Behaviour> {
    let mut jobs: BTreeMap<JobId, JobObservation> = BTreeMap::new();
    for sample in samples {
        jobs.entry(sample.job).or_default().add(sample);
    }
    jobs.into_iter()
        .map(|(id, o)| (id, o.behaviour()))
        .collect()
}

/// Observations of all jobs of a run.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    jobs: BTreeMap<JobId, JobObservation>,
    tally: Tally,
}

/// Which jobs wait on advice (by when they were advised) and how many ignore it, so that the
/// questions asked on every event cost nothing while every job follows advice, and little while some
/// wait.
#[derive(Debug, Clone, Default)]
struct Tally {
    /// (time advised, as bits: never negative, so they sort as the times do; job).
    pending: BTreeSet<(u64, JobId)>,
    ignoring: usize,
}

impl Tally {
    /// Sets job `id`'s `following` to `after`, counting the move.
    fn set(&mut self, id: JobId, following: &mut Following, after: Following) {
        match *following {
            Following::Pending { since, .. } => {
                self.pending.remove(&(since.to_bits(), id));
            }
            Following::Ignores { .. } => self.ignoring -= 1,
            Following::Untested | Following::Follows { .. } => {}
        }
        match after {
            Following::Pending { since, .. } => {
                self.pending.insert((since.to_bits(), id));
            }
            Following::Ignores { .. } => self.ignoring += 1,
            Following::Untested | Following::Follows { .. } => {}
        }
        *following = after;
    }
}

impl Observer {
    pub fn job(&self, id: JobId) -> Option<&JobObservation> {
        self.jobs.get(&id)
    }

    /// Takes in one executor event.
    pub fn observe(&mut self, now: f64, event: &Event) {
        match event {
            Event::Sample(s) => {
                let job = self.jobs.entry(s.job).or_default();
                job.add(s);
                if let (Some(true), Following::Pending { since, threads }) =
                    (s.advice_seen, job.following)
                {
                    if job.team_size == Some(threads) {
                        let follows = Following::Follows { lag: now - since };
                        self.tally.set(s.job, &mut job.following, follows);
                    }
                }
            }
            Event::ThreadsChanged { job: id, threads } => {
                let job = self.jobs.entry(*id).or_default();
                job.team_size = Some(*threads);
                job.region_age = Some(0.0);
                if let Following::Pending { since, .. } | Following::Ignores { since } =
                    job.following
                {
                    let follows = Following::Follows { lag: now - since };
                    self.tally.set(*id, &mut job.following, follows);
                }
            }
            Event::Finished { job } => {
                if let Some(mut gone) = self.jobs.remove(job) {
                    self.tally
                        .set(*job, &mut gone.following, Following::Untested);
                }
            }
            Event::Arrived { .. } | Event::Timer => {}
        }
    }

    /// Records the advice of a plan for a job now running with `job.threads`. Only started malleable
    /// jobs are expected to follow advice at run time; moldable and rigid ones take theirs at start.
    pub fn advised(&mut self, now: f64, job: &ActiveJob, threads: u32) {
        if job.started.is_none() || job.spec.kind != JobKind::Malleable {
            return;
        }
        let observed = self.jobs.entry(job.id()).or_default();
        let current = observed.threads(job.threads);
        let after = match observed.following {
            _ if threads == current => match observed.following {
                Following::Pending { since, .. } => Following::Follows { lag: now - since },
                other => other,
            },
            Following::Pending { since, threads: t } if t == threads => {
                Following::Pending { since, threads }
            }
            Following::Ignores { since } => Following::Ignores { since },
            _ => Following::Pending {
                since: now,
                threads,
            },
        };
        self.tally.set(job.id(), &mut observed.following, after);
    }

    /// Moves every job whose advice is overdue at `now` to `Ignores`; returns the ids that moved, in
    /// job order.
    pub fn expire(&mut self, now: f64) -> Vec<JobId> {
        debug_assert_eq!(
            (self.tally.pending.len(), self.tally.ignoring),
            (
                self.jobs
                    .values()
                    .filter(|j| matches!(j.following, Following::Pending { .. }))
                    .count(),
                self.jobs
                    .values()
                    .filter(|j| matches!(j.following, Following::Ignores { .. }))
                    .count(),
            ),
            "the tally of advice states drifted from the jobs"
        );
        let mut moved = Vec::new();
        // The earliest advised first: once one is not overdue, no later one is.
        while let Some(&(since, id)) = self.tally.pending.first() {
            let since = f64::from_bits(since);
            if now - since < ADVICE_DEADLINE - 1e-9 {
                break;
            }
            let job = self.jobs.get_mut(&id).expect("a pending job is observed");
            self.tally
                .set(id, &mut job.following, Following::Ignores { since });
            moved.push(id);
        }
        moved.sort_unstable();
        moved
    }

    /// The earliest time at which some pending advice becomes overdue.
    pub fn next_deadline(&self) -> Option<f64> {
        let &(since, _) = self.tally.pending.first()?;
        Some(f64::from_bits(since) + ADVICE_DEADLINE)
    }

    /// Whether some job does not follow advice: without one, no job is bound to its thread count.
    pub fn any_ignores(&self) -> bool {
        self.tally.ignoring > 0
    }

    /// The thread count a job is bound to because it does not follow advice, if it is.
    pub fn fixed_threads(&self, job: &ActiveJob) -> Option<u32> {
        let observed = self.jobs.get(&job.id())?;
        matches!(observed.following, Following::Ignores { .. })
            .then(|| observed.threads(job.threads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RateSource;

    fn running(threads: u32) -> ActiveJob {
        crate::test_util::job(0)
            .max_threads(threads)
            .running(0.0, threads)
    }

    /// One second of a job holding `cpus` CPUs: `busy` CPU-seconds used, `rate` progress per second,
    /// `regions` regions started, `seen` whether the latest advice was applied.
    fn second(cpus: u32, busy: f64, rate: f64, team: u32, regions: u64, seen: bool) -> Sample {
        Sample {
            os_threads: Some(team),
            team_size: Some(team),
            regions_started: Some(regions),
            advice_seen: Some(seen),
            ..Sample::new(JobId(0), rate, RateSource::ControlPage, cpus, busy, 1.0)
        }
    }

    /// Replays `samples` one second apart from t = 1, advising `advice` threads at t = 0.
    fn replay(job: &ActiveJob, advice: u32, samples: &[Sample]) -> (Observer, Vec<JobId>) {
        let mut observer = Observer::default();
        observer.advised(0.0, job, advice);
        let mut expired = Vec::new();
        for (t, s) in samples.iter().enumerate() {
            let now = t as f64 + 1.0;
            observer.observe(now, &Event::Sample(s.clone()));
            expired.extend(observer.expire(now));
        }
        (observer, expired)
    }

    #[test]
    fn a_job_that_applies_advice_at_its_next_region_follows() {
        let job = running(2);
        // Regions of a few hundred ms: the next one starts with the advised single thread.
        let samples = [
            second(1, 1.0, 10.0, 2, 3, false),
            second(1, 1.0, 10.0, 1, 3, true),
        ];
        let (observer, expired) = replay(&job, 1, &samples);
        assert!(expired.is_empty());
        let seen = observer.job(JobId(0)).unwrap();
        assert_eq!(seen.following, Following::Follows { lag: 2.0 });
        assert_eq!(observer.fixed_threads(&job), None);
        assert!(!observer.any_ignores());
        assert!(!seen.in_long_region());
    }

    #[test]
    fn a_job_inside_one_long_region_ignores_advice_and_is_fixed_at_its_team() {
        let job = running(2);
        // The region started before the advice and never ends: no region starts, advice never seen.
        let samples = [
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
        ];
        let (observer, expired) = replay(&job, 1, &samples);
        assert_eq!(expired, vec![JobId(0)], "overdue at the deadline, once");
        assert_eq!(observer.fixed_threads(&job), Some(2));
        assert!(observer.any_ignores());
        assert!(observer.job(JobId(0)).unwrap().in_long_region());
        assert_eq!(observer.next_deadline(), None);
    }

    #[test]
    fn a_runtime_without_the_preload_library_is_fixed_at_its_os_threads() {
        let job = running(2);
        // LLVM libomp: no control-page reports at all, three threads in the process.
        let silent = Sample {
            os_threads: Some(3),
            ..Sample::new(JobId(0), 1.0, RateSource::CpuTime, 1, 1.0, 1.0)
        };
        let (observer, _) = replay(&job, 1, &[silent.clone(), silent.clone(), silent]);
        assert_eq!(observer.fixed_threads(&job), Some(3));
    }

    #[test]
    fn a_job_that_catches_up_after_the_deadline_follows_again() {
        let job = running(2);
        let stuck = second(1, 1.0, 0.0, 2, 0, false);
        let (mut observer, _) = replay(&job, 1, &[stuck.clone(), stuck.clone(), stuck]);
        assert_eq!(observer.fixed_threads(&job), Some(2));
        observer.observe(
            5.0,
            &Event::ThreadsChanged {
                job: JobId(0),
                threads: 1,
            },
        );
        assert_eq!(observer.fixed_threads(&job), None);
        assert_eq!(
            observer.job(JobId(0)).unwrap().following,
            Following::Follows { lag: 5.0 }
        );
    }

    #[test]
    fn busy_cpus_with_stalled_progress_when_crowded_is_spinning() {
        let job = running(2);
        let samples = [
            // Alone on two CPUs: 10 units per CPU-second.
            second(2, 2.0, 20.0, 2, 5, true),
            // Two threads on one CPU: the CPU stays busy, progress collapses.
            second(1, 1.0, 0.5, 2, 0, true),
            second(1, 1.0, 0.4, 2, 0, true),
        ];
        let (observer, _) = replay(&job, 2, &samples);
        let seen = observer.job(JobId(0)).unwrap();
        assert_eq!(seen.waiting, Waiting::Spins);
        assert_eq!(seen.rate_by_cpus[&2], 20.0);
        assert!((seen.rate_by_cpus[&1] - 0.45).abs() < 1e-12);
    }

    #[test]
    fn idle_cpus_when_crowded_is_blocking() {
        let job = running(4);
        let samples = [
            second(4, 4.0, 40.0, 4, 5, true),
            // Four threads on two CPUs, half the CPU time left idle: waiters sleep.
            second(2, 1.0, 9.0, 4, 5, true),
            second(2, 1.2, 10.0, 4, 5, true),
        ];
        let (observer, _) = replay(&job, 4, &samples);
        assert_eq!(observer.job(JobId(0)).unwrap().waiting, Waiting::Blocks);
    }

    #[test]
    fn uncrowded_jobs_reveal_nothing_about_waiting() {
        let job = running(2);
        let (observer, _) = replay(&job, 2, &[second(2, 2.0, 20.0, 2, 5, true)]);
        assert_eq!(observer.job(JobId(0)).unwrap().waiting, Waiting::Unknown);
    }

    #[test]
    fn rigid_and_waiting_jobs_are_not_expected_to_follow() {
        let mut job = running(2);
        std::sync::Arc::make_mut(&mut job.spec).kind = JobKind::Rigid;
        let mut observer = Observer::default();
        observer.advised(0.0, &job, 1);
        std::sync::Arc::make_mut(&mut job.spec).kind = JobKind::Malleable;
        job.started = None;
        observer.advised(0.0, &job, 1);
        assert_eq!(observer.next_deadline(), None);
        assert!(observer.expire(10.0).is_empty());
    }

    #[test]
    fn a_run_stuck_in_one_spinning_region_is_remembered_as_rigid_and_spinning() {
        let samples = [
            second(2, 2.0, 20.0, 2, 5, true),
            // Squeezed onto one CPU inside its region: advice never applied, the CPU busy, no progress.
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
        ];
        let found = behaviours(&samples)[&JobId(0)];
        assert_eq!(
            found,
            Behaviour {
                follows_advice: Some(false),
                spins: Some(true),
                threads: Some(2),
            }
        );
        let mut spec = (*running(2).spec).clone();
        found.apply(&mut spec);
        assert_eq!(
            (spec.kind, spec.min_threads, spec.max_threads),
            (JobKind::Rigid, 2, 2)
        );
        assert_eq!(spec.hints.sync, SyncKind::Spin);
    }

    #[test]
    fn a_run_that_applied_advice_in_time_is_remembered_as_following() {
        let samples = [
            second(2, 2.0, 20.0, 2, 5, true),
            second(1, 1.0, 10.0, 2, 3, false),
            second(1, 1.0, 10.0, 1, 3, true),
        ];
        let found = behaviours(&samples)[&JobId(0)];
        assert_eq!(found.follows_advice, Some(true));
        let mut spec = (*running(2).spec).clone();
        found.apply(&mut spec);
        assert_eq!(spec.kind, JobKind::Malleable, "stays malleable");
    }

    #[test]
    fn a_job_seen_not_to_spin_keeps_its_declared_sync_and_one_seen_spinning_spins() {
        let not_spinning = Behaviour {
            spins: Some(false),
            ..Behaviour::default()
        };
        for declared in [SyncKind::None, SyncKind::Block, SyncKind::Spin] {
            let mut spec = (*running(2).spec).clone();
            spec.hints.sync = declared;
            not_spinning.apply(&mut spec);
            assert_eq!(spec.hints.sync, declared);
        }
        let mut spec = (*running(2).spec).clone();
        Behaviour {
            spins: Some(true),
            ..Behaviour::default()
        }
        .apply(&mut spec);
        assert_eq!(spec.hints.sync, SyncKind::Spin);
    }

    #[test]
    fn no_history_leaves_the_spec_as_declared_and_a_newer_run_refines_an_older() {
        let declared = (*running(2).spec).clone();
        let mut spec = declared.clone();
        Behaviour::default().apply(&mut spec);
        assert_eq!(spec, declared);
        let mut known = Behaviour {
            follows_advice: Some(false),
            spins: Some(true),
            threads: Some(2),
        };
        known.merge(Behaviour {
            spins: Some(false),
            ..Behaviour::default()
        });
        assert_eq!(
            known.follows_advice,
            Some(false),
            "an untested field is kept"
        );
        assert_eq!(known.spins, Some(false), "a tested one is replaced");
    }
}
