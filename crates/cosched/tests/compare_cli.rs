//! `cosched compare --sim`: every named policy runs, one table, traces and report in the out dir.

use std::process::Command;

const WORKLOAD: &str = r#"
[workload]
name = "pair"

[[job]]
name = "serialish"
profile = "amdahl(serial=0.2, runtime=20)"

[[job]]
name = "parallel"
arrival = 1.0
profile = "amdahl(serial=0.01, runtime=20)"
"#;

fn cosched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
}

#[test]
fn simulated_comparison_writes_one_row_and_trace_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("pair.toml");
    std::fs::write(&workload, WORKLOAD).unwrap();
    let out_dir = dir.path().join("out");
    let out = cosched()
        .arg("compare")
        .arg(&workload)
        .args([
            "--sim",
            "--machine",
            "gang-opteron8380",
            "--policy",
            "ue,bp",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policies: Vec<&str> = stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .take(2)
        .collect();
    assert_eq!(policies, ["ue", "bp"], "{stdout}");
    let bp_row = stdout.lines().find(|l| l.starts_with("bp ")).unwrap();
    assert!(bp_row.contains(" 100% "), "{stdout}");
    for file in [
        "ue.jsonl",
        "bp.jsonl",
        "report.html",
        "jobs.csv",
        "policies.csv",
        "timeline.csv",
        "results.json",
        "metadata.json",
    ] {
        assert!(out_dir.join(file).is_file(), "{file} missing");
    }
    // The run-level CSV says which command made it, and results.json finds traces from its own
    // directory whatever directory the command ran in.
    let policies = std::fs::read_to_string(out_dir.join("policies.csv")).unwrap();
    let header: Vec<&str> = policies.lines().next().unwrap().split(',').collect();
    let command_line = header.iter().position(|c| *c == "command_line").unwrap();
    let kernel = header.iter().position(|c| *c == "kernel").unwrap();
    let ue_row: Vec<&str> = policies.lines().nth(1).unwrap().split(',').collect();
    assert!(ue_row[command_line].contains("compare"), "{policies}");
    assert!(!ue_row[kernel].is_empty(), "{policies}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["runs"][0]["trace"], "ue.jsonl");
    assert!(results["metadata"]["cpu_model"].is_string());
}

#[test]
fn unknown_policy_names_the_valid_ones() {
    let out = cosched()
        .args(["compare", "--sim", "--policy", "ue,nonesuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: unknown policy \"nonesuch\"; valid policies: ue"),
        "{stderr}"
    );
}

/// A real comparison: isolated times are measured first, a job that fails shows as failed in the table
/// and the CSV while the other jobs and policies go on.
#[test]
fn real_comparison_measures_isolated_times_and_survives_a_failing_job() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("mixed.toml");
    std::fs::write(
        &workload,
        r#"
[workload]
name = "mixed"

[[job]]
name = "busy"
command = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]

[[job]]
name = "broken"
arrival = 0.1
command = ["sh", "-c", "exit 3"]
"#,
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = cosched()
        .arg("compare")
        .arg(&workload)
        .args(["--policy", "ue,taco", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Every policy completed; a job failed under each, which the exit status says.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("broken") && stderr.contains("failed alone"),
        "{stderr}"
    );
    let isolated = std::fs::read_to_string(dir.path().join("mixed.isolated.json")).unwrap();
    assert!(
        isolated.contains("\"busy\"") && !isolated.contains("\"broken\""),
        "{isolated}"
    );
    // The calibration and each policy's run are kept as scaling history of `busy`'s command line.
    let store: serde_json::Value = serde_json::from_str(&isolated).unwrap();
    let scaling = store["scaling"].as_array().unwrap();
    assert_eq!(scaling.len(), 1, "{isolated}");
    let runs = scaling[0]["runs"].as_array().unwrap();
    assert!(runs.len() >= 2, "{isolated}");
    assert!(runs
        .iter()
        .all(|r| r["spells"][0]["seconds"].as_f64().unwrap() > 0.0));
    for policy in ["ue", "taco"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{policy} ")))
            .unwrap_or_else(|| panic!("no {policy} row in\n{stdout}"));
        let failed: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(failed[failed.len() - 2], "1", "{stdout}");
        assert!(out_dir.join(format!("{policy}.jsonl")).is_file());
    }
    let jobs = std::fs::read_to_string(out_dir.join("jobs.csv")).unwrap();
    assert!(
        jobs.lines()
            .any(|l| l.contains("broken") && l.contains("failed")),
        "{jobs}"
    );
}
