//! One slot's rates, evaluated group by group.
//!
//! Runners in different regions of the machine ([`MachineModel::region_of_cpu`]: CPUs joined by an
//! LLC or a NUMA node) affect each other only through the machine's total load. So a slot's runners
//! fall into groups that share no region, and a group whose runners are the ones it had, with the
//! same CPUs and threads, keeps its rates: a job that ends on a large machine costs the model of its
//! own region, not of the whole machine. Only when the slot's total load moves (the effective speedup
//! model slows every job by it) are all groups evaluated again.

use crate::model::SpeedupModel;
use crate::model::{group_rates, Effects, MachineModel, ModelParams, Runner, Scratch, SlotRate};
use cosched_core::CpuSet;

/// A runner of the slot: the job's index and what the model sees of it.
pub(super) struct SlotRunner<'a> {
    pub job: usize,
    pub runner: Runner<'a>,
}

/// The slot's groups from its last evaluation, by the lowest region each one covers.
#[derive(Default)]
pub(super) struct SlotGroups {
    groups: Vec<Option<Group>>,
    /// Union-find over regions (each region's parent is a lower one or itself), reused.
    parent: Vec<u32>,
    /// Runners (indices into the slot's list) by the group they fall into, reused.
    buckets: Vec<Vec<usize>>,
}

struct Group {
    /// (job, threads, CPUs) of each runner, in the slot's order: what its rates were computed for.
    /// `None` when the group held the whole slot: any change to the slot changes it, so it is not
    /// worth remembering.
    members: Option<Vec<(usize, u32, CpuSet)>>,
    /// (job index, the model's rate, CPUs held).
    rates: Vec<(usize, SlotRate, usize)>,
    /// CPUs' worth its runners keep busy.
    busy: f64,
    /// The slot's busy CPUs, all groups together, its rates were computed with.
    total: f64,
}

/// What the model needs besides the runners.
pub(super) struct Model<'a> {
    pub machine: &'a MachineModel,
    pub effects: &'a Effects,
    pub params: &'a ModelParams,
}

impl SlotGroups {
    /// The model's rates for `runners`, all of one slot: (job index, rate, CPUs held), group by
    /// group.
    pub fn rates(
        &mut self,
        model: &Model,
        runners: &[SlotRunner],
        scratch: &mut Scratch,
    ) -> Vec<(usize, SlotRate, usize)> {
        let keys = self.group_keys(model.machine, runners);
        let regions = model.machine.regions;
        self.groups.resize_with(regions, || None);
        self.buckets.resize_with(regions, Vec::new);
        self.buckets.iter_mut().for_each(Vec::clear);
        for (r, &key) in keys.iter().enumerate() {
            self.buckets[key].push(r);
        }
        let mut changed = Vec::new();
        for key in 0..regions {
            let bucket = &self.buckets[key];
            if bucket.is_empty() {
                self.groups[key] = None;
                continue;
            }
            let members = self.groups[key].as_ref().and_then(|g| g.members.as_ref());
            let same = members.is_some_and(|members| {
                members.len() == bucket.len()
                    && members
                        .iter()
                        .zip(bucket)
                        .all(|((job, threads, cpus), &r)| {
                            let now = &runners[r];
                            *job == now.job
                                && *threads == now.runner.threads
                                && cpus == now.runner.cpus
                        })
            });
            if !same {
                changed.push(key);
            }
        }
        let busy =
            |groups: &[Option<Group>]| -> f64 { groups.iter().flatten().map(|g| g.busy).sum() };
        for &key in &changed {
            let elsewhere = busy(&self.groups) - self.groups[key].as_ref().map_or(0.0, |g| g.busy);
            self.groups[key] = Some(self.evaluate(model, runners, key, elsewhere, scratch));
        }
        // The machine's load moved: every group's effective speedup moves with it.
        if model.effects.speedup == SpeedupModel::Effective {
            let total = busy(&self.groups);
            let off = |g: &Group| (g.total - total).abs() > 1e-12 * total.max(1.0);
            for key in 0..regions {
                let redo = self.groups[key].as_ref().filter(|g| off(g));
                if let Some(elsewhere) = redo.map(|g| total - g.busy) {
                    self.groups[key] = Some(self.evaluate(model, runners, key, elsewhere, scratch));
                }
            }
        }
        self.groups
            .iter()
            .flatten()
            .flat_map(|g| g.rates.iter().copied())
            .collect()
    }

    /// Each runner's group, named by the lowest region of the group.
    fn group_keys(&mut self, machine: &MachineModel, runners: &[SlotRunner]) -> Vec<usize> {
        self.parent.clear();
        self.parent.extend(0..machine.regions as u32);
        let parent = &mut self.parent;
        let root = |parent: &mut [u32], mut x: u32| {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        };
        let mut first = Vec::with_capacity(runners.len());
        for r in runners {
            let mut regions = r
                .runner
                .cpus
                .iter()
                .map(|c| machine.region_of_cpu[c as usize]);
            let Some(home) = regions.next() else {
                first.push(0);
                continue;
            };
            first.push(home);
            for region in regions {
                let (a, b) = (root(parent, home), root(parent, region));
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        first
            .into_iter()
            .map(|region| root(parent, region) as usize)
            .collect()
    }

    fn evaluate(
        &self,
        model: &Model,
        runners: &[SlotRunner],
        key: usize,
        elsewhere: f64,
        scratch: &mut Scratch,
    ) -> Group {
        let bucket = &self.buckets[key];
        let members: Vec<Runner> = bucket.iter().map(|&r| runners[r].runner.clone()).collect();
        let (rates, busy) = group_rates(
            model.machine,
            &members,
            model.effects,
            model.params,
            scratch,
            elsewhere,
        );
        let whole_slot = bucket.len() == runners.len();
        Group {
            members: (!whole_slot).then(|| {
                bucket
                    .iter()
                    .map(|&r| {
                        let SlotRunner { job, runner } = &runners[r];
                        (*job, runner.threads, runner.cpus.clone())
                    })
                    .collect()
            }),
            rates: bucket
                .iter()
                .zip(rates)
                .map(|(&r, rate)| (runners[r].job, rate, runners[r].runner.width))
                .collect(),
            busy,
            total: elsewhere + busy,
        }
    }
}
