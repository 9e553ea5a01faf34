//! Durability for what the executor's thread journals (starts, placements, ends): it appends under the
//! registry's lock and leaves the fsync to a thread of its own, so that a slow disk never makes a slot
//! switch late. Its entries still reach the disk in the journal's order, and whoever waits on an end
//! (`cosched wait`) hears of it only once it is durable. Requests that come while an fsync runs are
//! covered together by the next. The thread that makes them so is `Shared::start_syncing`.

use crate::journal::Appended;
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
pub struct Syncer {
    pending: Mutex<Pending>,
    work: Condvar,
}

#[derive(Default)]
struct Pending {
    /// The last entry to make durable.
    upto: Option<Appended>,
    /// Whether clients waiting on ends are to hear once it is.
    notify_ended: bool,
}

impl Syncer {
    /// Makes the entry at `position` (and every one before it) durable soon; `notify_ended`: a job
    /// ended in it, which clients waiting on ends hear of once it is durable.
    pub fn request(&self, position: Appended, notify_ended: bool) {
        let mut pending = self.lock();
        pending.upto = pending.upto.max(Some(position));
        pending.notify_ended |= notify_ended;
        self.work.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a request, then takes every one made so far: the last entry to make durable, and
    /// whether clients waiting on ends are to hear once it is.
    pub fn next(&self) -> (Appended, bool) {
        let mut pending = self.lock();
        while pending.upto.is_none() {
            pending = self.work.wait(pending).unwrap_or_else(|p| p.into_inner());
        }
        let taken = std::mem::take(&mut *pending);
        (taken.upto.expect("waited for"), taken.notify_ended)
    }
}
