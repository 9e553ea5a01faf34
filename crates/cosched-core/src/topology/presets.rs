//! The machines of the seed papers, so that their experiments can be simulated as published.

use super::{synthetic, sysfs, Topology, TopologyError};

/// (name, synthetic description, where it comes from)
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "taco-opteron8435",
        "package:4 numa:1 l3:1(size=6MB) core:6",
        "TACO §4.1: 4 × AMD Opteron 8435, 6 cores and 6 MB L3 per package (seed 000)",
    ),
    (
        "casas-opteron6172",
        "package:4 die:2 numa:1 l3:1(size=6MB) core:6",
        "CaSAS §4.1: 4 × AMD Opteron 6172, 2 dies of 6 cores per package, an L3 and memory controller per die (seed 002)",
    ),
    (
        "gang-opteron8380",
        "package:4 numa:1 l3:1(size=6MB) core:4",
        "Peter et al. §2: 4 × AMD Opteron 8380, 4 cores and 6 MB L3 per package (seed 003)",
    ),
    (
        "scalpel-xeon-e5620",
        "package:2 numa:1 l3:1(size=12MB) core:4",
        "Scalpel §VI-A: 2 × Intel Xeon E5620, 4 cores and 12 MB L3 per package (seed 004)",
    ),
];

/// The running machine, read from sysfs.
pub const THIS_MACHINE: &str = "this";

pub fn preset_names() -> Vec<&'static str> {
    PRESETS
        .iter()
        .map(|(name, _, _)| *name)
        .chain([THIS_MACHINE])
        .collect()
}

pub fn preset(name: &str) -> Result<Topology, TopologyError> {
    if name == THIS_MACHINE {
        return sysfs::discover();
    }
    let (_, text, _) = PRESETS
        .iter()
        .find(|(preset, _, _)| *preset == name)
        .ok_or_else(|| TopologyError::UnknownPreset {
            name: name.to_string(),
            valid: preset_names().join(", "),
        })?;
    let mut topo = synthetic::parse(text)?;
    topo.name = name.to_string();
    Ok(topo)
}

/// Resolves a machine given on the command line: a preset name, or else a synthetic description.
pub fn machine(spec: &str) -> Result<Topology, TopologyError> {
    if spec.contains(':') {
        synthetic::parse(spec)
    } else {
        preset(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_papers_core_counts() {
        for (name, cpus) in [
            ("taco-opteron8435", 24),
            ("casas-opteron6172", 48),
            ("gang-opteron8380", 16),
            ("scalpel-xeon-e5620", 8),
        ] {
            assert_eq!(preset(name).unwrap().num_cpus(), cpus, "{name}");
        }
    }

    #[test]
    fn unknown_preset_lists_valid_names() {
        let err = preset("opteron").unwrap_err().to_string();
        assert!(
            err.contains("taco-opteron8435") && err.contains("this"),
            "{err}"
        );
    }
}
