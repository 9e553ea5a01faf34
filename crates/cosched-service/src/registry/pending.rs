//! Why a queued job waits: held, its begin, its dependencies, its array's limit, its user's
//! running jobs, memory.

use super::Registry;
use crate::protocol::{After, Dependency, JobState};
use cosched_core::memory::admits;

/// Whether a queued job may be taken, and if not, why.
pub(super) enum Gate {
    Go,
    /// Held by its user (`--hold`) until released.
    Held,
    /// Its `--begin`, a Unix time, has not come.
    Begin(f64),
    /// A job it depends on has yet to end (or start).
    Dependency,
    /// Its dependencies are met from this Unix time on (`after:ID+MINUTES`).
    Later(f64),
    /// Its dependencies can never be met, for this reason.
    Never(String),
}

/// Where one dependency stands.
enum Met {
    Yes,
    Waiting,
    /// Met from this Unix time on.
    Until(f64),
    Never(String),
}

impl Registry {
    /// Why queued job `id` has not started: held, before its begin, waiting for its dependencies
    /// (or never to have them met), held back for its array's limit or its user's running jobs
    /// (`running_per_user`), else waiting for the policy to give it CPUs.
    pub fn pending_reason(&self, id: u64, running_per_user: usize) -> Option<&'static str> {
        let job = self.jobs.get(&id)?;
        if job.view.state != JobState::Queued {
            return None;
        }
        match self.gate(id) {
            Gate::Held => return Some("job_held_user"),
            Gate::Begin(_) => return Some("begin_time"),
            Gate::Dependency | Gate::Later(_) => return Some("dependency"),
            Gate::Never(_) => return Some("dependency_never_satisfied"),
            Gate::Go => {}
        }
        let limit = job.submission.as_ref().and_then(|s| s.array?.limit);
        let array = job.view.array_id;
        if limit.is_some_and(|limit| self.running_in_array(job.view.uid, array) >= limit as usize) {
            return Some("array_task_limit");
        }
        let held = job.submission.is_some()
            && job.adopt.is_none()
            && job.view.uid != 0
            && self.load_of(job.view.uid).running >= running_per_user;
        // Once handed to the executor, its memory is counted in use.
        let fits = job.submission.is_none()
            || admits(self.memory_for_jobs, self.memory_in_use, job.view.mem);
        Some(match (held, fits) {
            (true, _) => "user_limit",
            (false, false) => "memory",
            (false, true) => "resources",
        })
    }

    /// How many jobs of `uid`'s array `array` run.
    fn running_in_array(&self, uid: u32, array: Option<u64>) -> usize {
        self.running_of.get(&uid).map_or(0, |ids| {
            ids.iter()
                .filter(|id| self.jobs[id].view.array_id == array)
                .count()
        })
    }

    /// Whether queued job `id` may be taken: not held, its begin come, its dependencies met.
    pub(super) fn gate(&self, id: u64) -> Gate {
        let Some(job) = self.jobs.get(&id) else {
            return Gate::Go;
        };
        let Some(submission) = job.submission.as_ref() else {
            return Gate::Go;
        };
        if submission.hold {
            return Gate::Held;
        }
        if let Some(begin) = submission.begin.filter(|&b| b > self.clock) {
            return Gate::Begin(begin);
        }
        if submission.singleton && self.earlier_namesake(id) {
            return Gate::Dependency;
        }
        let mut waiting = false;
        let mut until = f64::INFINITY;
        let mut never = Vec::new();
        for dependency in &submission.dependency {
            match self.met(id, dependency) {
                // One met is enough with `?`.
                Met::Yes if submission.dependency_any => return Gate::Go,
                Met::Yes => {}
                Met::Waiting => waiting = true,
                Met::Until(t) => until = until.min(t),
                Met::Never(why) => never.push(why),
            }
        }
        let all_never = never.len() == submission.dependency.len();
        match (waiting, never.is_empty()) {
            (_, false) if !submission.dependency_any || all_never => Gate::Never(never.join("; ")),
            (true, _) => Gate::Dependency,
            _ if until.is_finite() => Gate::Later(until),
            _ => Gate::Go,
        }
    }

    /// Whether a job of `id`'s user with its name, submitted before it, has yet to end.
    fn earlier_namesake(&self, id: u64) -> bool {
        let view = &self.jobs[&id].view;
        self.jobs.range(..id).any(|(_, other)| {
            let other = &other.view;
            other.uid == view.uid && other.name == view.name && !other.state.ended()
        })
    }

    /// Where `dependency` of queued job `id` stands.
    fn met(&self, id: u64, dependency: &Dependency) -> Met {
        let target = match dependency.after {
            After::Corr => {
                let index = self.jobs[&id].view.array_index;
                let element = self.jobs.range(dependency.id..).find(|(_, j)| {
                    j.view.array_id == Some(dependency.id) && j.view.array_index == index
                });
                match element {
                    Some((_, job)) => job,
                    None => return Met::Yes,
                }
            }
            _ => match self.jobs.get(&dependency.id) {
                Some(job) => job,
                None => return Met::Never(format!("{dependency}: job forgotten")),
            },
        };
        let view = &target.view;
        if dependency.after == After::Start && (view.started.is_some() || view.state.ended()) {
            // From its start, or from its end for one cancelled before it started.
            let from = view.started.or(view.finished).unwrap_or(self.clock);
            let ready = from + dependency.minutes as f64 * 60.0;
            return match dependency.minutes > 0 && ready > self.clock {
                true => Met::Until(ready),
                false => Met::Yes,
            };
        }
        if !view.state.ended() || view.finished.is_none() {
            return Met::Waiting;
        }
        match dependency.met_by(view.state) {
            true => Met::Yes,
            false => {
                let state = format!("{:?}", view.state).to_lowercase();
                Met::Never(format!(
                    "dependency {dependency} never satisfied: job {} ended {state}",
                    view.id
                ))
            }
        }
    }
}
