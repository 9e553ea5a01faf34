//! The C side of cosched: the OpenMP preload library `libcosched-omp.so`, the benchmark programs, and
//! the Rust end of the control page they share with the executor (layout in `docs/control-page.md`).
//!
//! The C sources under `native/` are compiled by this crate's build script, so `cargo build` builds
//! everything; the artefacts live in the build's `OUT_DIR`.

pub mod control;

use std::path::PathBuf;

/// Environment variable that overrides where the benchmark programs and the preload library are looked
/// up (e.g. to run an installed `cosched` binary against natives built elsewhere).
pub const NATIVE_DIR_ENV: &str = "COSCHED_NATIVE_DIR";

/// File name of the preload library.
pub const PRELOAD_LIBRARY_NAME: &str = "libcosched-omp.so";

/// Benchmark programs built from `native/bench/`, by file name.
pub const BENCHMARKS: &[&str] = &["barrier", "stress", "dense", "stencil", "spmv"];

/// Directory holding the built benchmark executables (and the preload library).
pub fn bench_dir() -> PathBuf {
    match std::env::var_os(NATIVE_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("COSCHED_NATIVE_BUILD_DIR")),
    }
}

/// Path of `libcosched-omp.so`, for `LD_PRELOAD`.
pub fn preload_library() -> PathBuf {
    bench_dir().join(PRELOAD_LIBRARY_NAME)
}

/// Path of one benchmark program, e.g. `benchmark("barrier")`.
pub fn benchmark(name: &str) -> PathBuf {
    bench_dir().join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_produced_every_artefact() {
        assert!(
            preload_library().is_file(),
            "{}",
            preload_library().display()
        );
        for name in BENCHMARKS {
            assert!(benchmark(name).is_file(), "{name} missing");
        }
    }
}
