//! `cosched topo`: how cosched sees a machine, and the machine written for hwloc's tools.

use super::machine::MachineArgs;
use anyhow::Context as _;
use cosched_core::topology::cluster::{self, Cluster};
use cosched_core::topology::{synthetic, xml};
use cosched_core::Topology;

/// Print a machine's topology tree and the partition sizes cosched may give a job on it
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched topo\n  cosched topo --machine taco-opteron8435\n  \
cosched topo --machine 'pack:2 [numa] l3:1(size=12MB) core:4 pu:2' --json\n  \
lstopo --of xml > m.xml && cosched topo --machine m.xml\n  \
cosched topo --of synthetic > m.txt && lstopo --input \"$(cat m.txt)\"\n  \
cosched topo --machine casas-opteron6172 --of xml > casas.xml && lstopo --input casas.xml\n  \
cosched topo --machine 'cluster:128 package:2 core:8'"
)]
pub struct Args {
    #[command(flatten)]
    machine: MachineArgs,
    /// Print the machine as JSON (nodes with level, index, CPU list, cache size, children)
    #[arg(long, conflicts_with = "of")]
    json: bool,
    /// Write the machine in a format hwloc reads back (`lstopo --input`): its synthetic syntax or
    /// hwloc 2 XML
    #[arg(long, value_enum, value_name = "FORMAT")]
    of: Option<Format>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
enum Format {
    Synthetic,
    Xml,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if cluster::is_cluster(&args.machine.machine) {
        return show_cluster(&args, &cluster::parse(&args.machine.machine)?);
    }
    let topo = args.machine.topology()?;
    match args.of {
        Some(Format::Synthetic) => {
            let text = synthetic::to_synthetic(&topo).with_context(|| {
                format!(
                    "machine {:?} is not symmetric (its units of one level differ in size), which \
                     hwloc's synthetic syntax cannot describe; use --of xml",
                    topo.name
                )
            })?;
            println!("{text}");
            return Ok(());
        }
        Some(Format::Xml) => {
            print!("{}", xml::to_xml(&topo));
            return Ok(());
        }
        None => {}
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&machine_json(&topo))?);
        return Ok(());
    }
    println!("machine {:?}: {} CPUs", topo.name, topo.num_cpus());
    print_tree(&topo);
    Ok(())
}

fn machine_json(topo: &Topology) -> serde_json::Value {
    serde_json::json!({
        "name": topo.name,
        "cpus": topo.cpus(),
        "levels": topo.levels(),
        "partition_sizes": topo.partition_sizes(),
        "nodes": topo.nodes,
    })
}

fn print_tree(topo: &Topology) {
    print!("{topo}");
    let sizes: Vec<String> = topo
        .partition_sizes()
        .iter()
        .map(usize::to_string)
        .collect();
    println!("partition sizes: {}", sizes.join(", "));
}

/// A cluster: its size, then one node as a machine (CPUs numbered within the node).
fn show_cluster(args: &Args, cluster: &Cluster) -> anyhow::Result<()> {
    if args.of.is_some() {
        anyhow::bail!(
            "hwloc describes one machine, not a cluster: give --of the node's machine (what follows \
             `cluster:N`)"
        );
    }
    if args.json {
        let out = serde_json::json!({
            "cluster": { "nodes": cluster.nodes, "cpus": cluster.num_cpus() },
            "node": machine_json(&cluster.node),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "cluster of {} nodes × {} CPUs = {} CPUs; each node, CPUs numbered within it:",
        cluster.nodes,
        cluster.node.num_cpus(),
        cluster.num_cpus()
    );
    print_tree(&cluster.node);
    Ok(())
}
