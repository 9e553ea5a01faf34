//! CaSAS's direction (CaSAS §4.2) on the repository's scenarios, run as the paper measures (every
//! application restarted until each has completed 3 runs): space sharing by scalability beats Linux-like
//! uncontrolled sharing on mixes of poorly scalable applications and loses on mixes of highly scalable
//! ones. How far the margins are from the paper's is explained in docs/policies.md.

mod common;

use common::{generated_rows, scenario};

/// Mean ANTT of `ue` and `casas` over the scenario's mixes.
fn antt(name: &str) -> (f64, f64) {
    let file = scenario(name);
    assert!(
        file.model.min_runs.is_some(),
        "{name} is a closed experiment"
    );
    let policies = ["ue".to_string(), "casas".to_string()];
    let table = generated_rows(&file, &policies);
    eprintln!("{name}: {table:#?}");
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
