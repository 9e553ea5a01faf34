pub mod bench;
pub mod compare;
pub mod gen;
pub mod machine;
pub mod report;
pub mod sim;
pub mod topo;
