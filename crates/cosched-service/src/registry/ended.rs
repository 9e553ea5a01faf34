//! Each user's ended jobs, oldest first, with the journal bytes each takes, so that one user's
//! history stays within `history.jobs_per_user` and `history.bytes_per_user` however fast their jobs
//! end: past either bound, their oldest ended jobs are forgotten first. Root is held to neither.

use super::Registry;
use crate::config::History;
use crate::slowdown::ShortestRuns;
use std::collections::{HashMap, VecDeque};

impl Registry {
    /// Job `id` has just ended (or was restored ended): it is counted for the retention and its
    /// user's bounds, and keeps from now on a summary of its command line only, which is all its
    /// user's oldest ended jobs past the bounds keep: they are forgotten.
    pub(super) fn ended_now(&mut self, id: u64) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let view = &mut job.view;
        self.ended
            .push_back((view.finished.unwrap_or(view.submitted), id));
        self.shortest.record(view);
        view.summarise();
        let uid = view.uid;
        for old in self
            .ended_by_user
            .push(uid, id, job.footprint, &self.bounds)
        {
            self.jobs.remove(&old);
        }
    }

    /// Forgets the jobs that ended before `cutoff` (Unix seconds); how many.
    pub fn forget_ended_before(&mut self, cutoff: f64) -> usize {
        let mut forgotten = 0;
        while let Some(&(t, id)) = self.ended.front() {
            if t >= cutoff {
                break;
            }
            self.ended.pop_front();
            if let Some(uid) = self.job(id).filter(|j| j.state.ended()).map(|j| j.uid) {
                self.jobs.remove(&id);
                self.ended_by_user.remove(uid, id);
                forgotten += 1;
            }
        }
        // The shortest runs outlive the jobs they came from, but not by far more than there are
        // jobs.
        if self.shortest.commands() > 2 * self.jobs.len() + 1024 {
            self.shortest = ShortestRuns::default();
            for job in self.jobs.values() {
                self.shortest.record(&job.view);
            }
        }
        forgotten
    }
}

#[derive(Default)]
pub struct EndedByUser(HashMap<u32, Ended>);

#[derive(Default)]
struct Ended {
    /// (id, bytes), in the order they ended.
    jobs: VecDeque<(u64, u64)>,
    bytes: u64,
}

impl EndedByUser {
    /// Records that `uid`'s job `id`, of `bytes`, has ended; the ids of that user's jobs to forget
    /// now to stay within `bounds`, oldest first.
    pub fn push(&mut self, uid: u32, id: u64, bytes: u64, bounds: &History) -> Vec<u64> {
        if uid == 0 {
            return Vec::new();
        }
        let ended = self.0.entry(uid).or_default();
        ended.jobs.push_back((id, bytes));
        ended.bytes += bytes;
        let mut forget = Vec::new();
        while ended.jobs.len() > bounds.jobs_per_user || ended.bytes > bounds.bytes_per_user {
            let Some((old, old_bytes)) = ended.jobs.pop_front() else {
                break;
            };
            ended.bytes -= old_bytes;
            forget.push(old);
        }
        forget
    }

    /// Forgets `uid`'s job `id`, forgotten for another reason (its retention passed).
    pub fn remove(&mut self, uid: u32, id: u64) {
        let Some(ended) = self.0.get_mut(&uid) else {
            return;
        };
        // Jobs are forgotten by age, so it is nearly always the oldest.
        if let Some(at) = ended.jobs.iter().position(|&(j, _)| j == id) {
            let (_, bytes) = ended.jobs.remove(at).expect("found");
            ended.bytes -= bytes;
        }
        if ended.jobs.is_empty() {
            self.0.remove(&uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ShareTable;
    use crate::protocol::{JobView, Submission, ENDED_COMMAND_BYTES};
    use crate::registry::Tracked;

    #[test]
    fn an_ended_job_keeps_a_summary_of_its_command_and_a_users_oldest_go_past_the_bounds() {
        let bounds = History {
            jobs_per_user: 3,
            ..History::default()
        };
        let mut registry =
            Registry::new("eq".into(), 1, ShareTable::default()).with_history_bounds(bounds);
        let long = "x".repeat(200_000);
        for _ in 0..5 {
            let id = registry.next_id();
            let mut submission = Submission::of("/missing");
            submission.command.push(long.clone());
            let view = JobView::queued(id, 1000, 1.0, &submission, "o".into(), "e".into());
            registry.enqueue(Tracked::new(view, 1000, Some(submission), None));
            registry.take_incoming(10, 10);
            registry.finish(id, Some(2.0), false, Some(127), None);
        }
        let ids: Vec<u64> = registry.jobs().map(|j| j.id).collect();
        assert_eq!(ids, [3, 4, 5]);
        let command = &registry.job(5).unwrap().command;
        let bytes: usize = command.iter().map(String::len).sum();
        assert!(
            bytes <= ENDED_COMMAND_BYTES + "…".len(),
            "{bytes} bytes kept"
        );
        assert_eq!(command[0], "/missing");
        assert!(command[1].ends_with('…'));
        assert_eq!(registry.next_id(), 6, "ids of forgotten jobs stay used");
    }

    #[test]
    fn a_users_oldest_ended_jobs_are_forgotten_past_either_bound_and_roots_never() {
        let bounds = History {
            jobs_per_user: 3,
            bytes_per_user: 1000,
            ..History::default()
        };
        let mut ended = EndedByUser::default();
        for id in 1..=3 {
            assert!(ended.push(1000, id, 100, &bounds).is_empty());
        }
        assert_eq!(ended.push(1000, 4, 100, &bounds), [1]);
        // Another user's history is apart.
        assert!(ended.push(1001, 5, 100, &bounds).is_empty());
        assert_eq!(ended.push(1000, 6, 850, &bounds), [2, 3]);
        ended.remove(1000, 4);
        assert!(ended.push(1000, 7, 150, &bounds).is_empty());
        assert_eq!(ended.push(1000, 8, 1, &bounds), [6]);
        for id in 10..20 {
            assert!(ended.push(0, id, 1 << 30, &bounds).is_empty());
        }
    }
}
