//! One vocabulary across commands, as a user meets it: `cosched policies`, comma-separated lists that
//! keep a parametric profile whole, and `--json` where results are printed.

use std::process::{Command, Output};

fn cosched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn policies_lists_every_policy_with_its_settings() {
    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&cosched(&["policies", "--json"]))).unwrap();
    let list = json.as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
    for expected in [
        "ue",
        "bp",
        "eq",
        "ta",
        "taco",
        "taco-basic",
        "taco-local",
        "gang",
        "casas",
        "casas-ts",
        "lpt",
        "di",
        "scalpel",
        "auto",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let defaults: Vec<&str> = list
        .iter()
        .filter(|p| p["default"] == true)
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(defaults, ["auto"]);
    let taco = list.iter().find(|p| p["name"] == "taco").unwrap();
    let keys: Vec<&str> = taco["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"hysteresis") && keys.contains(&"sizes"),
        "{keys:?}"
    );
    // The text form: one line per policy, starting with its name.
    let text = stdout_of(&cosched(&["policies"]));
    for name in names {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "no line for {name} in\n{text}"
        );
    }
}

#[test]
fn gen_mix_takes_commas_and_keeps_a_parametric_profile_whole() {
    let generated = |mix: &str| {
        stdout_of(&cosched(&[
            "gen", "--jobs", "30", "--seed", "3", "--mix", mix,
        ]))
    };
    let commas = generated("nas/lu.A,amdahl(serial=0.05, runtime=60)");
    assert!(commas.contains("nas/lu.A"), "{commas}");
    assert!(
        commas.contains("amdahl(serial=0.05, runtime=60)"),
        "{commas}"
    );
    // ';' still separates, drawing the same workload.
    assert_eq!(
        generated("nas/lu.A;amdahl(serial=0.05, runtime=60)"),
        commas
    );
}

#[test]
fn bench_policy_prints_json() {
    let out = cosched(&[
        "bench",
        "policy",
        "--policy",
        "eq",
        "--jobs",
        "20",
        "--machine",
        "package:1 core:4",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(json["policy"], "eq");
    assert_eq!(json["events"], 40);
    assert!(json["mean_ms"].as_f64().unwrap() >= 0.0);
}

/// Real runs: both jobs of examples/pair.toml alone on this machine, once.
#[test]
fn calibrate_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let isolated = dir.path().join("isolated.json");
    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/pair.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args([
            "calibrate",
            workload,
            "--repeat",
            "1",
            "--json",
            "--isolated",
        ])
        .arg(&isolated)
        .arg("-o")
        .arg(dir.path().join("runs"))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    let jobs = json["widths"][0]["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs.iter().map(|j| j["job"].as_str().unwrap()).collect();
    assert_eq!(names, ["spin", "dense"]);
    assert!(
        jobs.iter().all(|j| j["seconds"].as_f64().unwrap() > 0.0),
        "{json}"
    );
    assert!(isolated.is_file());
}
