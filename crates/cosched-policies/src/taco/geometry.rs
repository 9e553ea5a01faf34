//! The hierarchy levels TACO switches between: a chain of nested aligned partition sizes.
//!
//! Levels must nest so that splitting a unit hands each of its jobs a piece of it (§2.1). Where the
//! machine allows sizes that do not nest (halves and thirds of a 6-core package), the chain takes the
//! larger one at each step, which on the TACO machine gives the paper's 24, 12, 6, 3, 1 (§4.2).

use super::lanes::Places;
use cosched_core::{CpuSet, Topology};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Geometry {
    /// Partition sizes, coarsest (the machine or the largest allowed size) first.
    pub sizes: Vec<usize>,
    /// The partitions of each size, left to right; shared with the lanes dealt on them.
    pub parts: Vec<Arc<[CpuSet]>>,
    /// Where each level's partitions lie, to find a job's old partition among them.
    pub places: Vec<Places>,
}

impl Geometry {
    /// The chain of `topology`. Given `sizes` (§4.4) are kept where the machine allows them and they
    /// nest, largest first; when none survive, the machine's own chain is used. (A policy cannot report
    /// an error, so `docs/policies.md` lists what is dropped.)
    pub fn new(topology: &Topology, sizes: Option<&[usize]>) -> Geometry {
        let allowed = topology.partition_sizes();
        let candidates: Vec<usize> = match sizes {
            Some(given) => allowed
                .iter()
                .copied()
                .filter(|s| given.contains(s))
                .collect(),
            None => Vec::new(),
        };
        let sizes = if candidates.is_empty() {
            chain(topology, &allowed)
        } else {
            chain(topology, &candidates)
        };
        let parts: Vec<Arc<[CpuSet]>> = sizes
            .iter()
            .map(|&s| topology.partitions(s).into())
            .collect();
        let places = parts.iter().map(|p| Places::of(p)).collect();
        Geometry {
            sizes,
            parts,
            places,
        }
    }

    /// The coarsest level whose size is at most `cpus` (the finest level when none is).
    pub fn level_at_most(&self, cpus: usize) -> usize {
        self.sizes
            .iter()
            .position(|&s| s <= cpus)
            .unwrap_or(self.sizes.len() - 1)
    }

    /// The finest level whose size is at least `cpus` (the coarsest level when none is).
    pub fn level_at_least(&self, cpus: usize) -> usize {
        self.sizes.iter().rposition(|&s| s >= cpus).unwrap_or(0)
    }

    pub fn level_of_size(&self, size: usize) -> Option<usize> {
        self.sizes.iter().position(|&s| s == size)
    }
}

/// From the largest of `allowed` down, every size whose partitions nest in the previous one's.
fn chain(topology: &Topology, allowed: &[usize]) -> Vec<usize> {
    let mut sizes = vec![*allowed.last().expect("a machine has at least one CPU")];
    let mut coarse = topology.partitions(sizes[0]);
    for &size in allowed.iter().rev().skip(1) {
        let fine = topology.partitions(size);
        if nests(&fine, &coarse) {
            sizes.push(size);
            coarse = fine;
        }
    }
    sizes
}

fn nests(fine: &[CpuSet], coarse: &[CpuSet]) -> bool {
    fine.iter().all(|f| coarse.iter().any(|c| f.is_subset(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::topology::{presets, synthetic};

    #[test]
    fn taco_machine_gives_the_papers_chain() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        assert_eq!(Geometry::new(&topo, None).sizes, vec![24, 12, 6, 3, 1]);
        let restricted = Geometry::new(&topo, Some(&[1, 6, 24]));
        assert_eq!(restricted.sizes, vec![24, 6, 1]);
        assert_eq!(restricted.parts[1].len(), 4);
    }

    #[test]
    fn sizes_that_do_not_fit_are_dropped() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        assert_eq!(Geometry::new(&topo, Some(&[4, 6])).sizes, vec![6]);
        assert_eq!(Geometry::new(&topo, Some(&[2, 3, 24])).sizes, vec![24, 3]);
        assert_eq!(
            Geometry::new(&topo, Some(&[5])).sizes,
            vec![24, 12, 6, 3, 1]
        );
    }

    #[test]
    fn two_by_two_has_three_levels() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        assert_eq!(Geometry::new(&topo, None).sizes, vec![4, 2, 1]);
    }
}
