//! `cosched report --since`, a daemon's history as a report, carries what `compare`'s results carry:
//! the build, machine and command line of the daemon that ran the jobs, and each job's command.

use cosched_report::csv_fields;
use cosched_service::harness::{submission, Launch};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The rows of a CSV file as maps from column name to cell.
fn csv_maps(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = csv_fields(lines.next().expect("a header"));
    lines
        .map(|line| {
            let row = csv_fields(line);
            assert_eq!(row.len(), header.len(), "{line}");
            header.iter().cloned().zip(row).collect()
        })
        .collect()
}

fn proc_text(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

#[test]
fn a_daemon_report_names_the_daemons_build_and_machine_and_each_jobs_command() {
    let dir = tempfile::tempdir().unwrap();
    let cosched = Path::new(env!("CARGO_BIN_EXE_cosched"));
    let mut daemon = Launch::new(cosched, dir.path(), "state").start().unwrap();
    // Two jobs of one name: only their ids tell their commands apart.
    let quiet = daemon.submit(submission(&["sh", "-c", "exit 0"])).unwrap();
    let spaced = daemon
        .submit(submission(&["sh", "-c", "true 'two words'"]))
        .unwrap();
    daemon.wait(vec![quiet, spaced]).unwrap();
    daemon.stop().unwrap();

    let out = dir.path().join("report");
    let report = Command::new(cosched)
        .args(["report", "--since", "1h", "--state"])
        .arg(dir.path().join("state"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );

    let runs = csv_maps(&out.join("policies.csv"));
    assert_eq!(runs.len(), 1, "one daemon start: {runs:?}");
    let run = &runs[0];
    assert_eq!(run["cosched_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(run["host"], proc_text("/proc/sys/kernel/hostname"));
    assert_eq!(run["kernel"], proc_text("/proc/sys/kernel/osrelease"));
    for column in ["cgroup_version", "privileges", "date"] {
        assert!(!run[column].is_empty(), "{column} is empty: {run:?}");
    }
    assert!(run["command_line"].contains(" daemon --socket "), "{run:?}");
    // A daemon's jobs are real runs: no random seed, so the column stays empty.
    assert_eq!(run["seed_id"], "");

    let jobs = csv_maps(&out.join("jobs.csv"));
    let command = |id: u64| {
        let job = (jobs.iter())
            .find(|j| j["job_id"] == id.to_string())
            .unwrap_or_else(|| panic!("no job {id} in {jobs:?}"));
        (job["job"].clone(), job["command"].clone())
    };
    assert_eq!(command(quiet), ("sh".into(), "sh -c 'exit 0'".into()));
    assert_eq!(
        command(spaced),
        ("sh".into(), r#"sh -c 'true '\''two words'\'''"#.into())
    );
}
