//! A job's slowdown so far, from the daemon's own history: its elapsed time over the shortest run of
//! the same command line that ended well. That run may itself have shared the machine, so the figure
//! errs low, never high; a command never seen to finish has none.

use crate::protocol::{JobState, JobView};
use std::collections::HashMap;

/// The shortest successful run time of each command line among `views`. Attached processes are left
/// out: their time counts from the attach, not from their start.
pub fn shortest_runs<'a>(views: impl Iterator<Item = &'a JobView>) -> HashMap<&'a [String], f64> {
    let mut shortest: HashMap<&[String], f64> = HashMap::new();
    for view in views.filter(|v| v.state == JobState::Done && !v.attached) {
        if let (Some(start), Some(end)) = (view.started, view.finished) {
            let run = end - start;
            if run > 0.0 {
                shortest
                    .entry(view.command.as_slice())
                    .and_modify(|s| *s = s.min(run))
                    .or_insert(run);
            }
        }
    }
    shortest
}

/// `view` with its slowdown so far at `now`, where `shortest` knows its command.
pub fn with_slowdown(mut view: JobView, shortest: &HashMap<&[String], f64>, now: f64) -> JobView {
    view.slowdown = view.started.and_then(|start| {
        let run = shortest.get(view.command.as_slice())?;
        Some((view.finished.unwrap_or(now) - start) / run)
    });
    view
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
        let shortest = shortest_runs(history.iter());
        let at = |id: usize| with_slowdown(history[id].clone(), &shortest, 115.0).slowdown;
        assert_eq!(at(3), Some(1.5));
        assert_eq!(at(0), Some(1.2));
        assert_eq!(at(4), None, "b never finished");
        assert_eq!(at(5), None, "not started");
    }
}
