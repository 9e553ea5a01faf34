//! The jobs not yet handed to the executor, kept so that handing jobs over costs what is handed, not
//! what waits: one user's backlog of thousands is not looked at while that user may take no more.
//! Each user's jobs queue apart in submission order; processes to adopt (always taken) and jobs that
//! wait for others to end are kept aside, the latter looked at again only once a job has ended.
//! A job leaves by cancellation at once in the counts and lazily in its queue, which skips it when it
//! comes to the front.

use std::collections::{BTreeMap, HashSet, VecDeque};

/// Why a job queues where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A running process to adopt: taken at the next take, whatever the limits.
    Adopt,
    /// Names jobs it depends on.
    Dependent,
    Plain,
}

#[derive(Default)]
pub struct Queues {
    /// Each user's plain jobs (and dependents whose dependencies were met), by id.
    by_user: BTreeMap<u32, VecDeque<u64>>,
    adopt: Vec<u64>,
    dependent: Vec<u64>,
    /// Whether a dependent's dependencies may have changed since they were last looked at.
    dependents_unchecked: bool,
    /// Every job queued: what a queue holds that is not here has left.
    members: HashSet<u64>,
}

impl Queues {
    pub fn push(&mut self, id: u64, uid: u32, kind: Kind) {
        self.members.insert(id);
        match kind {
            Kind::Adopt => self.adopt.push(id),
            Kind::Dependent => {
                self.dependent.push(id);
                self.dependents_unchecked = true;
            }
            Kind::Plain => self.push_to_user(id, uid),
        }
    }

    /// Into `uid`'s queue in id order: at its end but for a job restored or released out of order.
    fn push_to_user(&mut self, id: u64, uid: u32) {
        let queue = self.by_user.entry(uid).or_default();
        let at = match queue.back() {
            Some(&last) if last > id => queue.partition_point(|&q| q < id),
            _ => queue.len(),
        };
        queue.insert(at, id);
    }

    /// Takes job `id` out; whether it was queued.
    pub fn remove(&mut self, id: u64) -> bool {
        self.members.remove(&id)
    }

    pub fn contains(&self, id: u64) -> bool {
        self.members.contains(&id)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Processes to adopt that are queued.
    pub fn adopt_len(&self) -> usize {
        self.adopt.iter().filter(|id| self.contains(**id)).count()
    }

    /// Says that a job ended: a dependent may be released by it.
    pub fn job_ended(&mut self) {
        self.dependents_unchecked |= !self.dependent.is_empty();
    }

    /// Takes every process to adopt.
    pub fn take_adopt(&mut self) -> Vec<u64> {
        let members = &mut self.members;
        self.adopt
            .drain(..)
            .filter(|id| members.remove(id))
            .collect()
    }

    /// The dependents to look at, where their dependencies may have changed; each goes back with
    /// [`Queues::release`] or [`Queues::hold`].
    pub fn take_unchecked_dependents(&mut self) -> Vec<u64> {
        if !std::mem::take(&mut self.dependents_unchecked) {
            return Vec::new();
        }
        let members = &self.members;
        self.dependent
            .drain(..)
            .filter(|id| members.contains(id))
            .collect()
    }

    /// A dependent whose dependencies are met joins its user's queue, in its place by id.
    pub fn release(&mut self, id: u64, uid: u32) {
        self.push_to_user(id, uid);
    }

    /// A dependent that still waits.
    pub fn hold(&mut self, id: u64) {
        self.dependent.push(id);
    }

    /// The oldest queued job of each user, skipping the jobs that have left.
    pub fn fronts(&mut self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let members = &self.members;
        self.by_user.retain(|_, queue| {
            while queue.front().is_some_and(|id| !members.contains(id)) {
                queue.pop_front();
            }
            !queue.is_empty()
        });
        self.by_user
            .iter()
            .map(|(&uid, queue)| (uid, *queue.front().expect("emptied queues are dropped")))
    }

    /// Takes `uid`'s oldest job, which [`Queues::fronts`] named.
    pub fn pop_front(&mut self, uid: u32) -> Option<u64> {
        let queue = self.by_user.get_mut(&uid)?;
        let id = queue.pop_front()?;
        if queue.is_empty() {
            self.by_user.remove(&uid);
        }
        self.members.remove(&id);
        Some(id)
    }
}
