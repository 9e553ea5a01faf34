//! How every subcommand names a machine: one `--machine` taking a preset, an hwloc synthetic
//! description or an lstopo XML file.

use cosched_core::topology::presets;
use cosched_core::Topology;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// The machine: a preset (taco-opteron8435, casas-opteron6172, gang-opteron8380,
    /// scalpel-xeon-e5620, or `this`, the running machine read from sysfs), a file written by
    /// `lstopo --of xml FILE`, or hwloc's synthetic syntax, e.g. "pack:2 [numa] l3:1(size=6MB) core:6 pu:2";
    /// `topo` also shows clusters: "cluster:128 package:2 core:8" or a machine file (docs/machines.md)
    #[arg(long, value_name = "PRESET|FILE|SYNTHETIC", default_value = presets::THIS_MACHINE)]
    pub machine: String,
}

impl MachineArgs {
    pub fn topology(&self) -> anyhow::Result<Topology> {
        Ok(presets::machine(&self.machine)?)
    }
}

/// A `--memory` SIZE (`64G`, `512MiB`), as clap's value parser takes it.
pub fn memory_size(text: &str) -> Result<u64, String> {
    cosched_core::memory::parse_size(text).map_err(|e| e.to_string())
}
