//! How every subcommand names a machine: a preset, a synthetic description or an lstopo XML file.

use cosched_core::topology::{presets, synthetic, xml};
use cosched_core::Topology;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// A named machine: taco-opteron8435, casas-opteron6172, gang-opteron8380, scalpel-xeon-e5620, or
    /// `this` (the running machine, read from sysfs; the default)
    #[arg(long, value_name = "NAME", group = "machine_source")]
    pub preset: Option<String>,
    /// A machine in hwloc's synthetic syntax, e.g. "package:4 numa:1 l3:1(size=6MB) core:6 pu:2"
    #[arg(long, value_name = "DESCRIPTION", group = "machine_source")]
    pub synthetic: Option<String>,
    /// A machine exported with `lstopo --of xml FILE`
    #[arg(long, value_name = "FILE", group = "machine_source")]
    pub xml: Option<PathBuf>,
}

impl MachineArgs {
    pub fn topology(&self) -> anyhow::Result<Topology> {
        let topo = if let Some(text) = &self.synthetic {
            synthetic::parse(text)?
        } else if let Some(path) = &self.xml {
            xml::import(path)?
        } else {
            presets::preset(self.preset.as_deref().unwrap_or(presets::THIS_MACHINE))?
        };
        Ok(topo)
    }
}
