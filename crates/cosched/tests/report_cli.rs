//! `cosched report` on trace files: a run with a job that failed is reported, not aborted.

use std::path::Path;
use std::process::Command;

const TACO: &str = r#"{"t":0.0,"type":"run_start","version":1,"executor":"real","policy":"taco","machine":"this","cpus":2,"workload":"mixed"}
{"t":0.0,"type":"arrival","job":{"id":0,"name":"lu","arrival":0.0,"kind":"malleable","min_threads":1,"max_threads":2,"coschedule":true,"weight":1.0,"hints":{"sync":"spin"}},"isolated":4.0}
{"t":0.0,"type":"plan","plan":{"slots":[{"length":1.0,"assignments":[{"job":0,"cpus":"0-1"}]}],"advice":{"0":2}}}
{"t":0.0,"type":"start","job":0,"threads":2,"pid":100}
{"t":0.5,"type":"arrival","job":{"id":1,"name":"broken","arrival":0.5,"kind":"rigid","min_threads":1,"max_threads":1,"coschedule":true,"weight":1.0,"hints":{}},"isolated":2.0}
{"t":0.5,"type":"plan","plan":{"slots":[{"length":1.0,"assignments":[{"job":0,"cpus":"0"},{"job":1,"cpus":"1"}]}],"advice":{"0":1}}}
{"t":0.5,"type":"start","job":1,"threads":1,"pid":101}
{"t":0.6,"type":"finish","job":1,"status":"failed","exit_code":3,"error":"exited with status 3"}
{"t":0.6,"type":"plan","plan":{"slots":[{"length":1.0,"assignments":[{"job":0,"cpus":"0-1"}]}],"advice":{"0":2}}}
{"t":4.5,"type":"finish","job":0,"status":"ok","exit_code":0}
{"t":4.5,"type":"run_end","overhead_seconds":0.02}
"#;

fn cosched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn report_shows_a_failed_job_and_writes_next_to_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("taco.jsonl");
    std::fs::write(&trace, TACO).unwrap();
    let out = cosched().arg("report").arg(&trace).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let taco_row = stdout.lines().find(|l| l.starts_with("taco")).unwrap();
    let failed_column = taco_row.split_whitespace().nth(9).unwrap();
    assert_eq!(failed_column, "1", "{stdout}");
    let html = read(&dir.path().join("report.html"));
    assert!(html.contains("✕ broken</span> (job 1) under taco: exited with status 3"));
    let jobs = read(&dir.path().join("jobs.csv"));
    assert!(
        jobs.contains("taco,taco,real,1,broken,rigid,,failed,3,"),
        "{jobs}"
    );
    for figure in [
        "running-jobs.svg",
        "slowdown.svg",
        "ntt.svg",
        "partitions-taco.svg",
    ] {
        assert!(dir.path().join(figure).is_file(), "{figure} missing");
    }
}

/// The README's rule for results: an earlier report is replaced only with --force.
#[test]
fn an_earlier_report_is_kept_unless_forced_and_json_prints_results() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("taco.jsonl");
    std::fs::write(&trace, TACO).unwrap();
    let first = cosched().arg("report").arg(&trace).output().unwrap();
    assert!(first.status.success());
    let html = dir.path().join("report.html");
    std::fs::write(&html, "mine").unwrap();
    let again = cosched().arg("report").arg(&trace).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(read(&html), "mine");
    let forced = cosched()
        .arg("report")
        .arg(&trace)
        .args(["--force", "--json"])
        .output()
        .unwrap();
    assert!(forced.status.success());
    assert_ne!(read(&html), "mine");
    let json: serde_json::Value = serde_json::from_slice(&forced.stdout).unwrap();
    assert_eq!(json["runs"][0]["trace"], "taco.jsonl");
    assert_eq!(json["comparison"][0]["policy"], "taco");
}

#[test]
fn unreadable_trace_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(&trace, "{\"t\":0,\"type\":\"nonsense\"}\n").unwrap();
    let out = cosched().arg("report").arg(&trace).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("bad.jsonl:1:"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}
