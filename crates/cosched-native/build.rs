//! Compiles the C side (`native/`): the preload library, the benchmark programs and the test
//! programs, with the system C compiler and OpenMP, into `OUT_DIR/native`. Where clang and LLVM
//! libomp's `omp-tools.h` are installed, the preload library also gets the OMPT tool for libomp
//! programs, and the test program is built a second time with clang against libomp. The preload
//! library and the benchmarks are then placed where an installed cosched keeps them: `lib/cosched/`
//! beside the directory of the executable (`<target>/lib/cosched` for `<target>/<profile>/cosched`), so
//! the build tree and an install are laid out alike and nothing needs a compiled-in path.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

const INSTALL_HINT: &str =
    "install a C compiler with OpenMP: `apt-get install gcc libgomp1` (Debian/Ubuntu)";

const PRELOAD_SOURCES: &[&str] = &["cosched_omp.c", "gomp_wrap.c"];
// The one list of benchmark programs, shared with the library that finds them at run time.
include!("src/benchmarks.rs");
const TEST_PROGRAMS: &[&str] = &["teamsize"];
/// Built with clang and LLVM libomp where they exist: `<name>-libomp`.
const LIBOMP_TEST_PROGRAMS: &[&str] = &["teamsize"];
const LIBOMP_HINT: &str = "apt-get install clang libomp-dev";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let native = manifest
        .join("../../native")
        .canonicalize()
        .unwrap_or_else(|e| panic!("cosched-native: C sources not found next to the crate ({e})"));
    let scratch = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let out = scratch.join("native");
    let test_out = out.join("tests");
    std::fs::create_dir_all(&test_out).unwrap();
    // A directory is scanned recursively: any edit under native/ rebuilds.
    println!("cargo:rerun-if-changed={}", native.display());
    println!("cargo:rerun-if-env-changed=CC");

    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    check_toolchain(&cc, &scratch);

    let preload = native.join("preload");
    let mut preload_sources: Vec<PathBuf> =
        PRELOAD_SOURCES.iter().map(|s| preload.join(s)).collect();
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    println!("cargo:rerun-if-env-changed=CLANG");
    let ompt_include = ompt_headers(&clang, &scratch);
    match &ompt_include {
        Some(_) => preload_sources.push(preload.join("ompt_tool.c")),
        None => println!(
            "cargo:warning=LLVM libomp support not built (no clang with omp-tools.h): programs \
             built with clang will not follow cosched's thread advice; {LIBOMP_HINT}"
        ),
    }
    let preload_includes: Vec<&Path> = ompt_include.iter().map(PathBuf::as_path).collect();
    let mut jobs = vec![(
        "libcosched-omp.so".to_string(),
        compile(
            &cc,
            &preload_sources,
            &out.join("libcosched-omp.so"),
            &["-shared", "-fPIC", "-ldl"],
            &preload_includes,
        ),
    )];
    let bench = native.join("bench");
    for name in BENCHMARKS {
        let source = bench.join(format!("{name}.c"));
        jobs.push((
            name.to_string(),
            compile(
                &cc,
                &[source],
                &out.join(name),
                &["-fopenmp", "-pthread", "-lm"],
                &[&preload],
            ),
        ));
    }
    let tests = native.join("tests");
    for name in TEST_PROGRAMS {
        let source = tests.join(format!("{name}.c"));
        jobs.push((
            name.to_string(),
            compile(
                &cc,
                &[source],
                &test_out.join(name),
                &["-fopenmp"],
                &[&preload],
            ),
        ));
    }
    for name in LIBOMP_TEST_PROGRAMS {
        let program = test_out.join(format!("{name}-libomp"));
        if ompt_include.is_none() {
            // A build from before clang went away must not pass for one with the OMPT tool.
            let _ = std::fs::remove_file(&program);
            continue;
        }
        let source = tests.join(format!("{name}.c"));
        jobs.push((
            format!("{name}-libomp"),
            compile(
                &clang,
                &[source],
                &program,
                &["-fopenmp=libomp"],
                &[&preload],
            ),
        ));
    }
    let failed: Vec<String> = jobs
        .into_iter()
        .filter_map(|(name, child)| {
            (!child.wait_with_output().unwrap().status.success()).then_some(name)
        })
        .collect();
    if !failed.is_empty() {
        panic!(
            "cosched-native: compiling {} failed (compiler output above)",
            failed.join(", ")
        );
    }
    place_beside_executables(&scratch, &out);
    println!(
        "cargo:rustc-env=COSCHED_NATIVE_TEST_DIR={}",
        test_out.display()
    );
}

/// Copies the preload library and the benchmarks to `<target>/lib/cosched`, where `OUT_DIR` is
/// `<target>/<profile>/build/<package>/out`. Each file is written under a temporary name and renamed, so
/// that a debug and a release build running at once never leave a partial file.
fn place_beside_executables(scratch: &Path, built: &Path) {
    let Some(target) = scratch.ancestors().nth(4) else {
        panic!(
            "cosched-native: unexpected OUT_DIR layout {}",
            scratch.display()
        );
    };
    let lib = target.join("lib/cosched");
    std::fs::create_dir_all(&lib).unwrap();
    let names = BENCHMARKS.iter().copied().chain(["libcosched-omp.so"]);
    for name in names {
        let partial = lib.join(format!(".{name}.{}", std::process::id()));
        std::fs::copy(built.join(name), &partial).unwrap();
        std::fs::rename(&partial, lib.join(name)).unwrap();
    }
}

/// Starts one compilation; stderr goes to cargo's build log so errors are visible.
fn compile(
    cc: &str,
    sources: &[PathBuf],
    output: &Path,
    flags: &[&str],
    includes: &[&Path],
) -> Child {
    let mut command = Command::new(cc);
    command
        .args(["-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-o"])
        .arg(output);
    for include in includes {
        command.arg("-I").arg(include);
    }
    for (from, to) in prefix_maps() {
        command.arg(format!("-ffile-prefix-map={}={to}", from.display()));
    }
    command.args(sources).args(flags);
    command.spawn().unwrap_or_else(|e| {
        panic!("cosched-native: cannot run the C compiler `{cc}`: {e}; {INSTALL_HINT}")
    })
}

/// Debug information names the paths of sources and outputs; the natives are compiled into cosched
/// (`embedded.rs`), so those paths are mapped to neutral names: the workspace to `cosched`, and the
/// build directory, where it lies elsewhere (`cargo install`), to `out`.
fn prefix_maps() -> Vec<(PathBuf, &'static str)> {
    let dir = |var: &str| PathBuf::from(std::env::var_os(var).unwrap());
    let workspace = dir("CARGO_MANIFEST_DIR").join("../..");
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let out = dir("OUT_DIR");
    let mut maps = vec![(workspace.clone(), "cosched")];
    if !out.starts_with(&workspace) {
        maps.push((out, "out"));
    }
    maps
}

/// The directory holding a copy of LLVM's `omp-tools.h` (alone, so that the C compiler does not
/// pick up clang's other built-in headers), or `None` when clang or the header is missing.
fn ompt_headers(clang: &str, scratch: &Path) -> Option<PathBuf> {
    let output = Command::new(clang)
        .arg("-print-resource-dir")
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let resource_dir = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    let header = resource_dir.join("include/omp-tools.h");
    let include = scratch.join("ompt-include");
    std::fs::create_dir_all(&include).ok()?;
    std::fs::copy(&header, include.join("omp-tools.h")).ok()?;
    println!("cargo:rerun-if-changed={}", header.display());
    Some(include)
}

/// Fails early, with the package to install, if there is no C compiler or no OpenMP.
fn check_toolchain(cc: &str, scratch: &Path) {
    let probe = scratch.join("toolchain-probe.c");
    std::fs::write(
        &probe,
        "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n",
    )
    .unwrap();
    match Command::new(cc).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => panic!("cosched-native: no C compiler (`{cc}`, or set CC); {INSTALL_HINT}"),
    }
    let status = Command::new(cc)
        .args(["-fopenmp", "-o"])
        .arg(scratch.join("toolchain-probe"))
        .arg(&probe)
        .status()
        .unwrap();
    if !status.success() {
        panic!("cosched-native: the C compiler `{cc}` cannot build OpenMP programs (-fopenmp, omp.h, libgomp); {INSTALL_HINT}");
    }
}
