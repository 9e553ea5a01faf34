//! What past runs showed about a program, remembered with its run time (the run history): how it takes
//! thread-count advice, and whether its threads spin. A program is remembered for what it is, not for
//! what it was given once: one started narrow that keeps its threads is moldable, not rigid at the
//! narrow count, and a count it runs whatever it is advised is believed only once two runs advised
//! different counts at start and saw it. A newer run that contradicts what is remembered corrects it.

use super::{Following, JobObservation};
use crate::job::{JobId, JobKind, JobSpec, SyncKind};
use crate::trace::Record;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// When a program applies the thread count it is advised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Advice {
    /// While it runs, at its parallel regions' boundaries: malleable.
    AtRegions,
    /// Only at start: it keeps the count it starts with (its whole computation is one parallel
    /// region, say): moldable.
    AtStart,
    /// Never: it runs [`Behaviour::own_threads`] whatever it is advised: rigid at those.
    Never,
}

/// What past runs of a program showed. Each field is `None` where no run tested it, so what is
/// unknown is never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Behaviour {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
    /// Whether its threads spin (true) or block (false) when they outnumber their CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spins: Option<bool>,
    /// The threads it ran though advised another count at start: believed (`advice` `Never`) once
    /// a second run advised a different count and saw the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_threads: Option<u32>,
    /// The count it was advised at start when it was first seen running `own_threads` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_start: Option<u32>,
}

/// What one run showed about a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunBehaviour {
    /// The threads it was started with (the advice at start), where the run recorded its start.
    pub started_with: Option<u32>,
    /// The threads it ran before any advice while running could change them: its first parallel
    /// region's team, else the most threads its processes had.
    pub threads: Option<u32>,
    /// Whether it applied advice given while it ran within the deadline; `None` where none was given.
    pub follows_advice: Option<bool>,
    pub spins: Option<bool>,
}

impl RunBehaviour {
    /// Whether it started with the count it was advised; `None` where the run does not tell.
    fn took_start_advice(&self) -> Option<bool> {
        Some(self.threads? == self.started_with?)
    }
}

impl Behaviour {
    /// Takes in a newer run: what it shows replaces what older runs found, and what it contradicts
    /// is dropped.
    pub fn learn(&mut self, run: &RunBehaviour) {
        self.spins = run.spins.or(self.spins);
        match (run.took_start_advice(), run.follows_advice) {
            (_, Some(true)) => self.believe(Advice::AtRegions),
            (Some(true), Some(false)) | (None, Some(false))
                if self.advice != Some(Advice::Never) =>
            {
                self.believe(Advice::AtStart)
            }
            (Some(true), _) if self.own_threads.is_some_and(|t| Some(t) != run.threads) => {
                // It took a count it was said to ignore: what it does at run time is untested.
                *self = Behaviour {
                    spins: self.spins,
                    ..Behaviour::default()
                };
            }
            (Some(false), _) => self.ignored(run),
            _ => {}
        }
    }

    fn believe(&mut self, advice: Advice) {
        self.advice = Some(advice);
        self.own_threads = None;
        self.ignored_start = None;
    }

    /// It ran other threads than it was advised at start: the same threads at another advised
    /// count confirm that it never takes advice; other threads start the count afresh.
    fn ignored(&mut self, run: &RunBehaviour) {
        let (threads, advised) = (run.threads, run.started_with);
        if self.own_threads == threads {
            if self
                .ignored_start
                .is_some_and(|first| Some(first) != advised)
            {
                self.advice = Some(Advice::Never);
            }
            return;
        }
        self.advice = None;
        self.own_threads = threads;
        self.ignored_start = advised;
    }

    /// What a policy should assume about the job from the start. A malleable job that keeps the
    /// threads it starts with is moldable: it still starts at any width its bounds allow, so that
    /// what one narrow start showed never pins it narrow. Only a job that ran the same threads at two
    /// different advised counts is rigid at them. Observed spinning replaces a declared `sync`; seen
    /// not to spin, a job keeps what it declared: a job that never waits for its threads and one that
    /// blocks look the same under crowding, so the observation cannot make a declared `none` into
    /// `block` (which would have `auto` hold it back for its full width). A job with no history is
    /// seen as declared.
    pub fn apply(&self, spec: &mut JobSpec) {
        match (self.advice, self.own_threads) {
            (Some(Advice::AtStart), _) if spec.kind == JobKind::Malleable => {
                spec.kind = JobKind::Moldable;
            }
            (Some(Advice::Never), Some(threads)) => {
                spec.kind = JobKind::Rigid;
                spec.min_threads = threads.max(1);
                spec.max_threads = threads.max(1);
            }
            _ => {}
        }
        if self.spins == Some(true) {
            spec.hints.sync = SyncKind::Spin;
        }
    }
}

impl JobObservation {
    /// What this run showed about the job, started with `started_with` threads where known.
    pub fn behaviour(&self, started_with: Option<u32>) -> RunBehaviour {
        // A team that changed size applied advice at a region boundary, whatever later advice it
        // was late with; samples cannot tell advice ignored from advice withdrawn before it was
        // due, so only a team that never changed while advice was overdue ignores it.
        let follows_advice = if self.threads_changed {
            Some(true)
        } else if self.advice_overdue || matches!(self.following, Following::Ignores { .. }) {
            Some(false)
        } else {
            None
        };
        RunBehaviour {
            started_with,
            threads: self.first_team.or(self.most_os_threads),
            follows_advice,
            spins: match self.waiting {
                super::Waiting::Spins => Some(true),
                super::Waiting::Blocks => Some(false),
                super::Waiting::Unknown => None,
            },
        }
    }
}

/// What one run's records (a trace's `start` and `sample` records, in order) show about each job.
pub fn behaviours<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> BTreeMap<JobId, RunBehaviour> {
    let mut jobs: BTreeMap<JobId, (Option<u32>, JobObservation)> = BTreeMap::new();
    for record in records {
        match record {
            Record::Start { job, threads, .. } => jobs.entry(*job).or_default().0 = Some(*threads),
            Record::Sample(sample) => jobs.entry(sample.job).or_default().1.add(sample),
            _ => {}
        }
    }
    jobs.into_iter()
        .map(|(id, (started, o))| (id, o.behaviour(started)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{RateSource, Sample};

    /// One second of job 0 on `cpus` CPUs with a team of `team`, `regions` regions started, the
    /// latest advice applied or not.
    fn second(cpus: u32, busy: f64, rate: f64, team: u32, regions: u64, seen: bool) -> Record {
        Record::Sample(Sample {
            os_threads: Some(team),
            team_size: Some(team),
            regions_started: Some(regions),
            advice_seen: Some(seen),
            ..Sample::new(JobId(0), rate, RateSource::ControlPage, cpus, busy, 1.0)
        })
    }

    fn started(threads: u32) -> Record {
        Record::Start {
            job: JobId(0),
            threads,
            pid: None,
        }
    }

    fn malleable(max_threads: u32) -> JobSpec {
        let job = crate::test_util::job(0).kind(JobKind::Malleable);
        (*job.max_threads(max_threads).waiting().spec).clone()
    }

    /// A run started with `advised` threads that ran `ran` and was never advised while running.
    fn run(advised: u32, ran: u32) -> RunBehaviour {
        RunBehaviour {
            started_with: Some(advised),
            threads: Some(ran),
            ..RunBehaviour::default()
        }
    }

    #[test]
    fn one_long_region_started_narrow_is_moldable_at_its_full_width_next_time() {
        // Started on one CPU, widened while inside its one region: it keeps its single thread.
        let records = [
            started(1),
            second(1, 1.0, 10.0, 1, 1, true),
            second(2, 1.0, 10.0, 1, 0, false),
            second(2, 1.0, 10.0, 1, 0, false),
            second(2, 1.0, 10.0, 1, 0, false),
        ];
        let found = behaviours(&records)[&JobId(0)];
        assert_eq!(
            (found.started_with, found.threads, found.follows_advice),
            (Some(1), Some(1), Some(false))
        );
        let mut known = Behaviour::default();
        known.learn(&found);
        assert_eq!(known.advice, Some(Advice::AtStart));
        let mut spec = malleable(2);
        known.apply(&mut spec);
        assert_eq!(
            (spec.kind, spec.min_threads, spec.max_threads),
            (JobKind::Moldable, 1, 2),
            "never narrowed to the one thread it was given once"
        );
    }

    #[test]
    fn a_run_stuck_in_one_spinning_region_is_remembered_moldable_and_spinning() {
        let records = [
            started(2),
            second(2, 2.0, 20.0, 2, 5, true),
            // Squeezed onto one CPU inside its region: advice never applied, the CPU busy, no progress.
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
            second(1, 1.0, 0.0, 2, 0, false),
        ];
        let mut known = Behaviour::default();
        known.learn(&behaviours(&records)[&JobId(0)]);
        assert_eq!(
            known,
            Behaviour {
                advice: Some(Advice::AtStart),
                spins: Some(true),
                ..Behaviour::default()
            }
        );
        let mut spec = malleable(2);
        known.apply(&mut spec);
        assert_eq!((spec.kind, spec.max_threads), (JobKind::Moldable, 2));
        assert_eq!(spec.hints.sync, SyncKind::Spin);
    }

    #[test]
    fn a_run_that_applied_advice_in_time_stays_malleable() {
        let records = [
            started(2),
            second(2, 2.0, 20.0, 2, 5, true),
            second(1, 1.0, 10.0, 2, 3, false),
            second(1, 1.0, 10.0, 1, 3, true),
        ];
        let mut known = Behaviour::default();
        known.learn(&behaviours(&records)[&JobId(0)]);
        assert_eq!(known.advice, Some(Advice::AtRegions));
        let mut spec = malleable(2);
        known.apply(&mut spec);
        assert_eq!(spec.kind, JobKind::Malleable);
    }

    #[test]
    fn threads_run_against_advice_are_believed_only_at_two_advised_counts() {
        let mut known = Behaviour::default();
        for _ in 0..2 {
            known.learn(&run(2, 1));
            let mut spec = malleable(4);
            known.apply(&mut spec);
            assert_eq!(spec, malleable(4), "one advised count proves nothing");
        }
        known.learn(&run(4, 1));
        assert_eq!(known.advice, Some(Advice::Never));
        let mut spec = malleable(4);
        known.apply(&mut spec);
        assert_eq!(
            (spec.kind, spec.min_threads, spec.max_threads),
            (JobKind::Rigid, 1, 1)
        );
        known.learn(&run(1, 1));
        assert_eq!(known.advice, Some(Advice::Never), "consistent with it");
    }

    #[test]
    fn a_newer_run_corrects_what_it_contradicts() {
        let mut known = Behaviour::default();
        known.learn(&run(2, 1));
        known.learn(&run(4, 1));
        // It took the count it was advised at start after all.
        known.learn(&run(4, 4));
        assert_eq!(known, Behaviour::default());
        known.learn(&RunBehaviour {
            follows_advice: Some(false),
            ..run(2, 2)
        });
        assert_eq!(known.advice, Some(Advice::AtStart));
        known.learn(&RunBehaviour {
            follows_advice: Some(true),
            ..run(2, 2)
        });
        assert_eq!(known.advice, Some(Advice::AtRegions));
        // Other threads than it was advised start the count afresh.
        known.learn(&run(2, 3));
        known.learn(&run(4, 1));
        assert_eq!((known.advice, known.own_threads), (None, Some(1)));
    }

    #[test]
    fn a_job_seen_not_to_spin_keeps_its_declared_sync_and_one_seen_spinning_spins() {
        let not_spinning = Behaviour {
            spins: Some(false),
            ..Behaviour::default()
        };
        for declared in [SyncKind::None, SyncKind::Block, SyncKind::Spin] {
            let mut spec = malleable(2);
            spec.hints.sync = declared;
            not_spinning.apply(&mut spec);
            assert_eq!(spec.hints.sync, declared);
        }
        let mut spec = malleable(2);
        Behaviour {
            spins: Some(true),
            ..Behaviour::default()
        }
        .apply(&mut spec);
        assert_eq!(spec.hints.sync, SyncKind::Spin);
    }

    #[test]
    fn no_history_leaves_the_spec_as_declared_and_an_untested_field_is_kept() {
        let declared = malleable(2);
        let mut spec = declared.clone();
        Behaviour::default().apply(&mut spec);
        assert_eq!(spec, declared);
        let mut known = Behaviour {
            advice: Some(Advice::AtStart),
            spins: Some(true),
            ..Behaviour::default()
        };
        known.learn(&RunBehaviour {
            spins: Some(false),
            ..RunBehaviour::default()
        });
        assert_eq!(
            known.advice,
            Some(Advice::AtStart),
            "an untested field is kept"
        );
        assert_eq!(known.spins, Some(false), "a tested one is replaced");
    }
}
