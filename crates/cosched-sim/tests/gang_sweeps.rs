//! The two gang-scheduling experiments, from their scenario files: Peter et al.'s synchronisation
//! granularity (`scenarios/gang-granularity.toml`, Peter et al. §3.2) and Frachtenberg & Etsion's BSP
//! programs against stressors (`scenarios/gang-bsp-stressors.toml`, Frachtenberg & Etsion §3.2).

use cosched_sim::runner::run_sweep;
use cosched_sim::scenario::ScenarioFile;
use cosched_sim::sweep::{PointResult, Sweep};
use std::path::Path;

fn sweep(name: &str) -> (Sweep, Vec<String>, Vec<PointResult>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}.toml"));
    let file = ScenarioFile::load(&path).unwrap();
    let machine = file.topology().unwrap();
    let sweep = file.sweep.expect("a [sweep] scenario");
    let policies = file.scenario.policies;
    let points = run_sweep(
        &machine,
        &sweep,
        &policies,
        &file.model,
        None,
        &mut |_, _| {},
    )
    .unwrap();
    (sweep, policies, points)
}

#[test]
fn gangs_benefit_vanishes_as_the_sync_interval_reaches_the_os_time_slice() {
    let (sweep, _, points) = sweep("gang-granularity");
    let speedup: Vec<(f64, f64)> = points
        .iter()
        .map(|p| {
            let interval: f64 = p.row.parse().unwrap();
            (interval, p.ratio("ue", &sweep.baseline).unwrap())
        })
        .collect();
    eprintln!("interval, no control / gang: {speedup:?}");
    let at = |interval: f64| {
        speedup
            .iter()
            .find(|(i, _)| (i / interval - 1.0).abs() < 1e-9)
            .unwrap()
            .1
    };
    assert!(at(1e-6) > 3.0, "gang at 1 µs: {:.2}×", at(1e-6));
    assert!(
        at(4e-5) > 1.2,
        "at 40 µs the benefit has only begun to shrink: {:.2}×",
        at(4e-5)
    );
    for pair in speedup.windows(2) {
        assert!(
            pair[1].1 <= pair[0].1 + 1e-9,
            "benefit grows from {:?} to {:?}",
            pair[0],
            pair[1]
        );
    }
    let os_quantum = cosched_sim::ModelParams::default().os_quantum;
    for &(interval, ratio) in speedup.iter().filter(|(i, _)| *i >= os_quantum) {
        assert!((0.95..1.05).contains(&ratio), "at {interval} s: {ratio:.3}");
    }
}

#[test]
fn stressors_slow_default_scheduling_down_but_not_gang_scheduling() {
    let (sweep, policies, points) = sweep("gang-bsp-stressors");
    let (default, gang) = (&policies[0], &sweep.baseline);
    assert_eq!(default, "ue");
    let figure = |policy: &str, k: &str, s: &str| {
        let point = points
            .iter()
            .find(|p| p.row == k && p.column.as_deref() == Some(s))
            .unwrap();
        point.seconds[policy].unwrap()
    };
    let stressors: Vec<String> = sweep
        .columns
        .as_ref()
        .unwrap()
        .values
        .iter()
        .map(|v| v.text())
        .collect();
    let most = stressors.last().unwrap();
    let mut slowdown_at_most = Vec::new();
    for k in sweep.rows.values.iter().map(|v| v.text()) {
        let slowdown = |s: &str| figure(default, &k, s) / figure(gang, &k, s);
        // No stressors: blocking programs self-synchronise; default is at least as fast as gang.
        assert!(
            slowdown("0") <= 1.01,
            "k={k}: default/gang {:.2} without stressors",
            slowdown("0")
        );
        // Stressors beyond the spare CPU: default's time keeps growing, gang's stays put (all stressors
        // share one slot), so the slowdown rises and ends above 1.
        let gang_times: Vec<f64> = stressors[1..].iter().map(|s| figure(gang, &k, s)).collect();
        let spread = gang_times.iter().cloned().fold(f64::MIN, f64::max)
            / gang_times.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            spread < 1.02,
            "k={k}: gang's time varies {spread:.3}× with stressors"
        );
        assert!(
            figure(default, &k, most) > 1.5 * figure(default, &k, "0"),
            "k={k}: default's time grows only {:.2}×",
            figure(default, &k, most) / figure(default, &k, "0")
        );
        for pair in stressors[1..].windows(2) {
            assert!(
                slowdown(&pair[1]) >= slowdown(&pair[0]) - 1e-9,
                "k={k}: {pair:?}"
            );
        }
        assert!(
            slowdown(most) > 1.0,
            "k={k}: default/gang {:.2} with {most} stressors",
            slowdown(most)
        );
        slowdown_at_most.push(slowdown(most));
    }
    // Most visible with one parallel program (Frachtenberg & Etsion §3.2.2: "the Parallel=1 axis").
    assert!(
        slowdown_at_most.windows(2).all(|w| w[0] >= w[1]),
        "{slowdown_at_most:?}"
    );
}
