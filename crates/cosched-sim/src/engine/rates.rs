//! Each running job's rate over the plan's cycle, recomputing the model only for the slots whose
//! runners changed, and within them only for the groups of runners that changed (`groups`).
//!
//! The model couples the jobs of one slot (they share caches, bandwidth and the machine's load), so a
//! slot is evaluated again when its assignments, or the thread count, start or end of one of its jobs,
//! change. Combining the slots into each job's figures is plain arithmetic over the plan: under a
//! fluid cycle of slots, each slot's figures times its length, a job's work per cycle, which the
//! engine's cycle time turns into progress; so a slot whose length changes changes only its own jobs'
//! figures, while the cycle's new length reaches everyone through the clock.

use super::groups::{emptied, Lookup, Model, Moved, SlotGroups, SlotRunner};
use super::{JobState, SimJob, SimOptions};
use crate::model::{MachineModel, Mode, Runner, Scratch, SlotRate};
use cosched_core::{JobId, Plan, PlanChange};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A job's figures over the plan's cycle: per cycle under a fluid cycle of slots, per second
/// otherwise (see [`cycle_length`]).
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
    /// Each job's places and rates, by job index: which slots to re-evaluate when a job changes, how
    /// often it enters the cycle, and what it gets there. Thousands of jobs may be summed again on one
    /// event, and one short list per job is read where a map per slot missed the cache.
    jobs: Vec<Vec<Place>>,
    /// The jobs with a place in some slot.
    placed: HashSet<usize>,
    /// Slots of the plan in force (`slots` holds one more, the pinned jobs', when it has none).
    plan_slots: usize,
    /// Each slot's weight as the last `figures` weighed them: its length under a fluid cycle, its
    /// share of the time otherwise.
    weights: Vec<f64>,
    /// Runners of slots dropped since the last `figures`: their figures change.
    dropped: Vec<usize>,
    /// The jobs the plan in force pins, sorted: a space-sharing plan pins every job.
    pinned: Vec<JobId>,
    /// The slots' weights being weighed, compared with `weights`.
    next_weights: Vec<f64>,
    /// The room of the list of a slot's runners.
    runners: Vec<SlotRunner<'static>>,
    moved: MovedRates,
    marks: JobMarks,
    /// The room of the list of a job's slots, whose entries into the cycle are charged a switch.
    charged_slots: Vec<usize>,
}

/// A bit per job index, to sort and deduplicate long lists of jobs in one pass: when a new shortest
/// turn scales every slot, every running job is listed once per slot it holds, thousands of them.
#[derive(Default)]
struct JobMarks {
    bits: Vec<u64>,
}

impl JobMarks {
    /// Below this many, sorting costs less than a pass over the bits between the least and the
    /// greatest index.
    const SORTED_BELOW: usize = 256;

    /// Sorts `jobs` and drops the repeats.
    fn sort_and_dedup(&mut self, jobs: &mut Vec<usize>) {
        let (Some(&least), Some(&greatest)) = (jobs.iter().min(), jobs.iter().max()) else {
            return;
        };
        if jobs.len() < Self::SORTED_BELOW || greatest - least > 64 * jobs.len() {
            jobs.sort_unstable();
            jobs.dedup();
            return;
        }
        let first_word = least / 64;
        let words = greatest / 64 + 1 - first_word;
        self.bits.clear();
        self.bits.resize(words, 0);
        for &i in jobs.iter() {
            self.bits[i / 64 - first_word] |= 1 << (i % 64);
        }
        jobs.clear();
        for (w, &word) in self.bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                jobs.push((first_word + w) * 64 + word.trailing_zeros() as usize);
                word &= word - 1;
            }
        }
    }
}

/// The rates a slot's groups hand over that moved: a group evaluated again hands over all its
/// runners, most of them (in a group of many) with the rate they had, and only a rate that moved
/// touches its job.
#[derive(Default)]
struct MovedRates {
    /// The rates handed over, in order: a job's last one is its rate.
    handed: Vec<(usize, Option<(SlotRate, usize)>)>,
    /// For each job, the last hand-over that read its rate (`reading` counts them).
    read_at: Vec<u64>,
    reading: u64,
}

impl MovedRates {
    /// Writes the rates `groups` hand over into the places in slot `s` of `jobs`, where they differ
    /// from those kept, and adds those jobs to `touched`.
    fn take(
        &mut self,
        s: usize,
        groups: &mut SlotGroups,
        jobs: &mut Vec<Vec<Place>>,
        touched: &mut Vec<usize>,
    ) {
        groups.take_changes(|i, rate| self.handed.push((i, rate)));
        self.reading += 1;
        for &(i, rate) in self.handed.iter().rev() {
            if self.read_at.len() <= i {
                self.read_at.resize(i + 1, 0);
            }
            if std::mem::replace(&mut self.read_at[i], self.reading) == self.reading {
                continue;
            }
            let places = places_of(jobs, i);
            let at = places.binary_search_by_key(&s, |p| p.slot);
            if same_rate(at.ok().and_then(|k| places[k].rate), rate) {
                continue;
            }
            edit_place(places, s, |place| place.rate = rate);
            touched.push(i);
        }
        self.handed.clear();
    }
}

/// One slot of a job's: whether the plan assigns it there, and the model's rate there with the CPUs
/// held, from the slot's last evaluation (a pinned job has rates in every slot and no places).
#[derive(Clone, Copy)]
struct Place {
    slot: usize,
    assigned: bool,
    rate: Option<(SlotRate, usize)>,
}

#[derive(Default)]
struct SlotRates {
    /// The whole slot is evaluated again, its groups found anew.
    stale: bool,
    /// Otherwise, the jobs (by index) whose runner in the slot may have changed since its last
    /// evaluation.
    dirty: Vec<(usize, Moved)>,
    groups: SlotGroups,
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
    /// evaluated again. `index` gives each job's index.
    pub fn change(&mut self, change: &PlanChange, plan: &Plan, index: &HashMap<JobId, usize>) {
        let count = plan.slots.len().max(1);
        let (before, slots) = (self.plan_slots, plan.slots.len());
        self.plan_slots = slots;
        for (s, slot) in self.slots.drain(count.min(self.slots.len())..).enumerate() {
            let s = count + s;
            for i in slot.groups.runners() {
                self.dropped.push(i);
                edit_place(places_of(&mut self.jobs, i), s, |place| place.rate = None);
            }
        }
        self.slots.resize_with(count, || SlotRates {
            stale: true,
            ..SlotRates::default()
        });
        // The pinned jobs run in every slot, and in the one pseudo-slot of a plan without slots.
        let pinned_moved = !change.pinned.is_empty() || !change.unpinned.is_empty();
        for job in &change.unpinned {
            if let Ok(k) = self.pinned.binary_search(job) {
                self.pinned.remove(k);
            }
        }
        for pin in &change.pinned {
            if let Err(k) = self.pinned.binary_search(&pin.job) {
                self.pinned.insert(k, pin.job);
            }
        }
        if pinned_moved || (before == 0) != (slots == 0) {
            self.slots.iter_mut().for_each(|s| s.stale = true);
        }
        // A slot dropped or rebuilt loses its places, and a rebuilt one is evaluated whole; the
        // others keep their groups whatever the slot count does.
        if slots < before || !change.cleared.is_empty() {
            let cleared = &change.cleared;
            let jobs = &mut self.jobs;
            self.placed.retain(|&i| {
                let places = &mut jobs[i];
                for place in places.iter_mut() {
                    if place.slot >= slots || cleared.contains(&place.slot) {
                        place.assigned = false;
                    }
                }
                places.retain(|p| p.assigned || p.rate.is_some());
                places.iter().any(|p| p.assigned)
            });
        }
        for &s in &change.cleared {
            self.slots[s].stale = true;
        }
        for &(s, job) in &change.removed {
            let i = index[&job];
            self.slots[s].dirty.push((i, Moved::Gone));
            let places = places_of(&mut self.jobs, i);
            edit_place(places, s, |place| place.assigned = false);
            if !places.iter().any(|p| p.assigned) {
                self.placed.remove(&i);
            }
        }
        for p in &change.placed {
            let i = index[&p.job];
            let moved = Moved::To(p.cpus.clone());
            self.slots[p.slot].dirty.push((i, moved));
            edit_place(places_of(&mut self.jobs, i), p.slot, |place| {
                place.assigned = true
            });
            self.placed.insert(i);
        }
    }

    /// Job `i` started, finished or changed its thread count: its slots are evaluated again.
    pub fn job_changed(&mut self, i: usize, pinned: bool) {
        if pinned {
            self.slots.iter_mut().for_each(|s| s.stale = true);
            return;
        }
        for s in assigned_slots(&self.jobs, i) {
            self.slots[s].dirty.push((i, Moved::Stayed));
        }
    }

    /// The slots job `i` is assigned in (not counting being pinned), in order.
    pub fn slots_of(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        assigned_slots(&self.jobs, i)
    }

    /// The figures under `inputs.plan` of every job they may have changed for since the last call:
    /// (job index, figures), all zero for a job no longer running in any slot. Only the slots whose
    /// runners changed are evaluated again, and only their runners, and those of the slots whose
    /// weight moved, summed again.
    pub fn figures(
        &mut self,
        inputs: &Inputs,
        scratch: &mut Scratch,
        out: &mut Vec<(usize, Figures)>,
    ) {
        let mut touched = std::mem::take(&mut self.dropped);
        for (s, slot) in self.slots.iter_mut().enumerate() {
            if !slot.stale && slot.dirty.is_empty() {
                continue;
            }
            let mut dirty = std::mem::take(&mut slot.dirty);
            let model = Model {
                machine: inputs.machine,
                effects: &inputs.options.effects,
                params: &inputs.options.params,
            };
            let run = |i: usize| {
                let run = inputs.states[i].running()?;
                Some((run.threads.max(1), &*inputs.jobs[i].profile, &run.home))
            };
            let profile = |i: usize| {
                let running = inputs.states[i].is_running();
                running.then(|| &*inputs.jobs[i].profile)
            };
            let lookup = Lookup {
                run: &run,
                profile: &profile,
            };
            let updated = !slot.stale && slot.groups.update(&model, &dirty, lookup, scratch);
            if !updated {
                let room = &mut self.runners;
                evaluate(inputs, s, &model, &mut slot.groups, lookup, scratch, room);
            }
            slot.stale = false;
            // Emptied, it keeps its room for the next changes.
            dirty.clear();
            slot.dirty = dirty;
            self.moved
                .take(s, &mut slot.groups, &mut self.jobs, &mut touched);
        }
        let plan = inputs.plan;
        let fluid = fluid_cycle(plan, inputs.options.mode).is_some();
        self.next_weights.clear();
        self.next_weights.extend((0..self.slots.len()).map(|s| {
            match (inputs.options.mode, plan.slots.len()) {
                (_, 0) => 1.0,
                (Mode::Exact, _) => f64::from(u8::from(s == inputs.current_slot)),
                // Per cycle: the cycle's length divides them in the engine's cycle time.
                (Mode::Fluid, _) if fluid => plan.slots[s].length,
                (Mode::Fluid, _) => f64::from(u8::from(s == 0)),
            }
        }));
        // Only the jobs of a slot whose weight moved see their figures move, and when the slot
        // count moved, those of the first slot that hold the last slot, before or now: whether they
        // enter the first slot depends on the last (all of them when switches start or stop being
        // charged, with a second slot).
        for (s, slot) in self.slots.iter().enumerate() {
            if self.weights.get(s) != self.next_weights.get(s) {
                touched.extend(slot.groups.runners());
            }
        }
        let (before, now) = (self.weights.len(), self.next_weights.len());
        // (With no weights before, every slot's is new and all its jobs are in already.)
        if before != now && before > 0 {
            let lasts = [before - 1, now - 1].map(|last| (last > 0 && last < now).then_some(last));
            let jobs = &self.jobs;
            let enters_anew = |i: &usize| {
                before.min(now) == 1
                    || lasts
                        .iter()
                        .flatten()
                        .any(|&s| jobs[*i].iter().any(|p| p.slot == s && p.rate.is_some()))
            };
            touched.extend(self.slots[0].groups.runners().filter(|i| enters_anew(i)));
        }
        std::mem::swap(&mut self.weights, &mut self.next_weights);
        self.marks.sort_and_dedup(&mut touched);
        debug_assert!(
            self.pinned.len() == plan.pinned.len()
                && plan
                    .pinned
                    .iter()
                    .all(|a| self.pinned.binary_search(&a.job).is_ok())
        );
        let charge_switches = inputs.options.mode == Mode::Fluid
            && plan.slots.len() > 1
            && inputs.options.effects.switch_cost;
        // One list of slots for every job: thousands of them may be summed again on one event.
        let mut slots = std::mem::take(&mut self.charged_slots);
        out.clear();
        out.extend(touched.iter().map(|&i| {
            let pinned = !self.pinned.is_empty()
                && self.pinned.binary_search(&inputs.jobs[i].spec.id).is_ok();
            let mut figures = self.sum(i, pinned);
            if let Some(f) = figures.as_mut().filter(|_| charge_switches) {
                slots.clear();
                if pinned {
                    slots.extend(0..self.slots.len());
                } else {
                    slots.extend(self.slots_of(i));
                }
                self.charge_fluid_switch(inputs, i, &slots, f);
            }
            (i, figures.unwrap_or_default())
        }));
        touched.clear();
        self.dropped = touched;
        slots.clear();
        self.charged_slots = slots;
    }

    /// Job `i`'s figures over its slots (all of them if `pinned`), weighed; `None` if it runs in
    /// none.
    fn sum(&self, i: usize, pinned: bool) -> Option<Figures> {
        let mut figures: Option<Figures> = None;
        for place in self.jobs.get(i).into_iter().flatten() {
            let w = self.weights[place.slot];
            if w == 0.0 || !(pinned || place.assigned) {
                continue;
            }
            let Some((rate, held)) = place.rate else {
                continue;
            };
            let f = figures.get_or_insert_with(Figures::default);
            f.rate += w * rate.rate;
            f.cpu_share += w * rate.cpu_share;
            f.held += w * held as f64;
            f.llc_miss += w * rate.llc_miss;
        }
        figures
    }

    /// Fluid mode: a job that enters the cycle `m` times per cycle (it holds `slots`) loses `m` switch
    /// costs of its running time per cycle.
    fn charge_fluid_switch(&self, inputs: &Inputs, i: usize, slots: &[usize], f: &mut Figures) {
        let plan_slots = &inputs.plan.slots;
        let n = plan_slots.len();
        let holds = |s: usize| slots.binary_search(&s).is_ok();
        let entries = slots.iter().filter(|&&s| !holds((s + n - 1) % n)).count();
        let running: f64 = slots.iter().map(|&s| plan_slots[s].length).sum();
        if entries == 0 || running <= 0.0 {
            return;
        }
        let lost = entries as f64 * switch_cost(inputs.machine, &inputs.jobs[i], inputs.options);
        f.rate *= (1.0 - lost / running).max(0.0);
    }
}

/// The same rate and CPUs held, to the bit, or both none.
fn same_rate(a: Option<(SlotRate, usize)>, b: Option<(SlotRate, usize)>) -> bool {
    match (a, b) {
        (Some((a, held)), Some((b, also_held))) => held == also_held && a.same_bits(&b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// The slots job `i` is assigned in, among every job's `places`, in order.
fn assigned_slots(places: &[Vec<Place>], i: usize) -> impl Iterator<Item = usize> + '_ {
    places
        .get(i)
        .into_iter()
        .flatten()
        .filter(|p| p.assigned)
        .map(|p| p.slot)
}

/// Job `i`'s places, made room for.
fn places_of(jobs: &mut Vec<Vec<Place>>, i: usize) -> &mut Vec<Place> {
    if jobs.len() <= i {
        jobs.resize_with(i + 1, Vec::new);
    }
    &mut jobs[i]
}

/// Edits the place in slot `s` of a job's `places` (added if missing), which is dropped once neither
/// assigned nor rated.
fn edit_place(places: &mut Vec<Place>, s: usize, edit: impl FnOnce(&mut Place)) {
    let k = places
        .binary_search_by_key(&s, |p| p.slot)
        .unwrap_or_else(|k| {
            let place = Place {
                slot: s,
                assigned: false,
                rate: None,
            };
            places.insert(k, place);
            k
        });
    edit(&mut places[k]);
    if !places[k].assigned && places[k].rate.is_none() {
        places.remove(k);
    }
}

/// Evaluates the started jobs of slot `s` and the pinned jobs, re-evaluating only the groups of
/// `groups` whose runners changed.
fn evaluate<'a>(
    inputs: &Inputs<'a>,
    s: usize,
    model: &Model,
    groups: &mut SlotGroups,
    lookup: Lookup<'a, '_>,
    scratch: &mut Scratch,
    room: &mut Vec<SlotRunner<'static>>,
) {
    let plan = inputs.plan;
    let assignments = plan
        .pinned
        .iter()
        .chain(plan.slots.get(s).into_iter().flat_map(|s| &s.assignments));
    let mut runners = emptied(std::mem::take(room));
    for a in assignments {
        let i = inputs.index[&a.job];
        let Some((threads, profile, home)) = (lookup.run)(i) else {
            continue;
        };
        let runner = Runner::new(&a.cpus, threads, profile, home);
        if runner.width == 0 {
            continue;
        }
        runners.push(SlotRunner { job: i, runner });
    }
    groups.rates(model, &runners, scratch);
    *room = emptied(runners);
}

/// The length of the plan's fluid cycle of slots, in whose cycle time jobs progress (the engine's
/// `CycleClock`); 1 where progress is per second: a plan without slots, exact mode (one slot at a
/// time), or slots of no length.
pub(super) fn cycle_length(plan: &Plan, mode: Mode) -> f64 {
    fluid_cycle(plan, mode).unwrap_or(1.0)
}

/// The plan's fluid cycle length, if it has one: then its slots weigh by their lengths.
fn fluid_cycle(plan: &Plan, mode: Mode) -> Option<f64> {
    let cycle = plan.cycle_length();
    (mode == Mode::Fluid && !plan.slots.is_empty() && cycle > 0.0).then_some(cycle)
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

#[cfg(test)]
mod tests {
    use super::JobMarks;
    use proptest::prelude::*;

    proptest! {
        /// Long lists go through the bits, short or sparse ones through a sort: both must give
        /// what a sort and a dedup give.
        #[test]
        fn job_marks_sort_and_dedup(
            jobs in prop::collection::vec(0usize..5_000, 0..3_000),
            offset in 0usize..200_000,
        ) {
            let mut jobs: Vec<usize> = jobs.into_iter().map(|i| i + offset).collect();
            let mut expected = jobs.clone();
            expected.sort_unstable();
            expected.dedup();
            JobMarks::default().sort_and_dedup(&mut jobs);
            prop_assert_eq!(jobs, expected);
        }
    }
}
