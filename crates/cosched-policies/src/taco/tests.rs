//! Behaviour of the whole policy: Fig. 2's schedules, equal CPU time, alignment, grace, opt-out.

use super::*;
use cosched_core::test_util::waiting;
use cosched_core::topology::{presets, synthetic};
use cosched_core::{ActiveJob, JobId, JobKind, Topology};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn job(id: u32) -> ActiveJob {
    waiting(id, JobKind::Malleable, 1, 1024)
}

/// Delivers `event` and marks every placed job started with its advice, as an executor would.
fn step(
    policy: &mut Taco,
    topo: &Topology,
    jobs: &mut [ActiveJob],
    now: f64,
    event: Event,
) -> Option<Plan> {
    let plan = policy.decide(
        &Context {
            topology: topo,
            now,
            jobs,
        },
        &event,
    )?;
    for job in jobs.iter_mut() {
        if plan.placed_jobs().contains(&job.id()) && job.started.is_none() {
            job.started = Some(now);
            job.threads = plan.advice[&job.id()];
        }
    }
    Some(plan)
}

/// Delivers the arrival of job `id`, already in `jobs`.
fn arrive(
    policy: &mut Taco,
    topo: &Topology,
    jobs: &mut [ActiveJob],
    now: f64,
    id: u32,
) -> Option<Plan> {
    step(policy, topo, jobs, now, Event::Arrived { job: JobId(id) })
}

/// Runs `n` arrivals and returns the last plan.
fn arrivals(policy: &mut Taco, topo: &Topology, n: u32) -> (Vec<ActiveJob>, Plan) {
    let mut jobs = Vec::new();
    let mut plan = Plan::default();
    for id in 0..n {
        jobs.push(job(id));
        plan = step(
            policy,
            topo,
            &mut jobs,
            id as f64,
            Event::Arrived { job: JobId(id) },
        )
        .unwrap();
    }
    (jobs, plan)
}

/// CPU-seconds per second of each job: Σ over slots of (slot share × CPUs held).
fn cpu_time(plan: &Plan) -> BTreeMap<JobId, f64> {
    let cycle = plan.cycle_length();
    let mut time = BTreeMap::new();
    for slot in &plan.slots {
        for a in &slot.assignments {
            *time.entry(a.job).or_insert(0.0) += slot.length / cycle * a.cpus.len() as f64;
        }
    }
    for a in &plan.pinned {
        *time.entry(a.job).or_insert(0.0) += a.cpus.len() as f64;
    }
    time
}

fn assert_aligned(topo: &Topology, plan: &Plan) {
    for slot in &plan.slots {
        for (i, a) in slot.assignments.iter().enumerate() {
            assert!(
                topo.partitions(a.cpus.len()).contains(&a.cpus),
                "{} is not an aligned partition",
                a.cpus
            );
            for b in &slot.assignments[i + 1..] {
                assert!(
                    a.cpus.is_disjoint(&b.cpus),
                    "{} and {} overlap in a slot",
                    a.cpus,
                    b.cpus
                );
            }
        }
    }
}

/// Full TACO as in a settled state, where every job has adapted (no grace period pending).
fn settled(hysteresis: f64) -> TacoOptions {
    TacoOptions {
        hysteresis,
        grace: None,
        ..TacoOptions::full()
    }
}

/// TACO Fig. 2: the schedules for one to eight jobs on the dual-socket dual-core machine, with §2.2
/// balancing and no hysteresis. Each slot is written as (length relative to the shortest slot, the
/// partition sizes running in it); the finest level comes first.
#[test]
fn figure_2_schedules_for_one_to_eight_jobs() {
    let topo = synthetic::parse("package:2 core:2").unwrap();
    let expected: [&[(f64, &[usize])]; 8] = [
        &[(1.0, &[4])],
        &[(1.0, &[2, 2])],
        &[(2.0, &[2, 2]), (1.0, &[4])],
        &[(1.0, &[1, 1, 1, 1])],
        &[(4.0, &[1, 1, 1, 1]), (1.0, &[4])],
        &[(2.0, &[1, 1, 1, 1]), (1.0, &[2, 2])],
        &[(4.0, &[1, 1, 1, 1]), (2.0, &[2, 2]), (1.0, &[4])],
        &[(1.0, &[1, 1, 1, 1]), (1.0, &[1, 1, 1, 1])],
    ];
    for (n, expected) in (1..=8).zip(expected) {
        let mut taco = Taco::new("taco", settled(0.0));
        let (_, plan) = arrivals(&mut taco, &topo, n);
        let shortest = plan
            .slots
            .iter()
            .map(|s| s.length)
            .fold(f64::INFINITY, f64::min);
        let got: Vec<(f64, Vec<usize>)> = plan
            .slots
            .iter()
            .map(|s| {
                (
                    (s.length / shortest * 1e6).round() / 1e6,
                    s.assignments.iter().map(|a| a.cpus.len()).collect(),
                )
            })
            .collect();
        let want: Vec<(f64, Vec<usize>)> = expected.iter().map(|(l, s)| (*l, s.to_vec())).collect();
        assert_eq!(got, want, "{n} jobs");
        assert_aligned(&topo, &plan);
        for time in cpu_time(&plan).values() {
            assert!((time - 4.0 / n as f64).abs() < 1e-9, "{n} jobs: {time}");
        }
    }
}

#[test]
fn a_job_promoted_to_a_coarser_level_moves_nobody_else() {
    // Four jobs fill the cores; the fifth is odd and goes to the whole machine (§2.2), in a slot of
    // its own after the cores' slot, which keeps its number and its jobs.
    let topo = synthetic::parse("package:2 core:2").unwrap();
    let mut taco = Taco::new("taco", settled(0.0));
    let (mut jobs, before) = arrivals(&mut taco, &topo, 4);
    jobs.push(job(4));
    let after = arrive(&mut taco, &topo, &mut jobs, 4.0, 4).unwrap();
    let change = PlanChange::between(&before, &after);
    assert!(change.removed.is_empty(), "{change:?}");
    let placed: Vec<(usize, JobId)> = change.placed.iter().map(|p| (p.slot, p.job)).collect();
    assert_eq!(placed, vec![(1, JobId(4))]);
}

#[test]
fn a_job_on_a_coarser_level_is_promoted_before_newer_ones() {
    // §2.2 moves the jobs already on the coarser level first, then the latest. Three jobs share the
    // packages, the third odd one on the whole machine; two more arrive at once and all five go to
    // the cores, one of them odd: the third job keeps the whole machine, where the latest would be
    // the fifth.
    let topo = synthetic::parse("package:2 core:2").unwrap();
    let mut taco = Taco::new("taco", settled(0.0));
    let (mut jobs, plan) = arrivals(&mut taco, &topo, 3);
    assert_eq!(on_the_whole_machine(&plan), vec![JobId(2)]);
    jobs.extend([job(3), job(4)]);
    let plan = arrive(&mut taco, &topo, &mut jobs, 3.0, 4).unwrap();
    assert_eq!(on_the_whole_machine(&plan), vec![JobId(2)]);
}

/// The jobs of `plan` given all four CPUs of a two-package dual-core machine.
fn on_the_whole_machine(plan: &Plan) -> Vec<JobId> {
    plan.slots
        .iter()
        .flat_map(|s| &s.assignments)
        .filter(|a| a.cpus.len() == 4)
        .map(|a| a.job)
        .collect()
}

#[test]
fn every_job_gets_the_same_cpu_time_for_1_to_64_jobs() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut taco = Taco::new("taco", settled(DEFAULT_HYSTERESIS));
    let mut jobs = Vec::new();
    for id in 0..64u32 {
        jobs.push(job(id));
        let plan = step(
            &mut taco,
            &topo,
            &mut jobs,
            id as f64,
            Event::Arrived { job: JobId(id) },
        )
        .unwrap();
        assert_aligned(&topo, &plan);
        let times = cpu_time(&plan);
        assert_eq!(times.len(), jobs.len());
        let fair = 24.0 / jobs.len() as f64;
        for (job, time) in &times {
            assert!(
                ((time - fair) / fair).abs() < 0.01,
                "{} jobs: job {job} gets {time}, fair {fair}",
                jobs.len()
            );
        }
    }
}

#[test]
fn basic_taco_coschedules_on_the_papers_levels() {
    // TACO §4.2: 2-3 jobs on 12-core halves, 4-7 on packages.
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut taco = Taco::new("taco-basic", TacoOptions::basic());
    let (_, plan) = arrivals(&mut taco, &topo, 7);
    assert_eq!(plan.slots.len(), 2);
    assert!(plan
        .slots
        .iter()
        .flat_map(|s| &s.assignments)
        .all(|a| a.cpus.len() == 6));
    assert!(plan.advice.values().all(|t| *t == 6));
}

#[test]
fn arrivals_within_a_level_move_nobody() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut taco = Taco::new("taco-basic", TacoOptions::basic());
    let (_, before) = arrivals(&mut taco, &topo, 5);
    let (_, after) = arrivals(&mut Taco::new("taco-basic", TacoOptions::basic()), &topo, 6);
    let place = |plan: &Plan, job| {
        plan.slots
            .iter()
            .flat_map(|s| &s.assignments)
            .find(|a| a.job == JobId(job))
            .unwrap()
            .cpus
            .clone()
    };
    for job in 0..5 {
        assert_eq!(place(&before, job), place(&after, job));
    }
}

/// On 2 × 2 CPUs with a 5 s grace: job 0 arrives at 0 s and takes all CPUs, job 1 arrives at 1 s.
fn second_arrival_in_grace() -> (Taco, Topology, Vec<ActiveJob>, Plan) {
    let topo = synthetic::parse("package:2 core:2").unwrap();
    let mut options = TacoOptions::full();
    options.hysteresis = 0.0;
    options.grace = Some(5.0);
    let mut taco = Taco::new("taco", options);
    let mut jobs = vec![job(0)];
    arrive(&mut taco, &topo, &mut jobs, 0.0, 0);
    jobs.push(job(1));
    let plan = arrive(&mut taco, &topo, &mut jobs, 1.0, 1).unwrap();
    (taco, topo, jobs, plan)
}

#[test]
fn grace_keeps_the_old_partition_until_the_job_adapts() {
    let (mut taco, topo, mut jobs, plan) = second_arrival_in_grace();
    // Job 0 is asked for 2 threads but keeps all 4 CPUs, in a level of its own, until it adapts.
    assert_eq!(plan.advice[&JobId(0)], 2);
    let last = plan.slots.len() - 1;
    assert_eq!(plan.cpus_in_slot(last, JobId(0)).map(|c| c.len()), Some(4));
    assert_eq!(plan.timer, Some(6.0));
    let times = cpu_time(&plan);
    assert!(
        (times[&JobId(0)] - times[&JobId(1)]).abs() < 1e-9,
        "weighted levels keep it fair"
    );
    jobs[0].threads = 2;
    let plan = step(
        &mut taco,
        &topo,
        &mut jobs,
        2.0,
        Event::ThreadsChanged {
            job: JobId(0),
            threads: 2,
        },
    )
    .unwrap();
    assert_eq!(plan.slots.len(), 1);
    assert_eq!(plan.timer, None);
    assert!(plan.slots[0].assignments.iter().all(|a| a.cpus.len() == 2));
}

#[test]
fn a_thread_change_outside_a_grace_period_leaves_the_plan_alone() {
    let (mut taco, topo, mut jobs, _) = second_arrival_in_grace();
    // Job 1 arrived into its partition and has no grace to end; job 0 still waits in its own.
    jobs[1].threads = 1;
    let event = Event::ThreadsChanged {
        job: JobId(1),
        threads: 1,
    };
    assert!(step(&mut taco, &topo, &mut jobs, 2.0, event).is_none());
    jobs[0].threads = 2;
    let event = Event::ThreadsChanged {
        job: JobId(0),
        threads: 2,
    };
    assert!(step(&mut taco, &topo, &mut jobs, 2.5, event).is_some());
}

#[test]
fn grace_ends_at_the_timer() {
    let (mut taco, topo, mut jobs, _) = second_arrival_in_grace();
    let plan = step(&mut taco, &topo, &mut jobs, 6.0, Event::Timer).unwrap();
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).map(|c| c.len()), Some(2));
    assert_eq!(plan.timer, None);
}

#[test]
fn opted_out_jobs_are_pinned_apart_and_never_frozen() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut taco = Taco::new("taco", TacoOptions::full());
    let mut jobs: Vec<ActiveJob> = (0..6).map(job).collect();
    std::sync::Arc::make_mut(&mut jobs[5].spec).coschedule = false;
    let plan = arrive(&mut taco, &topo, &mut jobs, 0.0, 5).unwrap();
    assert_eq!(plan.pinned.len(), 1);
    let pinned = &plan.pinned[0].cpus;
    assert!(plan.slots.iter().all(|s| s
        .assignments
        .iter()
        .all(|a| a.job != JobId(5) && a.cpus.is_disjoint(pinned))));
    assert_aligned(&topo, &plan);
}

#[test]
fn weights_scale_cpu_time() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut taco = Taco::new("taco", TacoOptions::full());
    let mut jobs: Vec<ActiveJob> = (0..4).map(job).collect();
    std::sync::Arc::make_mut(&mut jobs[0].spec).weight = 2.0;
    std::sync::Arc::make_mut(&mut jobs[1].spec).max_threads = 3;
    let plan = arrive(&mut taco, &topo, &mut jobs, 0.0, 3).unwrap();
    let times = cpu_time(&plan);
    assert!(
        (times[&JobId(0)] / times[&JobId(2)] - 2.0).abs() < 1e-9,
        "{times:?}"
    );
    // A job that can use only 3 threads gets a 3-CPU partition for longer: the same CPU time.
    assert!(
        (times[&JobId(1)] / times[&JobId(2)] - 1.0).abs() < 1e-9,
        "{times:?}"
    );
    assert_eq!(plan.advice[&JobId(1)], 3);
}

#[test]
fn restricted_sizes_are_the_only_sizes_used() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut options = TacoOptions::basic();
    options.apply("sizes=1/6/24").unwrap();
    let mut taco = Taco::new("taco", options);
    for n in [1, 3, 5, 12, 30] {
        let (_, plan) = arrivals(&mut taco, &topo, n);
        assert!(plan
            .slots
            .iter()
            .flat_map(|s| &s.assignments)
            .all(|a| [1, 6, 24].contains(&a.cpus.len())));
        taco = Taco::new("taco", taco.options.clone());
    }
}

#[test]
fn local_units_split_and_merge_on_their_own() {
    let topo = synthetic::parse("package:2 core:2").unwrap();
    let mut taco = Taco::new("taco-local", TacoOptions::local());
    let (mut jobs, plan) = arrivals(&mut taco, &topo, 3);
    // With hysteresis, the third job splits the machine into packages; one package takes two jobs.
    let sizes: Vec<usize> = plan
        .slots
        .iter()
        .flat_map(|s| &s.assignments)
        .map(|a| a.cpus.len())
        .collect();
    assert!(sizes.iter().all(|s| *s == 2), "{sizes:?}");
    jobs.retain(|j| j.id() != JobId(1));
    let plan = step(
        &mut taco,
        &topo,
        &mut jobs,
        5.0,
        Event::Finished { job: JobId(1) },
    )
    .unwrap();
    // The emptied package takes a job from its sibling rather than merging.
    assert_eq!(plan.slots.len(), 1);
    assert!(plan.slots[0].assignments.iter().all(|a| a.cpus.len() == 2));
    jobs.retain(|j| j.id() != JobId(2));
    let plan = step(
        &mut taco,
        &topo,
        &mut jobs,
        6.0,
        Event::Finished { job: JobId(2) },
    )
    .unwrap();
    assert_eq!(
        plan.slots[0].assignments[0].cpus.len(),
        4,
        "siblings hand their job back to the system"
    );
}

proptest! {
    /// Random arrivals and departures under every variant: every partition is aligned, slots never
    /// overlap, every job is placed up to `mpl` per CPU.
    #[test]
    fn random_sequences_keep_plans_aligned(
        machine in prop::sample::select(vec!["taco-opteron8435", "gang-opteron8380", "package:2 core:2"]),
        variant in 0usize..3,
        ops in prop::collection::vec((any::<bool>(), 0usize..64), 1..60),
    ) {
        let topo = presets::machine(machine).unwrap();
        let options = [TacoOptions::full(), TacoOptions::basic(), TacoOptions::local()][variant].clone();
        let mut taco = Taco::new("taco", options);
        let mut jobs: Vec<ActiveJob> = Vec::new();
        let mut next = 0;
        for (t, (arrive, pick)) in ops.into_iter().enumerate() {
            let event = if arrive || jobs.is_empty() {
                jobs.push(job(next));
                next += 1;
                Event::Arrived { job: JobId(next - 1) }
            } else {
                let gone = jobs.remove(pick % jobs.len()).id();
                Event::Finished { job: gone }
            };
            let plan = step(&mut taco, &topo, &mut jobs, t as f64, event).unwrap();
            assert_aligned(&topo, &plan);
            let admitted = jobs.len().min(super::DEFAULT_MPL * topo.num_cpus());
            prop_assert_eq!(plan.placed_jobs().len(), admitted);
        }
    }
}

#[test]
fn a_started_moldable_job_keeps_a_partition_its_threads_fit() {
    let topo = synthetic::parse("core:2").unwrap();
    let mut taco = Taco::new("taco", settled(0.0));
    let mut jobs = vec![waiting(0, JobKind::Moldable, 1, 2)];
    arrive(&mut taco, &topo, &mut jobs, 0.0, 0);
    assert_eq!(jobs[0].threads, 2);
    jobs.push(job(1));
    arrive(&mut taco, &topo, &mut jobs, 1.0, 1);
    jobs.push(job(2));
    let plan = arrive(&mut taco, &topo, &mut jobs, 2.0, 2).unwrap();
    for (slot, contents) in plan.slots.iter().enumerate() {
        for id in 0..3 {
            if let Some(cpus) = plan.cpus_in_slot(slot, JobId(id)) {
                let want = if id == 0 { 2 } else { 1 };
                assert_eq!(cpus.len(), want, "job {id} in {contents:?}");
            }
        }
    }
    let times = cpu_time(&plan);
    assert!(
        (0..3).all(|id| (times[&JobId(id)] - times[&JobId(1)]).abs() < 0.01 * times[&JobId(1)]),
        "equal CPU time: {times:?}"
    );
}

/// One policy answering with changes (and its shortcuts), one with full plans, fed the same events.
struct Twins {
    topo: Topology,
    shortcut: Taco,
    full: Taco,
    plan: Plan,
}

impl Twins {
    /// Delivers `event` to both, checks that the shortcut's plan is the full one (up to assignment
    /// order), marks placed jobs started with their advice, and returns the (slot, job) pairs moved.
    fn deliver(&mut self, jobs: &mut [ActiveJob], now: f64, event: Event) -> usize {
        let ctx = Context {
            topology: &self.topo,
            now,
            jobs,
        };
        let change = self.shortcut.decide_change(&ctx, &event, &self.plan);
        let full = self.full.decide(&ctx, &event);
        let moved = change
            .as_ref()
            .map_or(0, |c| c.removed.len() + c.placed.len());
        match (change, full) {
            (Some(change), Some(full)) => {
                change.apply(&mut self.plan);
                assert_eq!(
                    sorted(&self.plan),
                    sorted(&full),
                    "after {event:?} at {now}"
                );
            }
            (None, Some(full)) => assert_eq!(sorted(&self.plan), sorted(&full), "{event:?}"),
            (change, None) => assert!(change.is_none(), "{event:?}: a change without a plan"),
        }
        for job in jobs.iter_mut() {
            if job.started.is_none() && self.plan.placed_jobs().contains(&job.id()) {
                job.started = Some(now);
                job.threads = self.plan.advice[&job.id()];
            }
        }
        moved
    }

    /// Every started job adopts its advice, as malleable programs do at their next region.
    fn adapt(&mut self, jobs: &mut [ActiveJob], now: f64) {
        for i in 0..jobs.len() {
            let id = jobs[i].id();
            match self.plan.advice.get(&id) {
                Some(&threads) if jobs[i].started.is_some() && jobs[i].threads != threads => {
                    jobs[i].threads = threads;
                    self.deliver(jobs, now, Event::ThreadsChanged { job: id, threads });
                }
                _ => {}
            }
        }
    }
}

fn sorted(plan: &Plan) -> Plan {
    let mut plan = plan.clone();
    for slot in &mut plan.slots {
        slot.assignments.sort_by_key(|a| a.job);
    }
    plan
}

#[test]
fn under_a_long_queue_a_finished_jobs_place_goes_to_the_next_as_a_full_plan_would_give_it() {
    let options = TacoOptions {
        mpl: 2,
        ..TacoOptions::full()
    };
    let mut twins = Twins {
        topo: synthetic::parse("package:2 core:2").unwrap(),
        shortcut: Taco::new("taco", options.clone()),
        full: Taco::new("taco", options),
        plan: Plan::default(),
    };
    let mut jobs = Vec::new();
    let mut now = 0.0;
    for id in 0..30 {
        now += 0.1;
        jobs.push(job(id));
        twins.deliver(&mut jobs, now, Event::Arrived { job: JobId(id) });
        twins.adapt(&mut jobs, now);
    }
    // 8 jobs admitted on 4 CPUs, two to a core, 22 in the queue; then jobs end here and there.
    let mut small = 0;
    for k in 0..30 {
        now += 0.1;
        let started: Vec<usize> = (0..jobs.len())
            .filter(|&i| jobs[i].started.is_some())
            .collect();
        let gone = jobs.remove(started[k * 5 % started.len()]).id();
        let moved = twins.deliver(&mut jobs, now, Event::Finished { job: gone });
        small += usize::from(jobs.len() >= 8 && moved <= 4);
        twins.adapt(&mut jobs, now);
    }
    assert!(jobs.is_empty());
    assert!(small >= 20, "only {small} hand-overs moved one lane");
}

/// What happens next in [`a_plan_made_of_changes_is_the_full_plan_through_any_events`].
#[derive(Debug, Clone)]
enum Step {
    /// A job arrives: malleable, moldable or rigid, with at most this many threads.
    Arrive(u8, u32),
    /// The started job at this position (modulo their count) ends.
    Finish(usize),
    /// Started jobs adopt their advice, each told of at once (as an engine does with the thread
    /// changes of one instant), or one by one.
    Adapt { together: bool, every: usize },
    /// Time passes: a second, then a timer (which may end grace periods).
    Wait,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..3, 1u32..9).prop_map(|(kind, threads)| Step::Arrive(kind, threads)),
        2 => any::<usize>().prop_map(Step::Finish),
        3 => (any::<bool>(), 1usize..4).prop_map(|(together, every)| Step::Adapt { together, every }),
        1 => Just(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the arrivals, finishes, adaptations (some jobs adapting, others not yet) and
    /// timers, the policy that answers with changes and takes its shortcuts (hand-overs, jobs that
    /// adapted) gives exactly the plans of one that plans in full every time.
    #[test]
    fn a_plan_made_of_changes_is_the_full_plan_through_any_events(
        steps in prop::collection::vec(arb_step(), 1..60),
    ) {
        let options = TacoOptions { mpl: 2, ..TacoOptions::full() };
        let mut twins = Twins {
            topo: synthetic::parse("package:2 l3:1 core:4").unwrap(),
            shortcut: Taco::new("taco", options.clone()),
            full: Taco::new("taco", options),
            plan: Plan::default(),
        };
        let mut jobs: Vec<ActiveJob> = Vec::new();
        let mut now = 0.0;
        let mut next_id = 0;
        for step in steps {
            now += 0.01;
            match step {
                Step::Arrive(kind, threads) => {
                    let kind = [JobKind::Malleable, JobKind::Moldable, JobKind::Rigid][kind as usize];
                    jobs.push(waiting(next_id, kind, 1, threads));
                    twins.deliver(&mut jobs, now, Event::Arrived { job: JobId(next_id) });
                    next_id += 1;
                }
                Step::Finish(k) => {
                    let started: Vec<usize> =
                        (0..jobs.len()).filter(|&i| jobs[i].started.is_some()).collect();
                    if started.is_empty() {
                        continue;
                    }
                    let gone = jobs.remove(started[k % started.len()]).id();
                    twins.deliver(&mut jobs, now, Event::Finished { job: gone });
                }
                Step::Adapt { together, every } => {
                    let adapting: Vec<(usize, u32)> = (0..jobs.len())
                        .filter(|&i| jobs[i].started.is_some() && jobs[i].spec.kind == JobKind::Malleable)
                        .filter_map(|i| {
                            let advice = *twins.plan.advice.get(&jobs[i].id())?;
                            (jobs[i].threads != advice).then_some((i, advice))
                        })
                        .step_by(every)
                        .collect();
                    if together {
                        for &(i, threads) in &adapting {
                            jobs[i].threads = threads;
                        }
                    }
                    for (i, threads) in adapting {
                        jobs[i].threads = threads;
                        let job = jobs[i].id();
                        twins.deliver(&mut jobs, now, Event::ThreadsChanged { job, threads });
                    }
                }
                Step::Wait => {
                    now += 1.0;
                    twins.deliver(&mut jobs, now, Event::Timer);
                }
            }
        }
    }
}

/// `count` malleable jobs of up to 16 threads of `user`, ids from `first`, arriving at their ids.
fn users_jobs(user: u32, first: u32, count: u32) -> Vec<ActiveJob> {
    (first..first + count)
        .map(|id| {
            cosched_core::test_util::job(id)
                .arrival(f64::from(id))
                .threads(1, 16)
                .owner(user, 1.0)
                .waiting()
        })
        .collect()
}

/// Each user's CPU-seconds per second under `plan`.
fn cpu_time_by_user(plan: &Plan, jobs: &[ActiveJob]) -> BTreeMap<u32, f64> {
    let mut time = BTreeMap::new();
    for (job, cpus) in cpu_time(plan) {
        let user = jobs
            .iter()
            .find(|j| j.id() == job)
            .unwrap()
            .spec
            .owner
            .unwrap()
            .user;
        *time.entry(user).or_insert(0.0) += cpus;
    }
    time
}

/// The plan once every job of `jobs` has arrived, one after another, under `options`.
fn plan_after_arrivals(options: TacoOptions, topo: &Topology, mut jobs: Vec<ActiveJob>) -> Plan {
    let mut taco = Taco::new("taco", options);
    let mut plan = None;
    for k in 0..jobs.len() {
        let id = jobs[k].id();
        let seen = &mut jobs[..=k];
        plan = step(&mut taco, topo, seen, k as f64, Event::Arrived { job: id }).or(plan);
    }
    plan.unwrap()
}

#[test]
fn a_users_one_job_gets_the_cpu_time_another_users_seven_get() {
    let topo = synthetic::parse("package:2 core:8").unwrap();
    for (name, options) in [
        ("taco", settled(DEFAULT_HYSTERESIS)),
        ("taco-basic", TacoOptions::basic()),
    ] {
        let mut jobs = users_jobs(65534, 0, 7);
        jobs.extend(users_jobs(1000, 7, 1));
        let plan = plan_after_arrivals(options, &topo, jobs.clone());
        assert_aligned(&topo, &plan);
        let time = cpu_time_by_user(&plan, &jobs);
        assert!((time[&1000] - 8.0).abs() < 0.1, "{name}: {time:?}");
        assert!((time[&65534] - 8.0).abs() < 0.1, "{name}: {time:?}");
    }
}

#[test]
fn after_a_flood_of_one_users_jobs_the_next_place_goes_to_another_user() {
    let topo = synthetic::parse("package:2 core:8").unwrap();
    // 4 jobs per CPU are admitted: the flood's 70 fill them all before the other user's job comes.
    let mut jobs = users_jobs(65534, 0, 70);
    jobs.extend(users_jobs(1000, 70, 1));
    let mut taco = Taco::new("taco", settled(DEFAULT_HYSTERESIS));
    for k in 0..jobs.len() {
        let id = jobs[k].id();
        step(
            &mut taco,
            &topo,
            &mut jobs[..=k],
            k as f64,
            Event::Arrived { job: id },
        );
    }
    assert!(jobs[70].started.is_none(), "admitted past the limit");
    jobs.remove(0);
    let now = jobs.len() as f64;
    let plan = step(
        &mut taco,
        &topo,
        &mut jobs,
        now,
        Event::Finished { job: JobId(0) },
    )
    .unwrap();
    assert!(
        jobs[63].started.is_none(),
        "the flood's next job went first"
    );
    let time = cpu_time_by_user(&plan, &jobs);
    assert!((time[&1000] - 8.0).abs() < 0.5, "{time:?}");
    let busy: f64 = time.values().sum();
    assert!(busy > 15.9, "CPUs left idle: {time:?}");
}

#[test]
fn under_local_taco_a_users_one_job_takes_longer_turns_than_another_users_seven() {
    let topo = synthetic::parse("package:2 core:8").unwrap();
    let local = TacoOptions {
        local: true,
        ..TacoOptions::basic()
    };
    let lone = |owned: bool| {
        let mut jobs = users_jobs(65534, 0, 7);
        jobs.extend(users_jobs(1000, 7, 1));
        if !owned {
            for job in &mut jobs {
                let spec = JobSpec {
                    owner: None,
                    ..JobSpec::clone(&job.spec)
                };
                *job = ActiveJob::new(Arc::new(spec), None, 0);
            }
        }
        let plan = plan_after_arrivals(local.clone(), &topo, jobs);
        cpu_time(&plan)[&JobId(7)]
    };
    // Without owners it takes one turn in four in its package's unit: 2 CPUs.
    assert!((lone(false) - 2.0).abs() < 0.1, "{}", lone(false));
    assert!(lone(true) > 5.0, "{}", lone(true));
}
