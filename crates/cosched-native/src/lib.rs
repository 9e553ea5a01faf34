//! The C side of cosched: the OpenMP preload library `libcosched-omp.so`, the benchmark programs, and
//! the Rust end of the control page they share with the executor (layout in `docs/control-page.md`).
//!
//! The C sources under `native/` are compiled by this crate's build script, so `cargo build` builds
//! everything. The preload library and the benchmarks are found relative to the running executable,
//! in `lib/cosched/` beside its directory: `$PREFIX/lib/cosched` for `$PREFIX/bin/cosched` (`make
//! install`), `<target>/lib/cosched` for `<target>/release/cosched` (the build script puts them there).
//! An executable installed alone (`cargo install`) carries them too and writes them into a cache
//! directory on first use (`embedded`).

pub mod control;
mod embedded;

use std::path::PathBuf;

/// Environment variable that overrides where the benchmark programs and the preload library are looked
/// up (e.g. to run an installed `cosched` binary against natives built elsewhere).
pub const NATIVE_DIR_ENV: &str = "COSCHED_NATIVE_DIR";

/// File name of the preload library.
pub const PRELOAD_LIBRARY_NAME: &str = "libcosched-omp.so";

include!("benchmarks.rs");

/// Where the preload library and the benchmarks are looked for, in order: `COSCHED_NATIVE_DIR`, then
/// `lib/cosched` beside the executable's directory (`<exe dir>/../lib/cosched`), then one level higher
/// for test programs, which cargo puts in `<target>/<profile>/deps/`.
pub fn candidate_dirs() -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os(NATIVE_DIR_ENV).filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let exe = std::env::current_exe().and_then(|p| p.canonicalize());
    let Some(exe_dir) = exe.ok().and_then(|p| p.parent().map(PathBuf::from)) else {
        return Vec::new();
    };
    exe_dir
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("lib/cosched"))
        .collect()
}

/// The directory that holds the preload library and the benchmarks: the first of [`candidate_dirs`]
/// that has them, else the copies compiled into this program, written to a cache directory (not when
/// `COSCHED_NATIVE_DIR` names a place: that is where they must be). The error says where they were
/// looked for and how to get them.
pub fn locate() -> Result<PathBuf, NotFound> {
    let candidates = candidate_dirs();
    if let Some(dir) = candidates
        .iter()
        .find(|d| d.join(PRELOAD_LIBRARY_NAME).is_file())
    {
        return Ok(dir.clone());
    }
    let overridden = std::env::var_os(NATIVE_DIR_ENV).is_some_and(|d| !d.is_empty());
    let extract = if overridden {
        None
    } else {
        match embedded::extract() {
            Ok(dir) => return Ok(dir),
            Err(e) => Some(e),
        }
    };
    Err(NotFound {
        looked_in: candidates,
        extract,
    })
}

/// The preload library and the benchmarks are nowhere cosched looks for them.
#[derive(Debug, thiserror::Error)]
#[error(
    "{PRELOAD_LIBRARY_NAME} and the benchmarks are not in {}{}; install cosched with `make install \
     PREFIX=...` (which puts them in PREFIX/lib/cosched), or set {NATIVE_DIR_ENV} to their directory",
    places(looked_in),
    if extract.is_some() { ", and the built-in copies could not be written to a cache directory" } else { "" }
)]
pub struct NotFound {
    pub looked_in: Vec<PathBuf>,
    /// Why the built-in copies could not be written out (`None` when they were not tried).
    #[source]
    pub extract: Option<std::io::Error>,
}

fn places(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "any known place".to_string();
    }
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    names.join(" or ")
}

/// Directory holding the benchmark executables and the preload library; where they were expected
/// when they are missing, so that a failed launch names that place.
pub fn bench_dir() -> PathBuf {
    locate().unwrap_or_else(|_| candidate_dirs().into_iter().next().unwrap_or_default())
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
    fn build_placed_every_artefact_where_an_executable_finds_it() {
        locate().unwrap();
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
