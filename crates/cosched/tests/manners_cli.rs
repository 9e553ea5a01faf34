//! cosched behaves as a Unix tool: its exit status says whether every job succeeded, a closed pipe ends
//! it quietly, no name from a workload file leads its output out of the results directory, and an
//! earlier run's results are never overwritten unless `--force` says so.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn cosched() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write_workload(dir: &Path, name: &str, jobs: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{}.toml", name.replace(['/', '.'], "_")));
    std::fs::write(&path, format!("[workload]\nname = {name:?}\n{jobs}")).unwrap();
    path
}

const PARALLEL_JOB: &str = "[[job]]\nname = \"a\"\nprofile = \"amdahl(serial=0.1, runtime=5)\"\n";

/// A workload of one parallel job, for simulation.
fn simulated_workload(dir: &Path, name: &str) -> std::path::PathBuf {
    write_workload(dir, name, PARALLEL_JOB)
}

/// `compare --sim` on two cores.
fn compare_sim(workload: &Path, policies: &str, out: &Path, extra: &[&str]) -> Output {
    cosched()
        .arg("compare")
        .arg(workload)
        .args(["--sim", "--machine", "core:2", "--policy", policies, "-o"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// A real run without privileges, so that it works wherever the tests run.
fn real_run(workload: &Path, out: &Path) -> Command {
    let mut command = cosched();
    command
        .arg("run")
        .arg(workload)
        .args([
            "--policy",
            "eq",
            "--mechanism",
            "affinity",
            "--freezer",
            "signal",
            "-o",
        ])
        .arg(out);
    command
}

#[test]
fn a_run_with_a_failing_job_exits_1_and_a_clean_one_0() {
    let dir = tempfile::tempdir().unwrap();
    let failing = write_workload(
        dir.path(),
        "failing",
        "[[job]]\nname = \"ok\"\ncommand = [\"true\"]\n\
         [[job]]\nname = \"not-a-program\"\ncommand = [\"/etc/passwd\"]\n",
    );
    let out = real_run(&failing, &dir.path().join("failing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("failed: not-a-program"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let clean = write_workload(
        dir.path(),
        "clean",
        "[[job]]\nname = \"ok\"\ncommand = [\"true\"]\n",
    );
    let out = real_run(&clean, &dir.path().join("clean"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn bad_input_exits_2() {
    let out = cosched()
        .args(["run", "/nonexistent/w.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = cosched().args(["sim", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_closed_pipe_ends_cosched_quietly() {
    let mut child = cosched()
        .args(["gen", "--jobs", "5000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "[workload]");
    // The reader is gone: what cosched writes next meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}",
        out.status
    );
    assert_eq!(stderr(&out), "", "no panic, no message");
}

#[test]
fn a_workload_name_that_leaves_the_results_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let workload = write_workload(
        dir.path(),
        "../../etc/x",
        "[[job]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let out = cosched()
        .arg("run")
        .arg(&workload)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("field `name`"), "{}", stderr(&out));
    assert!(!dir.path().join("results").exists());
}

#[test]
fn an_earlier_runs_results_are_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let workload = simulated_workload(dir.path(), "pair");
    let out_dir = dir.path().join("out");
    let compare = |force: bool| {
        let extra: &[&str] = if force { &["--force"] } else { &[] };
        compare_sim(&workload, "ue", &out_dir, extra)
    };
    assert!(compare(false).status.success());
    let first = std::fs::metadata(out_dir.join("ue.jsonl"))
        .unwrap()
        .modified()
        .unwrap();
    let again = compare(false);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    assert_eq!(
        std::fs::metadata(out_dir.join("ue.jsonl"))
            .unwrap()
            .modified()
            .unwrap(),
        first
    );
    let forced = compare(true);
    assert!(forced.status.success(), "{}", stderr(&forced));
}

#[test]
fn compare_prints_json_with_one_row_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let workload = simulated_workload(dir.path(), "pair");
    let out = compare_sim(&workload, "ue,bp", &dir.path().join("out"), &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies: Vec<&str> = doc["comparison"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["ue", "bp"]);
}

#[test]
fn sim_of_a_parallel_workload_needs_no_machine_and_skips_task_bag_policies() {
    let dir = tempfile::tempdir().unwrap();
    let workload = simulated_workload(dir.path(), "parallel");
    let out = cosched()
        .arg("sim")
        .arg(&workload)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies: Vec<&str> = (rows.as_array().unwrap().iter())
        .map(|row| row["policy"].as_str().unwrap())
        .collect();
    assert!(policies.contains(&"taco"), "{policies:?}");
    for task_bag in ["fifo", "rr", "lpt", "di", "scalpel"] {
        assert!(!policies.contains(&task_bag), "{policies:?}");
    }
}

#[test]
fn report_refuses_traces_of_different_workloads_unless_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let mut traces = Vec::new();
    for name in ["first", "second"] {
        let workload = simulated_workload(dir.path(), name);
        let out_dir = dir.path().join(name);
        let out = compare_sim(&workload, "ue", &out_dir, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        traces.push(out_dir.join("ue.jsonl"));
    }
    let report = |mixed: bool| {
        let mut command = cosched();
        command
            .arg("report")
            .args(&traces)
            .arg("-o")
            .arg(dir.path().join("report"));
        if mixed {
            command.arg("--mixed");
        }
        command.output().unwrap()
    };
    let refused = report(false);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("first on core:2"),
        "{}",
        stderr(&refused)
    );
    let mixed = report(true);
    assert!(mixed.status.success(), "{}", stderr(&mixed));
    assert!(
        String::from_utf8_lossy(&mixed.stdout).contains("ue [second on core:2]"),
        "{}",
        String::from_utf8_lossy(&mixed.stdout)
    );
}

#[test]
fn jobs_learn_their_id_and_cpus_unbound_and_keep_a_binding_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let print = r#"command = ["sh", "-c", "echo \"$COSCHED_JOB_ID|$COSCHED_CPUS|$OMP_PLACES|$OMP_PROC_BIND\""]"#;
    let workload = write_workload(
        dir.path(),
        "environment",
        &format!(
            "[[job]]\nname = \"plain\"\n{print}\n\
             [[job]]\nname = \"bound\"\n{print}\nenv = {{ OMP_PROC_BIND = \"spread\" }}\n"
        ),
    );
    let out_dir = dir.path().join("out");
    let out = real_run(&workload, &out_dir)
        .env_remove("OMP_PLACES")
        .env_remove("OMP_PROC_BIND")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = |job: &str| {
        let text = std::fs::read_to_string(out_dir.join(format!("{job}.stdout"))).unwrap();
        text.trim().split('|').map(String::from).collect::<Vec<_>>()
    };
    let plain = printed("plain");
    assert_eq!(plain[0], "0");
    assert!(!expand_cpu_list(&plain[1]).is_empty(), "{plain:?}");
    // Not bound by cosched: a runtime bound to its first CPUs cannot create threads once moved.
    assert_eq!((plain[2].as_str(), plain[3].as_str()), ("", ""));
    let bound = printed("bound");
    assert_eq!(bound[0], "1");
    assert!(!expand_cpu_list(&bound[1]).is_empty(), "{bound:?}");
    assert_eq!((bound[2].as_str(), bound[3].as_str()), ("", "spread"));
}

/// `0-2,5` as [0, 1, 2, 5].
fn expand_cpu_list(list: &str) -> Vec<u32> {
    list.split(',')
        .filter(|part| !part.is_empty())
        .flat_map(|part| {
            let (first, last) = part.split_once('-').unwrap_or((part, part));
            first.parse::<u32>().unwrap()..=last.parse::<u32>().unwrap()
        })
        .collect()
}
