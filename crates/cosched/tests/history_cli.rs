//! A real run learns from the ones before it: the time a program took alone on its CPUs in one `cosched
//! run` reaches the policy as that program's time alone at that width (`times_alone`) in the next.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const WORKLOAD: &str = r#"
[workload]
name = "history"

[[job]]
name = "busy"
command = ["sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"]
"#;

/// A real run under `auto` without privileges, so that it works wherever the tests run.
fn run_auto(workload: &Path, out: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .arg("run")
        .arg(workload)
        .args([
            "--policy",
            "auto",
            "--mechanism",
            "affinity",
            "--freezer",
            "signal",
            "-o",
        ])
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}

fn records(trace: &Path) -> Vec<Value> {
    (std::fs::read_to_string(trace).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The job's `times_alone` hint as the policy received it.
fn times_alone(records: &[Value]) -> Vec<(u64, f64)> {
    let arrival = (records.iter())
        .find(|r| r["type"] == "arrival")
        .expect("an arrival record");
    let Some(points) = arrival["job"]["hints"]["times_alone"].as_array() else {
        return Vec::new();
    };
    (points.iter())
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
        .collect()
}

/// Seconds from the job's start to its finish.
fn elapsed(records: &[Value]) -> f64 {
    let at = |kind: &str| {
        (records.iter())
            .find(|r| r["type"] == kind)
            .and_then(|r| r["t"].as_f64())
            .unwrap_or_else(|| panic!("no {kind} record"))
    };
    at("finish") - at("start")
}

#[test]
fn the_second_real_run_hands_the_policy_the_first_runs_time_alone() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("history.toml");
    std::fs::write(&workload, WORKLOAD).unwrap();

    run_auto(&workload, &dir.path().join("first"));
    let first = records(&dir.path().join("first/trace.jsonl"));
    assert_eq!(times_alone(&first), vec![], "nothing is known before");
    let field = |kind: &str, name: &str| {
        (first.iter())
            .find(|r| r["type"] == kind)
            .and_then(|r| r[name].as_u64())
            .unwrap()
    };
    // Alone, it holds the whole machine; it can use as many CPUs as it was started with threads.
    let width = field("start", "threads").min(field("run_start", "cpus"));

    run_auto(&workload, &dir.path().join("second"));
    let second = records(&dir.path().join("second/trace.jsonl"));
    let known = times_alone(&second);
    let [(at, seconds)] = known.as_slice() else {
        panic!("one width known after one run alone, got {known:?}");
    };
    assert_eq!(*at, width, "{known:?}");
    let took = elapsed(&first);
    assert!(
        (seconds - took).abs() <= 0.1 * took + 0.1,
        "{seconds:.3} s alone against {took:.3} s in the first run"
    );
}
