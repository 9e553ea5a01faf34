//! The real executor on this machine, for each placement/freezer pair it supports: placement read back
//! from procfs, freezing, gang-scheduled CPU shares, SIGKILL of cosched, and failing jobs.

mod common;

use common::*;
use cosched_core::trace::{read_trace, ExitStatus, Record};
use cosched_core::Plan;
use cosched_linux::{run, Freezer, Placement, RunOptions, RunReport};
use std::path::Path;
use std::time::Duration;

fn options(dir: &Path, placement: Placement, freezer: Freezer) -> RunOptions {
    RunOptions {
        placement: Some(placement),
        freezer: Some(freezer),
        sample_interval: 0.2,
        ..RunOptions::new(dir.join("trace.jsonl"), dir.join("out"))
    }
}

fn assert_no_leftovers(pid: u32) {
    let left = cgroups_named(&format!("cosched-{pid}-"));
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

fn assert_all_ok(report: &RunReport) {
    for job in &report.jobs {
        assert_eq!(job.status, ExitStatus::Ok, "{job:?}");
    }
}

#[test]
fn every_thread_runs_on_the_planned_cpus_including_later_threads_and_after_a_change() {
    let _serial = serial();
    let machine = topology();
    if machine.num_cpus() < 2 {
        eprintln!("SKIPPED: needs 2 CPUs");
        return;
    }
    // Generous limits: each step waits for a state it observes, never for a fixed time.
    let limit = Duration::from_secs(30);
    for (placement, freezer) in mechanism_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = |job: u32| format!("{}-job{job}", dir.path().display());
        // Three threads each, two of them created 200 ms after start; the CPUs swap once the test
        // has seen every thread on its first CPUs. The jobs spin until the test ends them.
        let workload = workload(
            dir.path(),
            &[
                ("a", spin_command(3, 120.0, 200, &marker(0))),
                ("b", spin_command(3, 120.0, 200, &marker(1))),
            ],
        );
        let first = Plan::space_sharing(slot(1.0, &[(0, "0"), (1, "1")]).assignments);
        let swapped = Plan::space_sharing(slot(1.0, &[(0, "1"), (1, "0")]).assignments);
        let (policy, gate) = Gated::new(2, vec![first, swapped]);
        let options = options(dir.path(), placement, freezer);
        let handle = std::thread::spawn({
            let workload = workload.clone();
            let machine = machine.clone();
            move || run(&workload, &machine, policy, &options)
        });
        let all_threads_started = || (0..2).all(|job| allowed_cpus_of(&marker(job)).len() == 3);
        let before = wait::until(limit, all_threads_started)
            .then(|| [allowed_cpus_of(&marker(0)), allowed_cpus_of(&marker(1))]);
        gate.open_next(limit);
        let on = |job: u32, want: &str| {
            let threads = allowed_cpus_of(&marker(job));
            !threads.is_empty() && threads.iter().all(|(_, allowed)| allowed == &cpus(want))
        };
        let swapped_in_time = wait::until(limit, || on(0, "1") && on(1, "0"));
        let after = [allowed_cpus_of(&marker(0)), allowed_cpus_of(&marker(1))];
        stop_spinning(&dir.path().display().to_string());
        let report = handle.join().unwrap().unwrap();
        assert_all_ok(&report);
        let before =
            before.unwrap_or_else(|| panic!("{placement}/{freezer}: threads never started"));
        assert!(
            swapped_in_time,
            "{placement}/{freezer}: never swapped: {after:?}"
        );
        for (threads, want) in [
            (&before[0], "0"),
            (&before[1], "1"),
            (&after[0], "1"),
            (&after[1], "0"),
        ] {
            assert_eq!(
                threads.len(),
                3,
                "{placement}/{freezer}: threads {threads:?}"
            );
            for (tid, allowed) in threads {
                assert_eq!(allowed, &cpus(want), "{placement}/{freezer}: thread {tid}");
            }
        }
        assert_no_leftovers(std::process::id());
    }
}

#[test]
fn a_frozen_job_uses_no_cpu_until_its_slot_comes() {
    let _serial = serial();
    let machine = topology();
    let limit = Duration::from_secs(30);
    for (placement, freezer) in mechanism_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = |job: u32| format!("{}-job{job}", dir.path().display());
        let workload = workload(
            dir.path(),
            &[
                ("a", spin_command(1, 120.0, 0, &marker(0))),
                ("b", spin_command(1, 120.0, 0, &marker(1))),
            ],
        );
        // Both run, then b is out of the cycle while a runs 0.3 s of CPU, then both run again; each
        // step comes when the test has seen the previous one happen.
        let all = machine.cpus().to_string();
        let both = Plan::space_sharing(slot(1.0, &[(0, &all), (1, &all)]).assignments);
        let only_a = Plan::space_sharing(slot(1.0, &[(0, &all)]).assignments);
        let (policy, gate) = Gated::new(2, vec![both.clone(), only_a, both]);
        let options = options(dir.path(), placement, freezer);
        let handle = std::thread::spawn({
            let workload = workload.clone();
            let machine = machine.clone();
            move || run(&workload, &machine, policy, &options)
        });
        let pid = |job: u32| processes_with(&marker(job)).first().copied();
        assert!(
            wait::until(limit, || pid(0).is_some() && pid(1).is_some()),
            "{placement}/{freezer}: the jobs never started"
        );
        let (a, b) = (pid(0).unwrap(), pid(1).unwrap());
        assert!(
            wait::until(limit, || cpu_ns(b) > 0),
            "{placement}/{freezer}: b never ran before its freeze"
        );
        gate.open_next(limit);
        let (a0, b0) = (cpu_ns(a), cpu_ns(b));
        let a_ran = wait::until(limit, || cpu_ns(a) > a0 + 300_000_000);
        let (a1, b1) = (cpu_ns(a), cpu_ns(b));
        gate.open_next(limit);
        let b_resumed = wait::until(limit, || cpu_ns(b) > b1 + 100_000_000);
        stop_spinning(&dir.path().display().to_string());
        let report = handle.join().unwrap().unwrap();
        assert_all_ok(&report);
        assert_eq!(b1, b0, "{placement}/{freezer}: frozen job b ran");
        assert!(
            a_ran,
            "{placement}/{freezer}: job a barely ran: {a0} -> {a1} ns"
        );
        assert!(b_resumed, "{placement}/{freezer}: b never resumed");
        assert_no_leftovers(std::process::id());
    }
}

#[test]
fn a_two_job_gang_with_50_ms_slots_gives_each_job_half_the_cpu() {
    let _serial = serial();
    let machine = topology();
    for (placement, freezer) in mechanism_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let threads = machine.num_cpus().min(8) as u32;
        let workload = workload(
            dir.path(),
            &[
                ("a", spin_command(threads, 2.0, 0, "gang-a")),
                ("b", spin_command(threads, 2.0, 0, "gang-b")),
            ],
        );
        let all = machine.cpus().to_string();
        let gang = Plan {
            slots: vec![slot(0.05, &[(0, &all)]), slot(0.05, &[(1, &all)])],
            ..Plan::default()
        };
        let report = run(
            &workload,
            &machine,
            Scripted::new(2, vec![gang]),
            &options(dir.path(), placement, freezer),
        )
        .unwrap();
        assert_all_ok(&report);
        let (a, b) = (report.jobs[0].cpu_seconds, report.jobs[1].cpu_seconds);
        let share = a / (a + b);
        eprintln!(
            "{placement}/{freezer}: CPU a {a:.3} s, b {b:.3} s, share of a {share:.3}; {} switches, max skew {:.1} µs",
            report.switch_lateness.len(),
            report.switch_skew.iter().cloned().fold(0.0, f64::max) * 1e6
        );
        assert!(
            (0.45..=0.55).contains(&share),
            "{placement}/{freezer}: a got {share:.3} of the CPU time"
        );
        assert!(
            report.switch_lateness.len() >= 30,
            "{placement}/{freezer}: only {} slot switches",
            report.switch_lateness.len()
        );
        assert_no_leftovers(std::process::id());
    }
}

#[test]
fn a_job_that_cannot_start_fails_with_the_os_error_and_the_others_finish() {
    let _serial = serial();
    let machine = topology();
    for (placement, freezer) in mechanism_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let workload = workload(
            dir.path(),
            &[
                ("missing", vec!["/nonexistent/cosched-test-program".into()]),
                ("fine", vec!["sh".into(), "-c".into(), "echo hello".into()]),
            ],
        );
        let all = machine.cpus().to_string();
        let plan = Plan::space_sharing(slot(1.0, &[(0, &all), (1, &all)]).assignments);
        let report = run(
            &workload,
            &machine,
            Scripted::new(2, vec![plan]),
            &options(dir.path(), placement, freezer),
        )
        .unwrap();
        let missing = &report.jobs[0];
        assert_eq!(missing.status, ExitStatus::Failed);
        let error = missing.error.as_deref().unwrap_or("");
        assert!(
            error.contains("No such file or directory")
                && error.contains("/nonexistent/cosched-test-program"),
            "{error}"
        );
        assert_eq!(report.jobs[1].status, ExitStatus::Ok);
        assert_eq!(
            std::fs::read_to_string(&report.jobs[1].stdout).unwrap(),
            "hello\n"
        );
        let trace = read_trace(
            std::io::BufReader::new(std::fs::File::open(&report.trace).unwrap()),
            "trace",
        )
        .unwrap();
        let failed = trace.iter().any(|l| matches!(&l.record, Record::Finish { job, status: ExitStatus::Failed, error: Some(e), .. } if job.0 == 0 && e.contains("No such file")));
        assert!(failed, "no failed finish record for the missing program");
        assert!(
            matches!(&trace[0].record, Record::RunStart { mechanism: Some(m), .. } if m.contains(placement.name()))
        );
        assert_no_leftovers(std::process::id());
    }
}

/// Env var that turns `helper_process_for_the_sigkill_test` into a cosched run of the given pair.
const CHILD_ENV: &str = "COSCHED_LINUX_TEST_CHILD";

#[test]
fn helper_process_for_the_sigkill_test() {
    let Ok(request) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = request.split(',');
    let placement: Placement = parts.next().unwrap().parse().unwrap();
    let freezer: Freezer = parts.next().unwrap().parse().unwrap();
    let dir = std::path::PathBuf::from(parts.next().unwrap());
    let machine = topology();
    let marker = dir.display().to_string();
    let workload = workload(
        &dir,
        &[
            ("a", spin_command(2, 30.0, 0, &marker)),
            ("b", spin_command(2, 30.0, 0, &marker)),
        ],
    );
    let all = machine.cpus().to_string();
    let gang = Plan {
        slots: vec![slot(0.05, &[(0, &all)]), slot(0.05, &[(1, &all)])],
        ..Plan::default()
    };
    let _ = run(
        &workload,
        &machine,
        Scripted::new(2, vec![gang]),
        &options(&dir, placement, freezer),
    );
}

#[test]
fn after_sigkill_or_sigterm_of_cosched_no_job_stays_frozen_and_nothing_remains() {
    let _serial = serial();
    let pairs = mechanism_pairs();
    let cases = pairs
        .iter()
        .map(|&pair| (pair, libc::SIGKILL))
        .chain(pairs.first().map(|&pair| (pair, libc::SIGTERM)));
    for ((placement, freezer), signal) in cases {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().display().to_string();
        let mut cosched = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_process_for_the_sigkill_test",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{placement},{freezer},{marker}"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = wait::until(Duration::from_secs(10), || {
            processes_with(&marker).len() == 2
        });
        assert!(started, "{placement}/{freezer}: the jobs did not start");
        let jobs = processes_with(&marker);
        // The trace holds the gang plan once it is enforced (the executor flushes the trace before
        // it sleeps): from then on, one of the two jobs is frozen at any moment.
        let trace = dir.path().join("trace.jsonl");
        let enforced = wait::until(Duration::from_secs(10), || {
            std::fs::read_to_string(&trace).is_ok_and(|t| t.contains(r#""type":"plan""#))
        });
        assert!(enforced, "{placement}/{freezer}: the plan was not enforced");
        let prefix = format!("cosched-{}-", cosched.id());
        let had_cgroups = !cgroups_named(&prefix).is_empty();
        unsafe { libc::kill(cosched.id() as i32, signal) };
        cosched.wait().unwrap();
        // What cosched leaves is cleaned up by its watchdog, which outlives it by a moment.
        let gone = |pid: i32| matches!(state(pid), None | Some('Z') | Some('X'));
        let shm_pages = || {
            std::fs::read_dir("/dev/shm")
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect::<Vec<_>>()
        };
        wait::until(Duration::from_secs(10), || {
            jobs.iter().all(|&pid| gone(pid))
                && cgroups_named(&prefix).is_empty()
                && shm_pages().is_empty()
        });
        for pid in &jobs {
            let state = state(*pid);
            assert!(
                matches!(state, None | Some('Z') | Some('X')),
                "{placement}/{freezer}: job process {pid} is still there in state {state:?}"
            );
        }
        assert_eq!(
            had_cgroups,
            placement != Placement::Affinity || freezer != Freezer::Signal
        );
        let left = cgroups_named(&prefix);
        assert!(
            left.is_empty(),
            "{placement}/{freezer}: cgroups left: {left:?}"
        );
        let pages = shm_pages();
        assert!(
            pages.is_empty(),
            "{placement}/{freezer}: control pages left: {pages:?}"
        );
    }
}
