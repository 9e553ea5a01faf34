//! hwloc's synthetic topology syntax: `package:4 numa:1 l3:1(size=6MB) core:6 pu:2`.
//!
//! Each `level:count` gives the number of children per parent at that level; `(size=…)` gives a cache's
//! size. A missing `pu` level means one hardware thread per core.

use super::{Level, Shape, Topology, TopologyError};

#[derive(Debug, Clone, PartialEq)]
struct LevelSpec {
    level: Level,
    count: u32,
    cache_bytes: Option<u64>,
}

pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    let error = |reason: String| TopologyError::Synthetic {
        text: text.to_string(),
        reason,
    };
    let mut specs: Vec<LevelSpec> = Vec::new();
    for token in text.split_whitespace() {
        let spec = parse_token(token).map_err(error)?;
        if let Some(previous) = specs.last() {
            if spec.level <= previous.level {
                return Err(error(format!(
                    "level {} cannot come below {}; levels go from the top (package) down to pu",
                    spec.level, previous.level
                )));
            }
        }
        specs.push(spec);
    }
    if specs.is_empty() {
        return Err(error(
            "it is empty; write levels with counts, e.g. \"package:2 core:4\"".into(),
        ));
    }
    if specs.last().map(|s| s.level) != Some(Level::Pu) {
        specs.push(LevelSpec {
            level: Level::Pu,
            count: 1,
            cache_bytes: None,
        });
    }
    let total: u64 = specs.iter().map(|s| s.count as u64).product();
    if total > 1 << 20 {
        return Err(error(format!(
            "it describes {total} CPUs; at most 1048576 are supported"
        )));
    }
    let mut next_cpu = 0;
    let children = build(&specs, &mut next_cpu);
    Ok(Topology::from_shape(
        text.trim(),
        &Shape::Group {
            level: Level::Machine,
            cache_bytes: None,
            children,
        },
    ))
}

fn build(specs: &[LevelSpec], next_cpu: &mut u32) -> Vec<Shape> {
    let Some((spec, rest)) = specs.split_first() else {
        return Vec::new();
    };
    (0..spec.count)
        .map(|_| {
            if spec.level == Level::Pu {
                *next_cpu += 1;
                Shape::Pu(*next_cpu - 1)
            } else {
                Shape::Group {
                    level: spec.level,
                    cache_bytes: spec.cache_bytes,
                    children: build(rest, next_cpu),
                }
            }
        })
        .collect()
}

fn parse_token(token: &str) -> Result<LevelSpec, String> {
    let (head, attrs) = match token.split_once('(') {
        Some((head, rest)) => {
            let attrs = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("{token:?} opens '(' without closing it"))?;
            (head, Some(attrs))
        }
        None => (token, None),
    };
    let (name, count) = head
        .split_once(':')
        .ok_or_else(|| format!("{token:?} is not of the form level:count"))?;
    let level = Level::parse(name).ok_or_else(|| {
        format!("unknown level {name:?}; known levels: package, die, numa, l3, l2, l1, core, pu")
    })?;
    if level == Level::Machine {
        return Err(
            "the machine level is implicit; start with package (or any lower level)".into(),
        );
    }
    let count: u32 = count
        .parse()
        .ok()
        .filter(|c| *c > 0)
        .ok_or_else(|| format!("{count:?} in {token:?} is not a positive count"))?;
    let mut cache_bytes = None;
    for attr in attrs.into_iter().flat_map(|a| a.split(',')) {
        match attr.split_once('=') {
            Some(("size", size)) => cache_bytes = Some(parse_size(size)?),
            // hwloc also writes memory sizes and other attributes; they do not affect scheduling here.
            Some(_) => {}
            None => return Err(format!("attribute {attr:?} in {token:?} is not key=value")),
        }
    }
    if cache_bytes.is_some() && !level.is_cache() {
        return Err(format!(
            "{token:?}: only cache levels (l1, l2, l3) take a size"
        ));
    }
    Ok(LevelSpec {
        level,
        count,
        cache_bytes,
    })
}

fn parse_size(text: &str) -> Result<u64, String> {
    let upper = text.to_ascii_uppercase();
    let digits_end = upper
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(upper.len());
    let (number, unit) = upper.split_at(digits_end);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("cache size {text:?} does not start with a number"))?;
    let factor = match unit {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown unit in cache size {text:?}; use KB, MB or GB"
            ))
        }
    };
    Ok(number * factor)
}

/// Writes a tree back in the synthetic syntax. Only trees where all nodes of a level have the same
/// number of children can be written; other trees (from sysfs with offline CPUs) return `None`.
pub fn to_synthetic(topo: &Topology) -> Option<String> {
    let mut parts = Vec::new();
    let mut frontier = vec![0];
    loop {
        let first = topo.node(frontier[0]);
        if first.children.is_empty() {
            break;
        }
        let count = first.children.len();
        let child_level = topo.node(first.children[0]).level;
        let cache = topo.node(first.children[0]).cache_bytes;
        let mut next = Vec::new();
        for &id in &frontier {
            let node = topo.node(id);
            if node.children.len() != count {
                return None;
            }
            for &child in &node.children {
                let child = topo.node(child);
                if child.level != child_level || child.cache_bytes != cache {
                    return None;
                }
            }
            next.extend(node.children.iter().copied());
        }
        let size = cache
            .map(|b| format!("(size={})", super::human_bytes(b)))
            .unwrap_or_default();
        parts.push(format!("{child_level}:{count}{size}"));
        frontier = next;
    }
    Some(parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_levels_counts_and_cache_sizes() {
        let topo = parse("package:2 l3:1(size=12MB) core:4 pu:2").unwrap();
        assert_eq!(topo.num_cpus(), 16);
        assert_eq!(topo.nodes_at(Level::Package).count(), 2);
        assert_eq!(topo.llc_bytes(), Some(12 << 20));
        assert_eq!(
            topo.nodes_at(Level::Core).nth(1).unwrap().cpus.to_string(),
            "2-3"
        );
    }

    #[test]
    fn accepts_hwloc_spellings() {
        let topo = parse("Socket:2 NUMANode:1 L3Cache:1 Core:2 PU:1").unwrap();
        assert_eq!(topo.num_cpus(), 4);
        assert_eq!(topo.numa_domains().len(), 2);
    }

    #[test]
    fn rejects_malformed_strings_with_the_reason() {
        for (text, expect) in [
            ("", "empty"),
            ("package:x", "positive count"),
            ("package:0", "positive count"),
            ("core:2 package:2", "cannot come below"),
            ("gpu:2", "unknown level"),
            ("package4", "level:count"),
            ("l3:1(size=6XB)", "unit"),
            ("core:2(size=1MB)", "only cache levels"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(expect), "{text:?} gave {err:?}");
        }
    }

    proptest! {
        #[test]
        fn synthetic_strings_round_trip(
            counts in prop::collection::vec(1u32..4, 1..5),
            mask in 0u8..64,
            pu in 1u32..3,
        ) {
            let levels = [Level::Package, Level::Die, Level::Numa, Level::L3, Level::L2, Level::Core];
            let mut parts = Vec::new();
            for (i, (level, count)) in levels.iter().zip(counts.iter().cycle()).enumerate() {
                if mask & (1 << i) != 0 || *level == Level::Core {
                    let size = if level.is_cache() { "(size=4MB)" } else { "" };
                    parts.push(format!("{level}:{count}{size}"));
                }
            }
            parts.push(format!("pu:{pu}"));
            let text = parts.join(" ");
            let topo = parse(&text).unwrap();
            let written = to_synthetic(&topo).unwrap();
            prop_assert_eq!(&written, &text);
            prop_assert_eq!(parse(&written).unwrap().nodes, topo.nodes);
        }
    }
}
