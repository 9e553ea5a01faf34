//! TACO §4.3 (Table 4, Fig. 3): uncontrolled execution falls far behind batch processing when lu.A, which
//! busy-waits in its own code, is in the mix; without it, libgomp's spin-then-sleep waiting still costs
//! about twice BP's makespan (set C: 198%), and passive waiting stays close to BP (UEp: 113%). One model
//! with the papers' constants: only the mix and the wait policy change.

use cosched_core::topology::presets;
use cosched_core::JobKind;
use cosched_sim::generate::Poisson;
use cosched_sim::runner::{generated_instances, rows, run_all};
use cosched_sim::scenario::ModelConfig;
use cosched_sim::ModelParams;

fn ue_vs_bp(exclude: &[&str], gomp_spin: f64) -> f64 {
    let machine = presets::preset("taco-opteron8435").unwrap();
    let generator = Poisson {
        jobs: 40,
        rate_per_min: 9.0,
        mix: vec!["nas".into()],
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        kind: JobKind::Malleable,
        seed: 1,
    };
    let instances = generated_instances(&generator, 1, machine.num_cpus()).unwrap();
    let policies = vec!["ue".to_string(), "bp".to_string(), "eq".to_string()];
    let results = run_all(
        &machine,
        &instances,
        &policies,
        &ModelConfig {
            params: ModelParams {
                gomp_spin,
                ..ModelParams::default()
            },
            ..ModelConfig::default()
        },
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
    let gomp = ModelParams::default().gomp_spin;
    let with_lu = ue_vs_bp(&[], gomp);
    let without_lu = ue_vs_bp(&["nas/lu.A"], gomp);
    let passive = ue_vs_bp(&["nas/lu.A"], 0.0);
    assert!(
        with_lu > 1.5 * without_lu,
        "UE/BP with lu.A in the mix: {with_lu}, without: {without_lu}"
    );
    assert!(
        (1.5..2.5).contains(&without_lu),
        "UE/BP without lu.A: {without_lu}"
    );
    assert!((0.75..1.25).contains(&passive), "UEp/BP: {passive}");
}
