//! The machines of the seed papers, so that their experiments can be simulated as published.

use super::{machine_spec, synthetic, sysfs, xml, Topology, TopologyError};

/// (name, synthetic description, where it comes from)
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "taco-opteron8435",
        "package:4 numa:1 l3:1(size=6MiB) core:6",
        "TACO §4.1: 4 × AMD Opteron 8435, 6 cores and 6 MB L3 per package (Schönherr et al.)",
    ),
    (
        "casas-opteron6172",
        "package:4 die:2 numa:1 l3:1(size=6MiB) core:6",
        "CaSAS §4.1: 4 × AMD Opteron 6172, 2 dies of 6 cores per package, an L3 and memory controller per die (Tanimoto et al.)",
    ),
    (
        "gang-opteron8380",
        "package:4 numa:1 l3:1(size=6MiB) core:4",
        "Peter et al. §2: 4 × AMD Opteron 8380, 4 cores and 6 MB L3 per package (ETH Zurich TR 745)",
    ),
    (
        "scalpel-xeon-e5620",
        "package:2 numa:1 l3:1(size=12MiB) core:4",
        "Scalpel §VI-A: 2 × Intel Xeon E5620, 4 cores and 12 MB L3 per package (Liu et al.)",
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

/// Resolves a machine given on the command line (`--machine`) or in a scenario: a preset name, an
/// `lstopo --of xml` file, or a description in hwloc's synthetic syntax.
pub fn machine(spec: &str) -> Result<Topology, TopologyError> {
    let spec = spec.trim();
    if machine_spec::is_cluster(spec) {
        return Err(TopologyError::ClusterWhereNode {
            spec: spec.to_string(),
        });
    }
    if preset_names().contains(&spec) {
        return preset(spec);
    }
    let path = std::path::Path::new(spec);
    if path.is_file() || spec.ends_with(".xml") {
        return xml::import(path);
    }
    if spec.contains([':', '[', '(']) {
        return synthetic::parse(spec);
    }
    Err(TopologyError::UnknownMachine {
        name: spec.to_string(),
        presets: preset_names().join(", "),
    })
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
    fn a_machine_is_a_preset_a_file_or_a_synthetic_description() {
        assert_eq!(
            machine("gang-opteron8380").unwrap().name,
            "gang-opteron8380"
        );
        assert_eq!(machine(" pack:2 core:3 ").unwrap().num_cpus(), 6);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.xml");
        let topo = synthetic::parse("package:2 core:2").unwrap();
        std::fs::write(&file, xml::to_xml(&topo)).unwrap();
        assert_eq!(machine(file.to_str().unwrap()).unwrap().num_cpus(), 4);
        let missing = machine("nowhere.xml").unwrap_err().to_string();
        assert!(missing.contains("nowhere.xml"), "{missing}");
        let unknown = machine("opteron").unwrap_err().to_string();
        for expect in ["taco-opteron8435", "synthetic", "lstopo --of xml"] {
            assert!(unknown.contains(expect), "{unknown}");
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
