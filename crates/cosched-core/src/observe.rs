//! What running jobs really do, derived from the executor's samples and events: the threads a job
//! runs, whether and how fast it follows thread-count advice, whether its threads spin or block when
//! they time-share CPUs, whether it is stuck in one long parallel region, and its progress rate at each
//! width it has held. Pure code, fed the same way by the real executor and the simulator, so that every
//! policy can check what it assumes about a job (a `malleable` label is a promise the program may not
//! keep: a team already running a long region, or an OpenMP runtime without the preload library, keeps
//! its threads whatever it is advised).

use crate::event::{Event, Sample};
use crate::job::{JobId, JobKind};
use crate::policy::ActiveJob;
use std::collections::{BTreeMap, BTreeSet};

mod behaviour;

pub use behaviour::{behaviours, Advice, Behaviour, RunBehaviour};

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
    /// Its samples showed advice unapplied for at least the deadline.
    advice_overdue: bool,
    samples_by_cpus: BTreeMap<u32, u32>,
    /// The team of its first parallel region that reported one, and the most threads its processes
    /// had: the threads it runs before any advice while running changes them.
    first_team: Option<u32>,
    most_os_threads: Option<u32>,
    /// Its samples showed its threads change: it applied advice while running.
    threads_changed: bool,
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

    fn add(&mut self, s: &Sample) {
        match s.advice_seen {
            Some(false) => {
                let unseen = self.advice_unseen_for.get_or_insert(0.0);
                *unseen += s.interval;
                self.advice_overdue |= *unseen >= ADVICE_DEADLINE - 1e-9;
            }
            Some(true) => self.advice_unseen_for = None,
            None => {}
        }
        let before = self.team_size.or(self.os_threads);
        self.os_threads = s.os_threads.or(self.os_threads);
        self.most_os_threads = self.most_os_threads.max(s.os_threads);
        self.team_size = s.team_size.filter(|&t| t > 0).or(self.team_size);
        self.first_team = self.first_team.or(self.team_size);
        self.threads_changed |=
            before.is_some_and(|b| Some(b) != self.team_size.or(self.os_threads));
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
}
