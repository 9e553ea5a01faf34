//! A machine's partition sizes and the partitions of each size, computed once per policy: both walk the
//! whole topology tree, which on every decision cost TA and Gang more than their own choices. Like
//! TACO's geometry, it assumes a policy runs on one machine for its whole life.

use cosched_core::{CpuSet, Topology};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct Partitions {
    sizes: Option<Arc<[usize]>>,
    of_size: HashMap<usize, Arc<[CpuSet]>>,
}

impl Partitions {
    /// [`Topology::partition_sizes`], ascending.
    pub fn sizes(&mut self, topology: &Topology) -> Arc<[usize]> {
        self.sizes
            .get_or_insert_with(|| topology.partition_sizes().into())
            .clone()
    }

    /// [`Topology::partitions`] of `size`.
    pub fn of_size(&mut self, topology: &Topology, size: usize) -> Arc<[CpuSet]> {
        self.of_size
            .entry(size)
            .or_insert_with(|| topology.partitions(size).into())
            .clone()
    }
}
