//! `cosched topo`: how cosched sees a machine, and the machine written for hwloc's tools.

use super::machine::MachineArgs;
use anyhow::Context as _;
use cosched_core::topology::{synthetic, xml};

/// Print a machine's topology tree and the partition sizes cosched may give a job on it
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched topo\n  cosched topo --machine taco-opteron8435\n  \
cosched topo --machine 'pack:2 [numa] l3:1(size=12MB) core:4 pu:2' --json\n  \
lstopo --of xml > m.xml && cosched topo --machine m.xml\n  \
cosched topo --of synthetic > m.txt && lstopo --input \"$(cat m.txt)\"\n  \
cosched topo --machine casas-opteron6172 --of xml > casas.xml && lstopo --input casas.xml"
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
    let sizes = topo.partition_sizes();
    if args.json {
        let out = serde_json::json!({
            "name": topo.name,
            "cpus": topo.cpus(),
            "levels": topo.levels(),
            "partition_sizes": sizes,
            "nodes": topo.nodes,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("machine {:?}: {} CPUs", topo.name, topo.num_cpus());
    print!("{topo}");
    let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
    println!("partition sizes: {}", sizes.join(", "));
    Ok(())
}
