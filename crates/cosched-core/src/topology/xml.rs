//! `lstopo --of xml` files (hwloc 1.x and 2.x): import, and export in hwloc 2's format.
//!
//! Every object's CPUs are taken from the PUs below it, except NUMA nodes, which hwloc 2 attaches as
//! memory children without PUs and which therefore carry their CPUs in their `cpuset` attribute.

use super::{Grouping, Level, NodeId, Topology, TopologyError};
use crate::cpuset::CpuSet;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// What makes a file no topology cosched can import.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    #[error("{0}")]
    Syntax(roxmltree::Error),
    #[error("a PU object has no numeric os_index")]
    PuWithoutIndex,
    #[error("no PU objects found; is this an `lstopo --of xml` file?")]
    NoPus,
    #[error("malformed cpuset {text:?} (expected hwloc hex words)")]
    Cpuset { text: String },
}

pub fn import(path: &Path) -> Result<Topology, TopologyError> {
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::XmlRead {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    parse(&name, &text).map_err(|reason| TopologyError::Xml {
        path: path.to_path_buf(),
        reason,
    })
}

pub fn parse(name: &str, text: &str) -> Result<Topology, XmlError> {
    // lstopo writes `<!DOCTYPE topology SYSTEM "hwloc2.dtd">`; the DTD is only named, never fetched.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, options).map_err(XmlError::Syntax)?;
    let objects = || doc.descendants().filter(|n| n.has_tag_name("object"));
    let mut cpus = CpuSet::new();
    for pu in objects().filter(|n| n.attribute("type") == Some("PU")) {
        let index = pu
            .attribute("os_index")
            .and_then(|i| i.parse().ok())
            .ok_or(XmlError::PuWithoutIndex)?;
        cpus.insert(index);
    }
    if cpus.is_empty() {
        return Err(XmlError::NoPus);
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

/// Writes the tree as hwloc 2 XML, which `lstopo --input FILE` reads. A NUMA node becomes a group
/// holding the NUMA node as its memory child (hwloc drops the group where it repeats its parent); a
/// tree without NUMA nodes gets one for the whole machine, as hwloc requires.
pub fn to_xml(topo: &Topology) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n\
         <topology version=\"2.0\">\n",
    );
    let numa: Vec<&CpuSet> = topo.nodes_at(Level::Numa).map(|n| &n.cpus).collect();
    let nodeset = |cpus: &CpuSet| -> CpuSet {
        if numa.is_empty() {
            return CpuSet::from_range(0..1);
        }
        (0..numa.len() as u32)
            .filter(|&i| !numa[i as usize].is_disjoint(cpus))
            .collect()
    };
    write_object(topo, 0, 1, &nodeset, &mut out);
    out.push_str("</topology>\n");
    out
}

fn write_object(
    topo: &Topology,
    id: NodeId,
    depth: usize,
    nodeset: &dyn Fn(&CpuSet) -> CpuSet,
    out: &mut String,
) {
    let node = topo.node(id);
    let indent = "  ".repeat(depth);
    let sets = format!(
        "cpuset=\"{cpus}\" complete_cpuset=\"{cpus}\" nodeset=\"{nodes}\" complete_nodeset=\"{nodes}\"",
        cpus = bitmap(&node.cpus),
        nodes = bitmap(&nodeset(&node.cpus)),
    );
    let numa_child = |out: &mut String, os_index: u32| {
        let _ = writeln!(
            out,
            "{indent}  <object type=\"NUMANode\" os_index=\"{os_index}\" {sets}/>"
        );
    };
    let (kind, extra) = match node.level {
        Level::Machine => (
            "Machine",
            format!(
                " allowed_cpuset=\"{}\" allowed_nodeset=\"{}\"",
                bitmap(&node.cpus),
                bitmap(&nodeset(&node.cpus))
            ),
        ),
        Level::Package => ("Package", String::new()),
        Level::Die => ("Die", String::new()),
        Level::Numa => ("Group", String::new()),
        Level::L3 | Level::L2 | Level::L1 => {
            let depth = match node.level {
                Level::L3 => 3,
                Level::L2 => 2,
                _ => 1,
            };
            let kind = ["L1Cache", "L2Cache", "L3Cache"][depth - 1];
            let size = node.cache_bytes.unwrap_or(0);
            (
                kind,
                format!(
                    " cache_size=\"{size}\" depth=\"{depth}\" cache_linesize=\"64\" \
                     cache_associativity=\"0\" cache_type=\"0\""
                ),
            )
        }
        Level::Core => ("Core", String::new()),
        Level::Pu => ("PU", String::new()),
    };
    let os_index = match node.level {
        Level::Pu => node.cpus.first().unwrap_or(0),
        _ => node.index,
    };
    let _ = write!(
        out,
        "{indent}<object type=\"{kind}\" os_index=\"{os_index}\" {sets}{extra}"
    );
    if node.children.is_empty() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    if node.level == Level::Numa {
        numa_child(out, node.index);
    } else if node.level == Level::Machine && topo.nodes_at(Level::Numa).next().is_none() {
        numa_child(out, 0);
    }
    for &child in &node.children {
        write_object(topo, child, depth + 1, nodeset, out);
    }
    let _ = writeln!(out, "{indent}</object>");
}

/// A set in hwloc's bitmap format: 32-bit hex words, most significant first.
fn bitmap(set: &CpuSet) -> String {
    let words = set.iter().last().map_or(1, |max| max as usize / 32 + 1);
    let mut values = vec![0u32; words];
    for cpu in set.iter() {
        values[cpu as usize / 32] |= 1 << (cpu % 32);
    }
    values
        .iter()
        .rev()
        .map(|w| format!("0x{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// hwloc bitmaps: comma-separated 32-bit hex words, most significant first (`0x000000ff,0xffffffff`).
fn parse_bitmap(text: &str) -> Result<CpuSet, XmlError> {
    let mut set = CpuSet::new();
    let words: Vec<&str> = text.split(',').collect();
    for (i, word) in words.iter().rev().enumerate() {
        let digits = word.trim().trim_start_matches("0x");
        // hwloc leaves zero words empty: `0x0000ffff,,0x0`.
        let digits = if digits.is_empty() { "0" } else { digits };
        let value = u32::from_str_radix(digits, 16).map_err(|_| XmlError::Cpuset {
            text: text.to_string(),
        })?;
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
        assert_eq!(
            parse_bitmap("0x0000ffff,,0x0").unwrap().to_string(),
            "64-79"
        );
        let set: CpuSet = "0-1,32".parse().unwrap();
        assert_eq!(bitmap(&set), "0x00000001,0x00000003");
        assert!(parse_bitmap("zz").is_err());
    }

    #[test]
    fn lstopo_files_with_a_doctype_are_read() {
        let text = HWLOC2.replacen(
            "<topology",
            "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology",
            1,
        );
        assert_eq!(parse("dtd", &text).unwrap().num_cpus(), 8);
    }

    #[test]
    fn exported_xml_reads_back_as_the_same_tree() {
        for text in [
            "package:2 numa:1 l3:1(size=6MB) core:3 pu:2",
            "package:2 die:2 numa:1 l3:1(size=6MiB) l2:2(size=512kB) core:2",
            "package:2 l3:1(size=12MB) core:4",
        ] {
            let topo = super::super::synthetic::parse(text).unwrap();
            let back = parse(text, &to_xml(&topo)).unwrap();
            let count = |t: &Topology, level| t.nodes_at(level).count();
            for level in Level::ALL {
                assert_eq!(count(&back, level), count(&topo, level), "{text}: {level}");
            }
            assert_eq!(back.llc_bytes(), topo.llc_bytes(), "{text}");
        }
    }

    #[test]
    fn a_file_without_pus_is_rejected() {
        assert_eq!(parse("x", "<topology/>"), Err(XmlError::NoPus));
    }
}
