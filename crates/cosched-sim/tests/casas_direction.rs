//! CaSAS's direction (CaSAS §4.2) on the repository's scenarios, run as the paper measures (every
//! application restarted until each has completed 3 runs): space sharing by scalability beats Linux-like
//! uncontrolled sharing on mixes of poorly scalable applications and loses on mixes of highly scalable
//! ones. How far the margins are from the paper's is explained in docs/policies.md.

use cosched_sim::scenario::{generated_instances, rows, run_all, ScenarioFile};
use std::path::Path;

/// Mean ANTT of `ue` and `casas` over the scenario's mixes.
fn antt(scenario: &str) -> (f64, f64) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{scenario}.toml"));
    let file = ScenarioFile::load(&path).unwrap();
    assert!(
        file.model.min_runs.is_some(),
        "{scenario} is a closed experiment"
    );
    let machine = file.topology().unwrap();
    let generator = file.generator.as_ref().unwrap();
    let instances =
        generated_instances(generator, file.scenario.seeds, machine.num_cpus()).unwrap();
    let policies = ["ue".to_string(), "casas".to_string()];
    let results = run_all(
        &machine,
        &instances,
        &policies,
        &file.model,
        None,
        &mut |_, _| {},
    )
    .unwrap();
    let table = rows(&results, &policies);
    eprintln!("{scenario}: {table:#?}");
    (table[0].antt.unwrap(), table[1].antt.unwrap())
}

#[test]
fn casas_beats_uncontrolled_sharing_on_poorly_scalable_mixes() {
    let (ue, casas) = antt("casas-low");
    assert!(
        casas < ue,
        "low-scalability mixes: CaSAS {casas:.3} vs UE {ue:.3}"
    );
}

#[test]
fn casas_loses_to_uncontrolled_sharing_on_highly_scalable_mixes() {
    let (ue, casas) = antt("casas-high");
    assert!(
        casas > ue,
        "high-scalability mixes: CaSAS {casas:.3} vs UE {ue:.3}"
    );
}
