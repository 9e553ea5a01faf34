//! `cosched calibrate --model` writes this machine's model, and `cosched sim` on this machine uses it.
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
fn ue_makespan(cache: &Path, model: &Path) -> f64 {
    let model = model.to_str().unwrap();
    let stdout = succeeded(cosched(
        cache,
        &[
            "sim", WORKLOAD, "--policy", "ue", "--model", model, "--json",
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
