//! The active jobs as the policy sees them: a slice in arrival order that stays cheap to edit when a
//! long queue waits behind the running jobs.

use cosched_core::ActiveJob;

/// Jobs in arrival order, each with its arrival sequence number (the search key). Removing a job
/// shifts whichever side of it is shorter: finishing jobs are mostly the early, running ones, so a queue
/// of waiting jobs behind them is not moved. The front side shifts into a dead prefix that is dropped
/// once it is half of the buffer.
#[derive(Default)]
pub(super) struct ActiveList {
    jobs: Vec<ActiveJob>,
    order: Vec<u64>,
    start: usize,
}

impl ActiveList {
    pub fn as_slice(&self) -> &[ActiveJob] {
        &self.jobs[self.start..]
    }

    pub fn len(&self) -> usize {
        self.jobs.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a job; `order` must exceed every order pushed before.
    pub fn push(&mut self, job: ActiveJob, order: u64) {
        debug_assert!(self.order.last().is_none_or(|&last| last < order));
        self.jobs.push(job);
        self.order.push(order);
    }

    fn position(&self, order: u64) -> Option<usize> {
        self.order[self.start..]
            .binary_search(&order)
            .ok()
            .map(|i| i + self.start)
    }

    pub fn get_mut(&mut self, order: u64) -> Option<&mut ActiveJob> {
        let i = self.position(order)?;
        Some(&mut self.jobs[i])
    }

    pub fn remove(&mut self, order: u64) {
        let Some(i) = self.position(order) else {
            return;
        };
        if i - self.start < self.jobs.len() - i {
            self.jobs[self.start..=i].rotate_right(1);
            self.order[self.start..=i].rotate_right(1);
            self.start += 1;
            if self.start > 64 && 2 * self.start > self.jobs.len() {
                self.jobs.drain(..self.start);
                self.order.drain(..self.start);
                self.start = 0;
            }
        } else {
            self.jobs[i..].rotate_left(1);
            self.order[i..].rotate_left(1);
            self.jobs.pop();
            self.order.pop();
        }
    }

    /// Empties the list, returning the jobs in arrival order.
    pub fn take_all(&mut self) -> Vec<ActiveJob> {
        let jobs = self.jobs.split_off(self.start);
        *self = ActiveList::default();
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::JobKind;
    use proptest::prelude::*;

    fn job(id: u32) -> ActiveJob {
        cosched_core::test_util::job(id)
            .kind(JobKind::Rigid)
            .waiting()
    }

    proptest! {
        #[test]
        fn removals_keep_arrival_order(ops in prop::collection::vec((any::<bool>(), 0u32..400), 0..600)) {
            let mut list = ActiveList::default();
            let mut model: Vec<u32> = Vec::new();
            let mut next = 0;
            for (add, pick) in ops {
                if add || model.is_empty() {
                    list.push(job(next), u64::from(next));
                    model.push(next);
                    next += 1;
                } else {
                    let id = model.remove(pick as usize % model.len());
                    list.remove(u64::from(id));
                }
                let ids: Vec<u32> = list.as_slice().iter().map(|j| j.spec.id.0).collect();
                prop_assert_eq!(&ids, &model);
            }
        }
    }
}
