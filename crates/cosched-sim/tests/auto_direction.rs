//! The simulation requirement for `auto`, with nothing known about run times: on TACO's Table 4
//! sets (A–D) and the CaSAS mixes, its makespan is at most 1.02 × the best seed policy's and its mean
//! slowdown at most 1.02 × the best seed policy's (each best taken separately, over every seed policy
//! for multithreaded jobs). The figures are in docs/policies.md.

mod common;

use common::{generated_rows, scenario};
use cosched_sim::runner::{run_sets, PolicyRow};

/// The tolerance.
const TOLERANCE: f64 = 1.02;

/// The policies of the five papers that run multithreaded jobs (the task-bag ones give every job one
/// core), and `auto`.
const POLICIES: &[&str] = &[
    "ue",
    "bp",
    "eq",
    "ta",
    "taco-basic",
    "taco",
    "taco-local",
    "gang",
    "casas",
    "casas-ts",
    "auto",
];

fn policies() -> Vec<String> {
    POLICIES.iter().map(|p| p.to_string()).collect()
}

/// Auto's makespan and mean slowdown over the best seed policy's, each best taken on its own.
fn ratios(table: &[PolicyRow]) -> (f64, f64) {
    let seeds = || table.iter().filter(|r| r.policy != "auto");
    let best = |f: fn(&PolicyRow) -> f64| seeds().map(f).fold(f64::INFINITY, f64::min);
    let auto = table.iter().find(|r| r.policy == "auto").unwrap();
    let makespan = |r: &PolicyRow| r.makespan.unwrap();
    let slowdown = |r: &PolicyRow| r.mean_slowdown.unwrap();
    (
        makespan(auto) / best(makespan),
        slowdown(auto) / best(slowdown),
    )
}

fn check(sets: &[(String, Vec<PolicyRow>)]) {
    let mut failed = Vec::new();
    for (set, table) in sets {
        for row in table {
            eprintln!(
                "{set:10} {:11} makespan {:8.1}  mean slowdown {:6.2}",
                row.policy,
                row.makespan.unwrap(),
                row.mean_slowdown.unwrap()
            );
        }
        let (makespan, slowdown) = ratios(table);
        eprintln!("{set:10} auto / best: makespan {makespan:.3}, mean slowdown {slowdown:.3}");
        if makespan > TOLERANCE || slowdown > TOLERANCE {
            failed.push(format!(
                "{set}: makespan {makespan:.3}, mean slowdown {slowdown:.3}"
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "auto over the best seed policy: {failed:?}"
    );
}

/// Rows of the named sets of TACO's Table 4 scenario.
fn taco_sets(names: &[&str]) -> Vec<(String, Vec<PolicyRow>)> {
    let file = scenario("taco-table4");
    let machine = file.topology().unwrap();
    let sets: Vec<_> = file
        .sets
        .iter()
        .filter(|s| names.contains(&s.name.as_str()))
        .cloned()
        .collect();
    assert_eq!(
        sets.len(),
        names.len(),
        "sets {names:?} in taco-table4.toml"
    );
    run_sets(
        &machine,
        &sets,
        file.scenario.seeds,
        &policies(),
        &file.model,
        None,
        &mut |_, _| {},
    )
    .unwrap()
    .into_iter()
    .map(|r| (r.set, r.rows))
    .collect()
}

#[test]
fn auto_is_within_two_percent_of_the_best_seed_policy_on_taco_sets_a_to_d() {
    check(&taco_sets(&["A", "B", "C", "D"]));
}

#[test]
fn auto_is_within_two_percent_of_the_best_seed_policy_on_the_casas_mixes() {
    let sets: Vec<(String, Vec<PolicyRow>)> = ["casas-all", "casas-low", "casas-high"]
        .into_iter()
        .map(|name| {
            (
                name.to_string(),
                generated_rows(&scenario(name), &policies()),
            )
        })
        .collect();
    check(&sets);
}
