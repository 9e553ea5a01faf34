//! Aligned partitions: CPU sets that are a whole topology unit or an equal fraction of one.
//!
//! A unit with `k` equal children can be split into groups of `g` consecutive children for every `g`
//! dividing `k`; below a child's size, the child's own sizes apply. On the TACO machine (4 packages of 6
//! cores) this gives 24, 12, 6 (machine, half, package), 3, 2, 1 (half, third, sixth of a package):
//! never 1.5 packages, never 4 cores.

use super::{NodeId, Topology};
use crate::cpuset::CpuSet;
use std::collections::BTreeSet;

impl Topology {
    /// Every partition size this machine allows, ascending.
    pub fn partition_sizes(&self) -> Vec<usize> {
        self.sizes_of(0).into_iter().collect()
    }

    /// The largest allowed partition size not above `n` (at least the smallest size).
    pub fn partition_size_at_most(&self, n: usize) -> usize {
        let sizes = self.partition_sizes();
        sizes
            .iter()
            .rev()
            .find(|s| **s <= n)
            .or(sizes.first())
            .copied()
            .unwrap_or(1)
    }

    /// The disjoint CPU sets of one allowed size, left to right. Empty if `size` is not allowed.
    pub fn partitions(&self, size: usize) -> Vec<CpuSet> {
        let mut out = Vec::new();
        if size > 0 {
            self.collect_parts(0, size, &mut out);
        }
        out
    }

    fn sizes_of(&self, id: NodeId) -> BTreeSet<usize> {
        let node = self.node(id);
        let mut sizes = BTreeSet::from([node.cpus.len()]);
        if node.children.is_empty() {
            return sizes;
        }
        let child_sizes: Vec<usize> = node
            .children
            .iter()
            .map(|&c| self.node(c).cpus.len())
            .collect();
        let k = child_sizes.len();
        if child_sizes.iter().all(|s| *s == child_sizes[0]) {
            for group in (1..k).filter(|g| k.is_multiple_of(*g)) {
                sizes.insert(group * child_sizes[0]);
            }
        }
        // Below the children's size a partition must fit inside each child, so only the sizes that
        // every child allows can tile this node.
        let common = node
            .children
            .iter()
            .map(|&c| self.sizes_of(c))
            .reduce(|a, b| a.intersection(&b).copied().collect())
            .unwrap_or_default();
        sizes.extend(common);
        sizes
    }

    fn collect_parts(&self, id: NodeId, size: usize, out: &mut Vec<CpuSet>) {
        let node = self.node(id);
        let total = node.cpus.len();
        if total == size {
            out.push(node.cpus.clone());
            return;
        }
        if total < size || node.children.is_empty() {
            return;
        }
        let child_size = self.node(node.children[0]).cpus.len();
        let homogeneous = node
            .children
            .iter()
            .all(|&c| self.node(c).cpus.len() == child_size);
        if homogeneous && size > child_size {
            let group = size / child_size;
            if size.is_multiple_of(child_size) && node.children.len().is_multiple_of(group) {
                for chunk in node.children.chunks(group) {
                    out.push(
                        chunk
                            .iter()
                            .fold(CpuSet::new(), |acc, &c| acc.union(&self.node(c).cpus)),
                    );
                }
            }
            return;
        }
        for &child in &node.children {
            self.collect_parts(child, size, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::topology::{presets, synthetic, Level};
    use proptest::prelude::*;

    #[test]
    fn taco_machine_allows_the_papers_sizes() {
        let topo = presets::preset("taco-opteron8435").unwrap();
        assert_eq!(topo.partition_sizes(), vec![1, 2, 3, 6, 12, 24]);
        let thirds = topo.partitions(2);
        assert_eq!(thirds.len(), 12);
        assert_eq!(thirds[3].to_string(), "6-7");
        assert!(topo.partitions(4).is_empty());
        assert_eq!(topo.partition_size_at_most(5), 3);
    }

    #[test]
    fn casas_machine_splits_at_dies() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        assert_eq!(topo.partition_sizes(), vec![1, 2, 3, 6, 12, 24, 48]);
    }

    /// Random synthetic machines: each allowed size tiles the machine with disjoint sets, none of which
    /// straddles a unit whose size is at least the partition's.
    fn machines() -> impl Strategy<Value = String> {
        let levels = [
            Level::Package,
            Level::Die,
            Level::Numa,
            Level::L3,
            Level::Core,
            Level::Pu,
        ];
        (prop::collection::vec(1u32..5, 6), 0u8..64).prop_map(move |(counts, mask)| {
            levels
                .iter()
                .zip(counts)
                .enumerate()
                .filter(|(i, (level, _))| mask & (1 << i) != 0 || **level == Level::Core)
                .map(|(_, (level, count))| format!("{level}:{count}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
    }

    proptest! {
        #[test]
        fn partitions_are_disjoint_cover_and_stay_aligned(text in machines()) {
            let topo = synthetic::parse(&text).unwrap();
            for size in topo.partition_sizes() {
                let parts = topo.partitions(size);
                prop_assert!(!parts.is_empty(), "size {} of {} has no partition", size, text);
                let mut union = crate::cpuset::CpuSet::new();
                for (i, part) in parts.iter().enumerate() {
                    prop_assert_eq!(part.len(), size);
                    for other in &parts[i + 1..] {
                        prop_assert!(part.is_disjoint(other));
                    }
                    union = union.union(part);
                    for unit in &topo.nodes {
                        let overlap = unit.cpus.intersection(part).len();
                        let straddles = overlap > 0 && !part.is_subset(&unit.cpus) && !unit.cpus.is_subset(part);
                        prop_assert!(!straddles, "{} straddles {} #{} ({}) in {}", part, unit.level, unit.index, unit.cpus, text);
                    }
                }
                prop_assert_eq!(&union, topo.cpus());
            }
        }
    }
}
