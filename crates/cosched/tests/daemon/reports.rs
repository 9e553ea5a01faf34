//! What the daemon reports: `cosched bench daemon`'s figures, `cosched report --since` over several
//! daemon runs, and the slowdown so far of a running job.

use crate::common::*;
use cosched_service::protocol::JobState;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn bench_daemon_prints_every_figure() {
    let _serial = one_at_a_time();
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["bench", "daemon", "--clients", "2", "--jobs", "20"])
        .args(["--idle-jobs", "3", "--idle-seconds", "1"])
        .args([
            "--attack",
            "--attack-seconds",
            "1",
            "--history",
            "500",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(figures["jobs"], 20);
    assert!(figures["submissions_per_s"].as_f64().unwrap() > 0.0);
    for quantile in ["p50", "p99", "max"] {
        assert!(figures["latency_ms"][quantile].as_f64().unwrap() > 0.0);
    }
    assert!(figures["idle_cpu_percent"].as_f64().unwrap() >= 0.0);
    let attack = &figures["attack"];
    for half in ["quiet", "attacked"] {
        assert!(
            attack[half]["switches"].as_u64().unwrap() > 0,
            "no slot switch {half}: {figures}"
        );
    }
    assert!(attack["hostile_requests"].as_u64().unwrap() > 0);
    let users = &attack["users"];
    if users.is_null() {
        eprintln!("SKIPPED: the hostile users need root and setpriv");
    } else {
        // The per-user connection limit (64 by default) holds the hostile user, and the others
        // get in beside it.
        assert_eq!(users["hostile_connections_held"], 64, "{users}");
        assert_eq!(users["polite_users_connected"], 3, "{users}");
        assert_eq!(users["fair_share"].as_array().unwrap().len(), 3, "{users}");
        assert!(users["switches"].as_u64().unwrap() > 0, "{users}");
    }
    let history = &figures["history"];
    assert_eq!(history["jobs"], 500);
    for figure in ["restart_s", "rss_mib", "empty_restart_s", "list_all_s"] {
        assert!(
            history[figure].as_f64().unwrap() > 0.0,
            "{figure}: {history}"
        );
    }
    assert_eq!(figures["targets"]["submissions_per_s"], 500.0);
}

#[test]
fn report_since_covers_the_jobs_of_every_daemon_run_in_the_window() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut first = Daemon::start(dir.path(), "eq");
    let early: Vec<u64> = (0..2).map(|_| first.submit(&["/bin/true"])).collect();
    first.wait(early);
    first.stop();
    let between = cosched_service::protocol::now_unix();
    let second = Daemon::start(dir.path(), "eq");
    let late = second.submit(&["/bin/true"]);
    second.wait(vec![late]);
    let report = |window: &[&str], out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cosched"))
            .arg("report")
            .args(window)
            .arg("--state")
            .arg(&second.state)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    };
    // The running daemon's trace is read as it stands.
    let all = dir.path().join("all");
    let out = report(&["--since", "1h"], &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.join("report.html").is_file());
    let csv = std::fs::read_to_string(all.join("jobs.csv")).unwrap();
    let ok_jobs = |csv: &str| csv.lines().skip(1).filter(|l| l.contains(",ok,")).count();
    assert_eq!(ok_jobs(&csv), 3, "{csv}");
    let since_restart = dir.path().join("late");
    let at = format!("@{between}");
    let out = report(&["--since", &at], &since_restart);
    assert!(out.status.success());
    let csv = std::fs::read_to_string(since_restart.join("jobs.csv")).unwrap();
    assert_eq!(ok_jobs(&csv), 1, "{csv}");
    // The journal's accounting of the jobs that ended in the window, one line each.
    let accounting = std::fs::read_to_string(since_restart.join("accounting.csv")).unwrap();
    let rows: Vec<&str> = accounting.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{accounting}");
    assert!(
        rows[0].starts_with(&format!("{late},true,")),
        "{accounting}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("accounting: 1 jobs ended"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = report(
        &["--since", "3h", "--until", "2h"],
        &dir.path().join("none"),
    );
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("no job reached the daemon"), "{message}");
}

#[test]
fn jobs_show_the_slowdown_so_far_of_a_command_seen_to_finish_before() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let first = daemon.submit(&["sleep", "0.5"]);
    let [done] = &daemon.wait(vec![first])[..] else {
        panic!("one job")
    };
    assert_eq!(done.state, JobState::Done);
    let alone = done.finished.unwrap() - done.started.unwrap();
    assert_eq!(
        show(&daemon, first).slowdown,
        Some(1.0),
        "the shortest run is itself"
    );

    let again = daemon.submit(&["sleep", "0.5"]);
    let never_seen = daemon.submit(&["sleep", "3"]);
    assert!(wait::until(Duration::from_secs(10), || show(
        &daemon, again
    )
    .state
        == JobState::Running));
    let running = show(&daemon, again);
    let so_far = running
        .slowdown
        .expect("a command seen to finish has a slowdown");
    let elapsed = cosched_service::protocol::now_unix() - running.started.unwrap();
    assert!(
        so_far > 0.0 && so_far <= elapsed / alone + 0.01,
        "{so_far} against {elapsed} s over {alone} s"
    );
    assert_eq!(show(&daemon, never_seen).slowdown, None);

    let listing = daemon.cosched(&["jobs"]);
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(text.lines().next().unwrap().contains("slowdown"), "{text}");
    daemon.wait(vec![again, never_seen]);
    daemon.stop();
}
