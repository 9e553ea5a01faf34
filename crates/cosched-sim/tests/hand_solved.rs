//! The engine against cases solvable by hand.

use cosched_core::metrics::summarize;
use cosched_core::test_util;
use cosched_core::topology::synthetic;
use cosched_core::trace::{Record, TraceLine};
use cosched_core::{Assignment, Context, Event, JobId, JobKind, Plan, PlanError, Policy, Slot};
use cosched_sim::{profile, simulate, Mode, SimError, SimJob, SimOptions};
use std::sync::Arc;

fn job(id: u32, arrival: f64, kind: JobKind, threads: u32, profile_text: &str) -> SimJob {
    let min_threads = if kind == JobKind::Rigid { threads } else { 1 };
    SimJob {
        spec: test_util::job(id)
            .arrival(arrival)
            .kind(kind)
            .threads(min_threads, threads)
            .spec()
            .into(),
        profile: Arc::new(profile::parse(profile_text).unwrap()),
        mem: None,
    }
}

fn finishes(trace: &[TraceLine]) -> Vec<(JobId, f64)> {
    trace
        .iter()
        .filter_map(|l| match l.record {
            Record::Finish { job, .. } => Some((job, l.t)),
            _ => None,
        })
        .collect()
}

fn run(policy: &str, jobs: &[SimJob], machine: &str) -> Vec<TraceLine> {
    let topo = synthetic::parse(machine).unwrap();
    let mut policy = cosched_policies::create(policy).unwrap();
    simulate(&topo, jobs, policy.as_mut(), &SimOptions::default()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn one_job_alone_takes_its_isolated_time() {
    let jobs = [job(
        0,
        2.0,
        JobKind::Malleable,
        8,
        "amdahl(serial=0.1, runtime=100)",
    )];
    let trace = run("bp", &jobs, "package:2 core:4");
    let summary = summarize(&trace);
    let expected = 100.0 * (0.1 + 0.9 / 8.0);
    assert!(
        close(summary.jobs[0].isolated.unwrap(), expected),
        "{summary:?}"
    );
    assert!(
        close(summary.jobs[0].response.unwrap(), expected),
        "{summary:?}"
    );
    assert!(close(summary.mean_slowdown.unwrap(), 1.0));
}

#[test]
fn two_equal_rigid_jobs_under_bp_finish_at_t_and_2t() {
    let jobs = [
        job(0, 0.0, JobKind::Rigid, 8, "amdahl(serial=0, runtime=80)"),
        job(1, 0.0, JobKind::Rigid, 8, "amdahl(serial=0, runtime=80)"),
    ];
    let done = finishes(&run("bp", &jobs, "core:8"));
    assert_eq!(done.len(), 2);
    assert!(close(done[0].1, 10.0) && close(done[1].1, 20.0), "{done:?}");
}

#[test]
fn eq_on_two_perfectly_scaling_malleable_jobs_finishes_both_at_2t() {
    let jobs = [
        job(
            0,
            0.0,
            JobKind::Malleable,
            8,
            "amdahl(serial=0, runtime=80)",
        ),
        job(
            1,
            0.0,
            JobKind::Malleable,
            8,
            "amdahl(serial=0, runtime=80)",
        ),
    ];
    let trace = run("eq", &jobs, "core:8");
    let done = finishes(&trace);
    assert!(done.iter().all(|(_, t)| close(*t, 20.0)), "{done:?}");
}

#[test]
fn malleable_job_applies_new_advice_after_its_reconfiguration_delay() {
    let p = "amdahl(serial=0, runtime=80, reconfig_delay=0.5)";
    let jobs = [
        job(0, 0.0, JobKind::Malleable, 8, p),
        job(1, 2.0, JobKind::Malleable, 8, p),
    ];
    let trace = run("eq", &jobs, "core:8");
    let change = trace
        .iter()
        .find_map(|l| match l.record {
            Record::Threads { job, threads } => Some((job, threads, l.t)),
            _ => None,
        })
        .unwrap();
    assert_eq!(change.0, JobId(0));
    assert_eq!(change.1, 4);
    assert!(close(change.2, 2.5), "{change:?}");
}

/// Two jobs alternating on the whole machine in slots of `slot` seconds; a lone job gets the machine.
struct TwoGang {
    slot: f64,
}

impl Policy for TwoGang {
    fn name(&self) -> &str {
        "two-gang"
    }

    fn decide(&mut self, ctx: &Context, _event: &Event) -> Option<Plan> {
        let all = ctx.topology.cpus();
        let slots = ctx
            .jobs
            .iter()
            .map(|j| Slot {
                length: self.slot,
                assignments: vec![Assignment {
                    job: j.spec.id,
                    cpus: all.clone(),
                }],
            })
            .collect();
        Some(Plan {
            slots,
            ..Plan::default()
        })
    }
}

#[test]
fn fluid_and_exact_modes_agree_on_a_gang_plan_with_10ms_slots() {
    let topo = synthetic::parse("package:2 l3:1(size=4MiB) core:4").unwrap();
    let jobs = [
        job(
            0,
            0.0,
            JobKind::Malleable,
            8,
            "amdahl(serial=0.05, runtime=20, working_set=2)",
        ),
        job(
            1,
            0.0,
            JobKind::Malleable,
            8,
            "amdahl(serial=0.05, runtime=30, working_set=8)",
        ),
    ];
    let makespan = |mode| {
        let options = SimOptions {
            mode,
            ..SimOptions::default()
        };
        let trace = simulate(&topo, &jobs, &mut TwoGang { slot: 0.01 }, &options).unwrap();
        summarize(&trace).makespan.unwrap()
    };
    let (fluid, exact) = (makespan(Mode::Fluid), makespan(Mode::Exact));
    assert!(
        (fluid - exact).abs() / exact < 0.02,
        "fluid {fluid} exact {exact}"
    );
    // The switches cost something: slower than running the two jobs back to back.
    let back_to_back = (20.0 + 30.0) * (0.05 + 0.95 / 8.0);
    assert!(exact > back_to_back * 1.01, "{exact} vs {back_to_back}");
}

/// Asks for a timer every second and records what it hears.
struct Listener {
    heard: Vec<Event>,
}

impl Policy for Listener {
    fn name(&self) -> &str {
        "listener"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        self.heard.push(event.clone());
        let mut plan = Plan::space_sharing(
            ctx.jobs
                .iter()
                .map(|j| Assignment {
                    job: j.spec.id,
                    cpus: ctx.topology.cpus().clone(),
                })
                .collect(),
        );
        plan.timer = Some(ctx.now.floor() + 1.0);
        matches!(event, Event::Arrived { .. } | Event::Timer).then_some(plan)
    }
}

#[test]
fn a_sample_per_running_job_precedes_each_timer() {
    let topo = synthetic::parse("core:4").unwrap();
    let jobs = [job(
        0,
        0.0,
        JobKind::Malleable,
        4,
        "amdahl(serial=0, runtime=10)",
    )];
    let mut listener = Listener { heard: Vec::new() };
    simulate(&topo, &jobs, &mut listener, &SimOptions::default()).unwrap();
    let timer = listener
        .heard
        .iter()
        .position(|e| *e == Event::Timer)
        .unwrap();
    let Event::Sample(sample) = &listener.heard[timer - 1] else {
        panic!("no sample before the timer: {:?}", listener.heard);
    };
    assert!(
        close(sample.interval, 1.0) && close(sample.rate, 4.0),
        "{sample:?}"
    );
    assert!(
        close(sample.cpu_seconds, 4.0) && sample.cpus == 4,
        "{sample:?}"
    );
}

struct Forgetful;

impl Policy for Forgetful {
    fn name(&self) -> &str {
        "forgetful"
    }

    fn decide(&mut self, _: &Context, _: &Event) -> Option<Plan> {
        None
    }
}

#[test]
fn a_policy_that_never_places_a_job_is_reported_not_looped() {
    let topo = synthetic::parse("core:2").unwrap();
    let jobs = [job(
        0,
        0.0,
        JobKind::Malleable,
        2,
        "amdahl(serial=0, runtime=1)",
    )];
    let err = simulate(&topo, &jobs, &mut Forgetful, &SimOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::Plan {
                source: PlanError::Stalled { waiting: 1 },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_spinning_job_time_shared_without_coscheduling_crawls_and_a_blocking_one_does_not() {
    let spin = "amdahl(serial=0, runtime=40, sync=spin, sync_interval=0.001)";
    let block = "amdahl(serial=0, runtime=40, sync=block, sync_interval=0.001)";
    let plain = "amdahl(serial=0, runtime=40)";
    let makespan = |p: &str| {
        let jobs = [
            job(0, 0.0, JobKind::Malleable, 4, p),
            job(1, 0.0, JobKind::Malleable, 4, plain),
        ];
        summarize(&run("ue", &jobs, "core:4")).makespan.unwrap()
    };
    let (spin, block, plain) = (makespan(spin), makespan(block), makespan(plain));
    assert!(close(plain, 20.0), "{plain}");
    // Sharing 4 CPUs, each job gets 2 CPUs' worth (two threads per CPU). Each thread spins to the end
    // of its 15 ms slice, 7.5 ms on average, per 1 ms of work between synchronisations: 1/8.5 of its
    // speed (rate 2/8.5). Beside a job that never leaves its CPUs its four threads never run all at
    // once. Alone from t = 20 it runs at speed 4.
    assert!(
        close(spin, 20.0 + (40.0 - 20.0 * 2.0 / 8.5) / 4.0),
        "spin {spin}"
    );
    // A blocking job only pays 7.4 µs per synchronisation.
    assert!(block < plain + 0.05, "block {block} vs {plain}");
}

#[test]
fn a_spinning_team_runs_in_step_only_beside_jobs_that_leave_their_cpus() {
    let spin = "amdahl(serial=0, runtime=40, sync=spin, sync_interval=0.001)";
    let makespan = |beside: &str| {
        let jobs = [
            job(0, 0.0, JobKind::Malleable, 2, spin),
            job(1, 0.0, JobKind::Malleable, 2, beside),
        ];
        summarize(&run("ue", &jobs, "core:2")).makespan.unwrap()
    };
    // Both jobs hold half of each CPU; the neighbour alone would take 20 s.
    let beside_hog = makespan("amdahl(serial=0, runtime=20)");
    let beside_blocker = makespan("amdahl(serial=0, runtime=20, sync=block, sync_interval=0.001)");
    // Beside threads that keep their CPUs the team's threads take turns: 7.5 ms of spin (half a
    // 15 ms slice) per 1 ms of work, rate 1/8.5; alone from t = 20 at speed 2.
    assert!(
        close(beside_hog, 20.0 + (40.0 - 20.0 / 8.5) / 2.0),
        "beside a hog {beside_hog}"
    );
    // Beside a blocking job both threads hold a CPU at once 2^-2 of the time (independent slices),
    // at speed 2 then: rate 0.5, better than taking turns.
    // The blocker pays 7.4 µs per synchronisation, its 1 ms interval stretched to 2 ms on half its CPUs.
    let neighbour_done = 20.0 * (1.0 + 7.4e-6 / 2e-3);
    assert!(
        close(
            beside_blocker,
            neighbour_done + (40.0 - neighbour_done * 0.5) / 2.0
        ),
        "beside a blocker {beside_blocker}"
    );
}

/// Asks for a timer at the current time, forever.
struct Impatient;

impl Policy for Impatient {
    fn name(&self) -> &str {
        "impatient"
    }

    fn decide(&mut self, ctx: &Context, _: &Event) -> Option<Plan> {
        Some(Plan {
            timer: Some(ctx.now),
            ..Plan::default()
        })
    }
}

#[test]
fn a_policy_looping_on_timers_is_reported() {
    let topo = synthetic::parse("core:2").unwrap();
    let jobs = [job(
        0,
        0.0,
        JobKind::Malleable,
        2,
        "amdahl(serial=0, runtime=1)",
    )];
    let err = simulate(&topo, &jobs, &mut Impatient, &SimOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            SimError::Plan {
                source: PlanError::TimerLoop,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_closed_experiment_restarts_jobs_until_each_has_its_runs_and_stops_the_rest() {
    // One core each: a 10 s and a 24 s job, each restarted at once, until both have 2 runs.
    let jobs = [
        job(0, 0.0, JobKind::Rigid, 1, "amdahl(serial=0, runtime=10)"),
        job(1, 0.0, JobKind::Rigid, 1, "amdahl(serial=0, runtime=24)"),
    ];
    let topo = synthetic::parse("core:2").unwrap();
    let mut policy = cosched_policies::create("eq").unwrap();
    let options = SimOptions {
        min_runs: std::num::NonZeroU32::new(2),
        ..SimOptions::default()
    };
    let trace = simulate(&topo, &jobs, policy.as_mut(), &options).unwrap();
    let summary = summarize(&trace);
    let done: Vec<(&str, f64)> = summary
        .jobs
        .iter()
        .filter(|j| !j.failed)
        .map(|j| (j.name.as_str(), j.finish.unwrap()))
        .collect();
    assert_eq!(
        done,
        [
            ("j0", 10.0),
            ("j1", 24.0),
            ("j0#2", 20.0),
            ("j0#3", 30.0),
            ("j1#2", 48.0),
            ("j0#4", 40.0)
        ]
    );
    // At 48 s the fifth run of j0, started at 40 s, is stopped and not counted.
    let stopped: Vec<&str> = summary
        .jobs
        .iter()
        .filter(|j| j.failed)
        .map(|j| j.name.as_str())
        .collect();
    assert_eq!(stopped, ["j0#5"]);
    assert_eq!(summary.makespan, Some(48.0));
    assert_eq!(summary.antt, Some(1.0));
}

#[test]
fn a_task_beside_large_footprints_runs_slower_than_beside_small_ones() {
    // One 12 MB L3 shared by four cores, as one package of Scalpel's node.
    let machine = "package:1 l3:1(size=12MiB) core:4";
    let task = |id, kernel: &str| job(id, 0.0, JobKind::Rigid, 1, &format!("polybench/{kernel}"));
    let adi_finish = |neighbour: &str| {
        let jobs: Vec<SimJob> = std::iter::once(task(0, "adi"))
            .chain((1..4).map(|id| task(id, neighbour)))
            .collect();
        let trace = run("fifo", &jobs, machine);
        finishes(&trace)
            .into_iter()
            .find(|(job, _)| *job == JobId(0))
            .unwrap()
            .1
    };
    let alone = finishes(&run("fifo", &[task(0, "adi")], machine))[0].1;
    assert!(close(alone, 41.47), "adi alone {alone}");
    // apop reuses 11 KB; seidel-2d streams the largest footprint of Table II.
    let (small, large) = (adi_finish("apop"), adi_finish("seidel-2d"));
    eprintln!("adi alone {alone:.2} s, beside apop {small:.2} s, beside seidel-2d {large:.2} s");
    assert!(
        alone <= small && small * 1.01 < large,
        "adi alone {alone:.2} s, beside apop {small:.2} s, beside seidel-2d {large:.2} s"
    );
}
