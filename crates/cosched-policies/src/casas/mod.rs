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
//! `antt::EXACT_WORK_LIMIT`; beyond, a greedy that hands out one domain at a time to the job whose NTT drops
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

mod antt;
mod placement;

use crate::users;
use antt::{best_allocation, interpolate, ntt_curve};
use cosched_core::{Assignment, Context, CpuSet, Event, JobId, JobSpec, Plan, Policy, Slot};
use placement::{package_of, place, Wanted};
use std::collections::{HashMap, HashSet, VecDeque};

/// Length of one probe on one domain count, seconds. The paper gives no figure; half a second is many
/// sampling periods of `perf` yet short next to the PARSEC native runs (minutes).
pub const PROBE_INTERVAL: f64 = 0.5;
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

    fn job(id: u32) -> ActiveJob {
        waiting(id, JobKind::Malleable, 1, 48)
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
