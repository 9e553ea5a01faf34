/// Benchmark programs built from `native/bench/`, by file name.
pub const BENCHMARKS: &[&str] = &[
    "barrier",
    "stress",
    "dense",
    "stencil",
    "spmv",
    "longregion",
];
