//! Import of `lstopo --of xml` files (hwloc 1.x and 2.x).
//!
//! Every object's CPUs are taken from the PUs below it, except NUMA nodes, which hwloc 2 attaches as
//! memory children without PUs and which therefore carry their CPUs in their `cpuset` attribute.

use super::{Grouping, Level, Topology, TopologyError};
use crate::cpuset::CpuSet;
use std::collections::BTreeMap;
use std::path::Path;

pub fn import(path: &Path) -> Result<Topology, TopologyError> {
    let error = |reason: String| TopologyError::Xml {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    parse(&name, &text).map_err(error)
}

pub fn parse(name: &str, text: &str) -> Result<Topology, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| e.to_string())?;
    let objects = || doc.descendants().filter(|n| n.has_tag_name("object"));
    let mut cpus = CpuSet::new();
    for pu in objects().filter(|n| n.attribute("type") == Some("PU")) {
        let index = pu
            .attribute("os_index")
            .and_then(|i| i.parse().ok())
            .ok_or("a PU object has no numeric os_index")?;
        cpus.insert(index);
    }
    if cpus.is_empty() {
        return Err("no PU objects found; is this an `lstopo --of xml` file?".into());
    }
    let mut levels: BTreeMap<Level, Vec<(CpuSet, Option<u64>)>> = BTreeMap::new();
    for object in objects() {
        let Some(level) = level_of(&object) else {
            continue;
        };
        let unit_cpus = if level == Level::Numa {
            match object.attribute("cpuset").map(parse_bitmap) {
                Some(Ok(set)) => set,
                Some(Err(e)) => return Err(e),
                None => continue,
            }
        } else {
            object
                .descendants()
                .filter(|n| n.has_tag_name("object") && n.attribute("type") == Some("PU"))
                .filter_map(|pu| pu.attribute("os_index")?.parse().ok())
                .collect()
        };
        let size = object.attribute("cache_size").and_then(|s| s.parse().ok());
        levels.entry(level).or_default().push((unit_cpus, size));
    }
    let groupings = levels
        .into_iter()
        .map(|(level, units)| Grouping { level, units })
        .collect();
    Ok(Topology::from_groupings(name, &cpus, groupings))
}

/// Maps hwloc 2 type names and hwloc 1 `Cache` objects (with `depth`) to levels; instruction caches,
/// groups and I/O objects are not levels of the partition tree.
fn level_of(object: &roxmltree::Node) -> Option<Level> {
    let kind = object.attribute("type")?;
    if kind == "Cache" {
        if object.attribute("cache_type") == Some("2") {
            return None;
        }
        return match object.attribute("depth")? {
            "1" => Some(Level::L1),
            "2" => Some(Level::L2),
            "3" => Some(Level::L3),
            _ => None,
        };
    }
    match kind {
        "Socket" | "Package" => Some(Level::Package),
        "Die" => Some(Level::Die),
        "NUMANode" => Some(Level::Numa),
        "L3Cache" => Some(Level::L3),
        "L2Cache" => Some(Level::L2),
        "L1Cache" => Some(Level::L1),
        "Core" => Some(Level::Core),
        _ => None,
    }
}

/// hwloc bitmaps: comma-separated 32-bit hex words, most significant first (`0x000000ff,0xffffffff`).
fn parse_bitmap(text: &str) -> Result<CpuSet, String> {
    let mut set = CpuSet::new();
    let words: Vec<&str> = text.split(',').collect();
    for (i, word) in words.iter().rev().enumerate() {
        let digits = word.trim().trim_start_matches("0x");
        let value = u32::from_str_radix(digits, 16)
            .map_err(|_| format!("malformed cpuset {text:?} (expected hwloc hex words)"))?;
        for bit in 0..32 {
            if value & (1 << bit) != 0 {
                set.insert(i as u32 * 32 + bit);
            }
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HWLOC2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x000000ff">
    <object type="Package" os_index="0" cpuset="0x0000000f">
      <object type="NUMANode" os_index="0" cpuset="0x0000000f" local_memory="1000"/>
      <object type="L3Cache" cpuset="0x0000000f" cache_size="8388608" depth="3">
        <object type="L2Cache" cache_size="524288" depth="2"><object type="L1Cache" depth="1"><object type="L1iCache"><object type="Core" os_index="0"><object type="PU" os_index="0"/></object></object></object></object>
        <object type="L2Cache" cache_size="524288" depth="2"><object type="L1Cache" depth="1"><object type="Core" os_index="1"><object type="PU" os_index="1"/></object></object></object>
        <object type="L2Cache" cache_size="524288" depth="2"><object type="L1Cache" depth="1"><object type="Core" os_index="2"><object type="PU" os_index="2"/></object></object></object>
        <object type="L2Cache" cache_size="524288" depth="2"><object type="L1Cache" depth="1"><object type="Core" os_index="3"><object type="PU" os_index="3"/></object></object></object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x000000f0">
      <object type="NUMANode" os_index="1" cpuset="0x000000f0" local_memory="1000"/>
      <object type="L3Cache" cpuset="0x000000f0" cache_size="8388608" depth="3">
        <object type="Core" os_index="0"><object type="PU" os_index="4"/></object>
        <object type="Core" os_index="1"><object type="PU" os_index="5"/></object>
        <object type="Core" os_index="2"><object type="PU" os_index="6"/></object>
        <object type="Core" os_index="3"><object type="PU" os_index="7"/></object>
      </object>
    </object>
  </object>
</topology>"#;

    #[test]
    fn hwloc2_export_becomes_the_same_tree_as_sysfs_would_give() {
        let topo = parse("two-socket", HWLOC2).unwrap();
        assert_eq!(topo.num_cpus(), 8);
        let numa: Vec<String> = topo
            .nodes_at(Level::Numa)
            .map(|n| n.cpus.to_string())
            .collect();
        assert_eq!(numa, ["0-3", "4-7"]);
        assert_eq!(topo.llc_bytes(), Some(8 << 20));
        assert_eq!(topo.partition_sizes(), vec![1, 2, 4, 8]);
    }

    #[test]
    fn bitmaps_with_several_words() {
        assert_eq!(
            parse_bitmap("0x00000001,0x00000003").unwrap().to_string(),
            "0-1,32"
        );
        assert!(parse_bitmap("zz").is_err());
    }

    #[test]
    fn a_file_without_pus_is_rejected() {
        let err = parse("x", "<topology/>").unwrap_err();
        assert!(err.contains("no PU"), "{err}");
    }
}
