//! hwloc's synthetic topology syntax, as `lstopo --input` reads it:
//! `pack:2 [numa(memory=1GB)] l3:1(size=6MB) core:6 pu:2`.
//!
//! Each `type:count` gives the number of children per parent at that level. Type names follow hwloc:
//! any unambiguous prefix of `package`/`socket`, `die`, `numanode`/`node`, `core`, `pu`, `group`,
//! `machine`, and cache names `l1`..`l5` with an optional `i`/`d`/`u` and `cache` (`L2Cache`, `l1d`).
//! Attributes go in parentheses, separated by spaces: `size=` on caches, `memory=` on NUMA nodes and
//! the machine. A NUMA node attached as a memory child (`package:2 [numa]`) becomes a NUMA level below
//! that level. Groups, instruction caches and L4/L5 caches are not partition levels: their counts
//! multiply into the level below. A missing `pu` level means one hardware thread per core.

use super::{Level, Shape, Topology, TopologyError};

/// What is wrong with a synthetic topology string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntheticError {
    #[error("it is empty; write levels with counts, e.g. \"package:2 core:4\"")]
    Empty,
    #[error("it describes {cpus} CPUs; at most 1048576 are supported")]
    TooManyCpus { cpus: u64 },
    #[error("{token:?}: too many objects")]
    TooManyObjects { token: String },
    #[error("unbalanced {bracket:?} at byte {at}")]
    Unbalanced { bracket: char, at: usize },
    #[error("a '(' or '[' is never closed")]
    NeverClosed,
    #[error("{token:?} opens '[' without closing it")]
    UnclosedBracket { token: String },
    #[error("{token:?}: nothing may follow the closing ')'")]
    AfterAttributes { token: String },
    #[error("{token:?}: attributes must follow a level without a space, as in l3:1(size=6MB)")]
    DetachedAttributes { token: String },
    #[error("{token:?} has no type; cosched does not guess types, write e.g. core:{count}")]
    NoType { token: String, count: String },
    #[error("{token:?} is not of the form type:count")]
    NotTypeCount { token: String },
    #[error(
        "unknown level {name:?}; hwloc's types are package (pack, socket), die, numa (node, \
         NUMANode), group, l1..l5 caches (L2, l1d, L3Cache), core and pu"
    )]
    UnknownLevel { name: String },
    #[error("the machine level is implicit; start with package (or any lower level)")]
    ExplicitMachine,
    #[error("{count:?} in {token:?} is not a positive count")]
    NotPositiveCount { token: String, count: String },
    #[error(
        "level {level} cannot come below {above}; levels go from the top (package) down to pu{}",
        if *level == Level::Numa || *above == Level::Numa {
            "; write NUMA nodes as memory children of the level that holds them, e.g. \
             \"package:2 [numa] core:4\""
        } else {
            ""
        }
    )]
    LevelOrder { level: Level, above: Level },
    #[error("the last level must be pu (or a core, for one thread per core)")]
    LastLevel,
    #[error("{token:?}: only NUMA nodes can be memory children, as in [numa(memory=1GB)]")]
    NotNumaMemory { token: String },
    #[error(
        "{holder} has {count} NUMA nodes ([numa] given {count} times); cosched gives every CPU one \
         NUMA node: keep one"
    )]
    SeveralNuma { holder: String, count: usize },
    #[error(
        "a NUMA node attached to {token:?} cannot be represented: cosched's tree holds NUMA nodes \
         above caches and cores; attach it to the package, die or a group"
    )]
    NumaBelowCaches { token: String },
    #[error(
        "it names memory but no CPUs; put the levels around it, e.g. \
         \"package:2 [numa(memory=1GB)] core:4 pu:1\""
    )]
    MemoryWithoutCpus,
    #[error(
        "{token:?}: indexes= (a custom OS numbering) is not supported; cosched numbers CPUs in order"
    )]
    Indexes { token: String },
    #[error(
        "{token:?}: attribute {key:?} does not apply to {level}; it takes {}",
        if level.is_cache() { "size=" } else { "memory=" }
    )]
    MisplacedAttribute {
        token: String,
        key: String,
        level: Level,
    },
    #[error("attribute {attr:?} in {token:?} is not key=value")]
    NotKeyValue { token: String, attr: String },
    #[error("size {text:?} does not start with a number")]
    SizeWithoutNumber { text: String },
    #[error(
        "unknown unit in size {text:?}; use bytes, kB, MB, GB (powers of 1000) or KiB, MiB, GiB \
         (powers of 1024)"
    )]
    SizeUnit { text: String },
    #[error("size {text:?} is too large")]
    SizeTooLarge { text: String },
}

#[derive(Debug, Clone, PartialEq)]
struct LevelSpec {
    level: Level,
    count: u32,
    cache_bytes: Option<u64>,
}

/// What a type name in the string stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Level(Level),
    /// hwloc levels that add no partition here (groups, instruction caches, L4/L5).
    Transparent,
}

/// One `type:count(attrs)` item and the memory children written after it (`[numa(memory=…)]`).
struct Item<'a> {
    token: &'a str,
    kind: Kind,
    count: u32,
    cache_bytes: Option<u64>,
    memory_children: usize,
}

pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    let error = |reason: SyntheticError| TopologyError::Synthetic {
        text: text.to_string(),
        reason,
    };
    let specs = level_specs(text).map_err(error)?;
    let total: u64 = specs.iter().map(|s| s.count as u64).product();
    if total > 1 << 20 {
        return Err(error(SyntheticError::TooManyCpus { cpus: total }));
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

fn level_specs(text: &str) -> Result<Vec<LevelSpec>, SyntheticError> {
    let tokens = tokens(text)?;
    let mut items: Vec<Item> = Vec::new();
    let mut machine_memory = 0;
    for (i, token) in tokens.iter().enumerate() {
        if let Some(attrs) = token.strip_prefix('(') {
            if i > 0 {
                return Err(SyntheticError::DetachedAttributes {
                    token: token.to_string(),
                });
            }
            check_attrs(
                attrs.strip_suffix(')').unwrap_or(attrs),
                Level::Machine,
                token,
            )?;
        } else if let Some(inner) = token.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| SyntheticError::UnclosedBracket {
                    token: token.to_string(),
                })?;
            memory_child(inner, token)?;
            match items.last_mut() {
                Some(item) => item.memory_children += 1,
                None => machine_memory += 1,
            }
        } else {
            items.push(parse_item(token)?);
        }
    }
    if machine_memory > 1 {
        return Err(several_numa("the machine", machine_memory));
    }
    let mut specs: Vec<LevelSpec> = Vec::new();
    let mut multiplier = 1u32;
    for item in &items {
        let count =
            item.count
                .checked_mul(multiplier)
                .ok_or_else(|| SyntheticError::TooManyObjects {
                    token: item.token.to_string(),
                })?;
        if item.memory_children > 1 {
            return Err(several_numa(item.token, item.memory_children));
        }
        let level = match item.kind {
            // A group that carries memory is a NUMA domain (sub-NUMA clustering, AMD NPS).
            Kind::Transparent if item.memory_children == 1 => Level::Numa,
            Kind::Transparent => {
                multiplier = count;
                continue;
            }
            Kind::Level(level) => level,
        };
        multiplier = 1;
        if let Some(previous) = specs.last_mut() {
            // hwloc 1.x style `node:2 pack:1`: one package per NUMA node is one NUMA node per package.
            if previous.level == Level::Numa && level < Level::Numa && count == 1 {
                previous.level = level;
                specs.push(LevelSpec {
                    level: Level::Numa,
                    count: 1,
                    cache_bytes: None,
                });
                continue;
            }
            if level <= previous.level {
                return Err(SyntheticError::LevelOrder {
                    level,
                    above: previous.level,
                });
            }
        }
        specs.push(LevelSpec {
            level,
            count,
            cache_bytes: item.cache_bytes,
        });
        if item.memory_children == 1 && level != Level::Numa {
            if level > Level::Numa {
                return Err(SyntheticError::NumaBelowCaches {
                    token: item.token.to_string(),
                });
            }
            specs.push(LevelSpec {
                level: Level::Numa,
                count: 1,
                cache_bytes: None,
            });
        }
    }
    if multiplier != 1 || items.last().is_some_and(|i| i.kind == Kind::Transparent) {
        return Err(SyntheticError::LastLevel);
    }
    if specs.is_empty() && machine_memory > 0 {
        return Err(SyntheticError::MemoryWithoutCpus);
    }
    if specs.is_empty() {
        return Err(SyntheticError::Empty);
    }
    if specs.last().map(|s| s.level) != Some(Level::Pu) {
        specs.push(LevelSpec {
            level: Level::Pu,
            count: 1,
            cache_bytes: None,
        });
    }
    Ok(specs)
}

fn several_numa(holder: &str, count: usize) -> SyntheticError {
    SyntheticError::SeveralNuma {
        holder: holder.to_string(),
        count,
    }
}

/// Splits on spaces outside parentheses and brackets (hwloc separates attributes with spaces).
fn tokens(text: &str) -> Result<Vec<&str>, SyntheticError> {
    let mut tokens = Vec::new();
    let mut depth = 0i32;
    let mut start = None;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SyntheticError::Unbalanced { bracket: c, at: i });
                }
            }
            _ => {}
        }
        if c.is_whitespace() && depth == 0 {
            if let Some(s) = start.take() {
                tokens.push(&text[s..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if depth != 0 {
        return Err(SyntheticError::NeverClosed);
    }
    if let Some(s) = start {
        tokens.push(&text[s..]);
    }
    Ok(tokens)
}

/// Splits `name(attrs)` into the name and the attribute text, if any.
fn split_attrs(token: &str) -> Result<(&str, Option<&str>), SyntheticError> {
    match token.split_once('(') {
        Some((head, rest)) => {
            let attrs = rest
                .strip_suffix(')')
                .ok_or_else(|| SyntheticError::AfterAttributes {
                    token: token.to_string(),
                })?;
            Ok((head, Some(attrs)))
        }
        None => Ok((token, None)),
    }
}

fn memory_child(inner: &str, token: &str) -> Result<(), SyntheticError> {
    let (name, attrs) = split_attrs(inner)?;
    if parse_type(name) != Some(Kind::Level(Level::Numa)) {
        return Err(SyntheticError::NotNumaMemory {
            token: token.to_string(),
        });
    }
    check_attrs(attrs.unwrap_or(""), Level::Numa, token)?;
    Ok(())
}

fn parse_item(token: &str) -> Result<Item<'_>, SyntheticError> {
    let (head, attrs) = split_attrs(token)?;
    let Some((name, count)) = head.split_once(':') else {
        if !head.is_empty() && head.chars().all(|c| c.is_ascii_digit()) {
            return Err(SyntheticError::NoType {
                token: token.to_string(),
                count: head.to_string(),
            });
        }
        return Err(SyntheticError::NotTypeCount {
            token: token.to_string(),
        });
    };
    let kind = parse_type(name).ok_or_else(|| SyntheticError::UnknownLevel {
        name: name.to_string(),
    })?;
    if kind == Kind::Level(Level::Machine) {
        return Err(SyntheticError::ExplicitMachine);
    }
    let count: u32 =
        count
            .parse()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| SyntheticError::NotPositiveCount {
                token: token.to_string(),
                count: count.to_string(),
            })?;
    let cache_bytes = match (kind, attrs) {
        (Kind::Level(level), Some(attrs)) => check_attrs(attrs, level, token)?,
        _ => None,
    };
    Ok(Item {
        token,
        kind,
        count,
        cache_bytes,
        memory_children: 0,
    })
}

/// Checks a level's attributes as hwloc would and returns the cache size, if one is given.
fn check_attrs(attrs: &str, level: Level, token: &str) -> Result<Option<u64>, SyntheticError> {
    let mut cache_bytes = None;
    for attr in attrs.split_whitespace() {
        match attr.split_once('=') {
            Some(("size", size)) if level.is_cache() => cache_bytes = Some(parse_size(size)?),
            Some(("memory", size)) if !level.is_cache() => {
                parse_size(size)?;
            }
            Some(("indexes", _)) => {
                return Err(SyntheticError::Indexes {
                    token: token.to_string(),
                })
            }
            Some((key, _)) => {
                return Err(SyntheticError::MisplacedAttribute {
                    token: token.to_string(),
                    key: key.to_string(),
                    level,
                });
            }
            None => {
                return Err(SyntheticError::NotKeyValue {
                    token: token.to_string(),
                    attr: attr.to_string(),
                })
            }
        }
    }
    Ok(cache_bytes)
}

/// hwloc's type names: case-insensitive, any prefix of at least two letters (`pa`, `sock`, `NUMANode`).
fn parse_type(name: &str) -> Option<Kind> {
    let lower = name.to_ascii_lowercase();
    let prefix_of = |full: &str| lower.len() >= 2 && full.starts_with(lower.as_str());
    if let Some(rest) = lower.strip_prefix('l') {
        return parse_cache(rest);
    }
    let level = if prefix_of("machine") {
        Level::Machine
    } else if prefix_of("numanode") || prefix_of("node") {
        Level::Numa
    } else if prefix_of("package") || prefix_of("socket") {
        Level::Package
    } else if prefix_of("die") {
        Level::Die
    } else if prefix_of("core") {
        Level::Core
    } else if prefix_of("pu") {
        Level::Pu
    } else if is_group(&lower) {
        return Some(Kind::Transparent);
    } else {
        return None;
    };
    Some(Kind::Level(level))
}

/// `group`, `gr`, `Group0`: hwloc numbers group levels.
fn is_group(lower: &str) -> bool {
    let name = lower.trim_end_matches(|c: char| c.is_ascii_digit());
    name.len() >= 2 && "group".starts_with(name)
}

/// `l2`, `L2Cache`, `l1d`, `l1i`, `l3u` (the leading `l` already removed).
fn parse_cache(rest: &str) -> Option<Kind> {
    let mut chars = rest.chars();
    let depth = chars.next()?.to_digit(10)?;
    let rest = chars.as_str();
    let (instruction, suffix) = match rest.chars().next() {
        Some('i') => (true, &rest[1..]),
        Some('d' | 'u') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if !"cache".starts_with(suffix) {
        return None;
    }
    match (depth, instruction) {
        (1..=3, true) | (4..=5, false) => Some(Kind::Transparent),
        (1, false) => Some(Kind::Level(Level::L1)),
        (2, false) => Some(Kind::Level(Level::L2)),
        (3, false) => Some(Kind::Level(Level::L3)),
        _ => None,
    }
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

/// Sizes as hwloc 2 reads them: bytes, or decimal `kB`, `MB`, `GB`, `TB`, or binary `KiB`, `MiB`,
/// `GiB`, `TiB` (any case).
fn parse_size(text: &str) -> Result<u64, SyntheticError> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let number: u64 = number
        .parse()
        .map_err(|_| SyntheticError::SizeWithoutNumber {
            text: text.to_string(),
        })?;
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => {
            return Err(SyntheticError::SizeUnit {
                text: text.to_string(),
            })
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| SyntheticError::SizeTooLarge {
            text: text.to_string(),
        })
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
            .map(|b| format!("(size={})", super::hwloc_size(b)))
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
        let topo = parse("package:2 l3:1(size=12MiB) core:4 pu:2").unwrap();
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
        // The example of hwloc's documentation, with its abbreviations.
        let topo = parse("pack:2 node:1 l2:1 core:2 pu:1").unwrap();
        assert_eq!(topo.nodes_at(Level::Package).count(), 2);
        assert_eq!(topo.nodes_at(Level::L2).count(), 2);
        assert_eq!(topo.numa_domains().len(), 2);
        assert_eq!(topo.nodes_at(Level::Core).count(), 4);
        // hwloc 1.x put NUMA nodes above packages.
        let old = parse("node:2 sock:1 l2:1 core:2 pu:1").unwrap();
        assert_eq!(old.nodes, topo.nodes);
    }

    #[test]
    fn memory_children_become_numa_levels() {
        let topo = parse("pack:2 [NUMANode(memory=1GB)] l3:1(size=8MiB) core:2 pu:2").unwrap();
        let numa: Vec<String> = topo.numa_domains().iter().map(|c| c.to_string()).collect();
        assert_eq!(numa, ["0-3", "4-7"]);
        assert_eq!(topo.llc_bytes(), Some(8 << 20));
        // A machine-wide NUMA node is what a tree without a NUMA level means.
        let topo = parse("[numa(memory=4GB)] package:2 core:2").unwrap();
        assert_eq!(topo.nodes_at(Level::Numa).count(), 0);
        // Sub-NUMA clusters: groups that carry memory are NUMA domains.
        let topo = parse("package:2 group:2 [numa] core:2 pu:1").unwrap();
        assert_eq!(topo.numa_domains().len(), 4);
        assert_eq!(topo.numa_domains()[1].to_string(), "2-3");
    }

    #[test]
    fn reads_lstopo_synthetic_exports() {
        // `lstopo --of synthetic` on a 2-vCPU EPYC virtual machine.
        let text = "Package:1 [NUMANode(memory=17139793920)] L3Cache:1(size=33554432) \
                    L2Cache:2(size=524288) L1dCache:1(size=32768) L1iCache:1(size=32768) Core:1 PU:1";
        let topo = parse(text).unwrap();
        assert_eq!(topo.num_cpus(), 2);
        assert_eq!(topo.nodes_at(Level::Core).count(), 2);
        assert_eq!(topo.nodes_at(Level::L2).count(), 2);
        assert_eq!(topo.nodes_at(Level::L1).count(), 2);
        assert_eq!(topo.llc_bytes(), Some(32 << 20));
    }

    #[test]
    fn groups_and_instruction_caches_multiply_into_the_level_below() {
        let topo = parse("pack:2 group:2 core:3 l1i:1 pu:2").unwrap();
        assert_eq!(topo.num_cpus(), 24);
        assert_eq!(
            topo.nodes_at(Level::Package).next().unwrap().children.len(),
            6
        );
    }

    #[test]
    fn rejects_malformed_strings_with_the_reason() {
        for (text, expect) in [
            ("", "empty"),
            ("package:x", "positive count"),
            ("package:0", "positive count"),
            ("core:2 package:2", "cannot come below"),
            ("node:2 pack:2 core:2", "memory children"),
            ("gpu:2", "unknown level"),
            ("package4", "type:count"),
            ("2 2 2", "no type"),
            ("l3:1(size=6XB)", "unit"),
            ("core:2(size=1MB)", "it takes memory="),
            ("l3:1(memory=1GB)", "it takes size="),
            ("l3:1(size=6MB", "never closed"),
            ("core:2 pu:2(indexes=0,2,1,3)", "indexes"),
            ("pack:2 [core] core:2", "only NUMA nodes"),
            ("pack:2 [numa] [numa] core:2", "2 NUMA nodes"),
            ("pack:2 l3:1 [numa] core:2", "cannot be represented"),
            ("pack:2 group:2", "last level"),
            ("[NUMANode(memory=1GB)]", "no CPUs"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(expect), "{text:?} gave {err:?}");
        }
    }

    #[test]
    fn sizes_have_hwloc_units() {
        // hwloc 2: kB, MB, GB are powers of 1000; KiB, MiB, GiB powers of 1024.
        let topo =
            parse("package:1 l3:1(size=6MB) l2:2(size=1536KiB) l1:1(size=1001) core:1").unwrap();
        let size = |level| topo.nodes_at(level).next().unwrap().cache_bytes.unwrap();
        assert_eq!(size(Level::L3), 6_000_000);
        assert_eq!(size(Level::L2), 1536 << 10);
        assert_eq!(size(Level::L1), 1001);
        assert_eq!(
            to_synthetic(&topo).unwrap(),
            "package:1 l3:1(size=6MB) l2:2(size=1536KiB) l1:1(size=1001) core:1 pu:1"
        );
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
