//! Remaining work of jobs whose run time is estimated (declared, or from the run history), and the
//! order that prefers the least of it without starving anyone.

use cosched_core::{ActiveJob, Context, JobId, Plan};
use std::collections::HashMap;

/// A job that has waited this many times its estimated run time is served before every job that has
/// not, oldest first. See the module doc of `auto` for the slowdown this bounds.
pub const AGING_FACTOR: f64 = 3.0;

/// How far past its estimate a job is still taken to be nearly done: an estimate measured alone on an
/// idle machine is off by a few percent in a real run, and a job ranked as needing as long again just
/// before it ends would wait behind every other job of its CPU.
pub const OVERRUN_TOLERANCE: f64 = 0.5;

/// Service each job has received, in seconds alone on the whole machine.
#[derive(Debug, Default)]
pub struct Service {
    done: HashMap<JobId, f64>,
    since: f64,
}

impl Service {
    /// Credits the jobs of `plan`, enforced since the last call, with the work it let them do:
    /// `speed(job, cpus, full)` seconds alone on `full` CPUs (its width alone, the figure the estimate
    /// is for) per second on `cpus` CPUs.
    pub fn credit(
        &mut self,
        ctx: &Context,
        plan: Option<&Plan>,
        speed: impl Fn(&ActiveJob, usize, usize) -> f64,
    ) {
        let elapsed = ctx.now - self.since;
        self.since = ctx.now;
        self.done.retain(|id, _| ctx.job(*id).is_some());
        let Some(plan) = plan else { return };
        if elapsed <= 0.0 {
            return;
        }
        let machine = ctx.topology.num_cpus();
        for job in ctx.jobs {
            let id = job.id();
            let Some(cpus) = plan.first_cpus(id) else {
                continue;
            };
            let alone = (job.spec.max_threads as usize).clamp(1, machine);
            *self.done.entry(id).or_default() +=
                elapsed * plan.share(id) * speed(job, cpus.len(), alone);
        }
    }

    /// Estimated seconds alone still needed by a job estimated at `runtime` in all. Up to
    /// `OVERRUN_TOLERANCE` past its estimate a job is expected to end by then; a job that outlives that
    /// is expected to need as long again as it has run: a wrong estimate then costs what knowing
    /// nothing would, a doubling search, rather than ranking the job as nearly done forever.
    pub fn remaining(&self, id: JobId, runtime: f64) -> f64 {
        let done = self.done.get(&id).copied().unwrap_or(0.0);
        let tolerated = runtime * (1.0 + OVERRUN_TOLERANCE);
        if done < runtime {
            runtime - done
        } else if done < tolerated {
            tolerated - done
        } else {
            done.max(runtime)
        }
    }
}

/// Priority of a job: urgent jobs (waited `AGING_FACTOR` × their estimate) first in arrival order, then
/// the others by least remaining work. Smaller sorts first.
pub fn priority(now: f64, arrival: f64, runtime: f64, remaining: f64) -> (bool, f64) {
    let urgent = now - arrival >= AGING_FACTOR * runtime;
    (!urgent, if urgent { arrival } else { remaining })
}

/// When a job not yet urgent becomes so.
pub fn urgent_at(arrival: f64, runtime: f64) -> f64 {
    arrival + AGING_FACTOR * runtime
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_far_past_its_estimate_is_not_ranked_nearly_done() {
        let mut service = Service::default();
        service.done.insert(JobId(0), 16.0);
        assert_eq!(service.remaining(JobId(0), 10.0), 16.0);
        service.done.insert(JobId(0), 4.0);
        assert_eq!(service.remaining(JobId(0), 10.0), 6.0);
    }

    #[test]
    fn a_job_just_past_its_estimate_still_ends_before_a_longer_one_starts() {
        let mut service = Service::default();
        service.done.insert(JobId(0), 10.5);
        let overrun = service.remaining(JobId(0), 10.0);
        assert!(overrun < 10.0, "{overrun}: would wait behind a job of 10 s");
        assert!(overrun > 0.0);
    }

    #[test]
    fn an_old_enough_job_goes_before_any_shorter_newcomer() {
        let long = priority(31.0, 0.0, 10.0, 9.0);
        let short = priority(31.0, 30.0, 1.0, 1.0);
        assert!(long < short);
        let long_young = priority(29.0, 0.0, 10.0, 9.0);
        assert!(short < long_young);
    }
}
