//! `cosched calibrate --model` writes this machine's model, and `cosched sim` on this machine uses it;
//! `cosched calibrate --scaling` times jobs on one CPU too, and the simulation follows those times.
//! The calibration runs are real and short; nothing here depends on their figures, so a loaded machine
//! only makes them noisier.

use cosched_sim::calibrated::CalibratedModel;
use std::path::Path;
use std::process::{Command, Output};

const WORKLOAD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/default.toml");

fn cosched(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .env("XDG_CACHE_HOME", cache)
        .args(args)
        .output()
        .unwrap()
}

fn succeeded(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// UE's simulated makespan under the model in `model`.
/// UE's simulated makespan of the bundled workload's spinning and blocking barriers, which arrive
/// together: the only co-runners beside which a spinning team's threads can run at once.
fn ue_makespan(cache: &Path, model: &Path) -> f64 {
    let workload = cache.join("spin-beside-block.toml");
    let default = std::fs::read_to_string(WORKLOAD).unwrap();
    let barriers: Vec<&str> = default
        .split("[[job]]")
        .filter(|job| job.contains("-barrier\""))
        .collect();
    assert_eq!(barriers.len(), 2, "{default}");
    let jobs = barriers
        .iter()
        .map(|job| format!("[[job]]{}", job.replace("arrival = 1.0", "arrival = 0.0")))
        .collect::<String>();
    std::fs::write(
        &workload,
        format!("[workload]\nname = \"spin-beside-block\"\n{jobs}"),
    )
    .unwrap();
    let stdout = succeeded(cosched(
        cache,
        &[
            "sim",
            workload.to_str().unwrap(),
            "--policy",
            "ue",
            "--model",
            model.to_str().unwrap(),
            "--json",
        ],
    ));
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    rows[0]["makespan"].as_f64().unwrap()
}

#[test]
fn calibrate_model_writes_the_model_that_sim_on_this_machine_reads() {
    let cache = tempfile::tempdir().unwrap();
    let sim_here = ["sim", WORKLOAD, "--machine", "this", "--policy", "ue,bp"];
    let out = cosched(cache.path(), &sim_here);
    assert!(!out.status.success(), "no model fitted yet, yet sim ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cosched calibrate --model"), "{stderr}");

    succeeded(cosched(
        cache.path(),
        &["calibrate", "--model", "--repeat", "1"],
    ));
    let models: Vec<_> = std::fs::read_dir(cache.path().join("cosched"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    assert_eq!(models.len(), 1, "{models:?}");
    let text = std::fs::read_to_string(&models[0]).unwrap();
    for constant in ["spin_corun", "os_quantum", "gomp_spin", "context_switch"] {
        assert!(text.contains(&format!("[fitted.{constant}]")), "{text}");
    }
    succeeded(cosched(cache.path(), &sim_here));

    // The file's constants are the ones simulated: a team that never co-runs makes UE slower than
    // one whose threads run in step.
    let fitted = CalibratedModel::load(&models[0]).unwrap();
    let edited = |corun: f64| {
        let mut model = fitted.clone();
        model.params.spin_corun = corun;
        let path = cache.path().join(format!("corun-{corun}.toml"));
        std::fs::write(&path, model.to_toml()).unwrap();
        path
    };
    let in_step = ue_makespan(cache.path(), &edited(0.0));
    let never = ue_makespan(cache.path(), &edited(8.0));
    assert!(
        never > in_step * 1.1,
        "κ = 8: {never} s, κ = 0: {in_step} s"
    );
}

/// Two malleable kernels arriving together: EQ gives each one CPU.
fn two_kernels() -> String {
    let job = |name: &str| {
        format!(
            "[[job]]\nname = \"{name}\"\narrival = 0.0\nkind = \"malleable\"\n\
             command = [\"{{bench}}/dense\", \"--iterations\", \"2\"]\n\
             env = {{ OMP_WAIT_POLICY = \"passive\" }}\n\
             profile = \"amdahl(serial=0.01, runtime=1)\"\n"
        )
    };
    format!("[workload]\nname = \"two\"\n{}{}", job("a"), job("b"))
}

#[test]
fn jobs_measured_on_one_cpu_take_that_long_on_one_cpu_in_the_simulation() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path();
    let workload = dir.join("two.toml");
    std::fs::write(&workload, two_kernels()).unwrap();
    let workload = workload.to_str().unwrap();
    let calibration = dir.join("calibration");
    succeeded(cosched(
        dir,
        &[
            "calibrate",
            workload,
            "--scaling",
            "-o",
            calibration.to_str().unwrap(),
        ],
    ));
    let isolated = dir.join("two.isolated.json");
    let mut times: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&isolated).unwrap()).unwrap();
    assert_eq!(times["one_cpu"].as_array().unwrap().len(), 2, "{times}");
    assert!(times["one_cpu"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["threads"] == 1));
    let model = dir.join("model.toml");
    let fitted = CalibratedModel::fit("any", 2, &Default::default());
    std::fs::write(&model, fitted.to_toml()).unwrap();
    // Hand-set times: 2 s on every CPU, and on one CPU either twice that (perfect scaling) or
    // barely more (a kernel that does not scale here).
    for one_cpu in [4.0, 2.4] {
        for entry in times["entries"].as_array_mut().unwrap() {
            entry["seconds"] = 2.0.into();
        }
        for entry in times["one_cpu"].as_array_mut().unwrap() {
            entry["seconds"] = one_cpu.into();
        }
        std::fs::write(&isolated, times.to_string()).unwrap();
        let stdout = succeeded(cosched(
            dir,
            &[
                "sim",
                workload,
                "--policy",
                "eq",
                "--model",
                model.to_str().unwrap(),
                "--json",
            ],
        ));
        let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let makespan = rows[0]["makespan"].as_f64().unwrap();
        assert!(
            (makespan - one_cpu).abs() < 0.05 * one_cpu,
            "one CPU each: simulated {makespan} s, measured {one_cpu} s alone on one CPU"
        );
    }
}
