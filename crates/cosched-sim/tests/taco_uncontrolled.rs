//! TACO §4.3 (Table 4, Fig. 3): uncontrolled execution falls far behind batch processing when lu.A, which
//! busy-waits in its own code, is in the mix, and stays close to it when it is not. One model, no
//! per-scenario constants: only the mix changes.

use cosched_core::topology::presets;
use cosched_core::JobKind;
use cosched_sim::generate::Poisson;
use cosched_sim::runner::{generated_instances, rows, run_all};
use cosched_sim::scenario::ModelConfig;

fn ue_vs_bp(exclude: &[&str]) -> f64 {
    let machine = presets::preset("taco-opteron8435").unwrap();
    let generator = Poisson {
        jobs: 40,
        rate_per_min: 9.0,
        mix: vec!["nas".into()],
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        kind: JobKind::Malleable,
        seed: 42,
    };
    let instances = generated_instances(&generator, 1, machine.num_cpus()).unwrap();
    let policies = vec!["ue".to_string(), "bp".to_string(), "eq".to_string()];
    let results = run_all(
        &machine,
        &instances,
        &policies,
        &ModelConfig::default(),
        None,
        &mut |_, _| {},
    )
    .unwrap();
    let table = rows(&results, &policies);
    eprintln!("{exclude:?}: {table:#?}");
    table[0].makespan_vs_bp.unwrap()
}

#[test]
fn uncontrolled_execution_suffers_from_spin_waiting_lu_a_only() {
    let with_lu = ue_vs_bp(&[]);
    let without_lu = ue_vs_bp(&["nas/lu.A"]);
    assert!(with_lu > 1.5, "UE/BP with lu.A in the mix: {with_lu}");
    assert!(
        (0.75..1.25).contains(&without_lu),
        "UE/BP without lu.A: {without_lu}"
    );
}
