//! The bundled workloads parse, name only benchmarks this crate builds, and simulate (every job
//! has a valid profile).

use cosched_core::workload::Workload;
use std::path::{Path, PathBuf};

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    [
        "default.toml",
        "independent.toml",
        "crowd.toml",
        "twins.toml",
    ]
    .iter()
    .map(|name| dir.join(name))
    .collect()
}

#[test]
fn bundled_workloads_run_built_benchmarks_and_have_profiles() {
    for path in examples() {
        let workload = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
        for job in &workload.jobs {
            let program = job.command.first().expect("a command");
            let name = program
                .strip_prefix("{bench}/")
                .unwrap_or_else(|| panic!("{}: {program} is not a bundled benchmark", job.name));
            assert!(
                cosched_native::benchmark(name).is_file(),
                "{}: no benchmark {name}",
                job.name
            );
            let profile = job.profile.as_deref().expect("a profile");
            cosched_sim::profile::parse(profile).unwrap_or_else(|e| panic!("{}: {e}", job.name));
        }
    }
}

#[test]
fn the_default_workload_scales_with_the_machine() {
    let workload = Workload::load(&examples()[0]).unwrap();
    for job in &workload.jobs {
        assert_eq!(job.max_threads, None, "{}: fixed max_threads", job.name);
        let threads_from_advice = job.command.iter().any(|arg| arg == "{threads}")
            || job.kind == cosched_core::job::JobKind::Malleable;
        assert!(
            threads_from_advice,
            "{}: thread count not advised",
            job.name
        );
    }
}
