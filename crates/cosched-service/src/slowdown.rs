//! A job's slowdown so far, from the daemon's own history: its elapsed time over the shortest run of
//! the same command line that ended well. That run may itself have shared the machine, so the figure
//! errs low, never high; a command never seen to finish has none.

use crate::protocol::{JobState, JobView};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The shortest successful run time of each command line seen, kept up to date as jobs end so that
/// no request has to go through the history. Keyed by a hash of the command line, so that long
/// command lines cost no memory once their jobs have ended.
#[derive(Debug, Default)]
pub struct ShortestRuns(HashMap<u64, f64>);

fn key(command: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    command.hash(&mut hasher);
    hasher.finish()
}

impl ShortestRuns {
    /// Counts `view` if it is a run that ended well. Attached processes are left out: their time
    /// counts from the attach, not from their start.
    pub fn record(&mut self, view: &JobView) {
        if view.state != JobState::Done || view.attached {
            return;
        }
        if let (Some(start), Some(end)) = (view.started, view.finished) {
            let run = end - start;
            if run > 0.0 {
                self.0
                    .entry(key(&view.command))
                    .and_modify(|s| *s = s.min(run))
                    .or_insert(run);
            }
        }
    }

    /// `view`'s slowdown so far at `now`, where its command was seen to end well.
    pub fn slowdown(&self, view: &JobView, now: f64) -> Option<f64> {
        let start = view.started?;
        let run = self.0.get(&key(&view.command))?;
        Some((view.finished.unwrap_or(now) - start) / run)
    }

    /// Command lines known.
    pub fn commands(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Submission;

    fn view(id: u64, command: &str, state: JobState, run: Option<(f64, Option<f64>)>) -> JobView {
        let submission = Submission::of(command);
        let mut view = JobView::queued(id, 0, 0.0, &submission, "o".into(), "e".into());
        view.state = state;
        view.started = run.map(|(start, _)| start);
        view.finished = run.and_then(|(_, end)| end);
        view
    }

    #[test]
    fn elapsed_time_is_divided_by_the_shortest_good_run_of_the_same_command() {
        let history = [
            view(1, "a", JobState::Done, Some((0.0, Some(12.0)))),
            view(2, "a", JobState::Done, Some((20.0, Some(30.0)))),
            // A failed or cancelled run says nothing about how long the command takes.
            view(3, "a", JobState::Failed, Some((40.0, Some(41.0)))),
            view(4, "a", JobState::Running, Some((100.0, None))),
            view(5, "b", JobState::Running, Some((100.0, None))),
            view(6, "a", JobState::Queued, None),
        ];
        let mut shortest = ShortestRuns::default();
        history.iter().for_each(|view| shortest.record(view));
        let at = |id: usize| shortest.slowdown(&history[id], 115.0);
        assert_eq!(at(3), Some(1.5));
        assert_eq!(at(0), Some(1.2));
        assert_eq!(at(4), None, "b never finished");
        assert_eq!(at(5), None, "not started");
    }
}
