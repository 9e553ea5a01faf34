//! The daemon learns from its jobs: a job that ran alone on its CPUs leaves its time there in the
//! daemon's own store for its user, and that user's next job of the same command line reaches the
//! policy with it (`times_alone`).

use cosched_service::harness::{submission, Launch};
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const BUSY: &[&str] = &[
    "sh",
    "-c",
    "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
];

/// Every arrival record of the daemon's traces, in order.
fn arrivals(state: &Path) -> Vec<Value> {
    let mut traces: Vec<_> = std::fs::read_dir(state.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        // Each trace has its daemon's metadata.json beside it.
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    traces.sort();
    (traces.iter())
        .flat_map(|t| {
            let text = std::fs::read_to_string(t).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r["type"] == "arrival")
        .collect()
}

#[test]
fn a_daemon_job_arrives_with_the_time_alone_of_its_users_last_run() {
    let dir = tempfile::tempdir().unwrap();
    let launch = Launch::new(
        Path::new(env!("CARGO_BIN_EXE_cosched")),
        dir.path(),
        "state",
    );
    let mut daemon = launch.args(["--policy", "auto"]).start().unwrap();
    let first = daemon.submit(submission(BUSY)).unwrap();
    let ended = daemon.wait(vec![first]).unwrap();
    let second = daemon.submit(submission(BUSY)).unwrap();
    daemon.wait(vec![second]).unwrap();
    daemon.stop().unwrap();

    let state = dir.path().join("state");
    let arrivals = arrivals(&state);
    assert_eq!(arrivals.len(), 2, "{arrivals:?}");
    let hint = |arrival: &Value| arrival["job"]["hints"]["times_alone"].clone();
    assert_eq!(hint(&arrivals[0]), Value::Null, "nothing known at first");
    let known = hint(&arrivals[1]);
    // One thread, alone on one CPU from start to finish.
    assert_eq!(known[0][0], 1, "{known}");
    let seconds = known[0][1].as_f64().unwrap();
    let job = &ended[0];
    let took = job.finished.unwrap() - job.started.unwrap();
    assert!(
        (seconds - took).abs() <= 0.2 * took + 0.1,
        "{seconds:.3} s alone against {took:.3} s"
    );

    // The store is the daemon's, in its state directory, readable by it alone.
    let uid = nix::unistd::geteuid().as_raw();
    let store = std::fs::metadata(state.join(format!("scaling/{uid}.json"))).unwrap();
    assert_eq!(store.uid(), uid);
    assert_eq!(store.permissions().mode() & 0o077, 0);
}
