//! What the model knows of the machine: which LLC, NUMA node and region each CPU is in.

use super::ModelParams;
use cosched_core::{CpuSet, Level, Topology};

/// What the model needs to know of the machine, indexed by CPU number.
pub(crate) struct MachineModel {
    pub cpus: usize,
    pub(super) llc_of_cpu: Vec<u32>,
    pub(super) llc_domains: usize,
    pub(super) llc_mb: f64,
    pub(super) numa_of_cpu: Vec<u32>,
    pub(super) numa_domains: usize,
    numa_by_word: DomainsByWord,
    /// Every NUMA node's index: the home of most jobs on a machine of one node, shared by all of them
    /// so that every runner's evaluation reads the same memory.
    all_nodes: CpuSet,
    /// How many regions: CPUs that share an LLC or a NUMA node, and so on transitively (an LLC alone
    /// after [`MachineModel::uncouple_memory`]). Jobs in different regions affect each other only
    /// through the machine's total load.
    pub regions: usize,
    /// Each CPU's region.
    regions_by_word: DomainsByWord,
}

/// Which domains (LLCs, NUMA nodes, regions) each 64-CPU word of a CPU set reaches, and through which
/// bits: a job on a whole machine of a thousand CPUs spans a few domains but a thousand CPUs, and the
/// model asks which domains for every runner it evaluates.
struct DomainsByWord {
    /// For each word of the machine's bitmap, (domain, its CPUs in that word).
    words: Vec<Vec<(u32, u64)>>,
}

impl DomainsByWord {
    fn of(domain_of_cpu: &[u32]) -> DomainsByWord {
        let mut words: Vec<Vec<(u32, u64)>> = vec![Vec::new(); domain_of_cpu.len().div_ceil(64)];
        for (cpu, &domain) in domain_of_cpu.iter().enumerate() {
            let word = &mut words[cpu / 64];
            let bit = 1u64 << (cpu % 64);
            match word.iter_mut().find(|(d, _)| *d == domain) {
                Some((_, mask)) => *mask |= bit,
                None => word.push((domain, bit)),
            }
        }
        DomainsByWord { words }
    }

    /// Each domain `cpus` reaches and its CPUs of `cpus` in one word, word by word.
    fn reached<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = (u32, u64)> + 'a {
        cpus.words()
            .iter()
            .zip(&self.words)
            .filter(|(bits, _)| **bits != 0)
            .flat_map(|(&bits, domains)| {
                domains
                    .iter()
                    .map(move |&(domain, mask)| (domain, bits & mask))
                    .filter(|&(_, bits)| bits != 0)
            })
    }

    /// The domains `cpus` reaches, each once per word it reaches it in.
    fn of_set<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = u32> + 'a {
        self.reached(cpus).map(|(domain, _)| domain)
    }

    /// How many of `cpus` lie in domains for which `outside` holds.
    fn count_where(&self, cpus: &CpuSet, outside: impl Fn(u32) -> bool) -> usize {
        self.reached(cpus)
            .filter(|&(domain, _)| outside(domain))
            .map(|(_, bits)| bits.count_ones() as usize)
            .sum()
    }
}

impl MachineModel {
    pub fn new(topology: &Topology, params: &ModelParams) -> MachineModel {
        let max_cpu = topology.cpus().iter().max().unwrap_or(0) as usize;
        let index = |domains: &[CpuSet]| {
            let mut of_cpu = vec![0u32; max_cpu + 1];
            for (i, set) in domains.iter().enumerate() {
                for cpu in set.iter() {
                    of_cpu[cpu as usize] = i as u32;
                }
            }
            of_cpu
        };
        let llc = topology.llc_domains();
        let numa = topology.numa_domains();
        let has_llc = [Level::L3, Level::L2, Level::L1]
            .iter()
            .any(|l| topology.nodes_at(*l).next().is_some());
        let (region_of_cpu, regions) = coupled_regions(max_cpu + 1, &[&llc, &numa]);
        let numa_of_cpu = index(&numa);
        MachineModel {
            cpus: topology.num_cpus(),
            llc_of_cpu: index(&llc),
            llc_domains: llc.len(),
            llc_mb: topology
                .llc_bytes()
                .filter(|_| has_llc)
                .map_or(params.llc_mb, |b| b as f64 / (1024.0 * 1024.0)),
            numa_by_word: DomainsByWord::of(&numa_of_cpu),
            numa_of_cpu,
            numa_domains: numa.len(),
            all_nodes: (0..numa.len() as u32).collect(),
            regions_by_word: DomainsByWord::of(&region_of_cpu),
            regions,
        }
    }

    /// Regions by LLC alone, for a run in which no job demands memory bandwidth: the bandwidth model
    /// is then the only thing that a NUMA node's jobs share, and it slows nobody. A machine whose
    /// CPUs share one memory node would otherwise be one region, and every start or finish would
    /// evaluate all of its jobs again.
    pub fn uncouple_memory(self, topology: &Topology) -> MachineModel {
        self.regions_by(&topology.llc_domains())
    }

    /// Regions by package on a machine whose topology names no cache, for a run in which neither
    /// memory nor the LLC couples anybody (no job has a footprint, or the LLC effect is off): the
    /// one LLC assumed for the whole machine would otherwise make it one region, and every start or
    /// finish would evaluate all of its jobs again.
    pub fn uncouple_cache(self, topology: &Topology) -> MachineModel {
        let packages: Vec<CpuSet> = topology
            .nodes_at(Level::Package)
            .map(|n| n.cpus.clone())
            .collect();
        if Level::ALL
            .iter()
            .any(|l| l.is_cache() && topology.nodes_at(*l).next().is_some())
            || packages.is_empty()
        {
            return self.uncouple_memory(topology);
        }
        self.regions_by(&packages)
    }

    fn regions_by(mut self, domains: &[CpuSet]) -> MachineModel {
        let (region_of_cpu, regions) = coupled_regions(self.llc_of_cpu.len(), &[domains]);
        self.regions = regions;
        self.regions_by_word = DomainsByWord::of(&region_of_cpu);
        self
    }

    /// The regions `cpus` reaches (some more than once).
    pub fn regions_of<'a>(&'a self, cpus: &'a CpuSet) -> impl Iterator<Item = u32> + 'a {
        self.regions_by_word.of_set(cpus)
    }

    /// NUMA nodes a CPU set touches, as a set of node indices.
    pub fn numa_nodes(&self, cpus: &CpuSet) -> CpuSet {
        let nodes: CpuSet = self.numa_by_word.of_set(cpus).collect();
        if nodes == self.all_nodes {
            return self.all_nodes.clone();
        }
        nodes
    }

    /// How many of `cpus` lie outside the NUMA nodes `home` (node indices). Every evaluation of a
    /// runner asks, and on a machine of one node the answer needs no walk over its CPUs.
    pub fn remote_cpus(&self, cpus: &CpuSet, home: &CpuSet) -> usize {
        if self.numa_domains == 1 {
            return if home.contains(0) { 0 } else { cpus.len() };
        }
        self.numa_by_word
            .count_where(cpus, |node| !home.contains(node))
    }

    pub fn llc_mb(&self) -> f64 {
        self.llc_mb
    }
}

/// Numbers the connected groups of CPUs (0, 1, …) that the domains of any of the `partitions` join,
/// and returns each CPU's group and how many there are.
fn coupled_regions(cpus: usize, partitions: &[&[CpuSet]]) -> (Vec<u32>, usize) {
    let mut parent: Vec<usize> = (0..cpus).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for domain in partitions.iter().flat_map(|p| p.iter()) {
        let mut members = domain.iter().map(|c| c as usize);
        let Some(first) = members.next() else {
            continue;
        };
        for cpu in members {
            let (a, b) = (root(&mut parent, first), root(&mut parent, cpu));
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut number = vec![u32::MAX; cpus];
    let mut regions = 0;
    let region_of_cpu = (0..cpus)
        .map(|cpu| {
            let r = root(&mut parent, cpu);
            if number[r] == u32::MAX {
                number[r] = regions;
                regions += 1;
            }
            number[r]
        })
        .collect();
    (region_of_cpu, regions as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn domains_by_word_find_the_domains_and_counts_that_the_cpus_give() {
        // Domains of six CPUs over 200 CPUs: some lie across two words.
        let domain_of_cpu: Vec<u32> = (0..200).map(|cpu| cpu / 6).collect();
        let table = DomainsByWord::of(&domain_of_cpu);
        for text in ["0", "5-6", "60-70", "63-64,127-128,199", "0-199", ""] {
            let cpus: CpuSet = text.parse().unwrap();
            let expected: BTreeSet<u32> = cpus.iter().map(|c| domain_of_cpu[c as usize]).collect();
            let found: BTreeSet<u32> = table.of_set(&cpus).collect();
            assert_eq!(found, expected, "{text}");
            let odd = |d: u32| d % 2 == 1;
            let by_cpu = cpus
                .iter()
                .filter(|&c| odd(domain_of_cpu[c as usize]))
                .count();
            assert_eq!(table.count_where(&cpus, odd), by_cpu, "{text}");
        }
    }
}
