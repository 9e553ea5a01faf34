use super::*;
use crate::plan::{Assignment, Slot};
use crate::CpuSet;

/// Seconds alone on `k` CPUs of a job of `one_cpu` s on one CPU with serial fraction `serial`.
fn amdahl(one_cpu: f64, serial: f64, k: u32) -> f64 {
    one_cpu / speedup(serial, k)
}

fn spell(width: u32, seconds: f64, cpu_seconds: f64, rate: Option<f64>) -> Spell {
    Spell {
        width,
        threads: width,
        seconds,
        cpu_seconds: Some(cpu_seconds),
        rate,
    }
}

#[test]
fn a_spinning_job_scales_as_its_elapsed_times_show_not_as_its_cpu_time() {
    // 20 s on one CPU, serial fraction 0.3; its threads spin, so every CPU it holds stays busy and
    // its CPU time alone would make it look perfectly scalable.
    let spinning = |width: u32, seconds: f64| spell(width, seconds, width as f64 * seconds, None);
    let on_two = ScalingRun {
        spells: vec![spinning(2, amdahl(20.0, 0.3, 2))],
        whole: true,
    };
    assert_eq!(
        fit(std::slice::from_ref(&on_two)),
        None,
        "one width cannot tell"
    );
    // 4 s on one CPU did a fifth of its work; the rest took 0.8 × T(2) on two.
    let mixed = ScalingRun {
        spells: vec![spinning(1, 4.0), spinning(2, 0.8 * amdahl(20.0, 0.3, 2))],
        whole: true,
    };
    let fitted = fit(&[on_two, mixed]).unwrap();
    assert!((fitted.serial - 0.3).abs() < 0.002, "{fitted:?}");
    assert!(
        (fitted.one_cpu_seconds.unwrap() - 20.0).abs() < 0.1,
        "{fitted:?}"
    );
    assert!(fitted.residual < 0.01 && fitted.samples == 2, "{fitted:?}");
}

#[test]
fn a_blocking_job_scales_as_its_progress_rates_show_without_a_whole_run() {
    // Serial fraction 0.2: its threads sleep while they wait, so it leaves CPU time unused.
    let busy = |width: u32, seconds: f64| speedup(0.2, width) * seconds;
    let rate = |width: u32| 100.0 * speedup(0.2, width);
    let run = ScalingRun {
        spells: vec![
            spell(1, 3.0, busy(1, 3.0), Some(rate(1))),
            spell(4, 5.0, busy(4, 5.0), Some(rate(4))),
        ],
        whole: false,
    };
    let fitted = fit(&[run]).unwrap();
    assert!((fitted.serial - 0.2).abs() < 0.002, "{fitted:?}");
    assert_eq!(fitted.one_cpu_seconds, None, "no whole run fixes its scale");
}

#[test]
fn a_memory_bound_job_is_fitted_with_a_speedup_that_saturates() {
    // Speedups 1, 1.6, 1.9, 2.0 on 1–4 CPUs: bandwidth, not a serial part, limits it.
    let measured = [(1, 1.0), (2, 1.6), (3, 1.9), (4, 2.0)];
    let run = ScalingRun {
        spells: (measured.iter())
            .map(|&(k, s)| spell(k, 4.0, 4.0 * k as f64, Some(10.0 * s)))
            .collect(),
        whole: false,
    };
    let fitted = fit(&[run]).unwrap();
    let predicted = fitted.speedup(4);
    assert!((predicted - 2.0).abs() < 0.2, "{fitted:?}");
    assert!(
        fitted.speedup(3) - fitted.speedup(2) < 0.5,
        "a third CPU gains less than half a CPU: {fitted:?}"
    );
    assert!(
        fitted.residual > 0.005,
        "the misfit is reported: {fitted:?}"
    );
    assert_eq!(fitted.samples, 4);
}

fn line(t: f64, record: Record) -> TraceLine {
    TraceLine { t, record }
}

fn alone(job: u32, cpus: &str) -> Assignment {
    Assignment {
        job: JobId(job),
        cpus: cpus.parse::<CpuSet>().unwrap(),
    }
}

fn model_second(job: u32, cpus: u32, rate: f64) -> Sample {
    Sample::new(JobId(job), rate, RateSource::Model, cpus, cpus as f64, 1.0)
}

#[test]
fn a_trace_gives_each_job_its_spells_alone_and_whether_they_cover_its_whole_run() {
    let side_by_side = Plan::space_sharing(vec![alone(0, "0"), alone(1, "1")]);
    let time_shared = Plan {
        slots: vec![
            Slot {
                length: 1.0,
                assignments: vec![alone(0, "0-1")],
            },
            Slot {
                length: 1.0,
                assignments: vec![alone(1, "0-1")],
            },
        ],
        ..Plan::default()
    };
    let start = |job| Record::Start {
        job: JobId(job),
        threads: 1,
        pid: None,
    };
    let finish = |job| Record::Finish {
        job: JobId(job),
        status: ExitStatus::Ok,
        exit_code: Some(0),
        error: None,
    };
    let trace = vec![
        line(0.0, Record::Plan { plan: side_by_side }),
        line(0.0, start(0)),
        line(0.0, start(1)),
        line(1.0, Record::Sample(model_second(0, 1, 10.0))),
        line(2.0, Record::Sample(model_second(0, 1, 10.0))),
        line(2.0, Record::Plan { plan: time_shared }),
        line(
            2.0,
            Record::Threads {
                job: JobId(0),
                threads: 2,
            },
        ),
        line(
            3.0,
            Record::Plan {
                plan: Plan::space_sharing(vec![alone(0, "0-1")]),
            },
        ),
        line(3.0, finish(1)),
        line(4.0, Record::Sample(model_second(0, 2, 18.0))),
        line(5.0, Record::Sample(model_second(0, 2, 18.0))),
        line(5.0, finish(0)),
    ];
    let runs = runs_from_trace(&trace);
    let first = &runs[&JobId(0)];
    assert!(
        !first.whole,
        "a second time-shared is not alone on its CPUs"
    );
    let widths: Vec<(u32, f64, Option<f64>)> = (first.spells.iter())
        .map(|s| (s.width, s.seconds, s.rate))
        .collect();
    assert_eq!(widths, vec![(1, 2.0, Some(10.0)), (2, 2.0, Some(18.0))]);
    let fitted = fit(std::slice::from_ref(first)).unwrap();
    assert!((fitted.speedup(2) - 1.8).abs() < 0.01, "{fitted:?}");
    let second = &runs[&JobId(1)];
    assert!(!second.whole);
    assert_eq!(second.spells.len(), 1);
}

#[test]
fn cpu_time_samples_give_no_rate() {
    let trace = vec![
        line(
            0.0,
            Record::Plan {
                plan: Plan::space_sharing(vec![alone(0, "0-1")]),
            },
        ),
        line(
            0.0,
            Record::Start {
                job: JobId(0),
                threads: 2,
                pid: None,
            },
        ),
        line(
            1.0,
            Record::Sample(Sample::new(JobId(0), 2.0, RateSource::CpuTime, 2, 2.0, 1.0)),
        ),
        line(
            2.0,
            Record::Finish {
                job: JobId(0),
                status: ExitStatus::Ok,
                exit_code: Some(0),
                error: None,
            },
        ),
    ];
    let run = &runs_from_trace(&trace)[&JobId(0)];
    assert!(run.whole);
    assert_eq!(run.spells[0].rate, None);
    assert_eq!(run.spells[0].cpu_seconds, Some(2.0));
    assert_eq!(run.spells[0].seconds, 2.0);
}

#[test]
fn time_frozen_while_shorter_jobs_run_leaves_a_run_whole() {
    let finish = |job| Record::Finish {
        job: JobId(job),
        status: ExitStatus::Ok,
        exit_code: Some(0),
        error: None,
    };
    let trace = vec![
        line(
            0.0,
            Record::Plan {
                plan: Plan::space_sharing(vec![alone(0, "0")]),
            },
        ),
        line(
            0.0,
            Record::Start {
                job: JobId(0),
                threads: 1,
                pid: None,
            },
        ),
        line(
            4.0,
            Record::Plan {
                plan: Plan::space_sharing(vec![alone(1, "0-1")]),
            },
        ),
        line(
            6.0,
            Record::Plan {
                plan: Plan::space_sharing(vec![alone(0, "0")]),
            },
        ),
        line(14.0, finish(0)),
    ];
    let run = &runs_from_trace(&trace)[&JobId(0)];
    assert!(run.whole, "frozen, it did no work: {run:?}");
    assert_eq!(run.spells.len(), 1);
    assert_eq!(run.spells[0].seconds, 12.0);
}

#[test]
fn times_alone_keep_a_speedup_that_jumps_at_a_package_boundary() {
    // bt.A of TACO's Table 1: 94 s on one CPU, speedup 2.5 on 3 CPUs, 10.4 on 19, 13.4 on 24. A
    // first run: on one CPU, then on 3 (progress reported), then on 19 (none reported).
    let time = |speedup: f64| 94.0 / speedup;
    let calibration = ScalingRun::alone(24, 24, time(13.4));
    let (at_one, at_three) = (12.0, 9.0);
    let done = at_one / time(1.0) + at_three / time(2.5);
    let run = ScalingRun {
        spells: vec![
            spell(1, at_one, at_one, Some(1.0)),
            spell(3, at_three, 2.5 * at_three, Some(2.5)),
            spell(19, (1.0 - done) * time(10.44), 0.0, None),
        ],
        whole: true,
    };
    let times = times_alone(&[calibration, run]);
    let at = |k: u32| times.iter().find(|t| t.width == k).unwrap().seconds;
    assert!((at(24) - time(13.4)).abs() < 1e-9);
    for (k, speedup) in [(1, 1.0), (3, 2.5)] {
        // Within a tenth: the time on 19 CPUs is read between 3 and 24, where the curve steps.
        let error = at(k) / time(speedup) - 1.0;
        assert!(
            error.abs() < TRUSTED_RESIDUAL,
            "{k} CPUs: {:.1} s, {error:+.3}",
            at(k)
        );
    }
    // The fitted Amdahl curve cannot follow it: it misses the time on 3 CPUs by more than a tenth.
    let amdahl = fit(&[
        ScalingRun::alone(24, 24, time(13.4)),
        ScalingRun::alone(1, 1, 94.0),
    ])
    .unwrap();
    assert!(amdahl.scale(time(13.4), 24, 3) < 0.9 * time(2.5));
}

/// Runs recorded by `cosched compare` on a 2-CPU machine (`tests/data/scaling-runs-2cpu.json`:
/// the calibration at full width and a run of `auto` that gave each program one CPU), by program.
fn recorded() -> BTreeMap<String, Vec<ScalingRun>> {
    #[derive(Deserialize)]
    struct Program {
        runs: Vec<ScalingRun>,
    }
    let text = include_str!("../../tests/data/scaling-runs-2cpu.json");
    let programs: BTreeMap<String, Program> = serde_json::from_str(text).unwrap();
    programs
        .into_iter()
        .map(|(name, p)| (name, p.runs))
        .collect()
}

#[test]
fn recorded_runs_tell_programs_that_scale_from_one_that_waits_on_a_timer() {
    let runs = recorded();
    let serial = |name: &str| {
        fit(&runs[name])
            .unwrap_or_else(|| panic!("{name}: no fit"))
            .serial
    };
    // Compute-bound (a spin loop per thread), blocking OpenMP (dense), spinning OpenMP (stencil,
    // OMP_WAIT_POLICY=active) and memory-streaming ones (spmv, a 256 MB buffer) all nearly halve
    // their time on two CPUs of this machine.
    for name in ["cpu-stress", "dense", "stencil", "spmv", "cache-stress"] {
        assert!(serial(name) < 0.1, "{name}: {}", serial(name));
    }
    // Its threads each wait 200 µs between barriers: the same time on one CPU as on two.
    assert!(serial("long-serial") > 0.9, "{}", serial("long-serial"));
}

#[test]
fn recorded_runs_of_a_spinning_program_at_one_width_do_not_pass_for_scaling() {
    // Two runs at full width; its CPU time (both CPUs busy spinning) says nothing of its scaling.
    let runs = recorded();
    assert_eq!(fit(&runs["spin-barrier"]), None);
    let known = times_alone(&runs["spin-barrier"]);
    assert_eq!(known.len(), 1, "{known:?}");
    assert_eq!(known[0].width, 2);
}
