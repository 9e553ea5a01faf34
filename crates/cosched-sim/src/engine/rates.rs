//! Each running job's cycle-average rate under the plan in force, recomputing the model only for the
//! slots whose runners changed, and within them only for the groups of runners that changed
//! (`groups`).
//!
//! The model couples the jobs of one slot (they share caches, bandwidth and the machine's load), so a
//! slot is evaluated again when its assignments, or the thread count, start or end of one of its jobs,
//! change. Combining the slots into each job's average is plain arithmetic over the plan.

use super::groups::{Lookup, Model, Moved, SlotGroups, SlotRunner};
use super::{JobState, SimJob, SimOptions};
use crate::model::{MachineModel, Mode, Runner, Scratch, SlotRate};
use cosched_core::{JobId, Plan, PlanChange};
use std::collections::HashMap;

/// A job's figures averaged over the plan's cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Figures {
    /// Work (sequential seconds) done per second.
    pub rate: f64,
    /// CPUs' worth of time its threads get.
    pub cpu_share: f64,
    /// CPUs it holds.
    pub held: f64,
    pub llc_miss: f64,
}

/// The model's answers per slot (plus the jobs pinned in every slot; one pseudo-slot when the plan has
/// no slots), kept until a slot changes.
#[derive(Default)]
pub(super) struct RateBook {
    slots: Vec<SlotRates>,
    /// (job, slot) for every slotted assignment, sorted: which slots to re-evaluate when a job changes,
    /// and how often it enters the cycle.
    places: Vec<(JobId, usize)>,
    /// Slots of the plan in force (`slots` holds one more, the pinned jobs', when it has none).
    plan_slots: usize,
    /// Each job's figures as the last `figures` summed them, by job index; valid for `figured`.
    sums: Vec<Figures>,
    figured: Vec<bool>,
    /// The jobs the last `figures` gave figures.
    listed: Vec<usize>,
}

#[derive(Default)]
struct SlotRates {
    /// The whole slot is evaluated again, its groups found anew.
    stale: bool,
    /// Otherwise, the jobs whose runner in the slot may have changed since its last evaluation.
    dirty: Vec<(JobId, Moved)>,
    groups: SlotGroups,
    /// (job index, the model's rate, CPUs held).
    runners: Vec<(usize, SlotRate, usize)>,
}

pub(super) struct Inputs<'a> {
    pub plan: &'a Plan,
    pub jobs: &'a [SimJob],
    pub states: &'a [JobState],
    pub index: &'a HashMap<JobId, usize>,
    pub machine: &'a MachineModel,
    pub options: &'a SimOptions,
    /// Exact mode: the slot running now.
    pub current_slot: usize,
}

impl RateBook {
    /// `change` made the plan `plan`: the slots it touches (all of them when pinned jobs moved) are
    /// evaluated again.
    pub fn change(&mut self, change: &PlanChange, plan: &Plan) {
        let count = plan.slots.len().max(1);
        let reshaped = plan.slots.len() != self.plan_slots || !change.cleared.is_empty();
        self.plan_slots = plan.slots.len();
        self.slots.truncate(count);
        self.slots.resize_with(count, || SlotRates {
            stale: true,
            ..SlotRates::default()
        });
        if !change.pinned.is_empty() || !change.unpinned.is_empty() {
            self.slots.iter_mut().for_each(|s| s.stale = true);
        }
        for &(s, job) in &change.removed {
            self.slots[s].dirty.push((job, Moved::Gone));
        }
        for p in &change.placed {
            let moved = Moved::To(p.cpus.clone());
            self.slots[p.slot].dirty.push((p.job, moved));
        }
        if reshaped {
            self.slots.iter_mut().for_each(|s| s.stale = true);
            self.places.clear();
            for (s, slot) in plan.slots.iter().enumerate() {
                self.places
                    .extend(slot.assignments.iter().map(|a| (a.job, s)));
            }
            self.places.sort_unstable();
            return;
        }
        for &(s, job) in &change.removed {
            if let Ok(k) = self.places.binary_search(&(job, s)) {
                self.places.remove(k);
            }
        }
        for p in &change.placed {
            if let Err(k) = self.places.binary_search(&(p.job, p.slot)) {
                self.places.insert(k, (p.job, p.slot));
            }
        }
    }

    /// A job started, finished or changed its thread count: its slots are evaluated again.
    pub fn job_changed(&mut self, job: JobId, pinned: bool) {
        if pinned {
            self.slots.iter_mut().for_each(|s| s.stale = true);
            return;
        }
        let first = self.places.partition_point(|(j, _)| *j < job);
        for k in first..self.places.len() {
            let (j, s) = self.places[k];
            if j != job {
                break;
            }
            self.slots[s].dirty.push((job, Moved::Stayed));
        }
    }

    /// The slots `job` is assigned in (not counting being pinned), in order.
    pub fn slots_of(&self, job: JobId) -> impl Iterator<Item = usize> + '_ {
        let first = self.places.partition_point(|(j, _)| *j < job);
        self.places[first..]
            .iter()
            .take_while(move |(j, _)| *j == job)
            .map(|(_, s)| *s)
    }

    /// Whether the last [`figures`](Self::figures) gave job `i` figures.
    pub fn figured(&self, i: usize) -> bool {
        self.figured.get(i).copied().unwrap_or(false)
    }

    /// Every placed running job's figures under `inputs.plan`: (job index, figures).
    pub fn figures(&mut self, inputs: &Inputs, scratch: &mut Scratch) -> Vec<(usize, Figures)> {
        for (s, slot) in self.slots.iter_mut().enumerate() {
            let dirty = std::mem::take(&mut slot.dirty);
            if !slot.stale && dirty.is_empty() {
                continue;
            }
            let model = Model {
                machine: inputs.machine,
                effects: &inputs.options.effects,
                params: &inputs.options.params,
            };
            let lookup = |i: usize| {
                let run = inputs.states[i].running()?;
                Some((run.threads.max(1), &*inputs.jobs[i].profile, &run.home))
            };
            let moved: Option<Vec<(usize, Moved)>> = (!slot.stale).then(|| {
                dirty
                    .into_iter()
                    .map(|(job, moved)| (inputs.index[&job], moved))
                    .collect()
            });
            let updated =
                moved.is_some_and(|moved| slot.groups.update(&model, &moved, &lookup, scratch));
            slot.runners = if updated {
                slot.groups.all_rates()
            } else {
                evaluate(inputs, s, &model, &mut slot.groups, &lookup, scratch)
            };
            slot.stale = false;
        }
        for i in self.listed.drain(..) {
            self.figured[i] = false;
        }
        self.sums.resize(inputs.jobs.len(), Figures::default());
        self.figured.resize(inputs.jobs.len(), false);
        let plan = inputs.plan;
        let cycle = plan.cycle_length();
        let weight = |s: usize| match (inputs.options.mode, plan.slots.len()) {
            (_, 0) => 1.0,
            (Mode::Exact, _) => f64::from(u8::from(s == inputs.current_slot)),
            (Mode::Fluid, _) if cycle > 0.0 => plan.slots[s].length / cycle,
            (Mode::Fluid, _) => f64::from(u8::from(s == 0)),
        };
        for (s, slot) in self.slots.iter().enumerate() {
            let w = weight(s);
            if w == 0.0 {
                continue;
            }
            for &(i, rate, held) in &slot.runners {
                if !self.figured[i] {
                    self.figured[i] = true;
                    self.sums[i] = Figures::default();
                    self.listed.push(i);
                }
                let f = &mut self.sums[i];
                f.rate += w * rate.rate;
                f.cpu_share += w * rate.cpu_share;
                f.held += w * held as f64;
                f.llc_miss += w * rate.llc_miss;
            }
        }
        let options = inputs.options;
        if options.mode == Mode::Fluid && plan.slots.len() > 1 && options.effects.switch_cost {
            self.charge_fluid_switches(inputs);
        }
        self.listed.iter().map(|&i| (i, self.sums[i])).collect()
    }

    /// Fluid mode: a job that enters the cycle `m` times per cycle loses `m` switch costs of its running
    /// time per cycle.
    fn charge_fluid_switches(&mut self, inputs: &Inputs) {
        let slots = &inputs.plan.slots;
        for group in self.places.chunk_by(|a, b| a.0 == b.0) {
            let Some(&i) = inputs.index.get(&group[0].0) else {
                continue;
            };
            if !self.figured[i] {
                continue;
            }
            let f = &mut self.sums[i];
            let holds = |s: usize| group.binary_search(&(group[0].0, s)).is_ok();
            let entries = group
                .iter()
                .filter(|(_, s)| !holds((s + slots.len() - 1) % slots.len()))
                .count();
            let running: f64 = group.iter().map(|(_, s)| slots[*s].length).sum();
            if entries == 0 || running <= 0.0 {
                continue;
            }
            let lost =
                entries as f64 * switch_cost(inputs.machine, &inputs.jobs[i], inputs.options);
            f.rate *= (1.0 - lost / running).max(0.0);
        }
    }
}

/// The model's rates for the started jobs of slot `s` and the pinned jobs, re-evaluating only the
/// groups of `groups` whose runners changed.
fn evaluate<'a>(
    inputs: &Inputs<'a>,
    s: usize,
    model: &Model,
    groups: &mut SlotGroups,
    lookup: Lookup<'a, '_>,
    scratch: &mut Scratch,
) -> Vec<(usize, SlotRate, usize)> {
    let plan = inputs.plan;
    let assignments = plan
        .pinned
        .iter()
        .chain(plan.slots.get(s).into_iter().flat_map(|s| &s.assignments));
    let mut runners = Vec::new();
    for a in assignments {
        let i = inputs.index[&a.job];
        let Some((threads, profile, home)) = lookup(i) else {
            continue;
        };
        let runner = Runner::new(&a.cpus, threads, profile, home);
        if runner.width == 0 {
            continue;
        }
        runners.push(SlotRunner { job: i, runner });
    }
    groups.rates(model, &runners, lookup, scratch)
}

/// Time a job loses each time it enters a slot: the context switch and refilling its share of the
/// LLC (TACO §3.3: the whole LLC in about 1 ms).
pub(super) fn switch_cost(machine: &MachineModel, job: &SimJob, options: &SimOptions) -> f64 {
    let llc = machine.llc_mb();
    let fraction = job
        .profile
        .footprint
        .map_or(1.0, |curve| (curve.mb(llc) / llc).min(1.0));
    options.params.context_switch + options.params.llc_refill * fraction
}
