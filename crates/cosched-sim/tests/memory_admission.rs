//! Memory admission in the simulator: jobs whose `mem` requests do not fit the machine's memory
//! beside those running wait, as the daemon holds them pending for `memory`.

use cosched_core::topology::synthetic;
use cosched_core::trace::{Record, TraceLine};
use cosched_core::workload::Workload;
use cosched_sim::{jobs, simulate, SimError, SimOptions};
use std::collections::BTreeMap;

/// Four one-thread jobs of 10 s on four CPUs, all arriving at once, asking 3, 2, 1 and 2 GiB.
const WORKLOAD: &str = r#"
[workload]
name = "memory"

[[job]]
name = "a"
kind = "rigid"
max_threads = 1
profile = "amdahl(serial=0, runtime=10)"
mem = "3G"

[[job]]
name = "b"
kind = "rigid"
max_threads = 1
profile = "amdahl(serial=0, runtime=10)"
mem = "2G"

[[job]]
name = "c"
kind = "rigid"
max_threads = 1
profile = "amdahl(serial=0, runtime=10)"
mem = "1G"

[[job]]
name = "d"
kind = "rigid"
max_threads = 1
profile = "amdahl(serial=0, runtime=10)"
mem = "2G"
"#;

/// When each job started, by name, under `eq` with `memory` bytes for jobs.
fn starts(memory: Option<u64>) -> Result<BTreeMap<String, f64>, SimError> {
    let topology = synthetic::parse("package:1 core:4").unwrap();
    let workload = Workload::parse(WORKLOAD, "memory.toml").unwrap();
    let jobs = jobs::sim_jobs(&workload, topology.num_cpus(), "memory.toml", None).unwrap();
    let options = SimOptions {
        memory,
        ..SimOptions::default()
    };
    let mut policy = cosched_policies::create("eq").unwrap();
    let trace: Vec<TraceLine> = simulate(&topology, &jobs, policy.as_mut(), &options)?;
    let names: BTreeMap<_, _> = jobs
        .iter()
        .map(|j| (j.spec.id, j.spec.name.clone()))
        .collect();
    Ok(trace
        .iter()
        .filter_map(|line| match &line.record {
            Record::Start { job, .. } => Some((names[job].clone(), line.t)),
            _ => None,
        })
        .collect())
}

#[test]
fn jobs_start_while_their_memory_fits_and_the_others_wait_for_an_end() {
    let gib = 1u64 << 30;
    let unlimited = starts(None).unwrap();
    assert!(unlimited.values().all(|&t| t == 0.0), "{unlimited:?}");

    // 3 GiB run; 2 GiB do not fit beside them and wait; 1 GiB goes ahead; the last 2 GiB wait.
    let limited = starts(Some(4 * gib)).unwrap();
    assert_eq!((limited["a"], limited["c"]), (0.0, 0.0), "{limited:?}");
    for late in ["b", "d"] {
        assert!(
            (limited[late] - 10.0).abs() < 1e-6,
            "{late} started at {}: {limited:?}",
            limited[late]
        );
    }

    let too_small = starts(Some(2 * gib)).unwrap_err().to_string();
    assert!(
        too_small.contains("job a asks for 3G") && too_small.contains("--memory"),
        "{too_small}"
    );
}
