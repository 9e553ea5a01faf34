//! The loop driven through fakes of its seams: a world of scripted processes that the fake
//! enforcement, children and clock share, so that each test reads what was done to which job at
//! which time on the injected clock, with no process, cgroup or sleep.

mod world;

use super::seams::Seams;
use super::*;
use cosched_core::{Assignment, CpuSet, Slot};
use nix::sys::signal::Signal;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use world::{Act, FakeChildren, FakeClock, FakeEnforcement, Script, Shared, World, FIRST_PID};

/// How a test's policy decides.
type Decide = Box<dyn FnMut(&Context, &Event) -> Option<Plan> + Send>;

/// A policy whose decisions a test writes, and that notes what it heard, when.
struct Scripted {
    decide: Decide,
    heard: Arc<Mutex<Vec<(f64, Event)>>>,
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        self.heard.lock().unwrap().push((ctx.now, event.clone()));
        (self.decide)(ctx, event)
    }
}

fn cpus(list: &[u32]) -> CpuSet {
    let mut set = CpuSet::new();
    list.iter().for_each(|&cpu| set.insert(cpu));
    set
}

fn slot(length: f64, jobs: &[(u32, &[u32])]) -> Slot {
    let assignments = (jobs.iter())
        .map(|&(job, list)| Assignment {
            job: JobId(job),
            cpus: cpus(list),
        })
        .collect();
    Slot {
        length,
        assignments,
    }
}

/// One slot for good: job `id` on CPUs `list`, for each pair.
fn space(jobs: &[(u32, &[u32])]) -> Plan {
    Plan {
        slots: vec![slot(1.0, jobs)],
        ..Plan::default()
    }
}

/// Whether job `id` has arrived and not ended.
fn active(ctx: &Context, id: u32) -> bool {
    ctx.job(JobId(id)).is_some()
}

/// A run on a machine of 4 CPUs: its jobs, what their processes do, and the world they share.
struct Bench {
    world: Shared,
    topology: Topology,
    workload: Workload,
    options: RunOptions,
    _dir: tempfile::TempDir,
}

/// What a run that ended well left: the outcome of each job in the workload's order, what the
/// policy heard.
struct Ran {
    outcomes: Vec<JobOutcome>,
    heard: Vec<(f64, Event)>,
    /// What the source was told of each plan: its jobs' first CPUs.
    placed: Vec<Vec<(JobId, CpuSet)>>,
}

/// A workload's jobs, and what the executor told of the plans.
struct Told {
    replay: WorkloadReplay,
    placed: Vec<Vec<(JobId, CpuSet)>>,
}

impl JobSource for Told {
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob> {
        self.replay.take_arrived(now)
    }
    fn next_arrival(&self) -> Option<f64> {
        self.replay.next_arrival()
    }
    fn not_arrived(&self) -> usize {
        self.replay.not_arrived()
    }
    fn exhausted(&self) -> bool {
        self.replay.exhausted()
    }
    fn finished(&mut self, outcome: JobOutcome) {
        self.replay.finished(outcome)
    }
    fn placed(&mut self, placed: &[(JobId, &CpuSet)]) {
        let placed = placed.iter().map(|&(id, cpus)| (id, cpus.clone()));
        self.placed.push(placed.collect());
    }
}

impl Ran {
    fn heard_at(&self, event: &Event) -> Vec<f64> {
        (self.heard.iter())
            .filter(|(_, e)| e == event)
            .map(|(t, _)| *t)
            .collect()
    }
}

impl Bench {
    /// Jobs `(name, arrival, kind, script)`, each of 1 to 4 threads.
    fn new(jobs: &[(&str, f64, &str, Script)]) -> Bench {
        let mut text = String::from("[workload]\nname = \"fake\"\n");
        for (name, arrival, kind, _) in jobs {
            text += &format!(
                "[[job]]\nname = \"{name}\"\narrival = {arrival:?}\nkind = \"{kind}\"\n\
                 command = [\"{name}\"]\nmax_threads = 4\n"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let mut options = RunOptions::new(dir.path().join("trace.jsonl"), dir.path().join("out"));
        // Samples read /proc: none unless a test asks.
        options.sample_interval = 1e6;
        let scripts = jobs.iter().map(|j| (j.0.to_string(), j.3)).collect();
        Bench {
            world: Rc::new(RefCell::new(World {
                scripts,
                ..World::default()
            })),
            topology: cosched_core::topology::presets::machine("package:1 core:4").unwrap(),
            workload: Workload::parse(&text, "fake").unwrap(),
            options,
            _dir: dir,
        }
    }

    fn slow_to_start(self, name: &str, seconds: f64) -> Bench {
        self.world
            .borrow_mut()
            .start_costs
            .insert(name.into(), seconds);
        self
    }

    fn refuse(self, name: &str) -> Bench {
        self.world.borrow_mut().refused.insert(name.into());
        self
    }

    /// Runs the loop under a policy deciding by `decide` until the run is over or the fake clock
    /// reaches `stop`; `inspect` sees the executor then, before it shuts the run down as `execute`
    /// does.
    fn run(
        &self,
        stop: f64,
        decide: impl FnMut(&Context, &Event) -> Option<Plan> + Send + 'static,
        inspect: impl FnOnce(&Executor),
    ) -> Ran {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let policy = Scripted {
            decide: Box::new(decide),
            heard: heard.clone(),
        };
        let isolated = IsolatedTimes::default();
        let replay = WorkloadReplay::new(
            &self.workload,
            &self.topology,
            &isolated,
            &self.options.output_dir,
        );
        let mut source = Told {
            replay,
            placed: Vec::new(),
        };
        let setup = RunSetup {
            name: "fake".into(),
            capacity: 8,
            user: None,
            on_death: OnDeath::Kill,
        };
        let seams = Seams {
            enforcement: Box::new(FakeEnforcement(self.world.clone())),
            children: Box::new(FakeChildren(self.world.clone())),
            clock: Box::new(FakeClock(self.world.clone())),
            mechanism: "fake".into(),
        };
        let mut progress = |_: &Progress| {};
        let result = {
            let mut executor = Executor::new(
                &setup,
                &self.topology,
                Box::new(policy),
                &mut source,
                &self.options,
                seams,
                &mut progress,
            )
            .unwrap();
            let result = drive(&mut executor, stop);
            inspect(&executor);
            let note = match &result {
                Ok(()) => "the test stopped it".to_string(),
                Err(e) => e.to_string(),
            };
            executor.shutdown(Some(&note));
            result
        };
        if let Err(e) = result {
            panic!("the run failed: {e}");
        }
        let heard = heard.lock().unwrap().clone();
        Ran {
            outcomes: source.replay.into_outcomes(),
            heard,
            placed: source.placed,
        }
    }
}

fn drive(executor: &mut Executor, stop: f64) -> Result<(), Error> {
    while !executor.pass()? {
        if executor.now() >= stop {
            break;
        }
        executor.wait();
    }
    Ok(())
}

/// Places every active job on the CPUs `place` gives it, on every decision.
fn placing(
    place: &'static [(u32, &'static [u32])],
) -> impl FnMut(&Context, &Event) -> Option<Plan> {
    move |ctx, _| {
        let placed: Vec<_> = place
            .iter()
            .copied()
            .filter(|&(id, _)| active(ctx, id))
            .collect();
        Some(space(&placed))
    }
}

/// Once jobs 0 and 1 are both active: each on the whole machine in turn, for slots of 2 s.
fn alternating() -> impl FnMut(&Context, &Event) -> Option<Plan> {
    |ctx, _| {
        (active(ctx, 0) && active(ctx, 1)).then(|| Plan {
            slots: vec![
                slot(2.0, &[(0, &[0, 1, 2, 3])]),
                slot(2.0, &[(1, &[0, 1, 2, 3])]),
            ],
            ..Plan::default()
        })
    }
}

const ENDS_AT_4: Script = Script::Ends {
    after: 4.0,
    status: 0,
};

#[test]
fn a_plan_sets_each_jobs_cpus_through_the_enforcement() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", ENDS_AT_4),
        ("b", 0.0, "rigid", ENDS_AT_4),
    ]);
    let ran = bench.run(
        10.0,
        |ctx, event| match event {
            Event::Timer => Some(space(&[(0, &[0]), (1, &[1, 2, 3])])),
            Event::Arrived { .. } if active(ctx, 1) => Some(Plan {
                timer: Some(2.0),
                ..space(&[(0, &[0, 1]), (1, &[2, 3])])
            }),
            _ => None,
        },
        |_| {},
    );
    let world = bench.world.borrow();
    // Started on the plan's CPUs, then moved there by the plan of the timer.
    assert_eq!(world.acts("a")[0], (2.0, Act::Place(cpus(&[0]))));
    assert_eq!(world.acts("b")[0], (2.0, Act::Place(cpus(&[1, 2, 3]))));
    let started: Vec<Option<f64>> = ran.outcomes.iter().map(|o| o.started).collect();
    assert_eq!(started, vec![Some(0.0), Some(0.0)]);
    assert_eq!(world.processes[&FIRST_PID].cpus, cpus(&[0]));
}

#[test]
fn a_slot_switch_freezes_the_old_slot_and_thaws_the_new_at_its_deadline() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Runs),
        ("b", 0.0, "rigid", Script::Runs),
    ]);
    bench.run(3.0, alternating(), |_| {});
    let world = bench.world.borrow();
    // b was launched onto the CPUs of the second slot and waited frozen for it.
    assert_eq!(world.acts("b")[..2], [(0.0, Act::Freeze), (2.0, Act::Thaw)]);
    assert_eq!(world.acts("a")[0], (2.0, Act::Freeze));
}

#[test]
fn a_slot_switch_due_while_jobs_start_waits_for_one_start_not_all() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Runs),
        ("b", 0.0, "rigid", Script::Runs),
        ("c", 1.7, "rigid", Script::Runs),
        ("d", 1.7, "rigid", Script::Runs),
        ("e", 1.7, "rigid", Script::Runs),
    ])
    .slow_to_start("c", 0.4)
    .slow_to_start("d", 0.4)
    .slow_to_start("e", 0.4);
    // a and the late jobs share the first slot, b has the second; each slot lasts 2 s.
    let decide = |ctx: &Context, _: &Event| {
        let first: Vec<(u32, &[u32])> = [(0, &[0][..]), (2, &[1]), (3, &[2]), (4, &[3])]
            .into_iter()
            .filter(|&(id, _)| active(ctx, id))
            .collect();
        (active(ctx, 0) && active(ctx, 1)).then(|| Plan {
            slots: vec![slot(2.0, &first), slot(2.0, &[(1, &[0, 1, 2, 3])])],
            ..Plan::default()
        })
    };
    bench.run(3.5, decide, |_| {});
    let world = bench.world.borrow();
    // The switch due at 2 s came once c's start ended (2.1 s), not after e's (2.9 s).
    let (thawed, act) = world.acts("b")[1].clone();
    assert_eq!(act, Act::Thaw);
    assert!((thawed - 2.1).abs() < 1e-9, "b thawed at {thawed} s");
}

#[test]
fn a_jobs_end_reaches_the_policy_and_its_next_plan_starts_the_next_job() {
    let ends = Script::Ends {
        after: 3.0,
        status: 0,
    };
    let bench = Bench::new(&[("a", 0.0, "rigid", ends), ("b", 0.0, "rigid", ENDS_AT_4)]);
    // One job at a time on the whole machine, first come first served.
    let ran = bench.run(
        20.0,
        |ctx, _| {
            let first = ctx.jobs.first()?;
            Some(space(&[(first.id().0, &[0, 1, 2, 3])]))
        },
        |_| {},
    );
    assert_eq!(ran.heard_at(&Event::Finished { job: JobId(0) }), [3.0]);
    let a = &ran.outcomes[0];
    assert_eq!(
        (a.status.clone(), a.exit_code, a.finished),
        (ExitStatus::Ok, Some(0), Some(3.0))
    );
    assert_eq!(ran.outcomes[1].started, Some(3.0));
    assert_eq!(ran.outcomes[1].finished, Some(7.0));
}

#[test]
fn a_launch_failure_fails_that_job_and_the_others_run() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Unstartable),
        ("b", 0.0, "rigid", ENDS_AT_4),
    ]);
    let ran = bench.run(20.0, placing(&[(0, &[0, 1]), (1, &[2, 3])]), |_| {});
    let (a, b) = (&ran.outcomes[0], &ran.outcomes[1]);
    assert_eq!(a.status, ExitStatus::Failed);
    assert_eq!(a.error.as_deref(), Some("no such program"));
    assert_eq!(ran.heard_at(&Event::Finished { job: JobId(0) }), [0.0]);
    assert_eq!((b.status.clone(), b.finished), (ExitStatus::Ok, Some(4.0)));
}

#[test]
fn a_plan_refused_for_one_job_ends_that_job_and_the_others_go_on() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", ENDS_AT_4),
        ("b", 0.0, "rigid", Script::Runs),
    ])
    .refuse("b");
    let ran = bench.run(
        20.0,
        |ctx, event| match event {
            Event::Timer => Some(space(&[(0, &[2, 3]), (1, &[0, 1])])),
            Event::Arrived { .. } if active(ctx, 1) => Some(Plan {
                timer: Some(1.0),
                ..space(&[(0, &[0, 1]), (1, &[2, 3])])
            }),
            _ => None,
        },
        |_| {},
    );
    let (a, b) = (&ran.outcomes[0], &ran.outcomes[1]);
    let error = b.error.as_deref().unwrap_or_default();
    assert!(error.contains("could not enforce its plan"), "{error}");
    assert_eq!(
        (b.status.clone(), b.finished),
        (ExitStatus::Failed, Some(1.0))
    );
    assert_eq!((a.status.clone(), a.finished), (ExitStatus::Ok, Some(4.0)));
    let world = bench.world.borrow();
    assert_eq!(world.acts("a")[0], (1.0, Act::Place(cpus(&[2, 3]))));
    // Killed, and its cgroups and watchdog entry undone.
    assert_eq!(
        world.acts("b"),
        [(1.0, Act::Signal(Signal::SIGKILL)), (1.0, Act::Release)]
    );
}

#[test]
fn a_timer_fires_at_its_time_and_not_before() {
    let bench = Bench::new(&[(
        "a",
        0.0,
        "rigid",
        Script::Ends {
            after: 9.0,
            status: 0,
        },
    )]);
    let ran = bench.run(
        20.0,
        |_, event| match event {
            Event::Arrived { .. } => Some(Plan {
                timer: Some(5.0),
                ..space(&[(0, &[0, 1, 2, 3])])
            }),
            _ => None,
        },
        |_| {},
    );
    assert_eq!(ran.heard_at(&Event::Timer), [5.0]);
    // The loop woke every second until then (its bound on a sleep), and the timer stayed quiet.
    assert_eq!(ran.outcomes[0].finished, Some(9.0));
}

#[test]
fn arrivals_due_at_a_time_are_started_then() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", ENDS_AT_4),
        ("b", 2.5, "rigid", ENDS_AT_4),
    ]);
    let ran = bench.run(20.0, placing(&[(0, &[0, 1]), (1, &[2, 3])]), |_| {});
    assert_eq!(ran.heard_at(&Event::Arrived { job: JobId(1) }), [2.5]);
    let started: Vec<Option<f64>> = ran.outcomes.iter().map(|o| o.started).collect();
    assert_eq!(started, vec![Some(0.0), Some(2.5)]);
}

#[test]
fn a_job_killed_by_a_signal_is_recorded_with_its_signal() {
    let segv = Script::Ends {
        after: 1.0,
        status: libc::SIGSEGV,
    };
    let bench = Bench::new(&[("a", 0.0, "rigid", segv)]);
    let ran = bench.run(20.0, placing(&[(0, &[0, 1, 2, 3])]), |_| {});
    let a = &ran.outcomes[0];
    assert_eq!((a.status.clone(), a.exit_code), (ExitStatus::Failed, None));
    let error = a.error.as_deref().unwrap_or_default();
    assert!(error.contains("signal 11"), "{error}");
}

#[test]
fn a_malleable_jobs_advice_follows_the_plan_and_a_rigid_jobs_does_not() {
    let bench = Bench::new(&[
        ("m", 0.0, "malleable", Script::Runs),
        ("r", 0.0, "rigid", Script::Runs),
    ]);
    let advised = |m: u32, r: u32| BTreeMap::from([(JobId(0), m), (JobId(1), r)]);
    let mut pages = Vec::new();
    bench.run(
        3.0,
        move |ctx, event| match event {
            Event::Timer => Some(Plan {
                advice: advised(1, 1),
                ..space(&[(0, &[0]), (1, &[1, 2, 3])])
            }),
            Event::Arrived { .. } if active(ctx, 1) => Some(Plan {
                advice: advised(3, 3),
                timer: Some(2.0),
                ..space(&[(0, &[0, 1, 2]), (1, &[3])])
            }),
            _ => None,
        },
        |executor| {
            for id in [JobId(0), JobId(1)] {
                if let State::Running(r) = &executor.jobs[&id].state {
                    pages.push(r.page.advice());
                }
            }
        },
    );
    // The malleable job was advised 3 threads at its start and 1 later; the rigid one keeps the 4
    // it started with.
    assert_eq!(pages, [1, 4]);
}

#[test]
fn shutdown_thaws_every_frozen_job_so_that_it_can_end_on_sigterm() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Runs),
        ("b", 0.0, "rigid", Script::Runs),
    ]);
    let ran = bench.run(1.0, alternating(), |executor| {
        assert!(executor.running().any(|(_, r)| r.control.frozen))
    });
    let world = bench.world.borrow();
    for process in world.processes.values() {
        assert!(!process.frozen, "{} left frozen", process.name);
        assert_eq!(
            process.ends.map(|e| e.1),
            Some(libc::SIGTERM),
            "{}",
            process.name
        );
    }
    let b = &ran.outcomes[1];
    assert_eq!(b.error.as_deref(), Some("stopped: the test stopped it"));
}

#[test]
fn a_job_opted_out_of_coscheduling_is_never_frozen() {
    let mut bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Runs),
        ("b", 0.0, "rigid", Script::Runs),
    ]);
    bench.workload.jobs[1].coschedule = false;
    bench.run(5.0, alternating(), |_| {});
    let world = bench.world.borrow();
    assert!(
        !world.acts("b").iter().any(|(_, act)| *act == Act::Freeze),
        "{:?}",
        world.acts("b")
    );
    assert_eq!(world.acts("a")[0], (2.0, Act::Freeze));
}

#[test]
fn each_plan_tells_the_source_the_cpus_each_job_gets_first() {
    let bench = Bench::new(&[
        ("a", 0.0, "rigid", Script::Runs),
        ("b", 0.0, "rigid", Script::Runs),
    ]);
    let ran = bench.run(
        1.0,
        |ctx, _| {
            let both = active(ctx, 0) && active(ctx, 1);
            both.then(|| Plan {
                slots: vec![slot(2.0, &[(0, &[0, 1])]), slot(2.0, &[(1, &[2, 3])])],
                ..Plan::default()
            })
        },
        |_| {},
    );
    // Job b's first CPUs are those of the second slot, where it first runs.
    let told = [(JobId(0), cpus(&[0, 1])), (JobId(1), cpus(&[2, 3]))];
    assert_eq!(ran.placed, [told]);
}
