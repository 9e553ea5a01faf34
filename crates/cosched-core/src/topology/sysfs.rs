//! Discovery of the running machine from sysfs.
//!
//! Reads `cpu/online`, each online CPU's `topology/` and `cache/index*/`, and `node/node*/cpulist`, all
//! below a root prefix so tests can point it at a fake tree (as sched_ext's scx_utils does). Caches are
//! grouped by `shared_cpu_list`, not by `id`, because some kernels and hypervisors omit cache ids.

use super::{Grouping, Level, Topology, TopologyError};
use crate::cpuset::CpuSet;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

pub fn discover() -> Result<Topology, TopologyError> {
    discover_at(Path::new("/"))
}

/// Reads `<root>/sys/devices/system/cpu` and `<root>/sys/devices/system/node`.
pub fn discover_at(root: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = online_cpus(&cpu_dir)?;
    let mut packages: BTreeMap<(i64, i64), CpuSet> = BTreeMap::new();
    let mut dies: BTreeMap<(i64, i64), CpuSet> = BTreeMap::new();
    let mut cores: Vec<CpuSet> = Vec::new();
    let mut caches: BTreeMap<Level, Vec<(CpuSet, Option<u64>)>> = BTreeMap::new();
    for cpu in online.iter() {
        let dir = cpu_dir.join(format!("cpu{cpu}"));
        let topo = dir.join("topology");
        let package = read_number(&topo.join("physical_package_id")).unwrap_or(0);
        let die = read_number(&topo.join("die_id")).unwrap_or(0);
        packages.entry((package, 0)).or_default().insert(cpu);
        dies.entry((package, die)).or_default().insert(cpu);
        let siblings = ["core_cpus_list", "thread_siblings_list"]
            .iter()
            .find_map(|file| read_cpulist(&topo.join(file)))
            .unwrap_or_else(|| [cpu].into_iter().collect());
        cores.push(siblings);
        for (level, shared, size) in cpu_caches(&dir) {
            caches.entry(level).or_default().push((shared, size));
        }
    }
    let unit = |sets: Vec<CpuSet>| sets.into_iter().map(|s| (s, None)).collect();
    let mut groupings = vec![
        Grouping {
            level: Level::Package,
            units: unit(packages.into_values().collect()),
        },
        Grouping {
            level: Level::Die,
            units: unit(dies.into_values().collect()),
        },
        Grouping {
            level: Level::Core,
            units: unit(cores),
        },
    ];
    groupings.extend(
        caches
            .into_iter()
            .map(|(level, units)| Grouping { level, units }),
    );
    let nodes = numa_nodes(&root.join("sys/devices/system/node"));
    if !nodes.is_empty() {
        groupings.push(Grouping {
            level: Level::Numa,
            units: unit(nodes),
        });
    }
    let name = fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .filter(|_| root == Path::new("/"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|| "this".to_string());
    Ok(Topology::from_groupings(name, &online, groupings))
}

fn online_cpus(cpu_dir: &Path) -> Result<CpuSet, TopologyError> {
    let online = cpu_dir.join("online");
    let text = match fs::read_to_string(&online) {
        Ok(text) => text,
        Err(source) => {
            return Err(TopologyError::SysfsRead {
                path: online,
                source,
            })
        }
    };
    let cpus: CpuSet = match text.trim().parse() {
        Ok(cpus) => cpus,
        Err(source) => {
            return Err(TopologyError::SysfsCpuList {
                path: online,
                source,
            })
        }
    };
    if cpus.is_empty() {
        return Err(TopologyError::NoCpuOnline { path: online });
    }
    Ok(cpus)
}

/// Unified and data caches of one CPU from L1 up, as (level, CPUs sharing it, size).
fn cpu_caches(cpu_dir: &Path) -> Vec<(Level, CpuSet, Option<u64>)> {
    let Ok(entries) = fs::read_dir(cpu_dir.join("cache")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let index = entry.path();
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let kind = read_text(&index.join("type")).unwrap_or_default();
        if kind == "Instruction" {
            continue;
        }
        let level = match read_number(&index.join("level")) {
            Some(1) => Level::L1,
            Some(2) => Level::L2,
            Some(3) => Level::L3,
            _ => continue,
        };
        let Some(shared) = read_cpulist(&index.join("shared_cpu_list")) else {
            continue;
        };
        let size = read_text(&index.join("size")).and_then(|s| parse_size(&s));
        out.push((level, shared, size));
    }
    out
}

fn numa_nodes(node_dir: &Path) -> Vec<CpuSet> {
    let Ok(entries) = fs::read_dir(node_dir) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, CpuSet)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let index: u32 = name.strip_prefix("node")?.parse().ok()?;
            Some((index, read_cpulist(&entry.path().join("cpulist"))?))
        })
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    nodes.sort_by_key(|(index, _)| *index);
    nodes.into_iter().map(|(_, cpus)| cpus).collect()
}

/// Sizes as sysfs writes them: `32K`, `512K`, `16384K`, `32M`.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let value: u64 = digits.parse().ok()?;
    let factor = match unit.trim() {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    Some(value * factor)
}

fn read_text(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_number(path: &Path) -> Option<i64> {
    read_text(path)?.parse().ok()
}

fn read_cpulist(path: &Path) -> Option<CpuSet> {
    read_text(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/sysfs")
            .join(name)
    }

    fn summary(topo: &Topology) -> Vec<String> {
        topo.levels()
            .into_iter()
            .map(|level| {
                let units: Vec<String> = topo.nodes_at(level).map(|n| n.cpus.to_string()).collect();
                format!("{level}: {}", units.join(" "))
            })
            .collect()
    }

    #[test]
    fn two_cpu_vm_has_one_shared_l3() {
        let topo = discover_at(&fixture("vm-2cpu")).unwrap();
        assert_eq!(
            summary(&topo),
            [
                "machine: 0-1",
                "package: 0-1",
                "numa: 0-1",
                "l3: 0-1",
                "core: 0 1",
                "pu: 0 1"
            ]
        );
        assert_eq!(topo.llc_bytes(), Some(32 << 20));
        assert_eq!(topo.partition_sizes(), vec![1, 2]);
    }

    #[test]
    fn two_socket_smt_machine_pairs_hyperthreads() {
        let topo = discover_at(&fixture("xeon-2s-smt")).unwrap();
        let summary = summary(&topo);
        assert_eq!(summary[1], "package: 0-3,8-11 4-7,12-15");
        assert_eq!(summary[2], "numa: 0-3,8-11 4-7,12-15");
        assert_eq!(summary[3], "l3: 0-3,8-11 4-7,12-15");
        assert_eq!(summary[4], "core: 0,8 1,9 2,10 3,11 4,12 5,13 6,14 7,15");
        assert_eq!(topo.nodes_at(Level::Pu).count(), 16);
        assert_eq!(topo.partition_sizes(), vec![1, 2, 4, 8, 16]);
    }

    #[test]
    fn offline_cpus_are_left_out() {
        let topo = discover_at(&fixture("offline-cpus")).unwrap();
        assert_eq!(topo.cpus().to_string(), "0-2,4-7");
        let packages: Vec<String> = topo
            .nodes_at(Level::Package)
            .map(|n| n.cpus.to_string())
            .collect();
        assert_eq!(packages, ["0-2", "4-7"]);
        for node in &topo.nodes {
            assert!(
                !node.cpus.contains(3),
                "{} #{} still has cpu 3",
                node.level,
                node.index
            );
        }
    }

    #[test]
    fn missing_cache_ids_and_numa_are_tolerated() {
        let topo = discover_at(&fixture("no-cache-ids")).unwrap();
        assert_eq!(
            summary(&topo),
            [
                "machine: 0-3",
                "package: 0-3",
                "l3: 0-3",
                "l2: 0-1 2-3",
                "core: 0 1 2 3",
                "pu: 0 1 2 3"
            ]
        );
    }

    #[test]
    fn unreadable_sysfs_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = discover_at(dir.path()).unwrap_err().to_string();
        assert!(err.contains("sys/devices/system/cpu/online"), "{err}");
    }

    #[test]
    fn sizes_are_parsed_with_units() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("16384K"), Some(16 << 20));
        assert_eq!(parse_size("huge"), None);
    }
}
