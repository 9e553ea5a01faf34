//! What a node gives each of the jobs placed on it.
//!
//! An SWF job is rigid: on each of its nodes it runs a fixed number of threads for a recorded run
//! time. All the node's policy decides for it is which CPUs it gets and in which slots of the cycle, so
//! a job's progress rate on a node depends only on the thread counts of the jobs sharing that node, in
//! the order they came. That list is the node's *signature*; the node policy is consulted once per
//! signature (a fresh instance, the jobs arriving in order), its plan turned into one share per job,
//! and the answer memoised. A replay of a whole archive trace meets a few hundred signatures at most,
//! so the policy runs a few hundred times, not once per event.
//!
//! A job's share of a node is the fluid average of its speed over the plan's cycle: in each slot its
//! threads spread over its CPUs, a CPU that holds more threads than one (of this job and others in the
//! same slot) gives each a fraction, and a bulk-synchronous job goes at the pace of its slowest thread.
//! Each entry into a slot of a cycle of several costs a context switch and a refill of the LLC
//! (`ModelParams::context_switch`, `llc_refill`), as in the node simulator.
//!
//! With interference on ([`super::interference`]), a signature lists each job's class beside its
//! thread count, and each slot's share is multiplied by what the node model says the slot's co-runners
//! do to the job's memory bandwidth, LLC and synchronisation. Off, every job is of one class and the
//! shares are the CPU shares alone.

use super::interference::NodeModel;
use cosched_core::{ActiveJob, Context, Event, JobHints, JobId, JobKind, JobSpec, Plan, Policy};
use cosched_core::{Assignment, Topology};
use std::collections::HashMap;

/// A job as its node sees it: its threads there and its application class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tenant {
    pub threads: u32,
    pub class: u8,
}

/// Index of a signature in a [`ShareBook`].
pub(crate) type Signature = u32;

/// The empty node.
pub(crate) const EMPTY: Signature = 0;

/// Builds a fresh instance of the node policy.
pub type PolicyFactory<'a> = &'a dyn Fn() -> Box<dyn Policy>;

/// How nodes are shared.
pub struct NodeSharing<'a> {
    /// The policy inside each node; `None`: a node runs its one job alone.
    pub policy: Option<PolicyFactory<'a>>,
    /// Most jobs a node holds at once (the multiprogramming level); 1 with no policy.
    pub mpl: u32,
    /// Time a job loses each time it enters a slot of a cycle of several, seconds.
    pub switch_cost: f64,
    /// Whether co-runners' classes slow each other through the node model.
    pub interference: bool,
}

impl NodeSharing<'_> {
    /// The node simulator's cost of entering a slot for a job of unknown footprint: a context switch
    /// and a refill of the whole LLC.
    pub fn default_switch_cost() -> f64 {
        let params = crate::model::ModelParams::default();
        params.context_switch + params.llc_refill
    }
}

/// A signature, its shares and its neighbours; the neighbours are few (one per distinct width, one
/// per position), so they sit in short lists rather than hash maps.
struct Entry {
    tenants: Vec<Tenant>,
    /// Each job's share, in the signature's order, and the CPUs' worth that interference takes from
    /// them all; `None` until asked.
    shares: Option<(Vec<f64>, f64)>,
    /// (tenant, the signature with one more such job).
    added: Vec<(Tenant, Signature)>,
    /// The signature without the job at each position, once asked.
    removed: Vec<Option<Signature>>,
    /// (tenant, whether one more such job is accepted).
    accepted: Vec<(Tenant, bool)>,
}

/// The signatures met so far, the transitions between them and their shares.
pub(crate) struct ShareBook<'a> {
    node: &'a Topology,
    sharing: &'a NodeSharing<'a>,
    entries: Vec<Entry>,
    ids: HashMap<Vec<Tenant>, Signature>,
    /// The node model, where co-runners interfere.
    model: Option<NodeModel>,
    /// The policy runs on so many signatures (for the replay's report).
    pub policy_runs: usize,
}

impl<'a> ShareBook<'a> {
    pub fn new(node: &'a Topology, sharing: &'a NodeSharing<'a>) -> Self {
        let mut book = ShareBook {
            node,
            sharing,
            entries: Vec::new(),
            ids: HashMap::new(),
            model: sharing.interference.then(|| NodeModel::new(node)),
            policy_runs: 0,
        };
        book.intern(Vec::new());
        book
    }

    fn intern(&mut self, tenants: Vec<Tenant>) -> Signature {
        if let Some(&id) = self.ids.get(&tenants) {
            return id;
        }
        let id = self.entries.len() as Signature;
        self.ids.insert(tenants.clone(), id);
        self.entries.push(Entry {
            removed: vec![None; tenants.len()],
            tenants,
            shares: None,
            added: Vec::new(),
            accepted: Vec::new(),
        });
        id
    }

    pub fn len(&self, sig: Signature) -> usize {
        self.entries[sig as usize].tenants.len()
    }

    /// The node `sig` with one more job `tenant`.
    pub fn with(&mut self, sig: Signature, tenant: Tenant) -> Signature {
        let entry = &self.entries[sig as usize];
        if let Some(&(_, next)) = entry.added.iter().find(|(t, _)| *t == tenant) {
            return next;
        }
        let mut tenants = entry.tenants.clone();
        tenants.push(tenant);
        let next = self.intern(tenants);
        self.entries[sig as usize].added.push((tenant, next));
        next
    }

    /// The node `sig` without its job at `position`.
    pub fn without(&mut self, sig: Signature, position: usize) -> Signature {
        if let Some(next) = self.entries[sig as usize].removed[position] {
            return next;
        }
        let mut tenants = self.entries[sig as usize].tenants.clone();
        tenants.remove(position);
        let next = self.intern(tenants);
        self.entries[sig as usize].removed[position] = Some(next);
        next
    }

    /// Each job's share of the node, in the signature's order.
    pub fn shares(&mut self, sig: Signature) -> &[f64] {
        &self.computed(sig).0
    }

    /// The CPUs' worth that co-runners' interference takes from the jobs of node `sig`, summed.
    pub fn interference_loss(&mut self, sig: Signature) -> f64 {
        self.computed(sig).1
    }

    fn computed(&mut self, sig: Signature) -> &(Vec<f64>, f64) {
        if self.entries[sig as usize].shares.is_none() {
            let computed = self.compute(&self.entries[sig as usize].tenants.clone());
            self.entries[sig as usize].shares = Some(computed);
        }
        self.entries[sig as usize].shares.as_ref().unwrap()
    }

    /// Whether the node `sig` takes one more job `tenant`: within the MPL, and the node policy runs
    /// every job then.
    pub fn accepts(&mut self, sig: Signature, tenant: Tenant) -> bool {
        if self.len(sig) >= self.sharing.mpl as usize {
            return false;
        }
        let entry = &self.entries[sig as usize];
        if let Some(&(_, accepted)) = entry.accepted.iter().find(|(t, _)| *t == tenant) {
            return accepted;
        }
        let next = self.with(sig, tenant);
        let accepted = self.shares(next).iter().all(|&share| share > 0.0);
        self.entries[sig as usize].accepted.push((tenant, accepted));
        accepted
    }

    fn compute(&mut self, tenants: &[Tenant]) -> (Vec<f64>, f64) {
        let Some(factory) = self.sharing.policy else {
            return (vec![1.0; tenants.len()], 0.0);
        };
        if tenants.is_empty() {
            return (Vec::new(), 0.0);
        }
        self.policy_runs += 1;
        let widths: Vec<u32> = tenants.iter().map(|t| t.threads).collect();
        let plan = settle(self.node, factory().as_mut(), &widths);
        let Some(model) = self.model.as_mut() else {
            return (shares_of(&plan, &widths, self.sharing.switch_cost), 0.0);
        };
        let classes: Vec<u8> = tenants.iter().map(|t| t.class).collect();
        let blind = shares_of(&plan, &widths, self.sharing.switch_cost);
        let shares = slot_shares(&plan, &widths, self.sharing.switch_cost, |runners| {
            let cpus: Vec<&cosched_core::CpuSet> = runners.iter().map(|a| &a.cpus).collect();
            let index = |a: &&Assignment| a.job.0 as usize;
            let threads: Vec<u32> = runners.iter().map(|a| widths[index(a)]).collect();
            let classes: Vec<u8> = runners.iter().map(|a| classes[index(a)]).collect();
            model.factors(&cpus, &threads, &classes)
        });
        let loss = blind.iter().zip(&shares).map(|(b, s)| b - s).sum();
        (shares, loss)
    }
}

/// Timers the node policy may ask for before its plan counts as settled (grace periods, hysteresis).
const SETTLING_TIMERS: usize = 8;

/// The plan `policy` reaches on `node` once rigid jobs of `widths` threads have arrived in order.
fn settle(node: &Topology, policy: &mut dyn Policy, widths: &[u32]) -> Plan {
    let mut jobs: Vec<ActiveJob> = Vec::with_capacity(widths.len());
    let mut plan = Plan::default();
    let mut now = 0.0;
    let mut decide = |jobs: &mut Vec<ActiveJob>, event: Event, now: f64, plan: &mut Plan| {
        let ctx = Context {
            topology: node,
            now,
            jobs,
        };
        if let Some(next) = policy.decide(&ctx, &event) {
            *plan = next;
        }
        let running = plan.placed_jobs();
        for job in jobs.iter_mut() {
            if job.started.is_none() && running.contains(&job.spec.id) {
                job.started = Some(now);
            }
        }
    };
    for (i, &threads) in widths.iter().enumerate() {
        let id = JobId(i as u32);
        jobs.push(ActiveJob::new(
            JobSpec {
                owner: None,
                id,
                name: format!("job{i}"),
                arrival: 0.0,
                kind: JobKind::Rigid,
                min_threads: threads,
                max_threads: threads,
                coschedule: true,
                weight: 1.0,
                hints: JobHints::default(),
            }
            .into(),
            None,
            threads,
        ));
        decide(&mut jobs, Event::Arrived { job: id }, now, &mut plan);
    }
    for _ in 0..SETTLING_TIMERS {
        match plan.timer {
            Some(t) if t >= now => {
                now = t;
                decide(&mut jobs, Event::Timer, now, &mut plan);
            }
            _ => break,
        }
    }
    plan
}

/// Each job's fluid share of the node under `plan` (jobs are `JobId(position)`).
pub(crate) fn shares_of(plan: &Plan, widths: &[u32], switch_cost: f64) -> Vec<f64> {
    slot_shares(plan, widths, switch_cost, |runners| {
        vec![1.0; runners.len()]
    })
}

/// [`shares_of`] with each slot's pace of each runner multiplied by `factors(the slot's runners)`.
fn slot_shares(
    plan: &Plan,
    widths: &[u32],
    switch_cost: f64,
    mut factors: impl FnMut(&[&Assignment]) -> Vec<f64>,
) -> Vec<f64> {
    let mut slots: Vec<(f64, Vec<&Assignment>)> = plan
        .slots
        .iter()
        .map(|slot| {
            let runners = slot.assignments.iter().chain(&plan.pinned).collect();
            (slot.length, runners)
        })
        .collect();
    if slots.is_empty() {
        slots.push((1.0, plan.pinned.iter().collect()));
    }
    let cycle: f64 = slots.iter().map(|(length, _)| length).sum();
    let slotted = slots.len() > 1;
    let mut shares = vec![0.0; widths.len()];
    let mut density: HashMap<u32, f64> = HashMap::new();
    for (length, runners) in &slots {
        density.clear();
        for a in runners {
            let threads = f64::from(widths[a.job.0 as usize]);
            for cpu in a.cpus.iter() {
                *density.entry(cpu).or_default() += threads / a.cpus.len() as f64;
            }
        }
        let kept = if slotted {
            (1.0 - switch_cost / length).max(0.0)
        } else {
            1.0
        };
        let factors = factors(runners);
        for (a, factor) in runners.iter().zip(factors) {
            let pace = a
                .cpus
                .iter()
                .map(|cpu| 1.0 / density[&cpu].max(1.0))
                .fold(f64::INFINITY, f64::min);
            if pace.is_finite() {
                shares[a.job.0 as usize] += length / cycle * pace * kept * factor;
            }
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::topology::presets;
    use cosched_core::{CpuSet, Slot};

    const ONE: Tenant = Tenant {
        threads: 1,
        class: 0,
    };

    fn assign(job: u32, cpus: std::ops::Range<u32>) -> Assignment {
        Assignment {
            job: JobId(job),
            cpus: CpuSet::from_range(cpus),
        }
    }

    #[test]
    fn a_share_is_the_slowest_threads_pace_averaged_over_the_cycle() {
        // Slot 1 (3 s): job 0 (4 threads) on CPUs 0-3, job 1 (2 threads) on CPUs 2-3 as well: CPUs
        // 2 and 3 hold 1 + 1 threads, so both go at 1/2. Slot 2 (1 s): job 1 alone on CPUs 0-1.
        let plan = Plan {
            slots: vec![
                Slot {
                    length: 3.0,
                    assignments: vec![assign(0, 0..4), assign(1, 2..4)],
                },
                Slot {
                    length: 1.0,
                    assignments: vec![assign(1, 0..2)],
                },
            ],
            ..Plan::default()
        };
        let shares = shares_of(&plan, &[4, 2], 0.0);
        assert_eq!(shares, vec![0.75 * 0.5, 0.75 * 0.5 + 0.25]);
        // Each slot entry costs 0.1 s: 1/30 of slot 1, 1/10 of slot 2.
        let shares = shares_of(&plan, &[4, 2], 0.1);
        assert!((shares[1] - (0.375 * (1.0 - 0.1 / 3.0) + 0.25 * 0.9)).abs() < 1e-12);
        // One slot: no switch.
        let alone = Plan::space_sharing(vec![assign(0, 0..2)]);
        assert_eq!(shares_of(&alone, &[4], 0.1), vec![0.5]);
    }

    #[test]
    fn gang_time_shares_and_eq_refuses_a_second_job_on_one_cpu() {
        let node = presets::machine("core:1").unwrap();
        let gang = || cosched_policies::create("gang").unwrap();
        let sharing = NodeSharing {
            policy: Some(&gang),
            mpl: 2,
            switch_cost: 0.0,
            interference: false,
        };
        let mut book = ShareBook::new(&node, &sharing);
        let one = book.with(EMPTY, ONE);
        assert!(book.accepts(one, ONE));
        let two = book.with(one, ONE);
        assert_eq!(book.shares(two), [0.5, 0.5]);
        assert!(!book.accepts(two, ONE), "the MPL is 2");
        assert_eq!(book.without(two, 0), one);

        let eq = || cosched_policies::create("eq").unwrap();
        let sharing = NodeSharing {
            policy: Some(&eq),
            mpl: 2,
            switch_cost: 0.0,
            interference: false,
        };
        let mut book = ShareBook::new(&node, &sharing);
        let one = book.with(EMPTY, ONE);
        assert_eq!(book.shares(one), [1.0]);
        assert!(!book.accepts(one, ONE), "EQ never time-slices one CPU");
    }
}
