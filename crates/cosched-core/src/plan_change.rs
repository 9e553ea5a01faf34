//! What changed from one plan to the next: the trace's `plan_change` record.
//!
//! A policy hands over a whole plan at every decision, but on a large machine most of it repeats the last
//! one. Writing only the difference keeps a trace's size proportional to what happened rather than to the
//! number of jobs times the number of decisions. [`PlanReplay`] turns the changes back into whole plans
//! for readers.

use crate::cpuset::CpuSet;
use crate::job::JobId;
use crate::plan::{Assignment, Plan, Slot};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One job's place in one slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotAssignment {
    pub slot: usize,
    pub job: JobId,
    pub cpus: CpuSet,
}

/// The difference between two plans. Applied in field order: slots beyond `slots` are dropped (new
/// ones start empty), `cleared` slots are emptied, `removed` jobs leave their slots, `placed` jobs take
/// their CPUs in a slot (replacing what they had there), and so on for lengths, pinned jobs and advice.
/// The order of assignments within a slot carries no meaning.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanChange {
    /// Number of slots in the new plan.
    pub slots: usize,
    /// (slot, length) for every slot whose length is new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lengths: Vec<(usize, f64)>,
    /// Slots rebuilt from scratch: the old ones held a job twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cleared: Vec<usize>,
    /// (slot, job) pairs gone from the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<(usize, JobId)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed: Vec<SlotAssignment>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpinned: Vec<JobId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<Assignment>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unadvised: Vec<JobId>,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "crate::plan::advice_keys"
    )]
    pub advice: BTreeMap<JobId, u32>,
    /// The new plan's timer (not a difference: absent means none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<f64>,
    /// The new plan's reason, as the timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl PlanChange {
    /// What turns `old` into `new`.
    pub fn between(old: &Plan, new: &Plan) -> PlanChange {
        let advice = new.advice.iter().map(|(&job, &threads)| (job, threads));
        PlanChange::with_slots(old, new, &new.slots, advice)
    }

    /// What turns `old` into `new` with `slots` for slots and `advice` (in job order) for advice;
    /// `new`'s own are not read. For a policy that keeps its slots apart and would otherwise copy them
    /// all into a plan only to compare them, and that advises thousands of jobs on every plan: a list
    /// in job order costs no tree to build, walk and drop.
    pub fn with_slots<'s>(
        old: &Plan,
        new: &Plan,
        slots: impl IntoIterator<Item = &'s Slot>,
        advice: impl IntoIterator<Item = (JobId, u32)>,
    ) -> PlanChange {
        let mut change = PlanChange {
            timer: new.timer,
            why: new.why.clone(),
            ..PlanChange::default()
        };
        change.slots = change.diff_slots(old, 0, slots);
        let (unpinned, pinned) = diff(&old.pinned, &new.pinned);
        change.unpinned = unpinned;
        change.pinned = pinned.into_iter().cloned().collect();
        let (unadvised, advice) = advice_diff(&old.advice, advice);
        change.unadvised = unadvised;
        change.advice = advice;
        change
    }

    /// What turns `old` into the plan that keeps its first `kept` slots, its pinned jobs and its
    /// advice and its reason, and goes on with `slots` (and `timer`): [`between`](Self::between) for a policy that
    /// knows which slots it made again, without building and comparing the rest.
    pub fn replacing_slots<'s>(
        old: &Plan,
        kept: usize,
        slots: impl IntoIterator<Item = &'s Slot>,
        timer: Option<f64>,
    ) -> PlanChange {
        let mut change = PlanChange {
            timer,
            why: old.why.clone(),
            ..PlanChange::default()
        };
        change.slots = kept + change.diff_slots(old, kept, slots);
        change
    }

    /// Adds what turns `old`'s slots from `first` on into `slots`; returns how many there are.
    fn diff_slots<'s>(
        &mut self,
        old: &Plan,
        first: usize,
        slots: impl IntoIterator<Item = &'s Slot>,
    ) -> usize {
        let empty = Slot {
            length: f64::NAN,
            assignments: Vec::new(),
        };
        let mut count = 0;
        for (s, slot) in (first..).zip(slots) {
            count += 1;
            let before = old.slots.get(s).unwrap_or(&empty);
            if before.length.to_bits() != slot.length.to_bits() {
                self.lengths.push((s, slot.length));
            }
            // Most slots of a new plan are those of the old one; comparing them in order is cheaper
            // than matching them by job.
            if before.assignments == slot.assignments {
                continue;
            }
            let (old_slot, new_slot) = (&before.assignments, &slot.assignments);
            let in_slot = |a: &Assignment| SlotAssignment {
                slot: s,
                job: a.job,
                cpus: a.cpus.clone(),
            };
            if let Some(differing) = few_moves(old_slot, new_slot) {
                let gone = differing.gone(old_slot, new_slot);
                self.removed.extend(gone.map(|job| (s, job)));
                self.placed
                    .extend(differing.placed(old_slot, new_slot).map(in_slot));
                continue;
            }
            let by_jobs = by_job(old_slot).zip(by_job(new_slot));
            match by_jobs.map(|(before, after)| diff_by_job(old_slot, &before, new_slot, &after)) {
                Some((gone, placed)) => {
                    self.removed.extend(gone.into_iter().map(|job| (s, job)));
                    self.placed.extend(placed.into_iter().map(in_slot));
                }
                None => {
                    self.cleared.push(s);
                    self.placed.extend(new_slot.iter().map(in_slot));
                }
            }
        }
        count
    }

    /// Turns the plan this change was computed from into the new one (up to assignment order). Costs
    /// one pass over each slot the change touches, however many of its jobs it moves.
    pub fn apply(&self, plan: &mut Plan) {
        plan.slots.resize_with(self.slots, || Slot {
            length: 0.0,
            assignments: Vec::new(),
        });
        for &s in &self.cleared {
            plan.slots[s].assignments.clear();
        }
        let mut removed = self.removed.clone();
        removed.sort_unstable();
        for gone in removed.chunk_by(|a, b| a.0 == b.0) {
            let s = gone[0].0;
            let slot = &mut plan.slots[s].assignments;
            if gone.len() > FEW_LEAVING {
                slot.retain(|a| gone.binary_search(&(s, a.job)).is_err());
                continue;
            }
            // A few jobs leave a slot of maybe a thousand: each is found by a read-only scan and
            // taken out at once, where a retain would move every job behind it one by one.
            for &(_, job) in gone {
                let Some(at) = slot.iter().position(|a| a.job == job) else {
                    continue;
                };
                if slot[at + 1..].iter().any(|a| a.job == job) {
                    slot.retain(|a| a.job != job);
                } else {
                    slot.remove(at);
                }
            }
        }
        for &(s, length) in &self.lengths {
            plan.slots[s].length = length;
        }
        let mut placed: Vec<&SlotAssignment> = self.placed.iter().collect();
        placed.sort_by_key(|p| p.slot);
        // Slots are kept in the order of their CPUs, as most policies build them, so that the next
        // plan's slots meet this one's in step (`few_moves`) whatever order changes came in.
        for group in placed.chunk_by(|a, b| a.slot == b.slot) {
            let s = group[0].slot;
            let slot = &mut plan.slots[s].assignments;
            let assignment = |p: &SlotAssignment| Assignment {
                job: p.job,
                cpus: p.cpus.clone(),
            };
            if self.cleared.contains(&s) {
                // Rebuilt from scratch: a job may be listed twice, as in the plan it came from.
                slot.extend(group.iter().map(|p| assignment(p)));
                slot.sort_by_key(|a| a.cpus.first());
                continue;
            }
            if group.len() > 8 {
                // Many moves: found through an index built once, and the slot sorted once.
                let mut at: HashMap<JobId, usize> =
                    slot.iter().enumerate().map(|(i, a)| (a.job, i)).collect();
                for p in group {
                    match at.get(&p.job) {
                        Some(&i) => slot[i].cpus = p.cpus.clone(),
                        None => {
                            at.insert(p.job, slot.len());
                            slot.push(assignment(p));
                        }
                    }
                }
                slot.sort_by_key(|a| a.cpus.first());
                continue;
            }
            for p in group {
                if let Some(i) = slot.iter().position(|a| a.job == p.job) {
                    slot.remove(i);
                }
                // After the jobs with the same first CPU, as the sorts above keep them: a policy that
                // gives every job the same CPUs lists them in arrival order, and so do its slots here.
                let first = p.cpus.first();
                let at = slot.partition_point(|a| a.cpus.first() <= first);
                slot.insert(at, assignment(p));
            }
        }
        plan.pinned.retain(|a| !self.unpinned.contains(&a.job));
        for pin in &self.pinned {
            match plan.pinned.iter_mut().find(|a| a.job == pin.job) {
                Some(a) => a.cpus = pin.cpus.clone(),
                None => plan.pinned.push(pin.clone()),
            }
        }
        for job in &self.unadvised {
            plan.advice.remove(job);
        }
        plan.advice
            .extend(self.advice.iter().map(|(j, t)| (*j, *t)));
        plan.timer = self.timer;
        plan.why.clone_from(&self.why);
    }

    /// Whether applying the change to `plan` leaves it as it is.
    pub fn changes_nothing(&self, plan: &Plan) -> bool {
        self.slots == plan.slots.len()
            && self.lengths.is_empty()
            && self.cleared.is_empty()
            && self.removed.is_empty()
            && self.placed.is_empty()
            && self.unpinned.is_empty()
            && self.pinned.is_empty()
            && self.unadvised.is_empty()
            && self.advice.is_empty()
            && self.timer == plan.timer
            && self.why == plan.why
    }

    /// Jobs whose place or advice changed.
    pub fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.removed
            .iter()
            .map(|(_, job)| *job)
            .chain(self.placed.iter().map(|a| a.job))
            .chain(self.unpinned.iter().copied())
            .chain(self.pinned.iter().map(|a| a.job))
    }
}

/// Jobs advised in `old` but not in `new` (given in job order), and the advice of `new` that is new or
/// changed: one walk of both in job order, where looking each job up in the other would cost a search
/// apiece.
fn advice_diff(
    old: &BTreeMap<JobId, u32>,
    new: impl IntoIterator<Item = (JobId, u32)>,
) -> (Vec<JobId>, BTreeMap<JobId, u32>) {
    let mut unadvised = Vec::new();
    let mut changed: Vec<(JobId, u32)> = Vec::new();
    let mut before = old.iter().peekable();
    #[cfg(debug_assertions)]
    let mut last = None;
    for (job, threads) in new {
        #[cfg(debug_assertions)]
        {
            assert!(last < Some(job), "advice out of job order");
            last = Some(job);
        }
        while let Some((&gone, _)) = before.next_if(|(j, _)| **j < job) {
            unadvised.push(gone);
        }
        if before.next_if(|(j, _)| **j == job).map(|(_, t)| *t) != Some(threads) {
            changed.push((job, threads));
        }
    }
    unadvised.extend(before.map(|(job, _)| *job));
    (unadvised, changed.into_iter().collect())
}

/// At most this many assignments differ between two slots for [`few_moves`] to diff them.
const FEW: usize = 32;

/// Jobs leaving one slot that are taken out one at a time (a scan each) rather than in one retain.
const FEW_LEAVING: usize = 4;

/// The assignments two slots differ in, found by [`few_moves`]: indices into each, in order.
struct Differing {
    olds: Few,
    news: Few,
}

/// At most [`FEW`] indices, on the stack: a plan change diffs every slot it touches, usually in a
/// few assignments.
struct Few {
    len: usize,
    items: [usize; FEW],
}

impl Few {
    fn new() -> Self {
        Few {
            len: 0,
            items: [0; FEW],
        }
    }

    /// Adds `items`; `false` when they do not fit, and then what did stays.
    fn extend(&mut self, items: impl IntoIterator<Item = usize>) -> bool {
        for item in items {
            let Some(slot) = self.items.get_mut(self.len) else {
                return false;
            };
            *slot = item;
            self.len += 1;
        }
        true
    }

    fn as_slice(&self) -> &[usize] {
        &self.items[..self.len]
    }
}

/// [`diff`] of two slots that agree in order except for a few assignments dropped, added or changed
/// (a plan made again from mostly the same lanes): found by walking both in order and matching only
/// the assignments that differ, where [`diff`] indexes every job of both. `None` when they differ in
/// many places, or when a job of the differing ones also holds one of the others (it is then listed
/// twice in one of the slots, which only the full diff tells apart).
fn few_moves(old: &[Assignment], new: &[Assignment]) -> Option<Differing> {
    /// The walk looks this far ahead to fall in step again.
    const AHEAD: usize = 4;
    let (mut i, mut j) = (0, 0);
    let (mut olds, mut news) = (Few::new(), Few::new());
    let fits = |olds: &Few, news: &Few| olds.len + news.len <= FEW;
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            i += 1;
            j += 1;
            continue;
        }
        // The fewest assignments to skip on either side before both agree again: by their sum, then
        // by the old side's, each side at most AHEAD. (Half-open ranges: this search runs for every
        // assignment out of step, and an inclusive range's iterator costs a flag test per step.)
        let in_step = |d: usize, e: usize| {
            (old.get(i + d).zip(new.get(j + e))).is_some_and(|(before, now)| before == now)
        };
        let skip = (1..2 * AHEAD + 1).find_map(|k| {
            (k.saturating_sub(AHEAD)..k.min(AHEAD) + 1)
                .map(|d| (d, k - d))
                .find(|&(d, e)| in_step(d, e))
        });
        let (d, e) = skip.unwrap_or((1, 1));
        if !(olds.extend(i..i + d) && news.extend(j..j + e) && fits(&olds, &news)) {
            return None;
        }
        (i, j) = (i + d, j + e);
    }
    if !(olds.extend(i..old.len()) && news.extend(j..new.len()) && fits(&olds, &news)) {
        return None;
    }
    let mut moved = [JobId(0); FEW];
    let jobs = (olds.as_slice().iter().map(|&i| old[i].job))
        .chain(news.as_slice().iter().map(|&j| new[j].job));
    moved.iter_mut().zip(jobs).for_each(|(at, job)| *at = job);
    let moved = &mut moved[..olds.len + news.len];
    let (in_old, in_new) = moved.split_at_mut(olds.len);
    if twice(in_old) || twice(in_new) {
        return None;
    }
    moved.sort_unstable();
    // The assignments in step are the same in both slots.
    let kept_elsewhere = (0..old.len())
        .filter(|i| olds.as_slice().binary_search(i).is_err())
        .any(|i| moved.binary_search(&old[i].job).is_ok());
    (!kept_elsewhere).then_some(Differing { olds, news })
}

/// Whether a job appears twice among `jobs` (which it sorts).
fn twice(jobs: &mut [JobId]) -> bool {
    jobs.sort_unstable();
    jobs.windows(2).any(|w| w[0] == w[1])
}

impl Differing {
    /// The jobs of `old` gone from `new`.
    fn gone<'s>(
        &'s self,
        old: &'s [Assignment],
        new: &'s [Assignment],
    ) -> impl Iterator<Item = JobId> + 's {
        let news = self.news.as_slice();
        self.olds
            .as_slice()
            .iter()
            .map(move |&i| old[i].job)
            .filter(move |job| !news.iter().any(|&j| new[j].job == *job))
    }

    /// The assignments of `new` that are new or moved.
    fn placed<'s>(
        &'s self,
        old: &'s [Assignment],
        new: &'s [Assignment],
    ) -> impl Iterator<Item = &'s Assignment> + 's {
        let olds = self.olds.as_slice();
        self.news
            .as_slice()
            .iter()
            .map(move |&j| &new[j])
            .filter(move |a| !olds.iter().any(|&i| old[i] == **a))
    }
}

/// Each job's CPUs in `assignments`; `None` if a job appears twice.
fn by_job(assignments: &[Assignment]) -> Option<HashMap<JobId, &CpuSet>> {
    let jobs: HashMap<JobId, &CpuSet> = assignments.iter().map(|a| (a.job, &a.cpus)).collect();
    (jobs.len() == assignments.len()).then_some(jobs)
}

/// Jobs of `old` absent from `new`, and assignments of `new` that are new or moved. Neither list may
/// hold a job twice.
fn diff<'a>(old: &[Assignment], new: &'a [Assignment]) -> (Vec<JobId>, Vec<&'a Assignment>) {
    let before: HashMap<JobId, &CpuSet> = old.iter().map(|a| (a.job, &a.cpus)).collect();
    let after: HashMap<JobId, &CpuSet> = new.iter().map(|a| (a.job, &a.cpus)).collect();
    diff_by_job(old, &before, new, &after)
}

/// [`diff`] with each list's jobs already looked up.
fn diff_by_job<'a>(
    old: &[Assignment],
    before: &HashMap<JobId, &CpuSet>,
    new: &'a [Assignment],
    after: &HashMap<JobId, &CpuSet>,
) -> (Vec<JobId>, Vec<&'a Assignment>) {
    let gone = old
        .iter()
        .filter(|a| !after.contains_key(&a.job))
        .map(|a| a.job)
        .collect();
    let placed = new
        .iter()
        .filter(|a| before.get(&a.job) != Some(&&a.cpus))
        .collect();
    (gone, placed)
}

/// The plan in force while a trace is read: whole plans replace it, changes update it.
#[derive(Debug, Default, Clone)]
pub struct PlanReplay {
    current: Plan,
}

impl PlanReplay {
    pub fn apply(&mut self, change: &PlanChange) -> &Plan {
        change.apply(&mut self.current);
        &self.current
    }

    pub fn replace(&mut self, plan: &Plan) {
        self.current = plan.clone();
    }

    pub fn current(&self) -> &Plan {
        &self.current
    }
}

/// Each job's CPUs under the plan in force while a trace is read, kept by job and slot: a change
/// costs what it moves, where rebuilding a job's CPUs from the whole plan costs every assignment of it
/// (a thousand on a large machine) on every change.
#[derive(Debug, Default, Clone)]
pub struct Placements {
    /// Each slot's jobs and their CPUs there (a slot that lists a job twice gives it both sets).
    slots: Vec<HashMap<JobId, CpuSet>>,
    pinned: HashMap<JobId, CpuSet>,
    /// The slots that hold each job.
    slots_of: HashMap<JobId, Vec<usize>>,
}

impl Placements {
    pub fn replace(&mut self, plan: &Plan) {
        *self = Placements::default();
        self.slots.resize_with(plan.slots.len(), HashMap::default);
        for (s, slot) in plan.slots.iter().enumerate() {
            for a in &slot.assignments {
                self.place(s, a.job, &a.cpus, true);
            }
        }
        for a in &plan.pinned {
            let cpus = self.pinned.entry(a.job).or_default();
            *cpus = cpus.union(&a.cpus);
        }
    }

    /// Follows [`PlanChange::apply`] step by step.
    pub fn apply(&mut self, change: &PlanChange) {
        for s in change.slots..self.slots.len() {
            self.empty(s);
        }
        self.slots.resize_with(change.slots, HashMap::default);
        for &s in &change.cleared {
            self.empty(s);
        }
        for &(s, job) in &change.removed {
            if self.slots[s].remove(&job).is_some() {
                self.leave(job, s);
            }
        }
        for p in &change.placed {
            // A rebuilt slot lists a job twice where its plan did; elsewhere a job's place is replaced.
            let twice = change.cleared.contains(&p.slot);
            self.place(p.slot, p.job, &p.cpus, twice);
        }
        for job in &change.unpinned {
            self.pinned.remove(job);
        }
        for pin in &change.pinned {
            self.pinned.insert(pin.job, pin.cpus.clone());
        }
    }

    /// All CPUs `job` has in the plan, over its slots and its pinned set; `None` if it has no place.
    pub fn cpus_of(&self, job: JobId) -> Option<CpuSet> {
        let in_slots = self.slots_of.get(&job).into_iter().flatten();
        in_slots
            .map(|&s| &self.slots[s][&job])
            .chain(self.pinned.get(&job))
            .fold(None, |all: Option<CpuSet>, cpus| {
                Some(all.map_or_else(|| cpus.clone(), |all| all.union(cpus)))
            })
    }

    /// Every job with a place in the plan.
    pub fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        let pinned_only = self
            .pinned
            .keys()
            .filter(|j| !self.slots_of.contains_key(j));
        self.slots_of.keys().chain(pinned_only).copied()
    }

    fn place(&mut self, s: usize, job: JobId, cpus: &CpuSet, add: bool) {
        match self.slots[s].get_mut(&job) {
            Some(held) if add => *held = held.union(cpus),
            Some(held) => *held = cpus.clone(),
            None => {
                self.slots[s].insert(job, cpus.clone());
                self.slots_of.entry(job).or_default().push(s);
            }
        }
    }

    fn empty(&mut self, s: usize) {
        for job in std::mem::take(&mut self.slots[s]).into_keys() {
            self.leave(job, s);
        }
    }

    fn leave(&mut self, job: JobId, s: usize) {
        if let Some(slots) = self.slots_of.get_mut(&job) {
            slots.retain(|&held| held != s);
            if slots.is_empty() {
                self.slots_of.remove(&job);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normalized(plan: &Plan) -> Plan {
        let mut plan = plan.clone();
        for slot in &mut plan.slots {
            slot.assignments.sort_by_key(|a| (a.job, a.cpus.first()));
        }
        plan.pinned.sort_by_key(|a| a.job);
        plan
    }

    fn arb_assignments() -> impl Strategy<Value = Vec<Assignment>> {
        // Up to 13 jobs a slot: more than apply scans for one by one.
        prop::collection::vec((0u32..16, 0u32..8, 1u32..4), 0..14).prop_map(|raw| {
            raw.into_iter()
                .map(|(job, first, len)| Assignment {
                    job: JobId(job),
                    cpus: (first..first + len).collect(),
                })
                .collect()
        })
    }

    fn arb_plan() -> impl Strategy<Value = Plan> {
        (
            prop::collection::vec(
                (prop::sample::select(vec![0.1, 0.2, 1.0]), arb_assignments()),
                0..4,
            ),
            arb_assignments(),
            prop::collection::btree_map(0u32..6, 1u32..8, 0..4),
            prop::option::of(0.0f64..10.0),
        )
            .prop_map(|(slots, pinned, advice, timer)| {
                let mut pinned = pinned;
                let mut seen = std::collections::HashSet::new();
                pinned.retain(|a| seen.insert(a.job));
                Plan {
                    slots: slots
                        .into_iter()
                        .map(|(length, assignments)| Slot {
                            length,
                            assignments,
                        })
                        .collect(),
                    pinned,
                    advice: advice.into_iter().map(|(j, t)| (JobId(j), t)).collect(),
                    why: timer.filter(|&t| t < 5.0).map(|t| format!("until {t}")),
                    timer,
                }
            })
    }

    proptest! {
        #[test]
        fn a_change_turns_the_old_plan_into_the_new(old in arb_plan(), new in arb_plan()) {
            // The plan an executor holds was made by applying changes, which keep its slots in
            // the order of their CPUs.
            let mut old = old;
            for slot in &mut old.slots {
                slot.assignments.sort_by_key(|a| a.cpus.first());
            }
            let change = PlanChange::between(&old, &new);
            let mut rebuilt = old.clone();
            change.apply(&mut rebuilt);
            prop_assert_eq!(normalized(&rebuilt), normalized(&new));
            for p in &change.placed {
                let slot = &rebuilt.slots[p.slot].assignments;
                prop_assert!(slot.is_sorted_by_key(|a| a.cpus.first()), "slot {} out of CPU order", p.slot);
            }
        }

        #[test]
        fn replacing_the_later_slots_gives_the_change_the_whole_plans_give(
            old in arb_plan(),
            later in prop::collection::vec(
                (prop::sample::select(vec![0.1, 0.2, 1.0]), arb_assignments()),
                0..4,
            ),
            kept in 0usize..4,
            timer in prop::option::of(0.0f64..10.0),
        ) {
            let kept = kept.min(old.slots.len());
            let later: Vec<Slot> = later
                .into_iter()
                .map(|(length, assignments)| Slot { length, assignments })
                .collect();
            let new = Plan {
                slots: old.slots[..kept].iter().chain(&later).cloned().collect(),
                timer,
                ..old.clone()
            };
            prop_assert_eq!(
                PlanChange::replacing_slots(&old, kept, &later, timer),
                PlanChange::between(&old, &new)
            );
        }

        #[test]
        fn placements_follow_a_chain_of_changes_as_the_whole_plans_do(
            plans in prop::collection::vec(arb_plan(), 1..6)
        ) {
            let mut placements = Placements::default();
            placements.replace(&plans[0]);
            for pair in plans.windows(2) {
                placements.apply(&PlanChange::between(&pair[0], &pair[1]));
                let whole = cpus_by_job(&pair[1]);
                let kept: BTreeMap<JobId, CpuSet> = placements
                    .jobs()
                    .map(|job| (job, placements.cpus_of(job).expect("placed")))
                    .collect();
                prop_assert_eq!(kept, whole);
            }
        }
    }

    /// Each job's CPUs over all of `plan`, read from the whole plan.
    fn cpus_by_job(plan: &Plan) -> BTreeMap<JobId, CpuSet> {
        let mut held: BTreeMap<JobId, CpuSet> = BTreeMap::new();
        for a in plan
            .slots
            .iter()
            .flat_map(|s| &s.assignments)
            .chain(&plan.pinned)
        {
            let cpus = held.entry(a.job).or_default();
            *cpus = cpus.union(&a.cpus);
        }
        held
    }

    #[test]
    fn an_unchanged_job_is_not_written_again() {
        let a = |job, cpus: &str| Assignment {
            job: JobId(job),
            cpus: cpus.parse().unwrap(),
        };
        let old = Plan::space_sharing(vec![a(0, "0-3"), a(1, "4-7")]);
        let new = Plan::space_sharing(vec![a(0, "0-3"), a(1, "4-5"), a(2, "6-7")]);
        let change = PlanChange::between(&old, &new);
        let jobs: Vec<JobId> = change.placed.iter().map(|p| p.job).collect();
        assert_eq!(jobs, [JobId(1), JobId(2)]);
        assert!(change.removed.is_empty() && change.lengths.is_empty());
    }

    /// Jobs that share their first CPU (UE gives every job the whole machine) stay in the order they
    /// came, as the policy lists them, so that its next plan meets the slot in step.
    #[test]
    fn jobs_on_the_same_cpus_keep_their_order() {
        let whole = |job| Assignment {
            job: JobId(job),
            cpus: "0-3".parse().unwrap(),
        };
        let mut plan = Plan::space_sharing(vec![whole(0), whole(1)]);
        let next = Plan::space_sharing(vec![whole(0), whole(1), whole(2)]);
        PlanChange::between(&plan, &next).apply(&mut plan);
        assert_eq!(plan.slots[0].assignments, next.slots[0].assignments);
    }
}
