//! CaSAS, the Contention and Scalability-Aware Scheduler (Tanimoto et al., IPSJ, in
//! Japanese; summarised in English in docs/references.md).
//!
//! - **Contention**: jobs get whole LLC domains (on the paper's Opteron 6172 a die: its L3 and memory
//!   controller, §3.1.1), so co-running jobs share no LLC and no memory controller.
//! - **Scalability**: a newly arrived job runs alone for a short interval on each of several domain
//!   counts while the others wait, and its progress rate is read from the `Sample` each interval ends
//!   with (instructions per second in the paper, §3.2; whatever rate the executor measures here). The
//!   probing is real time spent, so its cost shows in the schedule (§3.3, Fig. 6).
//! - **Allocation**: the domain counts of all running jobs minimise ANTT = mean of T_shared / T_alone
//!   (eq. 1), where a job's NTT on k domains is its best measured rate over its rate on k. Computed on
//!   every arrival (after its probe) and departure (§3.3).
//!
//! The search is exact by dynamic programming over (jobs, domains) — O(n·D²) — while n·D² stays below
//! [`EXACT_WORK_LIMIT`]; beyond, a greedy that hands out one domain at a time to the job whose NTT drops
//! most (optimal when every NTT curve is convex; its gap on small non-convex cases is measured by a test).
//!
//! With more jobs than domains, `casas` lets the surplus wait in arrival order; `casas-ts` time-shares
//! instead: ⌈n/D⌉ equal slots, jobs dealt to slots in arrival order, each slot allocated as above.
//!
//! **Users** share the domains before their jobs do (`crate::users`): where the jobs of a slot belong
//! to several users, the domains are split among the users by share, and each user's part among
//! their jobs by the ANTT optimum above. With more jobs than domains, `casas` gives each user as many
//! domains' worth of their oldest jobs as their share allows (a user's flood leaves another user's
//! lone job room to widen), and `casas-ts` deals the jobs to its slots in fair-share order; the next
//! job probed is the oldest of the user with the fewest jobs probed, so that one user's flood of
//! probes does not hold back everyone else's first.
//!
//! **Placement** keeps each job near its memory: a job's pages stay where it first ran (first touch; the
//! paper's Linux 2.6.37 does not migrate them), so its probe starts on a domain no other job calls home,
//! and every allocation gives a job its home domain, then the domains it already holds, then the free
//! ones nearest home. A die holds an L3 and a memory controller (§3.1.1); an allocation that moved jobs
//! away from their memory would bring back the memory-controller sharing die-granular allocation avoids.

use crate::users;
use cosched_core::{
    Assignment, Context, CpuSet, Event, JobId, JobSpec, Level, Plan, Policy, Slot, Topology,
};
use std::collections::{HashMap, HashSet, VecDeque};

/// Length of one probe on one domain count, seconds. The paper gives no figure; half a second is many
/// sampling periods of `perf` yet short next to the PARSEC native runs (minutes).
pub const PROBE_INTERVAL: f64 = 0.5;
/// Largest n·D² solved exactly.
pub const EXACT_WORK_LIMIT: usize = 1 << 22;
/// Slot length of the time-sharing variant, seconds.
const TIME_SLICE: f64 = 0.1;

#[derive(Debug, Default)]
pub struct Casas {
    time_sharing: bool,
    /// Progress rate per domain count 1..=D of every probed job.
    rates: HashMap<JobId, Vec<f64>>,
    probe: Option<Probe>,
    /// Jobs waiting for their probe, in arrival order.
    unprobed: VecDeque<JobId>,
    /// Probes started for each user with active jobs.
    probes_by_user: users::Turns,
    /// The domain each job first ran on, which holds its memory.
    home: HashMap<JobId, usize>,
    /// Domains each job holds in the current plan.
    held: HashMap<JobId, Vec<usize>>,
}

#[derive(Debug)]
struct Probe {
    job: JobId,
    /// Domain counts to try, in order, and the rate measured on each so far.
    counts: Vec<usize>,
    measured: Vec<f64>,
    /// Rate of the sample that ended the current interval.
    last_rate: Option<f64>,
}

impl Casas {
    pub fn space_sharing() -> Casas {
        Casas::default()
    }

    pub fn time_sharing() -> Casas {
        Casas {
            time_sharing: true,
            ..Casas::default()
        }
    }
}

/// Domain counts a probe tries: all of them on small machines, powers of two (and all) on large ones.
fn probe_counts(domains: usize) -> Vec<usize> {
    if domains <= 8 {
        return (1..=domains).collect();
    }
    let mut counts: Vec<usize> = std::iter::successors(Some(1), |k| Some(k * 2))
        .take_while(|k| *k < domains)
        .collect();
    counts.push(domains);
    counts
}

/// Rates for every count 1..=domains, linear between the measured counts.
fn interpolate(counts: &[usize], measured: &[f64], domains: usize) -> Vec<f64> {
    (1..=domains)
        .map(|k| {
            let upper = counts
                .iter()
                .position(|&c| c >= k)
                .unwrap_or(counts.len() - 1);
            if counts[upper] == k || upper == 0 {
                return measured[upper];
            }
            let (k0, k1) = (counts[upper - 1] as f64, counts[upper] as f64);
            let (r0, r1) = (measured[upper - 1], measured[upper]);
            r0 + (r1 - r0) * (k as f64 - k0) / (k1 - k0)
        })
        .collect()
}

/// NTT on k = 1..=D domains: best rate over rate on k (eq. 1 with the steady rates of §3.2), kept to
/// nine decimals. The same speed measured twice can differ in its last bits (the sum of a run's progress
/// depends on where its intervals were cut), and the allocation must not turn on that: one job whose
/// rate on two domains is its rate on one, less 1e-15, would otherwise be held to one domain.
fn ntt_curve(rates: &[f64]) -> Vec<f64> {
    let best = rates.iter().copied().fold(0.0, f64::max);
    rates
        .iter()
        .map(|&r| {
            if r > 0.0 {
                (best / r * 1e9).round() / 1e9
            } else {
                1e9
            }
        })
        .collect()
}

/// Domain counts (each ≥ 1, sum ≤ `domains`) minimising the summed NTT; `ntt[i][k - 1]` is job i's NTT
/// on k domains. `None` when there are more jobs than domains.
pub fn best_allocation(ntt: &[Vec<f64>], domains: usize) -> Option<Vec<usize>> {
    if ntt.len() > domains {
        return None;
    }
    if ntt.len() * domains * domains <= EXACT_WORK_LIMIT {
        Some(exact_allocation(ntt, domains))
    } else {
        Some(greedy_allocation(ntt, domains))
    }
}

/// Dynamic programming: cost[i][d] = least NTT sum of the first i jobs on at most d domains.
pub fn exact_allocation(ntt: &[Vec<f64>], domains: usize) -> Vec<usize> {
    let n = ntt.len();
    let mut cost = vec![vec![f64::INFINITY; domains + 1]; n + 1];
    let mut choice = vec![vec![0usize; domains + 1]; n + 1];
    cost[0].fill(0.0);
    for i in 1..=n {
        for d in i..=domains {
            // Largest count first, so that among equal costs the job gets more domains.
            for k in (1..=d - (i - 1)).rev() {
                let c = cost[i - 1][d - k] + ntt[i - 1][k - 1];
                if c < cost[i][d] {
                    cost[i][d] = c;
                    choice[i][d] = k;
                }
            }
        }
    }
    let mut counts = vec![0; n];
    let mut d = domains;
    for i in (1..=n).rev() {
        counts[i - 1] = choice[i][d];
        d -= choice[i][d];
    }
    counts
}

/// One domain each, then one more at a time to the job whose NTT drops most, while any drops.
pub fn greedy_allocation(ntt: &[Vec<f64>], domains: usize) -> Vec<usize> {
    let mut counts = vec![1; ntt.len()];
    for _ in ntt.len()..domains {
        let gain = |i: usize| {
            let k = counts[i];
            if k >= domains {
                return f64::NEG_INFINITY;
            }
            ntt[i][k - 1] - ntt[i][k]
        };
        match (0..ntt.len()).max_by(|&a, &b| gain(a).total_cmp(&gain(b))) {
            Some(i) if gain(i) > 0.0 => counts[i] += 1,
            _ => break,
        }
    }
    counts
}

impl Policy for Casas {
    fn name(&self) -> &str {
        if self.time_sharing {
            "casas-ts"
        } else {
            "casas"
        }
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        match event {
            Event::Arrived { job } => {
                self.unprobed.push_back(*job);
                if self.probe.is_some() {
                    return None;
                }
                Some(self.next_probe_or_allocation(ctx))
            }
            Event::Sample(sample) => {
                if let Some(probe) = self.probe.as_mut().filter(|p| p.job == sample.job) {
                    probe.last_rate = Some(sample.rate);
                }
                None
            }
            Event::Timer => {
                let probe = self.probe.as_mut()?;
                probe.measured.push(probe.last_rate.take().unwrap_or(0.0));
                if probe.measured.len() < probe.counts.len() {
                    let count = probe.counts[probe.measured.len()];
                    return Some(probe_plan(ctx, probe.job, self.home[&probe.job], count));
                }
                let probe = self.probe.take().expect("checked above");
                let domains = ctx.topology.llc_domains().len();
                self.rates.insert(
                    probe.job,
                    interpolate(&probe.counts, &probe.measured, domains),
                );
                Some(self.next_probe_or_allocation(ctx))
            }
            Event::Finished { job } => {
                self.rates.remove(job);
                self.home.remove(job);
                self.held.remove(job);
                self.unprobed.retain(|j| j != job);
                match &self.probe {
                    Some(probe) if probe.job == *job => {
                        self.probe = None;
                        Some(self.next_probe_or_allocation(ctx))
                    }
                    Some(_) => None,
                    // A place freed may let in a job its user's share held back from probing.
                    None => Some(self.next_probe_or_allocation(ctx)),
                }
            }
            Event::ThreadsChanged { .. } => None,
        }
    }
}

impl Casas {
    fn next_probe_or_allocation(&mut self, ctx: &Context) -> Plan {
        let domains = ctx.topology.llc_domains().len();
        if let Some(job) = self.next_to_probe(ctx) {
            let counts = probe_counts(domains);
            let home = self.free_home(domains);
            self.home.insert(job, home);
            let plan = probe_plan(ctx, job, home, counts[0]);
            self.probe = Some(Probe {
                job,
                counts,
                measured: Vec::new(),
                last_rate: None,
            });
            return plan;
        }
        self.allocation(ctx)
    }

    /// The waiting job to probe next (taken off the list): the oldest still active, or where several
    /// users wait, the oldest of the user with the fewest probes started for their share. Under `casas`
    /// that job must also be one its user's share of the domains would let in now: a user's flood
    /// would otherwise keep the machine probing, and every other job waiting, until it was all
    /// probed.
    fn next_to_probe(&mut self, ctx: &Context) -> Option<JobId> {
        let specs: Vec<&JobSpec> = ctx.jobs.iter().map(|j| &*j.spec).collect();
        if !users::several_users(specs.iter().copied()) {
            while let Some(job) = self.unprobed.pop_front() {
                if ctx.job(job).is_some() {
                    return Some(job);
                }
            }
            return None;
        }
        let waiting: HashSet<JobId> = self.unprobed.iter().copied().collect();
        let mut candidates = users::fair_order(&specs, |i| !waiting.contains(&specs[i].id));
        if !self.time_sharing {
            let domains = ctx.topology.llc_domains();
            let caps = domain_caps(&specs, &domains);
            let mut let_in = vec![false; specs.len()];
            for i in users::given_places(domains.len(), &specs, &caps) {
                let_in[i] = true;
            }
            candidates.retain(|&i| let_in[i]);
        }
        // The user with the fewest probes for their share; among equals, the fair order's first.
        let next = specs[self.probes_by_user.next(&specs, candidates)?];
        self.unprobed.retain(|&job| job != next.id);
        Some(next.id)
    }

    /// The domain that is home to the fewest jobs (the lowest among equals): where a new job's memory
    /// competes with nobody else's when there is such a domain.
    fn free_home(&self, domains: usize) -> usize {
        let mut homes = vec![0usize; domains];
        for &d in self.home.values() {
            homes[d] += 1;
        }
        (0..domains).min_by_key(|&d| homes[d]).unwrap_or(0)
    }

    /// The ANTT-minimising plan for every probed job.
    fn allocation(&mut self, ctx: &Context) -> Plan {
        let domains = ctx.topology.llc_domains();
        let packages = package_of(ctx.topology, &domains);
        let probed: Vec<&JobSpec> = ctx
            .jobs
            .iter()
            .map(|j| &*j.spec)
            .filter(|spec| self.rates.contains_key(&spec.id))
            .collect();
        let probed: Vec<JobId> = match users::several_users(probed.iter().copied()) {
            false => probed.iter().map(|spec| spec.id).collect(),
            true if self.time_sharing => users::fair_order(&probed, |_| false)
                .into_iter()
                .map(|i| probed[i].id)
                .collect(),
            true => {
                let caps = domain_caps(&probed, &domains);
                users::given_places(domains.len(), &probed, &caps)
                    .into_iter()
                    .map(|i| probed[i].id)
                    .collect()
            }
        };
        let slots = if self.time_sharing {
            probed.len().div_ceil(domains.len()).max(1)
        } else {
            1
        };
        let mut plan = Plan::default();
        for s in 0..slots {
            let members: Vec<JobId> = probed
                .iter()
                .copied()
                .skip(s)
                .step_by(slots)
                .take(domains.len())
                .collect();
            let ntt: Vec<Vec<f64>> = members
                .iter()
                .map(|id| ntt_curve(&self.rates[id]))
                .collect();
            let specs: Vec<&JobSpec> = members
                .iter()
                .map(|&id| &*ctx.job(id).expect("active").spec)
                .collect();
            // Users share the domains first; each user's part minimises the ANTT of their jobs.
            let counts = users::split_by_user(
                domains.len(),
                &specs,
                &vec![domains.len(); specs.len()],
                |mine, part| {
                    let curves: Vec<Vec<f64>> = mine.iter().map(|&i| ntt[i].clone()).collect();
                    best_allocation(&curves, part).expect("at most one job per domain")
                },
            );
            let wanted: Vec<Wanted> = members
                .iter()
                .zip(&counts)
                .map(|(id, &count)| Wanted {
                    count,
                    home: self.home.get(id).copied(),
                    held: self.held.get(id).map_or(&[][..], Vec::as_slice),
                })
                .collect();
            let given = place(&wanted, &packages);
            let assignments: Vec<Assignment> = members
                .iter()
                .zip(&given)
                .map(|(&job, held)| Assignment {
                    job,
                    cpus: held
                        .iter()
                        .fold(CpuSet::new(), |acc, &d| acc.union(&domains[d])),
                })
                .collect();
            for (id, held) in members.iter().zip(given) {
                self.held.insert(*id, held);
            }
            for a in &assignments {
                let spec = &ctx.job(a.job).expect("active").spec;
                plan.advice.insert(a.job, spec.threads_for(a.cpus.len()));
            }
            plan.slots.push(Slot {
                length: TIME_SLICE,
                assignments,
            });
        }
        plan
    }
}

/// The most LLC domains each job's threads can use (domains as large as the largest).
fn domain_caps(jobs: &[&JobSpec], domains: &[CpuSet]) -> Vec<usize> {
    let size = domains.iter().map(CpuSet::len).max().unwrap_or(1).max(1);
    (jobs.iter())
        .map(|spec| (spec.max_threads as usize).div_ceil(size))
        .collect()
}

/// What one job needs from [`place`].
struct Wanted<'a> {
    count: usize,
    home: Option<usize>,
    held: &'a [usize],
}

/// The package of every domain (domains outside any package count as package 0).
fn package_of(topology: &Topology, domains: &[CpuSet]) -> Vec<u32> {
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
fn place(jobs: &[Wanted], packages: &[u32]) -> Vec<Vec<usize>> {
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

/// The probe job alone on `count` domains from its home on; every other job waits until the timer.
fn probe_plan(ctx: &Context, job: JobId, home: usize, count: usize) -> Plan {
    let domains = ctx.topology.llc_domains();
    let cpus = (0..count)
        .map(|k| &domains[(home + k) % domains.len()])
        .fold(CpuSet::new(), |acc, d| acc.union(d));
    let threads = ctx.job(job).expect("active").spec.threads_for(cpus.len());
    let mut plan = Plan::space_sharing(vec![Assignment { job, cpus }]);
    plan.advice.insert(job, threads);
    plan.timer = Some(ctx.now + PROBE_INTERVAL);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::presets;
    use cosched_core::{ActiveJob, JobKind, RateSource, Sample};
    use proptest::prelude::*;

    fn job(id: u32) -> ActiveJob {
        waiting(id, JobKind::Malleable, 1, 48)
    }

    fn objective(ntt: &[Vec<f64>], counts: &[usize]) -> f64 {
        ntt.iter().zip(counts).map(|(c, &k)| c[k - 1]).sum()
    }

    /// Every allocation with each count ≥ 1 and sum ≤ domains, by enumeration.
    fn brute_force(ntt: &[Vec<f64>], domains: usize) -> f64 {
        fn go(ntt: &[Vec<f64>], left: usize) -> f64 {
            match ntt.split_first() {
                None => 0.0,
                Some((first, rest)) => (1..=left.saturating_sub(rest.len()))
                    .map(|k| first[k - 1] + go(rest, left - k))
                    .fold(f64::INFINITY, f64::min),
            }
        }
        go(ntt, domains)
    }

    fn curves() -> impl Strategy<Value = (Vec<Vec<f64>>, usize)> {
        (1usize..=8).prop_flat_map(|domains| {
            let rates = prop::collection::vec(0.1f64..10.0, domains);
            (
                prop::collection::vec(rates, 1..=4.min(domains)),
                Just(domains),
            )
        })
    }

    #[test]
    fn a_rate_that_differs_only_in_its_last_bits_counts_as_the_same_rate() {
        // Measured on 8 CPUs by one engine and on 4 by the other: the same speed, summed differently.
        let even = ntt_curve(&[3.433333333333337, 3.433333333333337]);
        let noisy = ntt_curve(&[3.433333333333337, 3.433333333333323]);
        assert_eq!(noisy, even);
        assert_eq!(best_allocation(&[noisy], 2), best_allocation(&[even], 2));
    }

    proptest! {
        #[test]
        fn allocation_is_the_exact_antt_optimum_on_small_cases((rates, domains) in curves()) {
            let ntt: Vec<Vec<f64>> = rates.iter().map(|r| ntt_curve(r)).collect();
            let counts = best_allocation(&ntt, domains).unwrap();
            prop_assert!(counts.iter().all(|&k| k >= 1));
            prop_assert!(counts.iter().sum::<usize>() <= domains);
            prop_assert!((objective(&ntt, &counts) - brute_force(&ntt, domains)).abs() < 1e-9);
        }

        #[test]
        fn greedy_is_exact_when_rates_grow_concavely(serial in prop::collection::vec(0.0f64..1.0, 1..=4), domains in 4usize..=8) {
            // Amdahl rates: NTT convex in the domain count, so marginal gains only shrink.
            let ntt: Vec<Vec<f64>> = serial
                .iter()
                .map(|s| ntt_curve(&(1..=domains).map(|k| 1.0 / (s + (1.0 - s) / k as f64)).collect::<Vec<_>>()))
                .collect();
            prop_assume!(ntt.len() <= domains);
            let greedy = objective(&ntt, &greedy_allocation(&ntt, domains));
            prop_assert!((greedy - brute_force(&ntt, domains)).abs() < 1e-9);
        }
    }

    /// The heuristic's gap to the optimum on small cases (`--nocapture` prints it): measured Amdahl-like
    /// curves with ±10% noise (what probing delivers), and arbitrary curves (the worst case).
    #[test]
    fn greedy_gap_on_small_non_convex_cases() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for noisy_amdahl in [true, false] {
            let (mut worst, mut total, mut optimal, cases) = (0.0f64, 0.0, 0, 2000);
            for _ in 0..cases {
                let domains = rng.gen_range(2..=8);
                let n = rng.gen_range(1..=4.min(domains));
                let ntt: Vec<Vec<f64>> = (0..n)
                    .map(|_| {
                        let serial: f64 = rng.gen_range(0.0..0.5);
                        let rates: Vec<f64> = (1..=domains)
                            .map(|k| {
                                if noisy_amdahl {
                                    rng.gen_range(0.9..1.1) / (serial + (1.0 - serial) / k as f64)
                                } else {
                                    rng.gen_range(0.1..10.0)
                                }
                            })
                            .collect();
                        ntt_curve(&rates)
                    })
                    .collect();
                let exact = brute_force(&ntt, domains);
                let greedy = objective(&ntt, &greedy_allocation(&ntt, domains));
                assert!(greedy >= exact - 1e-9);
                let gap = greedy / exact - 1.0;
                worst = worst.max(gap);
                total += gap;
                optimal += usize::from(gap < 1e-9);
            }
            let mean = total / cases as f64;
            println!(
                "greedy vs exact, {} curves, {cases} cases of ≤4 jobs on ≤8 domains: optimal in {optimal}, mean gap {:.2}%, worst {:.1}%",
                if noisy_amdahl { "noisy Amdahl" } else { "arbitrary" },
                100.0 * mean,
                100.0 * worst
            );
            if noisy_amdahl {
                assert!(mean < 0.02, "greedy should stay close on realistic curves");
            }
        }
    }

    fn ctx<'a>(topo: &'a cosched_core::Topology, now: f64, jobs: &'a [ActiveJob]) -> Context<'a> {
        Context {
            topology: topo,
            now,
            jobs,
        }
    }

    fn sample(job: u32, rate: f64) -> Event {
        Event::Sample(Sample::new(
            JobId(job),
            rate,
            RateSource::Model,
            6,
            0.0,
            PROBE_INTERVAL,
        ))
    }

    /// Runs a whole probe of `job`, answering each interval with `rate(domains)`.
    fn probe(
        casas: &mut Casas,
        topo: &cosched_core::Topology,
        jobs: &[ActiveJob],
        job: u32,
        now: &mut f64,
        rate: impl Fn(usize) -> f64,
    ) -> Plan {
        let mut plan = casas
            .decide(&ctx(topo, *now, jobs), &Event::Arrived { job: JobId(job) })
            .unwrap();
        loop {
            let held = plan.cpus_in_slot(0, JobId(job));
            let Some(held) = held.filter(|_| plan.timer.is_some()) else {
                return plan;
            };
            assert_eq!(
                plan.slots[0].assignments.len(),
                1,
                "others wait during a probe"
            );
            let domains = held.len() / 6;
            *now = plan.timer.unwrap();
            casas.decide(&ctx(topo, *now, jobs), &sample(job, rate(domains)));
            plan = casas.decide(&ctx(topo, *now, jobs), &Event::Timer).unwrap();
        }
    }

    #[test]
    fn probes_then_gives_domains_where_they_pay() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let jobs = vec![job(0), job(1)];
        let mut casas = Casas::space_sharing();
        let mut now = 0.0;
        // Job 0 scales perfectly; job 1 stops at 2 domains.
        let plan = probe(&mut casas, &topo, &jobs[..1], 0, &mut now, |k| k as f64);
        assert_eq!(plan.slots[0].assignments[0].cpus.len(), 48);
        assert!(
            (now - 8.0 * PROBE_INTERVAL).abs() < 1e-9,
            "probing takes time: {now}"
        );
        let plan = probe(&mut casas, &topo, &jobs, 1, &mut now, |k| k.min(2) as f64);
        let cpus = |id| plan.cpus_in_slot(0, JobId(id)).unwrap().len();
        assert_eq!((cpus(0), cpus(1)), (36, 12));
        assert!(plan.timer.is_none());
        // Departure: the survivor gets the machine back without a new probe.
        let left = vec![job(0)];
        let plan = casas
            .decide(&ctx(&topo, now, &left), &Event::Finished { job: JobId(1) })
            .unwrap();
        assert_eq!(plan.slots[0].assignments[0].cpus.len(), 48);
    }

    /// `flood` jobs of user 65534, then one of user 0, arriving one a second, of up to 48 threads.
    fn flood_then_lone_job(flood: u32) -> Vec<ActiveJob> {
        (0..=flood)
            .map(|id| {
                cosched_core::test_util::job(id)
                    .arrival(f64::from(id))
                    .max_threads(48)
                    .owner(if id < flood { 65534 } else { 0 }, 1.0)
                    .waiting()
            })
            .collect()
    }

    /// Probes `jobs` one after another, each scaling perfectly, and returns the allocation after
    /// the last.
    fn probe_each(casas: &mut Casas, topo: &cosched_core::Topology, jobs: &[ActiveJob]) -> Plan {
        let mut now = 0.0;
        let mut plan = Plan::default();
        for n in 1..=jobs.len() {
            plan = probe(casas, topo, &jobs[..n], n as u32 - 1, &mut now, |k| {
                k as f64
            });
        }
        plan
    }

    #[test]
    fn a_users_one_job_gets_the_domains_another_users_three_share() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let plan = probe_each(&mut Casas::space_sharing(), &topo, &flood_then_lone_job(3));
        let cpus = |id| plan.cpus_in_slot(0, JobId(id)).map_or(0, |c| c.len());
        // Perfectly scaling jobs: without users, two domains each (12 CPUs).
        assert_eq!(cpus(3), 24);
        assert_eq!(cpus(0) + cpus(1) + cpus(2), 24);
    }

    #[test]
    fn a_users_lone_job_gets_half_the_domains_beside_another_users_flood() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let plan = probe_each(&mut Casas::space_sharing(), &topo, &flood_then_lone_job(9));
        let cpus = |id| plan.cpus_in_slot(0, JobId(id)).map_or(0, |c| c.len());
        // Eight domains of six CPUs: four for the lone job, four for the flood's oldest four.
        assert_eq!(cpus(9), 24);
        assert_eq!((0..4).map(cpus).collect::<Vec<_>>(), [6; 4]);
        assert_eq!((4..9).map(cpus).sum::<usize>(), 0);
    }

    #[test]
    fn a_user_waiting_for_a_first_probe_goes_before_another_users_second() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let jobs = flood_then_lone_job(3);
        let mut casas = Casas::space_sharing();
        for id in 0..4 {
            casas.decide(&ctx(&topo, 0.0, &jobs), &Event::Arrived { job: JobId(id) });
        }
        let mut now = 0.0;
        let probed_next = loop {
            now += PROBE_INTERVAL;
            casas.decide(&ctx(&topo, now, &jobs), &sample(0, 1.0));
            let plan = casas
                .decide(&ctx(&topo, now, &jobs), &Event::Timer)
                .unwrap();
            let job = plan.slots[0].assignments[0].job;
            if job != JobId(0) {
                break job;
            }
        };
        assert_eq!(probed_next, JobId(3));
    }

    #[test]
    fn a_job_ending_during_its_probe_hands_the_next_probe_to_another_user() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let mut jobs = flood_then_lone_job(3);
        let mut casas = Casas::space_sharing();
        for id in 0..4 {
            casas.decide(&ctx(&topo, 0.0, &jobs), &Event::Arrived { job: JobId(id) });
        }
        // Job 0 ends while probed: no user holds a probed job, and the other user's turn is next.
        jobs.remove(0);
        let plan = casas
            .decide(&ctx(&topo, 0.2, &jobs), &Event::Finished { job: JobId(0) })
            .unwrap();
        assert_eq!(plan.slots[0].assignments[0].job, JobId(3));
    }

    #[test]
    fn jobs_stay_on_the_domain_their_memory_is_on() {
        let topo = presets::preset("casas-opteron6172").unwrap();
        let domains = topo.llc_domains();
        let jobs = vec![job(0), job(1), job(2)];
        let mut casas = Casas::space_sharing();
        let mut now = 0.0;
        probe(&mut casas, &topo, &jobs[..1], 0, &mut now, |k| k as f64);
        // The second job's probe starts on a domain that is not the first job's home.
        let first_step = casas
            .decide(
                &ctx(&topo, now, &jobs[..2]),
                &Event::Arrived { job: JobId(1) },
            )
            .unwrap();
        assert_eq!(first_step.slots[0].assignments[0].cpus, domains[1]);
        casas = Casas::space_sharing();
        now = 0.0;
        probe(&mut casas, &topo, &jobs[..1], 0, &mut now, |k| k as f64);
        probe(&mut casas, &topo, &jobs[..2], 1, &mut now, |k| {
            k.min(2) as f64
        });
        let plan = probe(&mut casas, &topo, &jobs, 2, &mut now, |k| k.min(2) as f64);
        let cpus = |id| plan.cpus_in_slot(0, JobId(id)).unwrap().clone();
        for (id, home) in [(0, 0), (1, 1), (2, 2)] {
            assert!(domains[home].is_subset(&cpus(id)), "job {id}: {}", cpus(id));
        }
        assert_eq!(
            [0, 1, 2].map(|id| cpus(id).len()),
            [24, 12, 12],
            "counts as the ANTT optimum gives them"
        );
    }

    #[test]
    fn surplus_jobs_wait_or_time_share() {
        let topo = cosched_core::topology::synthetic::parse("package:2 l3:1 core:2").unwrap();
        let jobs = vec![job(0), job(1), job(2)];
        for (mut casas, slots, placed) in [
            (Casas::space_sharing(), 1, 2),
            (Casas::time_sharing(), 2, 3),
        ] {
            let mut now = 0.0;
            let mut plan = Plan::default();
            for id in 0..3 {
                plan = probe_on(&mut casas, &topo, &jobs, id, &mut now);
            }
            assert_eq!(plan.slots.len(), slots, "{}", casas.name());
            assert_eq!(plan.placed_jobs().len(), placed, "{}", casas.name());
        }
    }

    fn probe_on(
        casas: &mut Casas,
        topo: &cosched_core::Topology,
        jobs: &[ActiveJob],
        job: u32,
        now: &mut f64,
    ) -> Plan {
        let mut plan = casas
            .decide(&ctx(topo, *now, jobs), &Event::Arrived { job: JobId(job) })
            .unwrap();
        while let Some(t) = plan.timer {
            *now = t;
            casas.decide(&ctx(topo, *now, jobs), &sample(job, 1.0));
            plan = casas.decide(&ctx(topo, *now, jobs), &Event::Timer).unwrap();
        }
        plan
    }

    #[test]
    fn interpolation_fills_counts_between_probes() {
        assert_eq!(probe_counts(16), vec![1, 2, 4, 8, 16]);
        let rates = interpolate(&[1, 2, 4], &[1.0, 2.0, 3.0], 4);
        assert_eq!(rates, vec![1.0, 2.0, 2.5, 3.0]);
    }
}
