//! `cosched topo`: how cosched sees a machine.

use super::machine::MachineArgs;

/// Print a machine's topology tree and the partition sizes cosched may give a job on it
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched topo\n  cosched topo --preset taco-opteron8435\n  \
cosched topo --synthetic 'package:2 numa:1 l3:1(size=12MB) core:4 pu:2' --json"
)]
pub struct Args {
    #[command(flatten)]
    machine: MachineArgs,
    /// Print the machine as JSON (nodes with level, index, CPU list, cache size, children)
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let topo = args.machine.topology()?;
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
