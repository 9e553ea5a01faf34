use super::*;
use cosched_core::test_util::waiting;
use cosched_core::topology::presets;
use cosched_core::Topology;

/// The plan for the last of `jobs` arriving at `now`.
fn arrive(auto: &mut Auto, topo: &Topology, now: f64, jobs: &[ActiveJob]) -> Plan {
    let ctx = Context {
        topology: topo,
        now,
        jobs,
    };
    auto.decide(
        &ctx,
        &Event::Arrived {
            job: jobs.last().unwrap().id(),
        },
    )
    .unwrap()
}

/// The plan once every arrival at `now` is in: after the timer a plan gathering them asks for.
fn decide(auto: &mut Auto, topo: &Topology, now: f64, jobs: &[ActiveJob]) -> Plan {
    let plan = arrive(auto, topo, now, jobs);
    if plan.timer != Some(now) {
        return plan;
    }
    let ctx = Context {
        topology: topo,
        now,
        jobs,
    };
    auto.decide(&ctx, &Event::Timer).unwrap()
}

fn started(mut job: ActiveJob, threads: u32) -> ActiveJob {
    job.started = Some(0.0);
    job.threads = threads;
    job
}

#[test]
fn a_fixed_job_is_coscheduled_at_its_threads_and_elastic_jobs_share_the_rest() {
    let topo = presets::preset("gang-opteron8380").unwrap();
    let jobs = vec![
        started(waiting(0, JobKind::Rigid, 4, 4), 4),
        started(waiting(1, JobKind::Rigid, 4, 4), 4),
        waiting(2, JobKind::Malleable, 1, 16),
        waiting(3, JobKind::Malleable, 1, 16),
    ];
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    // Half the jobs are fixed: they get half the machine, side by side; the elastic ones the rest.
    assert_eq!(plan.slots.len(), 1);
    for rigid in [0, 1] {
        assert_eq!(plan.cpus_in_slot(0, JobId(rigid)).unwrap().len(), 4);
        assert_eq!(plan.advice[&JobId(rigid)], 4);
    }
    for elastic in [2, 3] {
        assert_eq!(plan.cpus_in_slot(0, JobId(elastic)).unwrap().len(), 4);
        assert_eq!(plan.advice[&JobId(elastic)], 4);
    }
}

#[test]
fn fixed_jobs_that_outnumber_their_share_take_turns_beside_the_elastic_ones() {
    let topo = presets::preset("gang-opteron8380").unwrap();
    let mut jobs: Vec<ActiveJob> = (0..3)
        .map(|i| started(waiting(i, JobKind::Rigid, 4, 4), 4))
        .collect();
    jobs.extend((3..6).map(|i| waiting(i, JobKind::Malleable, 1, 16)));
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    let slots = plan.slots.len();
    assert!(slots >= 2, "three 4-thread jobs in 8 CPUs take turns");
    for rigid in 0..3 {
        let cpus: Vec<usize> = (0..slots)
            .filter_map(|s| plan.cpus_in_slot(s, JobId(rigid)).map(|c| c.len()))
            .collect();
        assert!(!cpus.is_empty() && cpus.iter().all(|&n| n == 4), "{cpus:?}");
    }
    for elastic in 3..6 {
        for slot in 0..slots {
            assert!(
                plan.cpus_in_slot(slot, JobId(elastic)).is_some(),
                "never stops"
            );
        }
    }
}

#[test]
fn with_no_cpu_beside_a_fixed_job_the_others_take_turns_instead_of_waiting() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let jobs = vec![
        started(waiting(0, JobKind::Rigid, 2, 2), 2),
        waiting(1, JobKind::Malleable, 1, 2),
        waiting(2, JobKind::Malleable, 1, 2),
    ];
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    assert_eq!(plan.slots.len(), 2);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).unwrap().len(), 2);
    assert_eq!(plan.cpus_in_slot(1, JobId(1)).unwrap().len(), 1);
    assert_eq!(plan.cpus_in_slot(1, JobId(2)).unwrap().len(), 1);
}

#[test]
fn more_single_threaded_tasks_than_cpus_take_turns() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let jobs: Vec<ActiveJob> = (0..5).map(|i| waiting(i, JobKind::Rigid, 1, 1)).collect();
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    assert_eq!(plan.placed_jobs().len(), 5, "nobody waits");
    for slot in &plan.slots {
        assert!(slot.assignments.len() <= 2);
    }
}

fn estimated(id: u32, arrival: f64, runtime: f64) -> ActiveJob {
    let mut job = waiting(id, JobKind::Malleable, 1, 2);
    let spec = std::sync::Arc::make_mut(&mut job.spec);
    spec.arrival = arrival;
    spec.hints.runtime = Some(runtime);
    job
}

#[test]
fn known_run_times_of_unknown_scaling_run_the_least_remaining_first_at_full_width() {
    // As BP shortest-first: a user with the times alone at hand would do no worse.
    let topo = presets::machine("package:1 core:2").unwrap();
    let jobs = vec![
        estimated(0, 0.0, 30.0),
        estimated(1, 0.0, 5.0),
        estimated(2, 0.0, 9.0),
    ];
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    assert_eq!(plan.slots.len(), 1);
    assert_eq!(plan.cpus_in_slot(0, JobId(1)).unwrap().len(), 2);
    assert_eq!(plan.advice[&JobId(1)], 2);
    assert_eq!(plan.cpus_in_slot(0, JobId(2)), None);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)), None);
    assert_eq!(plan.timer, Some(15.0), "when the shortest job turns urgent");
}

#[test]
fn a_job_alone_with_known_run_time_takes_the_whole_machine() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let plan = decide(&mut Auto::default(), &topo, 0.0, &[estimated(0, 0.0, 3.0)]);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).unwrap().len(), 2);
    assert_eq!(plan.advice[&JobId(0)], 2);
}

#[test]
fn a_fixed_spinning_job_with_known_run_time_is_never_squeezed() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let mut spinner = started(waiting(0, JobKind::Rigid, 2, 2), 2);
    let hints = &mut std::sync::Arc::make_mut(&mut spinner.spec).hints;
    hints.runtime = Some(3.0);
    hints.sync = SyncKind::Spin;
    let mut moldable = waiting(1, JobKind::Moldable, 1, 2);
    std::sync::Arc::make_mut(&mut moldable.spec).hints.runtime = Some(1.0);
    let plan = decide(&mut Auto::default(), &topo, 0.0, &[spinner, moldable]);
    assert_eq!(
        plan.cpus_in_slot(0, JobId(1)).unwrap().len(),
        2,
        "shorter first"
    );
    assert_eq!(
        plan.advice[&JobId(1)],
        2,
        "a moldable job starts at its full width"
    );
    assert_eq!(
        plan.cpus_in_slot(0, JobId(0)),
        None,
        "waits rather than spin on one CPU"
    );
}

#[test]
fn a_job_that_waited_long_enough_goes_before_shorter_newcomers() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let mut auto = Auto::default();
    let jobs = vec![
        estimated(0, 0.0, 5.0),
        estimated(1, 14.0, 1.0),
        estimated(2, 14.0, 1.0),
    ];
    let plan = decide(&mut auto, &topo, 14.0, &jobs);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)), None, "shorter first");
    let plan = decide(&mut auto, &topo, 15.0, &jobs);
    assert!(
        plan.cpus_in_slot(0, JobId(0)).is_some(),
        "waited 3 × 5 s: now first"
    );
}

#[test]
fn a_known_task_bag_is_dealt_longest_first_and_each_cpu_runs_its_shortest_first() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let task = |id, runtime| {
        let mut job = waiting(id, JobKind::Rigid, 1, 1);
        let spec = std::sync::Arc::make_mut(&mut job.spec);
        spec.arrival = 0.0;
        spec.hints.runtime = Some(runtime);
        job
    };
    // LPT: 6 → cpu A, 5 → cpu B, 4 → B (5 < 6), 1 → A (6 < 9). Dealt as they come, shortest
    // first, it would be 1 → A, 4 → B, 5 → A, 6 → B.
    let jobs = vec![task(0, 1.0), task(1, 4.0), task(2, 5.0), task(3, 6.0)];
    let mut auto = Auto::default();
    for arrived in 1..=jobs.len() {
        let gathering = arrive(&mut auto, &topo, 0.0, &jobs[..arrived]);
        assert!(
            gathering.placed_jobs().is_empty(),
            "the bag is gathered first"
        );
        assert_eq!(gathering.timer, Some(0.0));
    }
    let ctx = Context {
        topology: &topo,
        now: 0.0,
        jobs: &jobs,
    };
    let plan = auto.decide(&ctx, &Event::Timer).unwrap();
    let running: Vec<u32> = plan.slots[0].assignments.iter().map(|a| a.job.0).collect();
    assert_eq!(running, vec![0, 1], "each CPU's shortest task first");
    assert_ne!(auto.dealt[&JobId(0)], auto.dealt[&JobId(1)]);
    assert_eq!(auto.dealt[&JobId(0)], auto.dealt[&JobId(3)]);
    assert_eq!(auto.dealt[&JobId(1)], auto.dealt[&JobId(2)]);
}

#[test]
fn jobs_that_held_the_same_cpu_in_different_rows_never_share_it_in_one() {
    let mut held: HashMap<JobId, CpuSet> = [(JobId(2), "1"), (JobId(3), "1")]
        .into_iter()
        .map(|(job, cpus)| (job, cpus.parse().unwrap()))
        .collect();
    let region: CpuSet = "0-1".parse().unwrap();
    let placed = grow_in_place(&region, &mut held, &[(JobId(2), 1), (JobId(3), 1)]);
    assert!(
        placed[&JobId(2)].is_disjoint(&placed[&JobId(3)]),
        "{placed:?}"
    );
    assert_eq!(placed[&JobId(2)].len() + placed[&JobId(3)].len(), 2);
}

#[test]
fn with_nothing_known_at_most_six_elastic_jobs_run_side_by_side_and_none_is_stopped() {
    let topo = presets::preset("taco-opteron8435").unwrap();
    let mut jobs: Vec<ActiveJob> = (0..8)
        .map(|i| {
            let mut job = waiting(i, JobKind::Malleable, 1, 24);
            std::sync::Arc::make_mut(&mut job.spec).arrival = i as f64;
            job
        })
        .collect();
    let plan = decide(&mut Auto::default(), &topo, 8.0, &jobs);
    let placed = plan.placed_jobs();
    assert_eq!(placed.len(), SIDE_BY_SIDE);
    assert!(
        placed.iter().all(|id| id.0 < 6),
        "the oldest run: {placed:?}"
    );
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).unwrap().len(), 4);
    // Jobs already started (as after a time-shared spell) all keep running.
    for job in &mut jobs {
        job.started = Some(0.0);
    }
    let plan = decide(&mut Auto::default(), &topo, 8.0, &jobs);
    assert_eq!(plan.placed_jobs().len(), 8);
}

/// A malleable job estimated at `runtime` s alone on both CPUs and `one_cpu` s alone on one.
fn measured(id: u32, runtime: f64, one_cpu: f64) -> ActiveJob {
    let mut job = estimated(id, 0.0, runtime);
    std::sync::Arc::make_mut(&mut job.spec)
        .hints
        .one_cpu_runtime = Some(one_cpu);
    job
}

/// A job of 10 s on both CPUs and `one_cpu` s on one, and two of 2 s that scale perfectly.
fn long_and_two_short(one_cpu: f64) -> Vec<ActiveJob> {
    vec![
        measured(0, 10.0, one_cpu),
        measured(1, 2.0, 4.0),
        measured(2, 2.0, 4.0),
    ]
}

#[test]
fn long_jobs_that_scale_poorly_run_side_by_side_on_one_cpu_each() {
    let topo = presets::machine("package:1 core:2").unwrap();
    // 12 s on one CPU, 10 s on two: one after the other at full width they end at 10 and 20 s;
    // side by side on one CPU each, both by 12 s, a lower makespan and mean slowdown.
    let jobs = vec![measured(0, 10.0, 12.0), measured(1, 10.0, 12.0)];
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    for id in [JobId(0), JobId(1)] {
        assert_eq!(plan.cpus_in_slot(0, id).map(|c| c.len()), Some(1));
        assert_eq!(plan.advice[&id], 1);
    }
    let why = plan.why.unwrap();
    assert!(why.contains("least makespan bound"), "{why}");
}

#[test]
fn a_long_job_that_scales_poorly_beside_short_ones_runs_as_bp_shortest_first() {
    let topo = presets::machine("package:1 core:2").unwrap();
    // On one CPU from the start beside the short jobs, all would end by 12 s, but the short ones
    // would take twice as long: shortest first at full width ends by 14 s with a mean slowdown of
    // 1.5 instead of 2.4.
    let jobs = long_and_two_short(12.0);
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)), None);
    assert_eq!(plan.cpus_in_slot(0, JobId(1)).map(|c| c.len()), Some(2));
    let why = plan.why.unwrap();
    assert!(why.contains("as BP shortest-first"), "{why}");
}

#[test]
fn a_long_job_that_scales_still_waits_and_then_takes_the_whole_machine() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let jobs = long_and_two_short(19.5);
    let mut auto = Auto::default();
    let plan = decide(&mut auto, &topo, 0.0, &jobs);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)), None, "shortest first");
    let plan = decide(&mut auto, &topo, 4.0, &jobs[..1]);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).map(|c| c.len()), Some(2));
    assert_eq!(plan.advice[&JobId(0)], 2);
}

#[test]
fn a_moldable_job_that_scales_poorly_starts_with_the_threads_it_can_use() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let mut poor = waiting(0, JobKind::Moldable, 1, 2);
    let hints = &mut std::sync::Arc::make_mut(&mut poor.spec).hints;
    hints.runtime = Some(10.0);
    hints.one_cpu_runtime = Some(12.0);
    hints.sync = SyncKind::Block;
    let mut twin = poor.clone();
    std::sync::Arc::make_mut(&mut twin.spec).id = JobId(1);
    let plan = decide(&mut Auto::default(), &topo, 0.0, &[poor, twin]);
    assert_eq!(plan.cpus_in_slot(0, JobId(0)).map(|c| c.len()), Some(1));
    assert_eq!(plan.advice[&JobId(0)], 1, "not two threads on one CPU");
}

#[test]
fn a_job_on_fewer_cpus_is_credited_with_the_work_its_scaling_does_there() {
    let topo = presets::machine("package:1 core:2").unwrap();
    let jobs = vec![measured(0, 10.0, 12.0), measured(1, 10.0, 12.0)];
    let mut auto = Auto::default();
    decide(&mut auto, &topo, 0.0, &jobs);
    decide(&mut auto, &topo, 6.0, &jobs);
    // Six seconds on one CPU of a job 12 s on one CPU and 10 s on two: half its work, not 3 s of 10.
    let left = auto.service.remaining(JobId(0), 10.0);
    assert!((left - 5.0).abs() < 1e-9, "{left}");
}

#[test]
fn with_nothing_known_a_users_one_job_is_as_wide_as_another_users_three() {
    let topo = presets::preset("gang-opteron8380").unwrap();
    let owned = |id: u32, user: u32| {
        cosched_core::test_util::job(id)
            .arrival(f64::from(id))
            .max_threads(16)
            .owner(user, 1.0)
            .waiting()
    };
    let mut jobs: Vec<ActiveJob> = (0..3).map(|id| owned(id, 65534)).collect();
    jobs.push(owned(3, 0));
    let plan = decide(&mut Auto::default(), &topo, 0.0, &jobs);
    let width = |id: u32| {
        (0..plan.slots.len())
            .find_map(|s| plan.cpus_in_slot(s, JobId(id)))
            .map_or(0, |c| c.len())
    };
    assert_eq!(width(3), 8);
    assert_eq!((0..3).map(width).sum::<usize>(), 8);
}
