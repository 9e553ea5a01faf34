//! TACO Table 4's qualitative findings, from the scenario files themselves (`scenarios/taco-table4-*.toml`):
//! partitioning beats batch processing on makespan, topology-aware policies reconfigure less than EQ and
//! TACO least of all, and uncontrolled execution loses badly when lu.A is in the mix.

use cosched_sim::scenario::{generated_instances, rows, run_all, PolicyRow, ScenarioFile};
use std::path::Path;

fn table(set: &str) -> Vec<PolicyRow> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../scenarios/taco-table4-{set}.toml"));
    let file = ScenarioFile::load(&path).unwrap();
    let machine = file.topology().unwrap();
    let generator = file.generator.as_ref().expect("Table 4 sets are generated");
    let instances =
        generated_instances(generator, file.scenario.seeds, machine.num_cpus()).unwrap();
    let policies = &file.scenario.policies;
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

fn row<'a>(table: &'a [PolicyRow], policy: &str) -> &'a PolicyRow {
    table.iter().find(|r| r.policy == policy).unwrap()
}

#[test]
fn table_4_findings_hold_in_every_set() {
    for set in ["a", "b", "c", "d"] {
        let table = table(set);
        let vs_bp = |p| row(&table, p).makespan_vs_bp.unwrap();
        let reconfigs = |p| row(&table, p).reconfigurations;
        eprintln!("set {set}: {table:#?}");
        for policy in ["eq", "taco-basic"] {
            assert!(
                vs_bp(policy) < 1.0,
                "set {set}: {policy} at {:.2} of BP",
                vs_bp(policy)
            );
        }
        assert!(
            vs_bp("ta") < 1.01,
            "set {set}: TA at {:.2} of BP",
            vs_bp("ta")
        );
        assert!(
            reconfigs("ta") < reconfigs("eq"),
            "set {set}: TA {} vs EQ {}",
            reconfigs("ta"),
            reconfigs("eq")
        );
        assert!(
            reconfigs("taco-basic") < reconfigs("ta"),
            "set {set}: TACO {} vs TA {}",
            reconfigs("taco-basic"),
            reconfigs("ta")
        );
        if set != "c" {
            assert!(
                vs_bp("ue") > 2.0,
                "set {set} has lu.A: UE at {:.2} of BP",
                vs_bp("ue")
            );
        }
    }
}
