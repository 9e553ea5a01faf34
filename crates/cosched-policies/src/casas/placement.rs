//! Where CaSAS puts each job's domains: near its memory, which stays on the domain it first ran on.

use cosched_core::{CpuSet, Level, Topology};

/// What one job needs from [`place`].
pub(super) struct Wanted<'a> {
    pub(super) count: usize,
    pub(super) home: Option<usize>,
    pub(super) held: &'a [usize],
}

/// The package of every domain (domains outside any package count as package 0).
pub(super) fn package_of(topology: &Topology, domains: &[CpuSet]) -> Vec<u32> {
    domains
        .iter()
        .map(|d| {
            topology
                .nodes_at(Level::Package)
                .find(|p| d.is_subset(&p.cpus))
                .map_or(0, |p| p.index)
        })
        .collect()
}

/// Domain indices for every job: first its home domain, then the domains it already holds (nearest home
/// first), then free ones nearest home, larger jobs choosing first. Nearest: in the home's package, then
/// by index. `packages[d]` is domain d's package; the counts must sum to at most its length.
pub(super) fn place(jobs: &[Wanted], packages: &[u32]) -> Vec<Vec<usize>> {
    let domains = packages.len();
    let distance = |from: usize, d: usize| (packages[from] != packages[d], from.abs_diff(d));
    let mut owner: Vec<Option<usize>> = vec![None; domains];
    let mut given: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    let mut take = |owner: &mut Vec<Option<usize>>, job: usize, d: usize| {
        if owner[d].is_none() && given[job].len() < jobs[job].count {
            owner[d] = Some(job);
            given[job].push(d);
        }
    };
    let anchor = |j: &Wanted| j.home.or(j.held.first().copied()).unwrap_or(0);
    for (i, job) in jobs.iter().enumerate() {
        if let Some(home) = job.home {
            take(&mut owner, i, home);
        }
    }
    for (i, job) in jobs.iter().enumerate() {
        let mut kept = job.held.to_vec();
        kept.sort_by_key(|&d| distance(anchor(job), d));
        for d in kept {
            take(&mut owner, i, d);
        }
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[b].count.cmp(&jobs[a].count));
    for i in order {
        let mut free: Vec<usize> = (0..domains).filter(|&d| owner[d].is_none()).collect();
        free.sort_by_key(|&d| distance(anchor(&jobs[i]), d));
        for d in free {
            take(&mut owner, i, d);
        }
    }
    for held in &mut given {
        held.sort_unstable();
    }
    given
}
