//! A malleable-labelled OpenMP job stuck in one long parallel region (`longregion`, spinning barrier) is
//! shrunk to one CPU when two more jobs arrive; it cannot follow, and once its advice is overdue the
//! policy must give its two threads CPUs again. Affinity is read back from procfs. And one started on
//! one CPU, which keeps its one thread when widened, is learnt to be moldable: BP starts it on both
//! CPUs the next time, not rigid at the one thread it was given once.

mod common;

use common::*;
use cosched_core::observe::ADVICE_DEADLINE;
use cosched_core::trace::{read_trace, ExitStatus, Record};
use cosched_core::workload::Workload;
use cosched_linux::{run, RunOptions};
use std::time::{Duration, Instant};

/// A run not ended by then is hung: far more than the stuck run takes, even on a loaded machine.
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// This machine's topology where it has the two CPUs these tests are written for; `None`, saying
/// so, elsewhere.
fn two_cpu_machine() -> Option<cosched_core::Topology> {
    let machine = topology();
    if machine.num_cpus() != 2 {
        eprintln!(
            "SKIPPED: written for a 2-CPU machine, this one has {}",
            machine.num_cpus()
        );
        return None;
    }
    Some(machine)
}

#[test]
fn a_job_stuck_in_one_region_gets_cpus_for_the_threads_it_runs() {
    let _serial = serial();
    let Some(machine) = two_cpu_machine() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A link with a unique name, so that its process can be found by its command line.
    let stuck = dir.path().join("longregion-stuck");
    std::os::unix::fs::symlink(cosched_native::benchmark("longregion"), &stuck).unwrap();
    let spin = |label: &str| spin_command(1, 6.0, 0, &format!("{}-{label}", dir.path().display()));
    let quoted = |args: Vec<String>| {
        args.iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        r#"[workload]
name = "stuck"
[[job]]
name = "stuck"
kind = "malleable"
max_threads = 2
command = [{:?}, "--rounds", "6000", "--work", "1000", "--setup-regions", "1"]
env = {{ OMP_WAIT_POLICY = "active" }}
[[job]]
name = "one"
arrival = 0.5
kind = "rigid"
max_threads = 1
command = [{}]
[[job]]
name = "two"
arrival = 0.5
kind = "rigid"
max_threads = 1
command = [{}]
"#,
        stuck.display().to_string(),
        quoted(spin("one")),
        quoted(spin("two")),
    );
    let mut workload = Workload::parse(&text, "stuck.toml").unwrap();
    workload.dir = dir.path().to_path_buf();
    let options = RunOptions {
        sample_interval: 0.2,
        ..RunOptions::new(dir.path().join("trace.jsonl"), dir.path().join("out"))
    };
    let policy = cosched_policies::create("taco-basic").unwrap();
    let start = Instant::now();
    let handle = std::thread::spawn({
        let machine = machine.clone();
        move || run(&workload, &machine, policy, &options)
    });
    // (seconds since start, fewest CPUs any of its threads may use, its thread count)
    let mut seen = Vec::new();
    let ended = wait::until(RUN_LIMIT, || {
        let marker = stuck.display().to_string();
        let threads: Vec<usize> = processes_with(&marker)
            .into_iter()
            .flat_map(|pid| {
                cosched_linux::procfs::threads(pid)
                    .into_iter()
                    .filter_map(move |tid| cosched_linux::affinity::allowed_cpus(pid, tid).ok())
            })
            .map(|cpus| cpus.len())
            .collect();
        if let Some(&fewest) = threads.iter().min() {
            seen.push((start.elapsed().as_secs_f64(), fewest, threads.len()));
        }
        handle.is_finished()
    });
    assert!(ended, "the run did not end within {RUN_LIMIT:?}");
    let report = handle.join().unwrap().unwrap();
    for job in &report.jobs {
        assert_eq!(job.status, ExitStatus::Ok, "{job:?}");
    }
    let trace = read_trace(
        std::io::BufReader::new(std::fs::File::open(&report.trace).unwrap()),
        "trace",
    )
    .unwrap();
    let shrunk = trace.iter().any(|l| matches!(&l.record, Record::Plan { plan } if plan.advice.get(&cosched_core::JobId(0)) == Some(&1)));
    assert!(
        shrunk,
        "the policy never advised the stuck job one thread; nothing was tested"
    );
    let followed = trace
        .iter()
        .any(|l| matches!(&l.record, Record::Threads { job, threads: 1 } if job.0 == 0));
    assert!(
        !followed,
        "the job left its region after all; nothing was tested"
    );
    // Its advice was given at the earliest at 0.5 s; well after the deadline it must hold 2 CPUs.
    let settled = 0.5 + ADVICE_DEADLINE + 1.5;
    let late: Vec<_> = seen.iter().filter(|(t, _, _)| *t > settled).collect();
    assert!(
        !late.is_empty(),
        "the job ended before {settled} s: {seen:?}"
    );
    for (t, fewest, threads) in late {
        assert!(
            *fewest >= 2,
            "at {t:.1} s a thread of the stuck job ({threads} threads) may use only {fewest} CPU(s)"
        );
    }
}

/// Runs `text` (the workload) in `dir` under `policy` with `history`, and returns its jobs and trace.
fn run_in(
    dir: &std::path::Path,
    name: &str,
    text: &str,
    policy: &str,
    history: cosched_linux::IsolatedTimes,
) -> (Workload, Vec<cosched_core::trace::TraceLine>) {
    let mut workload = Workload::parse(text, "w.toml").unwrap();
    workload.dir = dir.to_path_buf();
    let options = RunOptions {
        sample_interval: 0.2,
        isolated: history,
        ..RunOptions::new(dir.join(format!("{name}.jsonl")), dir.join(name))
    };
    let policy = cosched_policies::create(policy).unwrap();
    let report = run(&workload, &topology(), policy, &options).unwrap();
    for job in &report.jobs {
        assert_eq!(job.status, ExitStatus::Ok, "{job:?}");
    }
    let file = std::fs::File::open(&report.trace).unwrap();
    let trace = read_trace(std::io::BufReader::new(file), "trace").unwrap();
    (workload, trace)
}

#[test]
fn a_long_region_started_on_one_cpu_starts_on_both_under_bp_next_time() {
    let _serial = serial();
    let Some(machine) = two_cpu_machine() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spin = spin_command(1, 3.0, 0, &format!("{}-one", dir.path().display()));
    let text = format!(
        r#"[workload]
name = "narrow"
[[job]]
name = "one"
kind = "rigid"
max_threads = 1
command = [{}]
[[job]]
name = "region"
arrival = 0.2
kind = "malleable"
max_threads = 2
command = [{:?}, "--rounds", "8000", "--work", "1000"]
"#,
        (spin.iter().map(|a| format!("{a:?}")))
            .collect::<Vec<_>>()
            .join(", "),
        cosched_native::benchmark("longregion")
            .display()
            .to_string(),
    );
    // Beside a single-threaded job it starts with one thread; widened once that job ends, it keeps
    // its one thread to the end of its region.
    let history = cosched_linux::IsolatedTimes::default();
    let (workload, first) = run_in(dir.path(), "first", &text, "eq", history.clone());
    let started = |trace: &[cosched_core::trace::TraceLine]| {
        (trace.iter()).find_map(|l| match l.record {
            Record::Start { job, threads, .. } if job.0 == 1 => Some(threads),
            _ => None,
        })
    };
    assert_eq!(started(&first), Some(1), "nothing was tested");
    let mut history = history;
    history.learn(&machine, &workload.jobs, &first);
    let known = history.behaviour(&machine, &workload.jobs[1].command);
    assert_eq!(
        known.and_then(|b| b.advice),
        Some(cosched_core::observe::Advice::AtStart),
        "{known:?}"
    );
    let (_, second) = run_in(dir.path(), "second", &text, "bp", history);
    assert_eq!(
        started(&second),
        Some(2),
        "moldable, not rigid at one thread"
    );
}
