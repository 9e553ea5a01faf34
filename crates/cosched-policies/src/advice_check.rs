//! The one place where every policy checks that malleable jobs follow its advice.
//!
//! [`AdviceCheck`] wraps any policy (`create` wraps them all). It feeds every event to an
//! [`Observer`], records the advice of every plan, and asks for a timer at each advice deadline. A job
//! still running its old thread count after `cosched_core::observe::ADVICE_DEADLINE` is shown to the
//! wrapped policy as rigid at the threads it really runs, at each count it runs in turn; if it later
//! applies advice after all, it is shown as malleable again. Each change is presented to the policy as
//! the job leaving and arriving again, which every policy already handles, so none of them needs code
//! of its own for jobs that do not follow advice.
//!
//! Asked for plan changes (the simulator), it passes the inner policy's change through while every
//! job follows advice, recording only the advice that is new or newly running; once a job is bound
//! to its threads, it builds the whole plan and diffs it.

use cosched_core::observe::Observer;
use cosched_core::{ActiveJob, Context, Event, JobId, JobKind, Plan, PlanChange, Policy, Topology};
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::collections::BTreeMap;

pub struct AdviceCheck {
    inner: Box<dyn Policy>,
    observer: Observer,
    /// Jobs shown to the inner policy as rigid, with the thread count they were shown at.
    fixed: BTreeMap<JobId, u32>,
    /// The last plan given to the executor, and the timer the inner policy asked for in it.
    plan: Option<Plan>,
    inner_timer: Option<f64>,
    /// When the last change was given (`decide_change`).
    last_plan_at: f64,
    /// Each active job's place in the order of arrivals, to find it in a context without a scan.
    arrivals: HashMap<JobId, u64>,
    next_arrival: u64,
    /// Jobs placed by a change before they started: their advice counts once they run.
    placed_unstarted: Vec<JobId>,
    /// Jobs that started since some change was given, and when.
    started: Vec<(JobId, f64)>,
}

impl AdviceCheck {
    pub fn new(inner: Box<dyn Policy>) -> AdviceCheck {
        AdviceCheck {
            inner,
            observer: Observer::default(),
            fixed: BTreeMap::new(),
            plan: None,
            inner_timer: None,
            last_plan_at: 0.0,
            arrivals: HashMap::default(),
            next_arrival: 0,
            placed_unstarted: Vec::new(),
            started: Vec::new(),
        }
    }

    /// The jobs of `ctx` as the inner policy must see them, without `leaving` if given; `ctx`'s own
    /// list, not a copy, while every job follows advice.
    fn shown_jobs<'c>(&self, ctx: &Context<'c>, leaving: Option<JobId>) -> Cow<'c, [ActiveJob]> {
        if self.fixed.is_empty() && leaving.is_none() {
            return Cow::Borrowed(ctx.jobs);
        }
        ctx.jobs
            .iter()
            .filter(|j| Some(j.id()) != leaving)
            .map(|job| match self.fixed.get(&job.id()) {
                Some(&threads) => {
                    let mut shown = job.clone();
                    let spec = std::sync::Arc::make_mut(&mut shown.spec);
                    spec.kind = JobKind::Rigid;
                    spec.min_threads = threads;
                    spec.max_threads = threads;
                    shown.threads = threads;
                    shown
                }
                _ => job.clone(),
            })
            .collect::<Vec<_>>()
            .into()
    }

    fn ask(&mut self, ctx: &Context, jobs: &[ActiveJob], event: &Event) -> Option<Plan> {
        let shown = Context {
            topology: ctx.topology,
            now: ctx.now,
            jobs,
        };
        let plan = self.inner.decide(&shown, event)?;
        self.inner_timer = plan.timer;
        Some(plan)
    }

    /// Shows each job whose status changed leave and arrive again; returns the last plan it gave.
    fn readmit(&mut self, ctx: &Context, changed: &[JobId]) -> Option<Plan> {
        let mut plan = None;
        for &job in changed {
            let without = self.shown_jobs(ctx, Some(job));
            plan = self.ask(ctx, &without, &Event::Finished { job }).or(plan);
            let with = self.shown_jobs(ctx, None);
            plan = self.ask(ctx, &with, &Event::Arrived { job }).or(plan);
        }
        plan
    }

    /// Takes in one event; returns the jobs that started or stopped being bound to their threads, or
    /// are bound to another count now: a job bound while it ran one thread (before its first parallel
    /// region, say) that now runs sixteen must be placed again, not left on its one CPU.
    fn take_in(&mut self, ctx: &Context, event: &Event) -> Vec<JobId> {
        self.observer.observe(ctx.now, event);
        match event {
            Event::Arrived { job } => {
                self.arrivals.insert(*job, self.next_arrival);
                self.next_arrival += 1;
            }
            Event::Finished { job } => {
                self.fixed.remove(job);
                self.arrivals.remove(job);
            }
            _ => {}
        }
        self.observer.expire(ctx.now);
        // Looking every job up costs more than the policy itself on most events, and no job is fixed
        // while all follow advice.
        let now_fixed: BTreeMap<JobId, u32> = if self.observer.any_ignores() {
            ctx.jobs
                .iter()
                .filter_map(|j| Some((j.id(), self.observer.fixed_threads(j)?)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let mut changed: Vec<JobId> = now_fixed
            .keys()
            .chain(self.fixed.keys())
            .filter(|job| now_fixed.get(job) != self.fixed.get(job))
            .copied()
            .collect();
        changed.sort_unstable();
        changed.dedup();
        self.fixed = now_fixed;
        changed
    }

    /// Job `id` of `ctx`, found by its place among the arrivals (a context lists its jobs in arrival
    /// order), or by a scan if that fails. A short list is scanned at once: each step of the search
    /// looks a job up in a hash map, which costs more than comparing a few dozen ids.
    fn find<'c>(&self, ctx: &Context<'c>, id: JobId) -> Option<&'c ActiveJob> {
        const SCANNED: usize = 64;
        if ctx.jobs.len() <= SCANNED {
            return ctx.jobs.iter().find(|job| job.id() == id);
        }
        let found = self.arrivals.get(&id).and_then(|&order| {
            let before = |job: &ActiveJob| self.arrivals.get(&job.id()).is_some_and(|&o| o < order);
            ctx.jobs
                .get(ctx.jobs.partition_point(before))
                .filter(|job| job.id() == id)
        });
        found.or_else(|| ctx.jobs.iter().find(|job| job.id() == id))
    }

    /// Notes the jobs `change` places that have not started yet, to record their advice once they
    /// do (the executor starts them as it applies the change).
    fn note_placed(&mut self, ctx: &Context, change: &PlanChange) {
        let placed = change.placed.iter().map(|p| p.job);
        for id in placed.chain(change.pinned.iter().map(|p| p.job)) {
            if self.find(ctx, id).is_some_and(|job| job.started.is_none()) {
                self.placed_unstarted.push(id);
            }
        }
    }

    /// The jobs that started at or after the last change given, found among those placed unstarted.
    fn started_since_last_change<'c>(&mut self, ctx: &Context<'c>) -> Vec<&'c ActiveJob> {
        let mut still = std::mem::take(&mut self.placed_unstarted);
        still.sort_unstable();
        still.dedup();
        still.retain(|&id| match self.find(ctx, id) {
            Some(job) => match job.started {
                Some(t) => {
                    self.started.push((id, t));
                    false
                }
                None => true,
            },
            None => false,
        });
        self.placed_unstarted = still;
        let since = self.last_plan_at;
        self.started.retain(|&(_, t)| t >= since);
        let started = std::mem::take(&mut self.started);
        let jobs = started
            .iter()
            .filter_map(|&(id, _)| self.find(ctx, id))
            .collect();
        self.started = started;
        jobs
    }

    fn inner_due(&self, now: f64) -> bool {
        self.inner_timer.is_some_and(|t| t <= now + 1e-9)
    }

    /// [`Policy::decide`] once the event is taken in.
    fn decide_taken(&mut self, ctx: &Context, event: &Event, changed: &[JobId]) -> Option<Plan> {
        let mut plan = if matches!(event, Event::Timer) && !self.inner_due(ctx.now) {
            None
        } else {
            let jobs = self.shown_jobs(ctx, None);
            self.ask(ctx, &jobs, event)
        };
        plan = self.readmit(ctx, changed).or(plan);

        if let Some(plan) = &plan.as_ref().filter(|p| !p.advice.is_empty()) {
            for job in ctx.jobs {
                if let Some(&threads) = plan.advice.get(&job.id()) {
                    self.observer.advised(ctx.now, job, threads);
                }
            }
        }
        let deadline = self.observer.next_deadline();
        let plan = match plan {
            Some(plan) => plan,
            // A deadline the executor's current plan does not wake us for: the same plan, new timer.
            None if deadline.is_some()
                && self.plan.as_ref().and_then(|p| p.timer)
                    != combine(self.inner_timer, deadline) =>
            {
                self.plan.clone()?
            }
            None => return None,
        };
        let plan = Plan {
            timer: combine(self.inner_timer, deadline),
            ..plan
        };
        self.plan = Some(plan.clone());
        Some(plan)
    }
}

impl Policy for AdviceCheck {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        self.inner.queue_window(topology)
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let changed = self.take_in(ctx, event);
        self.decide_taken(ctx, event, &changed)
    }

    /// While every job follows advice, the inner policy's change passes through with the advice it
    /// gives recorded and the deadlines' timer set; otherwise the whole plan is built and diffed.
    fn decide_change(
        &mut self,
        ctx: &Context,
        event: &Event,
        current: &Plan,
    ) -> Option<PlanChange> {
        let changed = self.take_in(ctx, event);
        if !changed.is_empty() || !self.fixed.is_empty() {
            self.plan = Some(current.clone());
            let change = self
                .decide_taken(ctx, event, &changed)
                .map(|plan| PlanChange::between(current, &plan));
            if let Some(change) = &change {
                self.note_placed(ctx, change);
            }
            return change;
        }
        let change = match event {
            Event::Timer if !self.inner_due(ctx.now) => None,
            _ => self.inner.decide_change(ctx, event, current),
        };
        if let Some(change) = &change {
            self.inner_timer = change.timer;
            // The whole-plan path records every advice of every plan; recording it again changes
            // nothing except for advice that is new and for jobs running it for the first time.
            let advice = |id: &JobId| match change.advice.get(id) {
                Some(&threads) => Some(threads),
                None if change.unadvised.contains(id) => None,
                None => current.advice.get(id).copied(),
            };
            let mut jobs = self.started_since_last_change(ctx);
            jobs.retain(|job| !change.advice.contains_key(&job.id()));
            jobs.extend(change.advice.keys().filter_map(|&id| self.find(ctx, id)));
            for job in jobs {
                if let Some(threads) = advice(&job.id()) {
                    self.observer.advised(ctx.now, job, threads);
                }
            }
            self.last_plan_at = ctx.now;
            self.note_placed(ctx, change);
        }
        let deadline = self.observer.next_deadline();
        let timer = combine(self.inner_timer, deadline);
        match change {
            Some(change) => Some(PlanChange { timer, ..change }),
            // A deadline the current plan does not wake us for: the same plan, new timer.
            None if deadline.is_some() && current.timer != timer => Some(PlanChange {
                slots: current.slots.len(),
                timer,
                ..PlanChange::default()
            }),
            None => None,
        }
    }
}

/// The earlier of the inner policy's timer and the next advice deadline, if either is in the future.
fn combine(inner: Option<f64>, deadline: Option<f64>) -> Option<f64> {
    inner.into_iter().chain(deadline).reduce(f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::observe::ADVICE_DEADLINE;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::presets;
    use cosched_core::{RateSource, Sample, Topology};

    /// A job inside one long region: two threads, no region starts, advice never applied.
    fn stuck(job: u32, cpus: u32) -> Event {
        Event::Sample(Sample {
            os_threads: Some(2),
            team_size: Some(2),
            regions_started: Some(0),
            advice_seen: Some(false),
            ..Sample::new(JobId(job), 0.0, RateSource::ControlPage, cpus, 1.0, 1.0)
        })
    }

    struct Run {
        topology: Topology,
        jobs: Vec<ActiveJob>,
        policy: AdviceCheck,
    }

    impl Run {
        fn new(policy: &str, jobs: usize) -> Run {
            let mut run = Run {
                topology: presets::machine("package:1 core:2").unwrap(),
                jobs: Vec::new(),
                policy: AdviceCheck::new(crate::create_unchecked(policy).unwrap()),
            };
            for id in 0..jobs as u32 {
                let mut job = waiting(id, JobKind::Malleable, 1, 2);
                std::sync::Arc::make_mut(&mut job.spec).arrival = 0.0;
                run.jobs.push(job);
                let plan = run.at(0.0, Event::Arrived { job: JobId(id) });
                for job in &mut run.jobs {
                    job.started.get_or_insert(0.0);
                    job.threads = plan
                        .as_ref()
                        .and_then(|p| p.advice.get(&job.id()).copied())
                        .unwrap_or(2);
                }
            }
            run
        }

        fn at(&mut self, now: f64, event: Event) -> Option<Plan> {
            let ctx = Context {
                topology: &self.topology,
                now,
                jobs: &self.jobs,
            };
            self.policy.decide(&ctx, &event)
        }
    }

    /// Job 0 starts alone with two threads and enters a region it never leaves; two more join at 0.5 s.
    /// Returns the run and the plan the joins gave.
    fn crowded(policy: &str) -> (Run, Plan) {
        let mut run = Run::new(policy, 1);
        let mut plan = None;
        for id in [1, 2] {
            run.jobs.push(waiting(id, JobKind::Malleable, 1, 2));
            plan = run.at(0.5, Event::Arrived { job: JobId(id) }).or(plan);
        }
        // CaSAS plans a newcomer only after probing it.
        let plan = plan.unwrap_or_default();
        for job in &mut run.jobs[1..] {
            job.started = Some(0.5);
            job.threads = plan.advice.get(&job.id()).copied().unwrap_or(2);
        }
        (run, plan)
    }

    #[test]
    fn taco_gives_a_job_that_keeps_its_threads_cpus_for_all_of_them() {
        let (mut run, plan) = crowded("taco");
        assert_eq!(plan.advice[&JobId(0)], 1, "TACO shrinks job 0 at first");
        let deadline = plan.timer.expect("a timer at the advice deadline");
        assert!(deadline <= 0.5 + ADVICE_DEADLINE + 1e-9);
        run.at(1.5, stuck(0, 1));
        let plan = run.at(0.5 + ADVICE_DEADLINE, Event::Timer).unwrap();
        assert_on_both_cpus(&plan, JobId(0));
    }

    /// `job` runs on both CPUs of the machine in every slot that holds it, and is in one.
    fn assert_on_both_cpus(plan: &Plan, job: JobId) {
        let widths: Vec<usize> = (0..plan.slots.len())
            .filter_map(|s| plan.cpus_in_slot(s, job).map(|c| c.len()))
            .collect();
        assert!(
            !widths.is_empty() && widths.iter().all(|&n| n == 2),
            "{job:?} runs on {widths:?} CPUs"
        );
    }

    #[test]
    fn every_policy_stops_advising_fewer_threads_than_a_job_keeps() {
        for policy in crate::names() {
            let (mut run, _) = crowded(policy);
            run.at(1.5, stuck(0, 1));
            let plan = run.at(0.5 + ADVICE_DEADLINE, Event::Timer);
            let shown = run.policy.shown_jobs(
                &Context {
                    topology: &run.topology,
                    now: 3.0,
                    jobs: &run.jobs,
                },
                None,
            );
            if run.policy.fixed.contains_key(&JobId(0)) {
                assert_eq!((shown[0].spec.kind, shown[0].threads), (JobKind::Rigid, 2));
                let advice = plan.and_then(|p| p.advice.get(&JobId(0)).copied());
                assert!(
                    advice.is_none_or(|a| a >= 2),
                    "{policy}: advised {advice:?}"
                );
            } else {
                assert_eq!(shown[0].spec.kind, JobKind::Malleable, "{policy}");
            }
        }
    }

    /// Asks for a change at `now` and applies it to `plan`, starting every job it places with
    /// `threads_at_start` threads or, if `None`, with its advice.
    fn change_at(
        run: &mut Run,
        plan: &mut Plan,
        now: f64,
        event: Event,
        threads_at_start: Option<u32>,
    ) -> Option<PlanChange> {
        let ctx = Context {
            topology: &run.topology,
            now,
            jobs: &run.jobs,
        };
        let change = run.policy.decide_change(&ctx, &event, plan)?;
        change.apply(plan);
        for job in &mut run.jobs {
            let placed = change.placed.iter().any(|p| p.job == job.id());
            if placed && job.started.is_none() {
                job.started = Some(now);
                let advice = plan.advice.get(&job.id()).copied();
                job.threads = threads_at_start.or(advice).unwrap_or(1);
            }
        }
        Some(change)
    }

    /// Two CPUs and two threads of advice for each job, in arrival order.
    struct Pairs;

    impl Policy for Pairs {
        fn name(&self) -> &str {
            "pairs"
        }

        fn decide(&mut self, ctx: &Context, _: &Event) -> Option<Plan> {
            let place = |(i, job): (usize, &ActiveJob)| cosched_core::Assignment {
                job: job.id(),
                cpus: (2 * i as u32..2 * i as u32 + 2).collect(),
            };
            let mut plan = Plan::space_sharing(ctx.jobs.iter().enumerate().map(place).collect());
            plan.advice = ctx.jobs.iter().map(|job| (job.id(), 2)).collect();
            Some(plan)
        }
    }

    #[test]
    fn a_job_that_starts_against_its_advice_is_caught_when_plans_come_as_changes() {
        let mut run = Run {
            topology: presets::machine("package:1 core:4").unwrap(),
            jobs: Vec::new(),
            policy: AdviceCheck::new(Box::new(Pairs)),
        };
        let mut plan = Plan::default();
        let arrive = |run: &mut Run, plan: &mut Plan, id: u32, now: f64, threads| {
            let mut job = waiting(id, JobKind::Malleable, 1, 4);
            std::sync::Arc::make_mut(&mut job.spec).arrival = now;
            run.jobs.push(job);
            change_at(run, plan, now, Event::Arrived { job: JobId(id) }, threads)
        };
        // Job 0 is advised 2 threads as it is placed but starts with 4 and never changes.
        arrive(&mut run, &mut plan, 0, 0.0, Some(4)).expect("job 0 placed");
        // Its advice is not new in the next change; that it started is what counts.
        let change = arrive(&mut run, &mut plan, 1, 0.5, None).expect("job 1 placed");
        assert!(!change.advice.contains_key(&JobId(0)));
        assert!(run.policy.fixed.is_empty());
        let late = 0.5 + ADVICE_DEADLINE + 0.1;
        change_at(&mut run, &mut plan, late, Event::Timer, None);
        assert!(
            run.policy.fixed.contains_key(&JobId(0)),
            "job 0 still counts as following advice it never applied"
        );
        assert!(
            !run.policy.fixed.contains_key(&JobId(1)),
            "job 1 started as advised"
        );
    }

    /// Seen on 16 CPUs: a job bound to one thread in its serial start was packed on one CPU, then ran
    /// sixteen threads there for the rest of the run.
    #[test]
    fn a_bound_job_that_grows_is_placed_again_for_all_its_threads() {
        let mut run = Run::new("gang", 1);
        let runs = |threads| {
            Event::Sample(Sample {
                os_threads: Some(threads),
                team_size: Some(threads),
                regions_started: Some(0),
                advice_seen: Some(false),
                ..Sample::new(JobId(0), 0.0, RateSource::ControlPage, 2, 1.0, 1.0)
            })
        };
        // Advised two threads as job 1 arrives, it runs one past the deadline.
        run.jobs[0].threads = 1;
        run.jobs.push(waiting(1, JobKind::Malleable, 1, 2));
        run.at(0.1, Event::Arrived { job: JobId(1) });
        run.at(0.2, runs(1));
        let late = 0.1 + ADVICE_DEADLINE + 0.1;
        run.at(late, Event::Timer);
        assert_eq!(run.policy.fixed.get(&JobId(0)), Some(&1));
        run.jobs.push(waiting(2, JobKind::Malleable, 1, 2));
        run.at(late, Event::Arrived { job: JobId(2) });
        // Its parallel region starts two threads.
        run.jobs[0].threads = 2;
        let plan = run.at(late + 0.1, runs(2)).expect("job 0 placed again");
        assert_eq!(run.policy.fixed.get(&JobId(0)), Some(&2));
        assert_on_both_cpus(&plan, JobId(0));
    }

    #[test]
    fn a_job_that_follows_is_left_to_the_policy() {
        let (mut run, plan) = crowded("taco");
        assert_eq!(plan.advice[&JobId(0)], 1);
        run.jobs[0].threads = 1;
        run.at(
            1.0,
            Event::ThreadsChanged {
                job: JobId(0),
                threads: 1,
            },
        );
        let plan = run.at(2.5, Event::Timer);
        assert!(run.policy.fixed.is_empty());
        assert!(plan.is_none_or(|p| p.advice[&JobId(0)] == 1));
    }
}
