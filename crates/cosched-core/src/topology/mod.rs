//! The machine as a tree: machine → package → die → NUMA node → LLC domain → core → PU.
//!
//! A topology comes from sysfs ([`sysfs`]), from hwloc's synthetic syntax ([`synthetic`]), from an
//! `lstopo --of xml` export ([`xml`]) or from a named preset of the papers' machines ([`presets`]);
//! [`cluster`] puts N such machines side by side, and `machine_spec` tells which of the two a
//! `--machine` string names.
//! Policies only ever see this tree and the aligned partitions derived from it ([`partition`]).

pub mod cluster;
mod machine_spec;
mod partition;
pub mod presets;
pub mod synthetic;
pub mod sysfs;
pub mod xml;

use crate::cpuset::CpuSet;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// A level of the hierarchy, named as hwloc names it in its synthetic syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Machine,
    Package,
    Die,
    Numa,
    L3,
    L2,
    L1,
    Core,
    Pu,
}

impl Level {
    pub const ALL: [Level; 9] = [
        Level::Machine,
        Level::Package,
        Level::Die,
        Level::Numa,
        Level::L3,
        Level::L2,
        Level::L1,
        Level::Core,
        Level::Pu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Level::Machine => "machine",
            Level::Package => "package",
            Level::Die => "die",
            Level::Numa => "numa",
            Level::L3 => "l3",
            Level::L2 => "l2",
            Level::L1 => "l1",
            Level::Core => "core",
            Level::Pu => "pu",
        }
    }

    pub fn is_cache(self) -> bool {
        matches!(self, Level::L3 | Level::L2 | Level::L1)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub type NodeId = usize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopoNode {
    pub level: Level,
    /// Position among the nodes of its level, counted left to right over the whole tree.
    pub index: u32,
    pub cpus: CpuSet,
    /// Cache size in bytes (cache levels only, where known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
    pub children: Vec<NodeId>,
    #[serde(skip)]
    pub parent: Option<NodeId>,
}

/// The machine tree. Node 0 is the machine; every other node's CPUs are a subset of its parent's, and
/// siblings are disjoint. Levels that were not described (no dies, no NUMA nodes) are simply absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    pub name: String,
    pub nodes: Vec<TopoNode>,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("unknown preset {name:?}; valid presets: {valid}")]
    UnknownPreset { name: String, valid: String },
    #[error(
        "unknown machine {name:?}: give a preset ({presets}), a file written by `lstopo --of xml \
         FILE`, or an hwloc synthetic description such as \"package:2 [numa] l3:1 core:8 pu:2\""
    )]
    UnknownMachine { name: String, presets: String },
    #[error("malformed synthetic topology {text:?}: {reason}")]
    Synthetic {
        text: String,
        reason: synthetic::SyntheticError,
    },
    #[error("cannot read the machine topology from {}: {source}", path.display())]
    SysfsRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the machine topology from {}: not a CPU list: {source}", path.display())]
    SysfsCpuList {
        path: PathBuf,
        #[source]
        source: crate::cpuset::CpuListError,
    },
    #[error("cannot read the machine topology from {}: no CPU is online", path.display())]
    NoCpuOnline { path: PathBuf },
    #[error("cannot read the lstopo XML file {}: {source}", path.display())]
    XmlRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot import the lstopo XML file {}: {reason}", path.display())]
    Xml {
        path: PathBuf,
        reason: xml::XmlError,
    },
    #[error("malformed cluster {spec:?}: {problem}")]
    Cluster {
        spec: String,
        problem: cluster::ClusterProblem,
    },
    #[error(
        "{spec:?} is a cluster, and this command simulates one machine: give one node's machine \
         (what follows `cluster:N`), or replay a trace on the cluster with `cosched replay`"
    )]
    ClusterWhereNode { spec: String },
}

impl Topology {
    /// Builds a tree from nested (level, cache size, children) descriptions; PUs are numbered in order.
    pub fn from_shape(name: impl Into<String>, shape: &Shape) -> Topology {
        let mut builder = Builder::default();
        builder.add(None, Level::Machine, None, shape);
        let mut topo = Topology {
            name: name.into(),
            nodes: builder.nodes,
        };
        topo.fill_cpus_and_indices();
        topo
    }

    pub fn root(&self) -> &TopoNode {
        &self.nodes[0]
    }

    pub fn cpus(&self) -> &CpuSet {
        &self.nodes[0].cpus
    }

    pub fn num_cpus(&self) -> usize {
        self.cpus().len()
    }

    pub fn node(&self, id: NodeId) -> &TopoNode {
        &self.nodes[id]
    }

    /// Levels present in the tree, from the top.
    pub fn levels(&self) -> Vec<Level> {
        let mut levels: Vec<Level> = self.nodes.iter().map(|n| n.level).collect();
        levels.sort();
        levels.dedup();
        levels
    }

    pub fn nodes_at(&self, level: Level) -> impl Iterator<Item = &TopoNode> {
        self.nodes.iter().filter(move |n| n.level == level)
    }

    /// The CPU sets of the last-level cache domains (the machine itself when no cache is described).
    pub fn llc_domains(&self) -> Vec<CpuSet> {
        let llc = [Level::L3, Level::L2, Level::L1]
            .into_iter()
            .find(|level| self.nodes_at(*level).next().is_some());
        match llc {
            Some(level) => self.nodes_at(level).map(|n| n.cpus.clone()).collect(),
            None => vec![self.cpus().clone()],
        }
    }

    /// Size in bytes of one last-level cache, where known.
    pub fn llc_bytes(&self) -> Option<u64> {
        [Level::L3, Level::L2, Level::L1]
            .into_iter()
            .find_map(|level| self.nodes_at(level).find_map(|n| n.cache_bytes))
    }

    /// The CPU sets of the NUMA nodes (the machine itself when none are described).
    pub fn numa_domains(&self) -> Vec<CpuSet> {
        let domains: Vec<CpuSet> = self.nodes_at(Level::Numa).map(|n| n.cpus.clone()).collect();
        if domains.is_empty() {
            vec![self.cpus().clone()]
        } else {
            domains
        }
    }

    /// Recomputes every inner node's CPU set from its PUs and numbers nodes per level left to right.
    fn fill_cpus_and_indices(&mut self) {
        for id in (0..self.nodes.len()).rev() {
            if self.nodes[id].children.is_empty() {
                continue;
            }
            let cpus = self.nodes[id]
                .children
                .iter()
                .fold(CpuSet::new(), |acc, &c| acc.union(&self.nodes[c].cpus));
            self.nodes[id].cpus = cpus;
        }
        let mut counters = std::collections::HashMap::new();
        let mut order = vec![0];
        let mut next = Vec::new();
        while !order.is_empty() {
            for &id in &order {
                let counter = counters.entry(self.nodes[id].level).or_insert(0);
                self.nodes[id].index = *counter;
                *counter += 1;
                next.extend(self.nodes[id].children.iter().copied());
            }
            order = std::mem::take(&mut next);
        }
    }
}

/// One level of a discovered machine: the CPU sets of its units, each with a cache size where known.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    pub level: Level,
    pub units: Vec<(CpuSet, Option<u64>)>,
}

impl Topology {
    /// Builds a tree from flat per-level groupings of `cpus`, as discovery sources (sysfs, lstopo XML)
    /// deliver them. Groupings that do not nest inside the levels above are dropped, as are dies, L2 and
    /// L1 levels that only repeat the level above or the cores below: they add no partition.
    pub fn from_groupings(
        name: impl Into<String>,
        cpus: &CpuSet,
        mut groupings: Vec<Grouping>,
    ) -> Topology {
        groupings.sort_by_key(|g| g.level);
        for grouping in &mut groupings {
            for unit in &mut grouping.units {
                unit.0 = unit.0.intersection(cpus);
            }
            grouping.units.retain(|u| !u.0.is_empty());
            grouping.units.sort_by_key(|u| u.0.first());
            grouping.units.dedup_by(|a, b| a.0 == b.0);
        }
        let mut kept: Vec<Grouping> = Vec::new();
        for grouping in groupings {
            let covers = grouping
                .units
                .iter()
                .fold(CpuSet::new(), |acc, u| acc.union(&u.0))
                == *cpus;
            let disjoint = grouping.units.iter().map(|u| u.0.len()).sum::<usize>() == cpus.len();
            let nests = kept.last().is_none_or(|above| {
                grouping
                    .units
                    .iter()
                    .all(|u| above.units.iter().any(|a| u.0.is_subset(&a.0)))
            });
            if covers && disjoint && nests {
                kept.push(grouping);
            }
        }
        let core_sets: Option<Vec<CpuSet>> = kept
            .iter()
            .find(|g| g.level == Level::Core)
            .map(|g| g.units.iter().map(|u| u.0.clone()).collect());
        let mut previous: Option<Vec<CpuSet>> = None;
        kept.retain(|g| {
            let sets: Vec<CpuSet> = g.units.iter().map(|u| u.0.clone()).collect();
            let optional = matches!(g.level, Level::Die | Level::L2 | Level::L1);
            let redundant = previous.as_ref() == Some(&sets)
                || (g.level != Level::Core && core_sets.as_ref() == Some(&sets));
            if optional && redundant {
                return false;
            }
            previous = Some(sets);
            true
        });
        let shape = shape_below(cpus, &kept);
        Topology::from_shape(
            name,
            &Shape::Group {
                level: Level::Machine,
                cache_bytes: None,
                children: shape,
            },
        )
    }
}

/// The children of a unit covering `cpus`, given the groupings below it (top first).
fn shape_below(cpus: &CpuSet, below: &[Grouping]) -> Vec<Shape> {
    match below.split_first() {
        None => cpus.iter().map(Shape::Pu).collect(),
        Some((grouping, rest)) => grouping
            .units
            .iter()
            .filter(|u| u.0.is_subset(cpus))
            .map(|(unit, cache)| Shape::Group {
                level: grouping.level,
                cache_bytes: *cache,
                children: shape_below(unit, rest),
            })
            .collect(),
    }
}

/// A nested description of a machine, used to build trees from synthetic strings, presets and imports.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A hardware thread with its OS CPU number.
    Pu(u32),
    Group {
        level: Level,
        cache_bytes: Option<u64>,
        children: Vec<Shape>,
    },
}

#[derive(Default)]
struct Builder {
    nodes: Vec<TopoNode>,
}

impl Builder {
    fn add(
        &mut self,
        parent: Option<NodeId>,
        level: Level,
        cache_bytes: Option<u64>,
        shape: &Shape,
    ) -> NodeId {
        let id = self.nodes.len();
        self.nodes.push(TopoNode {
            level,
            index: 0,
            cpus: CpuSet::new(),
            cache_bytes,
            children: Vec::new(),
            parent,
        });
        match shape {
            Shape::Pu(cpu) => self.nodes[id].cpus.insert(*cpu),
            Shape::Group { children, .. } => {
                for child in children {
                    let (level, cache) = match child {
                        Shape::Pu(_) => (Level::Pu, None),
                        Shape::Group {
                            level, cache_bytes, ..
                        } => (*level, *cache_bytes),
                    };
                    let child_id = self.add(Some(id), level, cache, child);
                    self.nodes[id].children.push(child_id);
                }
            }
        }
        id
    }
}

/// A size as hwloc writes and reads it: in the largest binary (`KiB`, `MiB`, `GiB`) or else decimal
/// (`kB`, `MB`, `GB`) unit that divides it exactly, else in plain bytes.
pub(crate) fn hwloc_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 6] = [
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("kB", 1_000),
    ];
    UNITS
        .into_iter()
        .find(|(_, size)| bytes >= *size && bytes.is_multiple_of(*size))
        .map_or_else(
            || bytes.to_string(),
            |(unit, size)| format!("{}{unit}", bytes / size),
        )
}

/// Prints the tree one node per line, collapsing runs of identical siblings so that a 1,024-CPU machine
/// stays readable.
impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn line(
            topo: &Topology,
            id: NodeId,
            depth: usize,
            f: &mut fmt::Formatter<'_>,
        ) -> fmt::Result {
            let node = topo.node(id);
            let cache = node
                .cache_bytes
                .map(|b| format!(" ({})", hwloc_size(b)))
                .unwrap_or_default();
            writeln!(
                f,
                "{:indent$}{} #{}{} cpus {}",
                "",
                node.level,
                node.index,
                cache,
                node.cpus,
                indent = depth * 2
            )?;
            let children = &node.children;
            let mut shown = 0;
            for (i, &child) in children.iter().enumerate() {
                if i >= 2 && i + 1 < children.len() && children.len() > 4 {
                    if shown == 2 {
                        writeln!(
                            f,
                            "{:indent$}… {} more {}",
                            "",
                            children.len() - 3,
                            topo.node(child).level,
                            indent = (depth + 1) * 2
                        )?;
                        shown += 1;
                    }
                    continue;
                }
                shown += 1;
                line(topo, child, depth + 1, f)?;
            }
            Ok(())
        }
        line(self, 0, 0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llc_and_numa_domains_come_from_the_tree() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        assert_eq!(topo.num_cpus(), 48);
        assert_eq!(topo.llc_domains().len(), 8);
        assert_eq!(topo.numa_domains().len(), 8);
        assert!(topo.llc_bytes().is_some());
    }
}
