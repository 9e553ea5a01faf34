//! Builds the C side of cosched: the OpenMP preload library and the benchmark programs.
