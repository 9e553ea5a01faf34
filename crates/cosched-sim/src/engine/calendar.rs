//! The event calendar: every future event in one priority queue, earliest first.
//!
//! Entries are never removed when they become outdated (a plan replaced the timer, a job's thread
//! change); each carries the version of what it was computed from, and the engine drops it when it
//! comes up if that version has moved on. Once they outnumber the entries that can still be current
//! three to one, they are swept out in one pass, so the queue stays a few times the number of running
//! jobs.
//!
//! Finishes are kept apart, in cycle time ([`CycleClock`]): under a fluid cycle of slots each job
//! progresses at its work per cycle over the cycle's length, so when a plan change moves only the
//! cycle's length, no job's finish moves in cycle time, and none has to be scheduled again. Their
//! queue holds one entry per job ([`FinishQueue`]): a finish moves far more often than anything else
//! (every rate change), and left behind, the outdated ones made nine in ten of the entries dropped.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens, in the order events at the same instant are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    Finish { job: usize, version: u32 },
    Threads { job: usize, version: u32 },
    Arrival,
    SlotEnd { version: u32 },
    Timer { version: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    t: f64,
    due: Due,
    /// Among events of one kind at one instant, lower ranks first (a job's start order).
    rank: u64,
    seq: u64,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so that the max-heap yields the earliest time, then the kind handled first, then the
    /// lowest rank, then the entry scheduled first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| kind(&other.due).cmp(&kind(&self.due)))
            .then_with(|| other.rank.cmp(&self.rank))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

fn kind(due: &Due) -> u8 {
    match due {
        Due::Finish { .. } => 0,
        Due::Threads { .. } => 1,
        Due::Arrival => 2,
        Due::SlotEnd { .. } => 3,
        Due::Timer { .. } => 4,
    }
}

/// How far after another event, relative to the time, a finish still counts as at that event's time:
/// the reference engine finishes a job when its finish is this close to now.
pub(super) const FINISH_TOLERANCE: f64 = 1e-12;

/// The work a job of `work` sequential seconds may have left and count as done: rounding leaves a
/// little.
pub(super) fn done_below(work: f64) -> f64 {
    1e-9 * work.max(1.0)
}

/// Time measured in cycles: it runs at one over the cycle's length (one where a plan has no fluid
/// cycle), so that a job's progress is its work per cycle times the cycle time passed. Also keeps the
/// time in squared cycles, for figures that are the product of two per-cycle ones.
#[derive(Debug, Clone, Copy)]
pub(super) struct CycleClock {
    t: f64,
    v: f64,
    w: f64,
    cycle: f64,
}

impl Default for CycleClock {
    fn default() -> Self {
        CycleClock {
            t: 0.0,
            v: 0.0,
            w: 0.0,
            cycle: 1.0,
        }
    }
}

impl CycleClock {
    pub fn cycle(&self) -> f64 {
        self.cycle
    }

    /// Cycle time at time `t` (not before the last restart).
    pub fn cycles_at(&self, t: f64) -> f64 {
        self.v + (t - self.t) / self.cycle
    }

    /// Squared-cycle time at time `t`.
    pub fn squared_cycles_at(&self, t: f64) -> f64 {
        self.w + (t - self.t) / (self.cycle * self.cycle)
    }

    /// The time at which cycle time reaches `v`, while the cycle keeps its length.
    fn time_of(&self, v: f64) -> f64 {
        self.t + (v - self.v) * self.cycle
    }
}

#[derive(Default)]
pub(super) struct Calendar {
    heap: BinaryHeap<Entry>,
    /// Finishes, their `t` in cycle time.
    finishes: FinishQueue,
    clock: CycleClock,
    seq: u64,
}

impl Calendar {
    pub fn clock(&self) -> &CycleClock {
        &self.clock
    }

    /// From time `t` on, the cycle is `cycle` seconds long.
    pub fn set_cycle(&mut self, t: f64, cycle: f64) {
        self.clock = CycleClock {
            t,
            v: self.clock.cycles_at(t),
            w: self.clock.squared_cycles_at(t),
            cycle,
        };
    }

    pub fn schedule(&mut self, t: f64, due: Due) {
        self.schedule_ranked(t, due, 0);
    }

    /// Schedules a job's event; jobs' events at one instant come in `rank` order.
    pub fn schedule_ranked(&mut self, t: f64, due: Due, rank: u64) {
        debug_assert!(
            !matches!(due, Due::Finish { .. }),
            "finishes are in cycle time"
        );
        self.seq += 1;
        self.heap.push(Entry {
            t,
            due,
            rank,
            seq: self.seq,
        });
    }

    /// Schedules a job's finish at cycle time `v`.
    pub fn schedule_finish(&mut self, v: f64, due: Due, rank: u64) {
        debug_assert!(matches!(due, Due::Finish { .. }));
        self.seq += 1;
        self.finishes.put(Entry {
            t: v,
            due,
            rank,
            seq: self.seq,
        });
    }

    /// Drops the outdated entries at the top of both queues; returns whether the earliest current
    /// entry is a finish (a finish comes before anything else at its instant), and its time.
    fn settle_tops(&mut self, current: &mut impl FnMut(f64, &Due) -> bool) -> Option<(bool, f64)> {
        while let Some(top) = self.heap.peek() {
            if current(top.t, &top.due) {
                break;
            }
            self.heap.pop();
        }
        let clock = self.clock;
        while let Some(top) = self.finishes.peek() {
            if current(clock.time_of(top.t), &top.due) {
                break;
            }
            self.finishes.pop();
        }
        let finish = self.finishes.peek().map(|e| clock.time_of(e.t));
        match (self.heap.peek(), finish) {
            (None, None) => None,
            (None, Some(t)) => Some((true, t)),
            (Some(top), None) => Some((false, top.t)),
            (Some(top), Some(t)) => Some((t <= top.t, t.min(top.t))),
        }
    }

    /// The earliest entry for which `current` holds, dropping outdated ones on the way; a finish due
    /// within [`FINISH_TOLERANCE`] after that entry, with nothing else between, comes first, at that
    /// entry's time. A job's finish is its remaining work over its rate, which rounding can put a hair
    /// after a slot end or a timer it meets in exact arithmetic (two identical jobs, a job that ends
    /// with its slot): handled after them, it would pay a slot switch that it never makes.
    pub fn pop(&mut self, mut current: impl FnMut(f64, &Due) -> bool) -> Option<(f64, Due)> {
        let (finish_first, t) = self.settle_tops(&mut current)?;
        if finish_first {
            let due = self.finishes.pop().expect("settled").due;
            return Some((t, due));
        }
        let first = self.heap.pop().expect("settled");
        if let Some((true, finish)) = self.settle_tops(&mut current) {
            if finish <= first.t + first.t.abs() * FINISH_TOLERANCE {
                let due = self.finishes.pop().expect("settled").due;
                self.heap.push(first);
                return Some((first.t, due));
            }
        }
        Some((first.t, first.due))
    }

    /// The earliest current entry (outdated ones before it are dropped), if it is `wanted`.
    pub fn pop_if(
        &mut self,
        mut current: impl FnMut(f64, &Due) -> bool,
        wanted: impl Fn(f64, &Due) -> bool,
    ) -> Option<Due> {
        let (finish_first, t) = self.settle_tops(&mut current)?;
        if finish_first {
            let top = self.finishes.peek().expect("settled");
            wanted(t, &top.due).then(|| self.finishes.pop().expect("peeked").due)
        } else {
            let top = self.heap.peek().expect("settled");
            wanted(t, &top.due).then(|| self.heap.pop().expect("peeked").due)
        }
    }

    /// Drops the outdated entries (those for which `current` fails) once they outnumber `live`, the
    /// entries that can still be current, three to one: a long run of replaced timers and thread
    /// changes, or of jobs stopped before their finish, would otherwise grow the queues far past the
    /// cache, and every pop would pay for it.
    pub fn compact(&mut self, live: usize, mut current: impl FnMut(f64, &Due) -> bool) {
        if self.heap.len() + self.finishes.len() > 4 * live + 256 {
            self.heap.retain(|entry| current(entry.t, &entry.due));
            let clock = self.clock;
            self.finishes
                .retain(|entry| current(clock.time_of(entry.t), &entry.due));
        }
    }

    pub fn clear(&mut self) {
        self.heap.clear();
        self.finishes.clear();
    }
}

/// A priority queue of finishes with at most one entry per job: a job's new finish takes its last
/// one's place. Entries come out in the order of [`Entry`], as from a `BinaryHeap`; since no two
/// entries are equal (each has its own `seq`), the order is the same whatever the heap's layout.
#[derive(Default)]
struct FinishQueue {
    /// A binary heap, the greatest entry (the earliest finish) first.
    entries: Vec<Entry>,
    /// Each job's index in `entries`, or `NOT_QUEUED`.
    place: Vec<u32>,
}

const NOT_QUEUED: u32 = u32::MAX;

impl FinishQueue {
    fn job(entry: &Entry) -> usize {
        match entry.due {
            Due::Finish { job, .. } => job,
            _ => unreachable!("only finishes are queued here"),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn peek(&self) -> Option<&Entry> {
        self.entries.first()
    }

    /// Queues `entry`, in place of its job's entry if it has one.
    fn put(&mut self, entry: Entry) {
        let job = Self::job(&entry);
        if job >= self.place.len() {
            self.place.resize(job + 1, NOT_QUEUED);
        }
        match self.place[job] {
            NOT_QUEUED => {
                self.entries.push(entry);
                self.sift_up(self.entries.len() - 1);
            }
            at => {
                let at = at as usize;
                self.entries[at] = entry;
                let at = self.sift_up(at);
                self.sift_down(at);
            }
        }
    }

    fn pop(&mut self) -> Option<Entry> {
        let last = self.entries.pop()?;
        let top = match self.entries.first_mut() {
            Some(first) => std::mem::replace(first, last),
            None => last,
        };
        self.place[Self::job(&top)] = NOT_QUEUED;
        if !self.entries.is_empty() {
            self.sift_down(0);
        }
        Some(top)
    }

    fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        for entry in &self.entries {
            self.place[Self::job(entry)] = NOT_QUEUED;
        }
        self.entries.retain(|entry| keep(entry));
        for at in (0..self.entries.len() / 2).rev() {
            self.sift_down(at);
        }
        for (at, entry) in self.entries.iter().enumerate() {
            self.place[Self::job(entry)] = at as u32;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.place.clear();
    }

    /// Moves the entry at `at` up past the lesser entries above it; returns where it ends.
    fn sift_up(&mut self, mut at: usize) -> usize {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.entries[at] <= self.entries[parent] {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
        self.place[Self::job(&self.entries[at])] = at as u32;
        at
    }

    /// Moves the entry at `at` down past the greater entries below it.
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut greatest = at;
            if left < self.entries.len() && self.entries[left] > self.entries[greatest] {
                greatest = left;
            }
            if right < self.entries.len() && self.entries[right] > self.entries[greatest] {
                greatest = right;
            }
            if greatest == at {
                break;
            }
            self.swap(at, greatest);
            at = greatest;
        }
        self.place[Self::job(&self.entries[at])] = at as u32;
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.entries.swap(a, b);
        self.place[Self::job(&self.entries[a])] = a as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The finish queue gives what a heap that keeps every finish gives once the outdated ones
        /// (not a job's last, or popped since) are dropped: an entry put 0-7, popped 8, swept 9.
        #[test]
        fn a_finish_replaces_the_last_of_its_job(
            ops in prop::collection::vec((0u8..10, 0u8..4, 0u8..3), 0..300)
        ) {
            let mut queue = FinishQueue::default();
            let mut every = BinaryHeap::new();
            let mut last: Vec<Option<u64>> = vec![None; 8];
            for (seq, (op, t, rank)) in (1u64..).zip(ops) {
                let current = |last: &[Option<u64>], e: &Entry| last[FinishQueue::job(e)] == Some(e.seq);
                match op {
                    0..=7 => {
                        let entry = Entry {
                            t: f64::from(t),
                            due: Due::Finish { job: usize::from(op), version: seq as u32 },
                            rank: u64::from(rank),
                            seq,
                        };
                        last[usize::from(op)] = Some(seq);
                        queue.put(entry);
                        every.push(entry);
                    }
                    8 => {
                        while every.peek().is_some_and(|e| !current(&last, e)) {
                            every.pop();
                        }
                        let expected = every.pop();
                        if let Some(e) = &expected {
                            last[FinishQueue::job(e)] = None;
                        }
                        prop_assert_eq!(queue.pop().map(|e| e.seq), expected.map(|e| e.seq));
                    }
                    _ => {
                        let keep = |e: &Entry| e.t != f64::from(t);
                        let swept: Vec<usize> = every
                            .iter()
                            .filter(|e| current(&last, e) && !keep(e))
                            .map(FinishQueue::job)
                            .collect();
                        for job in swept {
                            last[job] = None;
                        }
                        every.retain(|e| current(&last, e));
                        queue.retain(keep);
                    }
                }
                prop_assert_eq!(queue.len(), last.iter().flatten().count());
            }
        }
    }

    #[test]
    fn earliest_first_then_finishes_before_arrivals_before_timers() {
        let mut calendar = Calendar::default();
        calendar.schedule(2.0, Due::Timer { version: 0 });
        calendar.schedule(1.0, Due::Timer { version: 0 });
        calendar.schedule(1.0, Due::Arrival);
        calendar.schedule_finish(1.0, Due::Finish { job: 3, version: 0 }, 0);
        calendar.schedule_finish(1.0, Due::Finish { job: 1, version: 7 }, 0);
        let mut order = Vec::new();
        while let Some(entry) = calendar.pop(|_, due| *due != Due::Finish { job: 1, version: 7 }) {
            order.push(entry);
        }
        assert_eq!(
            order,
            [
                (1.0, Due::Finish { job: 3, version: 0 }),
                (1.0, Due::Arrival),
                (1.0, Due::Timer { version: 0 }),
                (2.0, Due::Timer { version: 0 }),
            ]
        );
    }

    #[test]
    fn a_finish_rounded_a_hair_past_a_slot_end_comes_first() {
        let mut calendar = Calendar::default();
        let end = 129.016_522_711_813_68;
        calendar.schedule(end, Due::SlotEnd { version: 0 });
        calendar.schedule_finish(end * (1.0 + 1e-15), Due::Finish { job: 1, version: 0 }, 0);
        calendar.schedule_finish(end * (1.0 + 1e-9), Due::Finish { job: 2, version: 0 }, 0);
        let mut order = Vec::new();
        while let Some(entry) = calendar.pop(|_, _| true) {
            order.push(entry);
        }
        assert_eq!(
            order,
            [
                (end, Due::Finish { job: 1, version: 0 }),
                (end, Due::SlotEnd { version: 0 }),
                (end * (1.0 + 1e-9), Due::Finish { job: 2, version: 0 }),
            ]
        );
    }
}
