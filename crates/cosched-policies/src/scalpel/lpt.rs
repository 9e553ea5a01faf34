//! Scalpel's two-level LPT scheduling (Algorithm 2, §V).
//!
//! First level, groups: full groups (C tasks) before partial ones, and within each kind the longest
//! group first, a group being as long as its longest task (§V-A). Second level, tasks: within a group
//! the longest task first (§V-B). Every processor (LLC domain) has a buffer: a core that frees up takes
//! the next task of its processor's buffer, and when the buffer is empty it takes the next group, runs
//! its first task and buffers the rest for the same processor (§V-C). A processor with no task running
//! and nothing buffered takes a whole group at once, which is how the first P groups are placed
//! (Algorithm 2, line 10).

use std::collections::VecDeque;

/// Groups ordered for dispatch, and the per-processor buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatcher<T> {
    queue: VecDeque<Vec<T>>,
    buffers: Vec<VecDeque<T>>,
}

impl<T: Copy> Dispatcher<T> {
    /// Orders `groups` (each task paired with its run time) for `processors` processors of `cores`
    /// cores each.
    pub fn new(groups: Vec<Vec<(T, f64)>>, processors: usize, cores: usize) -> Dispatcher<T> {
        let mut groups = groups;
        for g in &mut groups {
            g.sort_by(|a, b| b.1.total_cmp(&a.1));
        }
        // Full before partial, then by the group's longest task (its first, after the sort above).
        let longest = |g: &Vec<(T, f64)>| g.first().map_or(0.0, |t| t.1);
        groups.sort_by(|a, b| {
            (b.len() >= cores)
                .cmp(&(a.len() >= cores))
                .then(longest(b).total_cmp(&longest(a)))
        });
        Dispatcher {
            queue: groups
                .into_iter()
                .map(|g| g.into_iter().map(|(t, _)| t).collect())
                .collect(),
            buffers: vec![VecDeque::new(); processors],
        }
    }

    /// Groups not yet started, in dispatch order.
    pub fn queued(&self) -> impl Iterator<Item = &Vec<T>> {
        self.queue.iter()
    }

    pub fn buffered(&self, processor: usize) -> impl Iterator<Item = &T> {
        self.buffers[processor].iter()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.buffers.iter().all(VecDeque::is_empty)
    }

    /// Tasks for the free cores of every processor: `free[p]` cores are free on processor `p`, and
    /// `idle[p]` says whether it runs nothing. Returns, per processor, the tasks to start, in order.
    pub fn dispatch(&mut self, free: &[usize], idle: &[bool]) -> Vec<Vec<T>> {
        let mut starts: Vec<Vec<T>> = vec![Vec::new(); free.len()];
        let mut left = free.to_vec();
        for p in 0..free.len() {
            if idle[p] && self.buffers[p].is_empty() && left[p] > 0 {
                if let Some(group) = self.queue.pop_front() {
                    self.buffers[p].extend(group);
                }
            }
        }
        for p in 0..free.len() {
            while left[p] > 0 {
                if self.buffers[p].is_empty() {
                    match self.queue.pop_front() {
                        Some(group) => self.buffers[p].extend(group),
                        None => break,
                    }
                }
                let task = self.buffers[p].pop_front().expect("filled above");
                starts[p].push(task);
                left[p] -= 1;
            }
        }
        starts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(tasks: &[(u32, f64)]) -> Vec<(u32, f64)> {
        tasks.to_vec()
    }

    #[test]
    fn full_groups_go_first_then_longest_group_then_longest_task() {
        let groups = vec![
            timed(&[(1, 90.0), (2, 10.0)]), // partial, longest task overall
            timed(&[(3, 20.0), (4, 30.0), (5, 5.0), (6, 1.0)]), // full, 30
            timed(&[(7, 40.0), (8, 2.0), (9, 3.0), (10, 4.0)]), // full, 40
            timed(&[(11, 50.0), (12, 1.0), (13, 1.0)]), // partial, 50
        ];
        let d = Dispatcher::new(groups, 2, 4);
        let order: Vec<Vec<u32>> = d.queued().cloned().collect();
        assert_eq!(
            order,
            vec![
                vec![7, 10, 9, 8],
                vec![4, 3, 5, 6],
                vec![1, 2],
                vec![11, 12, 13]
            ]
        );
    }

    #[test]
    fn idle_processors_take_whole_groups_and_free_cores_use_their_buffer() {
        let groups = vec![
            timed(&[(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0)]),
            timed(&[(5, 9.0), (6, 8.0), (7, 7.0), (8, 6.0)]),
            timed(&[(9, 5.0), (10, 4.0), (11, 3.0), (12, 2.0)]),
            timed(&[(13, 1.0), (14, 1.0), (15, 1.0)]),
        ];
        let mut d = Dispatcher::new(groups, 2, 4);
        let first = d.dispatch(&[4, 4], &[true, true]);
        assert_eq!(first, vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
        // One core of processor 1 frees: it takes the next group's longest task and buffers the rest.
        let next = d.dispatch(&[0, 1], &[false, false]);
        assert_eq!(next, vec![vec![], vec![9]]);
        assert_eq!(d.buffered(1).copied().collect::<Vec<_>>(), vec![10, 11, 12]);
        // A core of processor 0 does not steal processor 1's buffer: it opens the next group.
        let next = d.dispatch(&[1, 1], &[false, false]);
        assert_eq!(next, vec![vec![13], vec![10]]);
        assert_eq!(d.buffered(0).copied().collect::<Vec<_>>(), vec![14, 15]);
    }

    #[test]
    fn spare_cores_of_a_partial_group_open_the_next_group() {
        // 13 tasks as 4, 4, 3, 2 on 2 processors: both full groups start, nothing else.
        let groups = vec![
            timed(&[(1, 5.0), (2, 5.0), (3, 5.0)]),
            timed(&[(4, 9.0), (5, 9.0)]),
            timed(&[(6, 1.0), (7, 1.0), (8, 1.0), (9, 1.0)]),
            timed(&[(10, 2.0), (11, 2.0), (12, 2.0), (13, 2.0)]),
        ];
        let mut d = Dispatcher::new(groups, 2, 4);
        let first = d.dispatch(&[4, 4], &[true, true]);
        assert_eq!(first, vec![vec![10, 11, 12, 13], vec![6, 7, 8, 9]]);
        // When processor 0 empties, it takes the longest partial group whole; its spare cores then
        // open the next group.
        let next = d.dispatch(&[4, 0], &[true, false]);
        assert_eq!(next, vec![vec![4, 5, 1, 2], vec![]]);
        assert!(!d.is_empty());
    }
}
