//! A cluster: N identical nodes, each a machine cosched reads as any other `--machine` (a preset, an
//! hwloc synthetic description, an lstopo XML file).
//!
//! hwloc has no level above the machine, so a cluster is written with a `cluster:N` prefix before one
//! node's machine (`cluster:128 package:2 core:8`), or in a machine file:
//!
//! ```toml
//! # cluster.toml
//! nodes = 128
//! node = "package:2 [numa] l3:1(size=16MB) core:8"   # or a preset, or an XML file beside this one
//! ```

use super::{presets, Topology, TopologyError};
use serde::Deserialize;
use std::path::Path;

pub use super::machine_spec::is_cluster;
use super::machine_spec::CLUSTER_PREFIX;

/// N identical nodes; CPUs are numbered within each node.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub nodes: u32,
    pub node: Topology,
}

impl Cluster {
    pub fn num_cpus(&self) -> usize {
        self.nodes as usize * self.node.num_cpus()
    }
}

/// What `--machine` names where a command takes both: one machine, or a cluster of them.
#[derive(Debug, Clone)]
pub enum Machine {
    Node(Topology),
    Cluster(Cluster),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    nodes: u32,
    node: String,
}

/// What is wrong with a cluster description.
#[derive(Debug, thiserror::Error)]
pub enum ClusterProblem {
    #[error(
        "`{CLUSTER_PREFIX}` takes the number of nodes, and `{count}` is not one; write e.g. \
         `cluster:128 package:2 core:8`"
    )]
    NotACount { count: String },
    #[error("cannot read the machine file: {source}; give an existing file or `cluster:N NODE`")]
    Read {
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}; a machine file has two keys: `nodes = 128` and `node = \"package:2 core:8\"`",
        source.message()
    )]
    MachineFile {
        #[source]
        source: toml::de::Error,
    },
    #[error("a cluster needs at least one node; give `cluster:N` with N > 0")]
    NoNodes,
    #[error(
        "give each node's machine after the node count, e.g. `cluster:{nodes} package:2 core:8` \
         or `cluster:{nodes} taco-opteron8435`"
    )]
    NoNodeMachine { nodes: u32 },
    #[error("a node cannot itself be a cluster (`{node}`); give one node's machine")]
    NestedCluster { node: String },
    #[error("its node machine: {0}")]
    Node(#[source] Box<TopologyError>),
}

/// Reads a cluster: `cluster:N NODE` or a machine file.
pub fn parse(spec: &str) -> Result<Cluster, TopologyError> {
    let spec = spec.trim();
    let problem = |problem: ClusterProblem| TopologyError::Cluster {
        spec: spec.to_string(),
        problem,
    };
    if let Some(rest) = spec.strip_prefix(CLUSTER_PREFIX) {
        let (count, node) = rest
            .trim_start()
            .split_once(char::is_whitespace)
            .unwrap_or((rest, ""));
        let nodes = count.parse::<u32>().map_err(|_| {
            problem(ClusterProblem::NotACount {
                count: count.to_string(),
            })
        })?;
        return build(nodes, node.trim(), None).map_err(problem);
    }
    let path = Path::new(spec);
    let text =
        std::fs::read_to_string(path).map_err(|source| problem(ClusterProblem::Read { source }))?;
    let file: MachineFile =
        toml::from_str(&text).map_err(|e| problem(ClusterProblem::MachineFile { source: e }))?;
    build(file.nodes, file.node.trim(), path.parent()).map_err(problem)
}

/// A cluster of `nodes` nodes of machine `node`; a relative XML path is taken from `dir`.
fn build(nodes: u32, node: &str, dir: Option<&Path>) -> Result<Cluster, ClusterProblem> {
    if nodes == 0 {
        return Err(ClusterProblem::NoNodes);
    }
    if node.is_empty() {
        return Err(ClusterProblem::NoNodeMachine { nodes });
    }
    if is_cluster(node) {
        return Err(ClusterProblem::NestedCluster {
            node: node.to_string(),
        });
    }
    let relative = dir.map(|dir| dir.join(node)).filter(|path| path.is_file());
    let node = match relative {
        Some(path) => presets::machine(&path.display().to_string()),
        None => presets::machine(node),
    }
    .map_err(|e| ClusterProblem::Node(Box::new(e)))?;
    Ok(Cluster { nodes, node })
}

/// Resolves `--machine` where a cluster is allowed.
pub fn machine(spec: &str) -> Result<Machine, TopologyError> {
    if is_cluster(spec) {
        parse(spec).map(Machine::Cluster)
    } else {
        presets::machine(spec).map(Machine::Node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(spec: &str) -> String {
        parse(spec).unwrap_err().to_string()
    }

    #[test]
    fn a_prefix_or_a_file_makes_a_cluster_of_identical_nodes() {
        let cluster = parse("cluster:128 package:2 core:8").unwrap();
        assert_eq!((cluster.nodes, cluster.node.num_cpus()), (128, 16));
        assert_eq!(cluster.num_cpus(), 2048);
        assert_eq!(
            parse(" cluster:3  gang-opteron8380").unwrap().num_cpus(),
            48
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("node.xml"),
            super::super::xml::to_xml(&super::super::synthetic::parse("pack:2 core:2").unwrap()),
        )
        .unwrap();
        let file = dir.path().join("cluster.toml");
        std::fs::write(&file, "nodes = 4\nnode = \"node.xml\"\n").unwrap();
        let cluster = parse(file.to_str().unwrap()).unwrap();
        assert_eq!((cluster.nodes, cluster.node.num_cpus()), (4, 4));
        assert!(matches!(
            machine("pack:2 core:2").unwrap(),
            Machine::Node(_)
        ));
    }

    #[test]
    fn errors_name_the_problem_and_the_fix() {
        let e = error("cluster:many core:4");
        assert!(
            e.contains("`many` is not one") && e.contains("cluster:128"),
            "{e}"
        );
        let e = error("cluster:0 core:4");
        assert!(e.contains("at least one node"), "{e}");
        let e = error("cluster:16");
        assert!(
            e.contains("after the node count") && e.contains("cluster:16 package:2"),
            "{e}"
        );
        let e = error("cluster:16 cluster:2 core:4");
        assert!(e.contains("cannot itself be a cluster"), "{e}");
        let e = error("cluster:16 core:4 bogus:2");
        assert!(e.contains("its node machine") && e.contains("bogus"), "{e}");
        let e = error("nowhere.toml");
        assert!(e.contains("cannot read the machine file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "nodes = 4\n").unwrap();
        let e = error(file.to_str().unwrap());
        assert!(e.contains("node") && e.contains("two keys"), "{e}");
    }

    #[test]
    fn a_one_machine_command_refuses_a_cluster_and_says_why() {
        let e = presets::machine("cluster:4 core:2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cluster") && e.contains("cosched replay"), "{e}");
    }
}
