//! Each job's progress, integrated lazily: settled at its figures when they change or someone
//! looks, and its finish moved in the calendar.

use super::calendar::Due;
use super::rates::{cycle_length, Figures, Inputs};
use super::Engine;

impl Engine<'_> {
    /// Brings job `i`'s progress and counters up to now at its current figures.
    pub(super) fn settle(&mut self, i: usize) {
        let clock = *self.calendar.clock();
        let Some(run) = self.states[i].running_mut() else {
            return;
        };
        let now = clock.cycles_at(self.now);
        let passed = now - run.since;
        if passed <= 0.0 {
            return;
        }
        let productive = (now - run.stall_until.max(run.since)).clamp(0.0, passed);
        let f = run.figures;
        run.remaining -= f.rate * productive;
        run.sampling.cpu_seconds += f.cpu_share * passed;
        run.sampling.held_seconds += f.held * passed;
        let squared = clock.squared_cycles_at(self.now);
        if run.has_footprint {
            // Per second, the miss ratio and the CPU share are each a per-cycle figure over the cycle.
            self.llc_misses += f.llc_miss * f.cpu_share * (squared - run.since_squared);
            self.llc_accesses += f.cpu_share * passed;
        }
        run.since = now;
        run.since_squared = squared;
    }

    /// Puts job `i`'s finish in the calendar at its current rate (outdating the previous entry).
    pub(super) fn reschedule_finish(&mut self, i: usize) {
        if let Some((at, due, rank)) = self.next_finish(i) {
            self.calendar.schedule_finish(at, due, rank);
        }
    }

    /// Job `i`'s finish at its current rate, as a calendar entry (cycle time, due, rank) that
    /// outdates its previous one; `None` if it makes no progress.
    pub(super) fn next_finish(&mut self, i: usize) -> Option<(f64, Due, u64)> {
        let now = self.calendar.clock().cycles_at(self.now);
        let run = self.states[i].running_mut()?;
        run.finish_version += 1;
        let due = Due::Finish {
            job: i,
            version: run.finish_version,
        };
        let rate = run.figures.rate;
        let at = if run.remaining <= run.done_below {
            now
        } else if rate > 0.0 {
            run.stall_until.max(now) + run.remaining / rate
        } else {
            return None;
        };
        Some((at, due, run.started))
    }

    /// New figures for the jobs whose slots changed; their progress is settled first and their finish
    /// moved. Jobs that left the plan stop.
    pub(super) fn refresh_rates(&mut self) {
        if !self.rates_stale {
            return;
        }
        self.rates_stale = false;
        let inputs = Inputs {
            plan: &self.plan,
            jobs: &self.jobs,
            states: &self.states,
            index: &self.index,
            machine: &self.machine,
            options: self.options,
            current_slot: self.slot,
        };
        let cycle = cycle_length(&self.plan, self.options.mode);
        if cycle != self.calendar.clock().cycle() {
            self.calendar.set_cycle(self.now, cycle);
        }
        let mut changed = std::mem::take(&mut self.changed_figures);
        self.book.figures(&inputs, &mut self.scratch, &mut changed);
        // The finishes go into the calendar after every job's run is updated: a new shortest turn
        // moves thousands, and apart from the queue's work, their runs (each behind a pointer) are
        // fetched from memory side by side.
        let mut finishes = std::mem::take(&mut self.moved_finishes);
        for &(i, f) in &changed {
            finishes.extend(self.set_figures(i, f));
        }
        for (at, due, rank) in finishes.drain(..) {
            self.calendar.schedule_finish(at, due, rank);
        }
        self.moved_finishes = finishes;
        self.changed_figures = changed;
    }

    /// Settles job `i` and gives it `figures`; returns its finish's new calendar entry if its rate
    /// moved.
    pub(super) fn set_figures(&mut self, i: usize, figures: Figures) -> Option<(f64, Due, u64)> {
        let old = self.states[i].running().map(|run| run.figures)?;
        if old == figures {
            return None;
        }
        self.settle(i);
        if let Some(run) = self.states[i].running_mut() {
            run.figures = figures;
        }
        (old.rate != figures.rate)
            .then(|| self.next_finish(i))
            .flatten()
    }
}
