//! `auto` with nothing known about run times, simulated on TACO's Table 4 sets (A-D) and the CaSAS mixes:
//! it must do no worse than Gang or TACO on either makespan or mean slowdown (2% tolerance). How far it is
//! from the best seed policy of each set is in docs/policies.md.

mod common;

use common::{generated_rows, scenario};
use cosched_sim::runner::{run_sets, PolicyRow};

/// 2% tolerance, the issue's.
const TOLERANCE: f64 = 1.02;

fn assert_no_worse(set: &str, table: &[PolicyRow], rivals: &[&str]) {
    eprintln!("{set}: {table:#?}");
    let row = |p: &str| table.iter().find(|r| r.policy == p).unwrap();
    let auto = row("auto");
    for rival in rivals {
        let rival = row(rival);
        let (a, r) = (auto.makespan.unwrap(), rival.makespan.unwrap());
        assert!(
            a <= r * TOLERANCE,
            "{set}: auto makespan {a:.1} vs {} {r:.1}",
            rival.policy
        );
        let (a, r) = (auto.mean_slowdown.unwrap(), rival.mean_slowdown.unwrap());
        assert!(
            a <= r * TOLERANCE,
            "{set}: auto mean slowdown {a:.2} vs {} {r:.2}",
            rival.policy
        );
    }
}

#[test]
fn auto_is_no_worse_than_gang_or_taco_on_taco_sets_a_to_d() {
    let file = scenario("taco-table4");
    let machine = file.topology().unwrap();
    let policies: Vec<String> = ["taco", "gang", "auto"].map(String::from).to_vec();
    let results = run_sets(
        &machine,
        &file.sets,
        file.scenario.seeds,
        &policies,
        &file.model,
        None,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(results.len(), 4);
    for result in &results {
        assert_no_worse(&result.set, &result.rows, &["taco", "gang"]);
    }
}

#[test]
fn auto_is_no_worse_than_gang_or_taco_on_the_casas_mixes() {
    for name in ["casas-all", "casas-low", "casas-high"] {
        let file = scenario(name);
        let policies: Vec<String> = ["taco", "gang", "auto"].map(String::from).to_vec();
        assert_no_worse(name, &generated_rows(&file, &policies), &["taco", "gang"]);
    }
}
