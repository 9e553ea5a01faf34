//! `cosched replay` from the command line: SWF in, the archive's metrics out; and the cluster
//! machines it runs on, as `cosched topo` shows them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .unwrap()
}

/// The JSON rows of a replay, one per node policy.
fn rows(args: &[&str]) -> Vec<serde_json::Value> {
    let out = cosched(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn metrics(args: &[&str]) -> serde_json::Value {
    let mut rows = rows(args);
    assert_eq!(rows.len(), 1);
    rows.remove(0)
}

/// 4 processors. FCFS: 1 at 0, 2 (all 4) at 10, 3 at 15: waits 0, 9, 13.
/// EASY: 3 (1 proc, ends by 7 < 10) backfills at 2 beside 1: waits 0, 9, 0.
const TRACE: &str = "\
; MaxProcs: 4
1 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1  5 -1 -1 -1 4  5 -1 1 1 1 -1 -1 -1 -1 -1
3 2 -1  3 -1 -1 -1 1  5 -1 1 1 1 -1 -1 -1 -1 -1
";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn easy_backfills_where_fcfs_waits() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let fcfs = metrics(&["replay", &trace, "--batch", "fcfs", "--json"]);
    let easy = metrics(&["replay", &trace, "--batch", "easy", "--json"]);
    assert_eq!(fcfs["mean_wait"], 22.0 / 3.0);
    assert_eq!(easy["mean_wait"], 3.0);
    assert_eq!(easy["jobs"], 3);
}

#[test]
fn easy_keeps_the_heads_reservation_behind_a_job_started_in_the_same_pass() {
    // t10: 2 starts and 3 (4 nodes) is reserved for 15, when 2 ends by its estimate, with no node
    // to spare: 4 (100 s) waits until 3 ends at 20. Waits 0, 9, 13, 17.
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "same-pass.swf",
        "; MaxProcs: 4\n\
         1 0 -1  10 -1 -1 -1 4  10 -1 1 1 1 -1 -1 -1 -1 -1\n\
         2 1 -1   5 -1 -1 -1 2   5 -1 1 1 1 -1 -1 -1 -1 -1\n\
         3 2 -1   5 -1 -1 -1 4   5 -1 1 1 1 -1 -1 -1 -1 -1\n\
         4 3 -1 100 -1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1\n",
    );
    let easy = metrics(&["replay", &trace, "--batch", "easy", "--json"]);
    assert_eq!(easy["mean_wait"], 39.0 / 4.0);
    // The speed is the 120 s makespan in days per hour of the replay's wall-clock time.
    let days = easy["simulated_days_per_hour"].as_f64().unwrap()
        * easy["replay_seconds"].as_f64().unwrap()
        / 3_600.0;
    assert!((days * 86_400.0 - 120.0).abs() < 1e-6, "{easy}");
}

#[test]
fn a_gzip_trace_replays_as_the_plain_one_and_a_broken_one_is_named() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let plain = write(dir.path(), "t.swf", TRACE);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(TRACE.as_bytes()).unwrap();
    let packed = dir.path().join("t.swf.gz");
    std::fs::write(&packed, encoder.finish().unwrap()).unwrap();
    let packed = packed.to_str().unwrap();
    let without_timing = |trace: &str| {
        let mut m = metrics(&["replay", trace, "--batch", "easy", "--json"]);
        m.as_object_mut().unwrap().remove("replay_seconds");
        m.as_object_mut().unwrap().remove("simulated_days_per_hour");
        m
    };
    assert_eq!(without_timing(packed), without_timing(&plain));
    let broken = write(dir.path(), "broken.swf.gz", TRACE);
    let out = cosched(&["replay", &broken]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cannot decompress") && stderr.contains("broken.swf.gz"),
        "{stderr}"
    );
}

#[test]
fn out_directory_holds_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let out = dir.path().join("out");
    metrics(&["replay", &trace, "--json", "-o", out.to_str().unwrap()]);
    let csv = std::fs::read_to_string(out.join("schedule.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("3,2,1,3,5,2,5,0,") && l.ends_with(",exclusive,2")),
        "{csv}"
    );
    assert!(out.join("metrics.json").exists());
    // Every column of numbers says its unit, by the report's rule.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for (i, name) in header.iter().enumerate() {
        let numeric = csv.lines().skip(1).any(|l| {
            l.split(',')
                .nth(i)
                .is_some_and(|v| v.parse::<f64>().is_ok())
        });
        let has_unit = cosched_report::UNIT_SUFFIXES
            .iter()
            .any(|(suffix, _)| name.ends_with(suffix));
        assert!(!numeric || has_unit, "schedule.csv: {name} has no unit");
    }
    let bare = dir.path().join("bare");
    let bare_dir = bare.to_str().unwrap();
    metrics(&[
        "replay", &trace, "--json", "-o", bare_dir, "--trace", "none",
    ]);
    assert!(bare.join("metrics.json").exists());
    assert!(!bare.join("schedule.csv").exists());
}

#[test]
fn bad_input_names_the_line_or_the_missing_size() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "b.swf", &format!("{TRACE}4 5 -1 x\n"));
    let err = String::from_utf8(cosched(&["replay", &broken]).stderr).unwrap();
    assert!(err.contains("b.swf:5:") && err.contains("18"), "{err}");
    let headless = write(
        dir.path(),
        "h.swf",
        TRACE.trim_start_matches("; MaxProcs: 4\n"),
    );
    let err = String::from_utf8(cosched(&["replay", &headless]).stderr).unwrap();
    assert!(err.contains("--procs"), "{err}");
    let err = String::from_utf8(cosched(&["replay", &headless, "--procs", "3"]).stderr).unwrap();
    assert!(err.contains("job 2 needs 4 processors"), "{err}");
}

#[test]
fn node_policies_share_nodes_and_each_gets_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let rows = rows(&[
        "replay",
        &trace,
        "--node-policy",
        "exclusive,gang",
        "--json",
    ]);
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["node_policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["exclusive", "gang"]);
    assert_eq!(rows[0]["machine"], "cluster:4 core:1");
    assert_eq!(
        (rows[0]["mpl"].as_u64(), rows[1]["mpl"].as_u64()),
        (Some(1), Some(2))
    );
    // Gang lets job 2 (all 4 nodes) start beside job 1 instead of waiting for it.
    let wait = |r: &serde_json::Value| r["mean_wait"].as_f64().unwrap();
    assert!(wait(&rows[1]) < wait(&rows[0]), "{rows:?}");
}

#[test]
fn a_bad_machine_or_node_policy_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let err = |args: &[&str]| String::from_utf8(cosched(args).stderr).unwrap();
    let e = err(&["replay", &trace, "--machine", "core:4"]);
    assert!(e.contains("cluster:N core:4"), "{e}");
    let e = err(&["replay", &trace, "--machine", "cluster:4"]);
    assert!(e.contains("cluster:4 package:2 core:8"), "{e}");
    let e = err(&["replay", &trace, "--node-policy", "gnag"]);
    assert!(e.contains("gnag") && e.contains("exclusive"), "{e}");
}

/// The shared KTH-SP2 log (beside the repository, as CI has it); skipped where absent.
#[test]
fn kth_sp2_replays_with_easy_ahead_of_fcfs() {
    let kth = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz");
    if !kth.exists() {
        eprintln!("skipped: {} not found", kth.display());
        return;
    }
    let kth = kth.to_str().unwrap();
    let fcfs = metrics(&["replay", kth, "--batch", "fcfs", "--json"]);
    let easy = metrics(&["replay", kth, "--batch", "easy", "--json"]);
    assert_eq!(easy["jobs"], 27_992);
    let wait = |m: &serde_json::Value| m["mean_wait"].as_f64().unwrap();
    let bsld = |m: &serde_json::Value| m["mean_bounded_slowdown"].as_f64().unwrap();
    assert!(wait(&easy) < wait(&fcfs) / 2.0, "EASY {easy} FCFS {fcfs}");
    assert!(bsld(&easy) < bsld(&fcfs), "EASY {easy} FCFS {fcfs}");
    let utilisation = easy["utilisation"].as_f64().unwrap();
    assert!(utilisation > 0.0 && utilisation < 1.0, "{easy}");
    // Time-shared nodes start jobs sooner; one-CPU nodes leave EQ nothing to split.
    let shared = rows(&["replay", kth, "--node-policy", "gang,eq", "--json"]);
    assert!(
        bsld(&shared[0]) < bsld(&easy),
        "gang {} EASY {easy}",
        shared[0]
    );
    assert_eq!(
        bsld(&shared[1]),
        bsld(&easy),
        "eq {} EASY {easy}",
        shared[1]
    );
}

/// The synthetic trace the README's replay example uses: it must stay a valid SWF file whose
/// header gives the machine, and show what the README says of shared nodes.
#[test]
fn the_shipped_example_trace_replays_as_the_readme_shows() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cluster-small.swf"
    );
    let rows = rows(&[
        "replay",
        trace,
        "--node-policy",
        "exclusive,gang,eq",
        "--json",
    ]);
    assert_eq!(rows[0]["jobs"], 120, "{}", rows[0]);
    let bsld = |m: &serde_json::Value| m["mean_bounded_slowdown"].as_f64().unwrap();
    assert!(
        bsld(&rows[1]) < bsld(&rows[0]),
        "gang {} exclusive {}",
        rows[1],
        rows[0]
    );
    assert_eq!(
        bsld(&rows[2]),
        bsld(&rows[0]),
        "eq {} exclusive {}",
        rows[2],
        rows[0]
    );
}

#[test]
fn topo_shows_a_cluster_as_its_size_and_one_node() {
    let out = cosched(&[
        "topo",
        "--machine",
        "cluster:128 package:2 core:8",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let topo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(topo["cluster"]["nodes"], 128);
    assert_eq!(topo["cluster"]["cpus"], 2048);
    assert_eq!(
        topo["node"]["partition_sizes"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        16
    );
    let out = cosched(&["topo", "--machine", "cluster:2 core:4"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("cluster of 2 nodes × 4 CPUs = 8 CPUs"),
        "{text}"
    );
    let err = String::from_utf8(
        cosched(&["topo", "--machine", "cluster:2 core:4", "--of", "xml"]).stderr,
    )
    .unwrap();
    assert!(err.contains("one machine, not a cluster"), "{err}");
    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/default.toml");
    let err =
        String::from_utf8(cosched(&["sim", workload, "--machine", "cluster:2 core:4"]).stderr)
            .unwrap();
    assert!(
        err.contains("is a cluster") && err.contains("cosched replay"),
        "{err}"
    );
}

/// A replay scenario gives the trace (relative to itself) and the options, the command line
/// overrides them, and the paper's figure is printed beside ours.
#[test]
fn a_replay_scenario_runs_its_setup_and_prints_the_papers_figure() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "t.swf", TRACE);
    let scenario = write(
        dir.path(),
        "s.toml",
        "[replay]\nname = \"tiny\"\ntrace = \"t.swf\"\nbatch = \"fcfs\"\n\
         node_policy = [\"exclusive\"]\nsubmit_scale = 0.5\n\
         [paper]\nsource = \"A. Author, Some Paper, Venue, Table 1\"\nmetric = \"mean_wait\"\n\
         policy = \"exclusive\"\nbaseline = \"exclusive\"\nchange = -0.1\n",
    );
    // FCFS on submit times 0, 0.5, 1: 2 starts at 10, 3 at 15: waits 0, 9.5, 14.
    let fcfs = metrics(&["replay", &scenario, "--json"]);
    assert_eq!(fcfs["mean_wait"], 23.5 / 3.0, "{fcfs}");
    let easy = metrics(&["replay", &scenario, "--batch", "easy", "--json"]);
    assert_eq!(easy["batch"], "easy");
    let out = cosched(&["replay", &scenario]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("scenario tiny") && text.contains("paper -10%, ours +0.0%"),
        "{text}"
    );
}

#[test]
fn interference_options_name_their_fix() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let err = |args: &[&str]| String::from_utf8(cosched(args).stderr).unwrap();
    let e = err(&[
        "replay",
        &trace,
        "--node-policy",
        "eq",
        "--admission",
        "pairing",
    ]);
    assert!(e.contains("--mix"), "{e}");
    let e = err(&["replay", &trace, "--mix", "hpcc"]);
    assert!(e.contains("balanced") && e.contains("compute=0.6"), "{e}");
    let e = err(&["replay", &trace, "--classes-from", "14=memory"]);
    assert!(e.contains("FIELD:VALUE=CLASS"), "{e}");
    // With interference on, the classes change nothing on nodes run alone.
    let alone = metrics(&["replay", &trace, "--json"]);
    let mixed = metrics(&["replay", &trace, "--mix", "memory", "--json"]);
    assert_eq!(alone["mean_wait"], mixed["mean_wait"]);
}

/// Two 4-processor jobs of 100 s side by side on one 8-CPU node under EQ; field 14 (the
/// executable number) of each is given.
fn pair_on_one_node(dir: &Path, name: &str, executables: [u32; 2], map: &str) -> serde_json::Value {
    let [first, second] = executables;
    let trace = write(
        dir,
        name,
        &format!(
            "; MaxProcs: 8\n\
             1 0 -1 100 -1 -1 -1 4 100 -1 1 1 1 {first} -1 -1 -1 -1\n\
             2 0 -1 100 -1 -1 -1 4 100 -1 1 1 1 {second} -1 -1 -1 -1\n"
        ),
    );
    metrics(&[
        "replay",
        &trace,
        "--machine",
        "cluster:1 l3:1(size=8MB) core:8",
        "--node-policy",
        "eq",
        "--classes-from",
        map,
        "--json",
    ])
}

#[test]
fn classes_from_a_mapped_column_slow_two_memory_bound_jobs_more_than_a_mixed_pair() {
    let dir = tempfile::tempdir().unwrap();
    let map = "14:7=memory,9=compute";
    let makespan = |m: &serde_json::Value| m["makespan"].as_f64().unwrap();
    let memory_pair = pair_on_one_node(dir.path(), "memory.swf", [7, 7], map);
    let mixed_pair = pair_on_one_node(dir.path(), "mixed.swf", [7, 9], map);
    // Beside a compute-bound job the memory-bound one has the node's bandwidth to itself and runs
    // its recorded 100 s; two memory-bound jobs ask for more than the node has.
    assert_eq!(makespan(&mixed_pair), 100.0, "{mixed_pair}");
    assert!(
        makespan(&memory_pair) > 110.0,
        "memory pair {memory_pair}, mixed pair {mixed_pair}"
    );
    // Mapped the other way, the same column gives two compute-bound jobs: no slowdown.
    let compute_pair = pair_on_one_node(dir.path(), "compute.swf", [7, 7], "14:7=compute");
    assert_eq!(makespan(&compute_pair), 100.0, "{compute_pair}");
}

#[test]
fn a_wrong_column_or_class_in_classes_from_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "t.swf", TRACE);
    let err = |map: &str| {
        let out = cosched(&[
            "replay",
            &trace,
            "--node-policy",
            "eq",
            "--classes-from",
            map,
        ]);
        assert_eq!(out.status.code(), Some(2), "{map}");
        String::from_utf8(out.stderr).unwrap()
    };
    let e = err("19:1=memory");
    assert!(
        e.contains("fields 1 to 18") && e.contains("14 (executable number)"),
        "{e}"
    );
    let e = err("14:1=memroy");
    assert!(
        e.contains("`memroy`") && e.contains("compute, memory, cache, sync"),
        "{e}"
    );
}

/// The shipped Breitbart et al. scenario: pairing a memory-bound with a compute-bound job on each
/// node finishes the queue a quarter sooner than exclusive nodes; placed blind, like pairs with
/// like and nothing is gained.
#[test]
fn the_breitbart_scenario_pairs_memory_with_compute_bound_jobs() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/replay/breitbart-pairing.toml"
    );
    let makespans = |args: &[&str]| -> Vec<f64> {
        let mut all = vec!["replay", scenario, "--json"];
        all.extend_from_slice(args);
        rows(&all)
            .iter()
            .map(|r| r["makespan"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(makespans(&[]), [7_200.0, 5_400.0]);
    assert_eq!(makespans(&["--admission", "blind"]), [7_200.0, 7_200.0]);
    let out = cosched(&["replay", scenario]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("paper -28%, ours -25.0%"), "{text}");
}
