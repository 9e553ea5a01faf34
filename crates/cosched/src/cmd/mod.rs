pub mod bench;
pub mod bench_barrier;
pub mod compare;
pub mod gen;
pub mod machine;
pub mod report;
pub mod sim;
pub mod topo;
