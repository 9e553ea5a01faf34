//! `cosched gen` and `cosched sim` from the command line.

use std::process::Command;

fn cosched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `cosched args`, which must succeed, and returns its standard output.
fn stdout_of(args: &[&str]) -> String {
    let out = cosched(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn generated_workload_simulates_with_one_row_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    let traces = dir.path().join("traces");
    stdout_of(&[
        "gen",
        "--jobs",
        "12",
        "--rate",
        "9",
        "--seed",
        "4",
        "-o",
        workload.to_str().unwrap(),
    ]);
    let stdout = stdout_of(&[
        "sim",
        workload.to_str().unwrap(),
        "--machine",
        "taco-opteron8435",
        "--policy",
        "eq,ue",
        "-o",
        traces.to_str().unwrap(),
    ]);
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("eq ") || l.starts_with("ue "))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    // BP runs as the reference for relative makespans, so its trace is written too.
    let traces_written = std::fs::read_dir(&traces)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(traces_written, 3);
    // Beside them, the record of the build and command line that made them, for `cosched report`.
    let metadata = std::fs::read_to_string(traces.join("metadata.json")).unwrap();
    assert!(
        metadata.contains("\"command_line\"") && metadata.contains("eq,ue"),
        "{metadata}"
    );
}

/// The one trace `cosched sim W --policy eq -o DIR --trace LEVEL` writes (besides BP's), if any,
/// and the table it prints.
fn eq_trace_at(level: &str) -> (Option<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    let w = workload.to_str().unwrap();
    stdout_of(&["gen", "--jobs", "12", "--rate", "9", "--seed", "4", "-o", w]);
    let traces = dir.path().join("traces");
    let t = traces.to_str().unwrap();
    let machine = "taco-opteron8435";
    let args = ["sim", w, "--machine", machine, "--policy", "eq", "-o", t];
    let stdout = stdout_of(&[&args[..], &["--trace", level]].concat());
    assert!(traces.join("metadata.json").exists());
    let trace = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with("-eq.jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap());
    let table = stdout.lines().filter(|l| !l.starts_with("traces: "));
    (trace, table.collect::<Vec<_>>().join("\n"))
}

#[test]
fn a_jobs_trace_keeps_each_jobs_arrival_start_and_finish_and_none_writes_no_trace() {
    let (full, full_table) = eq_trace_at("full");
    let (jobs, jobs_table) = eq_trace_at("jobs");
    let (none, none_table) = eq_trace_at("none");
    let full = full.unwrap();
    let jobs = jobs.unwrap();
    let kind =
        |line: &str| serde_json::from_str::<serde_json::Value>(line).unwrap()["type"].clone();
    let count = |trace: &str, wanted: &str| trace.lines().filter(|l| kind(l) == wanted).count();
    for wanted in ["arrival", "start", "finish"] {
        assert_eq!(count(&jobs, wanted), 12, "{wanted}");
    }
    assert!(count(&full, "plan") + count(&full, "plan_change") > 0);
    let kept = ["run_start", "arrival", "start", "finish", "run_end"];
    assert!(
        jobs.lines().all(|l| kept.iter().any(|k| kind(l) == *k)),
        "{jobs}"
    );
    assert!(jobs.len() < full.len());
    assert_eq!(none, None);
    // The figures come from the run, not from the file.
    assert_eq!(jobs_table, full_table);
    assert_eq!(none_table, full_table);
}

#[test]
fn a_trace_level_without_a_directory_is_refused() {
    for command in ["sim", "replay"] {
        let out = cosched(&[command, "w.toml", "--trace", "none"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("--out"),
            "{stderr}"
        );
    }
}

#[test]
fn bad_profile_is_a_one_line_error_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[workload]\nname = \"w\"\n\n[[job]]\nname = \"a\"\nprofile = \"amdahl(serial=2, runtime=5)\"\n").unwrap();
    let out = cosched(&[
        "sim",
        path.to_str().unwrap(),
        "--machine",
        "core:4",
        "--policy",
        "bp",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("bad.toml: line 6: job \"a\": field `profile`"),
        "{stderr}"
    );
}

fn scenario(name: &str) -> String {
    format!("{}/../../scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn workload_sets_print_one_block_per_set_with_the_papers_figures() {
    let text = stdout_of(&["sim", &scenario("taco-table4.toml"), "--seeds", "1"]);
    assert!(
        text.contains("makespan (BP = 100%)") && text.contains("paper reconfigs"),
        "{text}"
    );
    for set in ["A", "B", "C", "D"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{set}    ue "))),
            "set {set}:\n{text}"
        );
    }
    // Set C's published UE row sits next to the simulated one.
    assert!(
        text.lines()
            .any(|l| l.starts_with("C ") && l.contains("198%")),
        "{text}"
    );
}

#[test]
fn a_sweep_prints_each_policys_figure_and_the_ratio_to_its_baseline() {
    let text = stdout_of(&["sim", &scenario("gang-granularity.toml")]);
    assert!(
        text.contains("interval") && text.contains("ue / gang"),
        "{text}"
    );
    assert!(text.contains("paper finding:"), "{text}");
    let out = cosched(&[
        "sim",
        &scenario("gang-granularity.toml"),
        "--policy",
        "ue,eq",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("baseline"), "{err}");
}

#[test]
fn a_task_bag_scenario_prints_simulated_and_published_llc_misses() {
    let text = stdout_of(&[
        "sim",
        &scenario("scalpel-23.toml"),
        "--policy",
        "fifo,scalpel",
    ]);
    let header = text.lines().find(|l| l.starts_with("policy")).unwrap();
    for column in ["LLC miss", "paper makespan s", "paper LLC miss"] {
        assert!(header.contains(column), "{text}");
    }
    // Columns the scenario publishes nothing for stay out.
    assert!(!header.contains("paper vs BP"), "{text}");
    let scalpel = text.lines().find(|l| l.starts_with("scalpel ")).unwrap();
    let percents: Vec<f64> = scalpel
        .split_whitespace()
        .filter_map(|cell| cell.strip_suffix('%')?.parse().ok())
        .collect();
    // vs BP, the simulated miss ratio (tasks stream data larger than the L3), the paper's 37.8%.
    assert_eq!(percents.len(), 3, "{scalpel}");
    assert!(percents[1] > 5.0 && percents[1] < 95.0, "{scalpel}");
    assert_eq!(percents[2], 37.8, "{scalpel}");
}

#[test]
fn jobs_whose_memory_does_not_fit_the_simulated_machine_wait_and_the_makespan_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    let job = |name: &str, mem: &str| {
        format!(
            "[[job]]\nname = \"{name}\"\nkind = \"rigid\"\nmax_threads = 1\n\
             profile = \"amdahl(serial=0, runtime=10)\"\nmem = \"{mem}\"\n"
        )
    };
    let text = format!(
        "[workload]\nname = \"memory\"\n{}{}",
        job("a", "3G"),
        job("b", "2G")
    );
    std::fs::write(&workload, text).unwrap();
    let makespan = |memory: &str| -> f64 {
        let stdout = stdout_of(&[
            "sim",
            workload.to_str().unwrap(),
            "--machine",
            "package:1 core:4",
            "--policy",
            "eq",
            "--memory",
            memory,
            "--json",
        ]);
        let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        rows[0]["makespan"]
            .as_f64()
            .unwrap_or_else(|| panic!("{rows}"))
    };
    // Side by side with 5 GiB; one after the other with 4 GiB.
    assert!((makespan("5G") - 10.0).abs() < 1e-6);
    assert!((makespan("4G") - 20.0).abs() < 1e-6);
    let refused = cosched(&[
        "sim",
        workload.to_str().unwrap(),
        "--machine",
        "package:1 core:4",
        "--memory",
        "2G",
    ]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("job a asks for 3G"), "{message}");
}
