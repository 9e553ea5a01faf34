//! What several scenario tests share: loading a file of `scenarios/` and running its generated mixes.

// The tests of `auto` use it; the others that share these fixtures do not.
#[allow(dead_code)]
pub mod auto;

use cosched_sim::runner::{generated_instances, rows, run_all, PolicyRow};
use cosched_sim::scenario::ScenarioFile;
use std::path::Path;

/// `scenarios/<name>.toml` of this repository.
pub fn scenario(name: &str) -> ScenarioFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}.toml"));
    ScenarioFile::load(&path).unwrap()
}

/// One row per policy over every seeded mix of a scenario with a `[generator]`, on its machine.
pub fn generated_rows(file: &ScenarioFile, policies: &[String]) -> Vec<PolicyRow> {
    let machine = file.topology().unwrap();
    let generator = file.generator.as_ref().unwrap();
    let instances =
        generated_instances(generator, file.scenario.seeds, machine.num_cpus()).unwrap();
    let results = run_all(
        &machine,
        &instances,
        policies,
        &file.model,
        None,
        &mut |_, _| {},
    )
    .unwrap();
    rows(&results, policies)
}
