//! Co-location interference on shared nodes: each replayed job gets an application class, and a
//! node's shares come from the node model (`crate::model`: memory bandwidth, LLC, synchronisation)
//! for the classes it holds, memoised per combination as node signatures are.
//!
//! An archive log says nothing of what its jobs do to a node's memory system, so a class is drawn
//! for each job from a named mix (deterministic per job number and seed), or read from an SWF field
//! the user maps. A class is a profile sized to the node: `memory` streams through more bandwidth
//! than half the node's CPUs can have at once (STREAM-like), `cache` keeps a working set of most of
//! the LLC, `compute` touches neither, `sync` synchronises every millisecond with spinning waits.
//! The node model's answer for a slot is turned into a factor per job: its rate beside the slot's
//! other runners over its rate alone on the same CPUs, each per CPU's worth it gets, so that the
//! CPU sharing the plan already accounts for is not counted twice.

use crate::model::{slot_rates, Effects, MachineModel, ModelParams, Runner, Scratch, SpeedupModel};
use crate::profile::{self, Profile};
use crate::swf::SwfJob;
use cosched_core::{CpuSet, Topology};
use std::collections::HashMap;

/// The classes a replay knows, in the order their indices refer to.
pub const CLASSES: [&str; 4] = ["compute", "memory", "cache", "sync"];

/// The class of index 0, given to every job when interference is off.
pub const COMPUTE: u8 = 0;

/// Named mixes: (name, weight of each of [`CLASSES`], what it stands for).
pub const MIXES: [(&str, [f64; 4], &str); 4] = [
    (
        "hpc",
        [0.4, 0.4, 0.1, 0.1],
        "as many memory-bound as compute-bound jobs, a few cache-bound and finely synchronised",
    ),
    (
        "balanced",
        [0.5, 0.5, 0.0, 0.0],
        "half compute-bound, half memory-bound",
    ),
    ("memory", [0.0, 1.0, 0.0, 0.0], "every job memory-bound"),
    ("compute", [1.0, 0.0, 0.0, 0.0], "every job compute-bound"),
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MixError {
    #[error(
        "unknown mix `{0}`; give one of hpc, balanced, memory, compute, or weights such as \
compute=0.6,memory=0.4 (classes: compute, memory, cache, sync)"
    )]
    UnknownMix(String),
    #[error("`{0}` in the mix is not CLASS=WEIGHT with a weight of 0 or more (e.g. memory=0.4)")]
    BadWeight(String),
    #[error("unknown class `{0}`; classes: compute, memory, cache, sync")]
    UnknownClass(String),
    #[error("the mix's weights add up to 0; give at least one class a positive weight")]
    Empty,
    #[error(
        "`{0}` is not FIELD:VALUE=CLASS,...; e.g. 14:1=memory,2=compute,*=compute maps SWF field \
14 (executable number)"
    )]
    BadColumnMap(String),
    #[error(
        "an SWF job line has fields 1 to 18, not {0}; map 14 (executable number), 12 (user), \
13 (group), 15 (queue) or 16 (partition), e.g. 14:1=memory,*=compute"
    )]
    NoSuchField(usize),
}

/// Where each job's class comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ClassSource {
    /// Drawn from a mix's weights (one per [`CLASSES`]) by a hash of the job number and the seed.
    Drawn { weights: [f64; 4], seed: u64 },
    /// An SWF field (1-based) whose values name the classes; `default` for values not listed.
    Column {
        field: usize,
        map: Vec<(f64, u8)>,
        default: u8,
    },
}

fn class_index(name: &str) -> Result<u8, MixError> {
    CLASSES
        .iter()
        .position(|c| *c == name)
        .map(|i| i as u8)
        .ok_or_else(|| MixError::UnknownClass(name.to_string()))
}

/// A mix by name (`hpc`, ...) or by weights (`compute=0.6,memory=0.4`).
pub fn parse_mix(text: &str) -> Result<[f64; 4], MixError> {
    if let Some((_, weights, _)) = MIXES.iter().find(|(name, _, _)| *name == text) {
        return Ok(*weights);
    }
    if !text.contains('=') {
        return Err(MixError::UnknownMix(text.to_string()));
    }
    let mut weights = [0.0; 4];
    for item in text.split(',') {
        let (class, weight) = item
            .split_once('=')
            .ok_or_else(|| MixError::BadWeight(item.to_string()))?;
        let weight: f64 = weight
            .trim()
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| MixError::BadWeight(item.to_string()))?;
        weights[class_index(class.trim())? as usize] += weight;
    }
    if weights.iter().sum::<f64>() <= 0.0 {
        return Err(MixError::Empty);
    }
    Ok(weights)
}

/// Fields of an SWF job line.
const SWF_FIELDS: usize = 18;

/// A column map `FIELD:VALUE=CLASS,...,*=CLASS`.
pub fn parse_column_map(text: &str) -> Result<ClassSource, MixError> {
    let bad = || MixError::BadColumnMap(text.to_string());
    let (field, pairs) = text.split_once(':').ok_or_else(bad)?;
    let field: usize = field.trim().parse().map_err(|_| bad())?;
    if !(1..=SWF_FIELDS).contains(&field) {
        return Err(MixError::NoSuchField(field));
    }
    let (mut map, mut default) = (Vec::new(), COMPUTE);
    for pair in pairs.split(',') {
        let (value, class) = pair.split_once('=').ok_or_else(bad)?;
        let class = class_index(class.trim())?;
        match value.trim() {
            "*" => default = class,
            v => map.push((v.parse().map_err(|_| bad())?, class)),
        }
    }
    Ok(ClassSource::Column {
        field,
        map,
        default,
    })
}

/// A job number and seed mixed into 64 well-spread bits (SplitMix64's finaliser).
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Each job's class. `text` is the SWF text the jobs came from (read again for a column map).
pub fn assign(jobs: &[SwfJob], source: &ClassSource, text: &str) -> Vec<u8> {
    match source {
        ClassSource::Drawn { weights, seed } => {
            let total: f64 = weights.iter().sum();
            jobs.iter()
                .map(|job| {
                    let bits = mix64(mix64(*seed) ^ job.id);
                    let mut u = (bits >> 11) as f64 / (1u64 << 53) as f64 * total;
                    for (i, &w) in weights.iter().enumerate() {
                        if u < w {
                            return i as u8;
                        }
                        u -= w;
                    }
                    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u8
                })
                .collect()
        }
        ClassSource::Column {
            field,
            map,
            default,
        } => {
            let values: HashMap<u64, f64> = text
                .lines()
                .filter(|l| !l.trim_start().starts_with(';'))
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    let id = fields.first()?.parse::<f64>().ok()? as u64;
                    Some((id, fields.get(field - 1)?.parse().ok()?))
                })
                .collect();
            jobs.iter()
                .map(|job| {
                    values
                        .get(&job.id)
                        .and_then(|v| map.iter().find(|(m, _)| m == v))
                        .map_or(*default, |&(_, class)| class)
                })
                .collect()
        }
    }
}

/// The node model with the classes sized to one node.
pub(crate) struct NodeModel {
    machine: MachineModel,
    params: ModelParams,
    effects: Effects,
    profiles: Vec<Profile>,
    scratch: Scratch,
}

impl NodeModel {
    pub fn new(node: &Topology) -> NodeModel {
        let params = ModelParams::default();
        let machine = MachineModel::new(node, &params);
        let cpus = node.num_cpus().max(1) as f64;
        let numa = node.numa_domains().len().max(1) as f64;
        // Per thread: 1.5 times a fair part of the node's bandwidth, so that a job on half the CPUs
        // uses three quarters of it and two such jobs together ask for 1.5 times what there is.
        let bandwidth = 1.5 * params.numa_bandwidth_gbs * numa / cpus;
        let llc = machine.llc_mb();
        let texts = [
            "amdahl(serial=0, runtime=1)".to_string(),
            format!(
                "amdahl(serial=0, runtime=1, bandwidth={bandwidth}, working_set={})",
                8.0 * llc
            ),
            format!("amdahl(serial=0, runtime=1, working_set={})", 0.75 * llc),
            "amdahl(serial=0, runtime=1, sync=spin, sync_interval=0.001)".to_string(),
        ];
        let profiles = texts
            .iter()
            .map(|t| profile::parse(t).expect("the classes' profiles are valid"))
            .collect();
        NodeModel {
            machine,
            params,
            // The plan's CPU shares are counted by the replay; the model adds what co-runners do to
            // each other's memory, cache and synchronisation.
            effects: Effects {
                speedup: SpeedupModel::Traditional,
                reconfig_delay: false,
                sync: true,
                serial_phase: false,
                llc: true,
                bandwidth: true,
                numa: false,
                switch_cost: false,
            },
            profiles,
            scratch: Scratch::default(),
        }
    }

    /// Each runner's factor (≤ 1 but for rounding) in a slot where runner `i` has `threads[i]`
    /// threads of `classes[i]` on `cpus[i]`.
    pub fn factors(&mut self, cpus: &[&CpuSet], threads: &[u32], classes: &[u8]) -> Vec<f64> {
        let home = CpuSet::default();
        let runners: Vec<Runner> = (0..cpus.len())
            .map(|i| {
                Runner::new(
                    cpus[i],
                    threads[i],
                    &self.profiles[classes[i] as usize],
                    &home,
                )
            })
            .collect();
        let together = slot_rates(
            &self.machine,
            &runners,
            &self.effects,
            &self.params,
            &mut self.scratch,
        );
        runners
            .iter()
            .zip(&together)
            .map(|(runner, with)| {
                let alone = slot_rates(
                    &self.machine,
                    std::slice::from_ref(runner),
                    &self.effects,
                    &self.params,
                    &mut self.scratch,
                )[0];
                let per_cpu = |r: f64, share: f64| if share > 0.0 { r / share } else { 0.0 };
                let alone = per_cpu(alone.rate, alone.cpu_share);
                if alone > 0.0 {
                    per_cpu(with.rate, with.cpu_share) / alone
                } else {
                    1.0
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::topology::presets;

    fn jobs(n: u64) -> Vec<SwfJob> {
        (1..=n)
            .map(|id| SwfJob {
                id,
                submit: 0.0,
                run: 1.0,
                procs: 1,
                estimate: 1.0,
            })
            .collect()
    }

    #[test]
    fn classes_are_drawn_per_job_and_seed_in_the_mixs_proportions() {
        let jobs = jobs(10_000);
        let source = |seed| ClassSource::Drawn {
            weights: parse_mix("compute=0.7,memory=0.3").unwrap(),
            seed,
        };
        let a = assign(&jobs, &source(1), "");
        assert_eq!(a, assign(&jobs, &source(1), ""), "same seed, same classes");
        let b = assign(&jobs, &source(2), "");
        assert_ne!(a, b, "another seed draws other classes");
        // A job keeps its class whatever else the trace holds.
        assert_eq!(assign(&jobs[5..6], &source(1), ""), [a[5]]);
        let memory = a.iter().filter(|&&c| c == 1).count();
        assert!((2_800..3_200).contains(&memory), "{memory} of 10,000");
        assert!(a.iter().all(|&c| c <= 1));
    }

    #[test]
    fn a_column_map_reads_the_field_by_job_number() {
        let text = "; MaxProcs: 4\n\
                    7 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 3 -1 -1 -1 -1\n\
                    8 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 4 -1 -1 -1 -1\n\
                    9 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 5 -1 -1 -1 -1\n";
        let jobs = crate::swf::parse(text, "t.swf").unwrap().jobs;
        let source = parse_column_map("14:3=memory,4=cache,*=sync").unwrap();
        assert_eq!(assign(&jobs, &source, text), [1, 2, 3]);
        assert!(matches!(
            parse_column_map("14=memory"),
            Err(MixError::BadColumnMap(_))
        ));
        assert_eq!(
            parse_column_map("19:1=memory"),
            Err(MixError::NoSuchField(19))
        );
        assert_eq!(
            parse_column_map("0:1=memory"),
            Err(MixError::NoSuchField(0))
        );
        assert_eq!(
            parse_mix("disk=1"),
            Err(MixError::UnknownClass("disk".into()))
        );
        assert_eq!(parse_mix("hpcc"), Err(MixError::UnknownMix("hpcc".into())));
    }

    #[test]
    fn two_memory_bound_jobs_slow_each_other_more_than_a_memory_and_a_compute_bound_job() {
        let node = presets::machine("l3:1(size=8MB) core:8").unwrap();
        let mut model = NodeModel::new(&node);
        let (left, right) = (CpuSet::from_range(0..4), CpuSet::from_range(4..8));
        let cpus = [&left, &right];
        let memory_pair = model.factors(&cpus, &[4, 4], &[1, 1]);
        let mixed_pair = model.factors(&cpus, &[4, 4], &[1, 0]);
        assert!(memory_pair[0] < 0.9, "{memory_pair:?}");
        assert!(
            mixed_pair[0] > memory_pair[0] + 0.1,
            "{mixed_pair:?} {memory_pair:?}"
        );
        assert!((mixed_pair[1] - 1.0).abs() < 1e-9, "compute is untouched");
        // Alone on its CPUs nothing changes.
        assert!((model.factors(&cpus[..1], &[4], &[1])[0] - 1.0).abs() < 1e-12);
    }
}
