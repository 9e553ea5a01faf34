pub mod machine;
pub mod topo;
