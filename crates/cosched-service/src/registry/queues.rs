//! The jobs not yet handed to the executor, kept so that handing jobs over costs what is handed, not
//! what waits: one user's backlog of thousands is not looked at while that user may take no more.
//! Each user's jobs queue apart, highest priority first, then by id; processes to adopt (always
//! taken) and jobs held back until another job ends (by a dependency, their array's limit or the
//! node's memory) are kept aside, the held ones looked at again only once a job has ended.
//! A job leaves by cancellation at once in the counts and lazily in its queue, which skips it when it
//! comes to the front.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Why a job queues where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A running process to adopt: taken at the next take, whatever the limits.
    Adopt,
    /// Names jobs it depends on.
    Dependent,
    Plain,
}

/// A job's place in its user's queue: highest priority first, then the oldest.
type Place = (Reverse<i64>, u64);

#[derive(Default)]
pub struct Queues {
    /// Each user's jobs free to be taken.
    by_user: BTreeMap<u32, BTreeSet<Place>>,
    adopt: Vec<u64>,
    /// Jobs that wait for another job to end before they may be taken.
    held: Vec<u64>,
    /// Whether a held job may be free to go since the held jobs were last looked at.
    held_unchecked: bool,
    /// Every job queued, with its user and priority: what a queue holds that is not here has left.
    members: HashMap<u64, (u32, i64)>,
}

impl Queues {
    pub fn push(&mut self, id: u64, uid: u32, priority: i64, kind: Kind) {
        self.members.insert(id, (uid, priority));
        match kind {
            Kind::Adopt => self.adopt.push(id),
            Kind::Dependent => {
                self.held.push(id);
                self.held_unchecked = true;
            }
            Kind::Plain => self.release(id),
        }
    }

    /// Takes job `id` out; whether it was queued.
    pub fn remove(&mut self, id: u64) -> bool {
        self.members.remove(&id).is_some()
    }

    pub fn contains(&self, id: u64) -> bool {
        self.members.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Processes to adopt that are queued.
    pub fn adopt_len(&self) -> usize {
        self.adopt.iter().filter(|id| self.contains(**id)).count()
    }

    /// Says that a job ended: a held job may be free to go.
    pub fn job_ended(&mut self) {
        self.held_unchecked |= !self.held.is_empty();
    }

    /// Whether a queued job is held until another ends.
    pub fn any_held(&self) -> bool {
        self.held.iter().any(|id| self.contains(*id))
    }

    /// Takes every process to adopt.
    pub fn take_adopt(&mut self) -> Vec<u64> {
        let members = &mut self.members;
        self.adopt
            .drain(..)
            .filter(|id| members.remove(id).is_some())
            .collect()
    }

    /// The held jobs to look at, where a job ended since the last look; each goes back with
    /// [`Queues::release`] or [`Queues::hold`].
    pub fn take_unchecked_held(&mut self) -> Vec<u64> {
        if !std::mem::take(&mut self.held_unchecked) {
            return Vec::new();
        }
        let members = &self.members;
        let mut held: Vec<u64> = self
            .held
            .drain(..)
            .filter(|id| members.contains_key(id))
            .collect();
        // A job held while in its user's queue can be held again when it comes to the front.
        held.sort_unstable();
        held.dedup();
        held
    }

    /// A queued job free to be taken joins its user's queue, in its place.
    pub fn release(&mut self, id: u64) {
        if let Some(&(uid, priority)) = self.members.get(&id) {
            self.by_user
                .entry(uid)
                .or_default()
                .insert((Reverse(priority), id));
        }
    }

    /// A queued job that waits for another to end: out of its user's queue (it was taken from
    /// there, or never in it) until [`Queues::take_unchecked_held`] gives it back.
    pub fn hold(&mut self, id: u64) {
        self.held.push(id);
    }

    /// The first queued job of each user, skipping the jobs that have left.
    pub fn fronts(&mut self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let members = &self.members;
        self.by_user.retain(|_, queue| {
            while let Some(&(_, id)) = queue.first() {
                if members.contains_key(&id) {
                    break;
                }
                queue.pop_first();
            }
            !queue.is_empty()
        });
        self.by_user.iter().map(|(&uid, queue)| {
            let (_, id) = queue.first().expect("emptied queues are dropped");
            (uid, *id)
        })
    }

    /// Takes `uid`'s first job, which [`Queues::fronts`] named, out of its queue; it stays queued
    /// until [`Queues::taken`] or [`Queues::hold`].
    pub fn pop_front(&mut self, uid: u32) -> Option<u64> {
        let queue = self.by_user.get_mut(&uid)?;
        let (_, id) = queue.pop_first()?;
        if queue.is_empty() {
            self.by_user.remove(&uid);
        }
        Some(id)
    }

    /// Job `id`, popped, leaves the queues for the executor.
    pub fn taken(&mut self, id: u64) {
        self.members.remove(&id);
    }
}
