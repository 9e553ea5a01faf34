pub mod compare;
pub mod machine;
pub mod report;
pub mod topo;
