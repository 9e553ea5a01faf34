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
            "--preset",
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
        "results.json",
    ] {
        assert!(out_dir.join(file).is_file(), "{file} missing");
    }
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
