//! How jobs end in a real run: reaped when their main process exits, killed when cancelled or
//! past a limit, signalled when the source asks, and finished into the trace and the policy.

use super::shutdown::{self, Usage};
use super::{running_mut, Executor, Running, State, UNKNOWN_STATUS};
use crate::measure::Reading;
use crate::Error;
use cosched_core::trace::{ExitStatus, Record};
use cosched_core::{Event, JobId};
use nix::sys::signal::Signal;

impl Executor<'_> {
    pub(super) fn reap_exited(&mut self) -> Result<(), Error> {
        for id in self.running_ids() {
            let Some(r) = running_mut(&mut self.jobs, id) else {
                continue;
            };
            let (pid, adopted) = (r.pid, r.adopted);
            let ended = match adopted {
                None => self.children.try_wait(pid),
                Some(_) => self
                    .attached_job_ended(id)
                    .then_some((UNKNOWN_STATUS, Usage::default())),
            };
            let Some((status, usage)) = ended else {
                continue;
            };
            self.finish(id, status, usage, None)?;
            // Each end costs a cgroup's removal and the next plan: a slot switch due meanwhile
            // goes before the next end.
            self.switch_slot_if_due()?;
        }
        Ok(())
    }

    /// Ends arrived job `id` that never ran (it could not start, or was cancelled): a failed `finish`.
    pub(super) fn end_unstarted(&mut self, id: JobId, error: String) -> Result<(), Error> {
        let Some(mut job) = self.jobs.remove(&id) else {
            return Ok(());
        };
        job.outcome.error = Some(error.clone());
        job.outcome.finished = Some(self.now());
        self.active.retain(|a| a.spec.id != id);
        self.emit(Record::Finish {
            job: id,
            status: ExitStatus::Failed,
            exit_code: None,
            error: Some(error),
        })?;
        self.failed += 1;
        self.source.finished(job.outcome);
        self.report_progress(true);
        self.decide(Event::Finished { job: id })
    }

    /// Sends the signals the source asked for to its running jobs; one that ended meanwhile is
    /// skipped. A signal asks a job to end and the source kills it later if it does not, so one
    /// that cannot be sent is left to that kill. A job frozen between its slots is thawed and kept
    /// so: frozen, it would act on the signal only at its next slot, perhaps after the kill.
    pub(super) fn signal_asked(&mut self) {
        for (id, signal) in self.source.take_signals() {
            if let Some(r) = running_mut(&mut self.jobs, id) {
                r.asked_to_end = true;
                let _ = self.enforcer.set_frozen(&mut r.control, false);
                let _ = self.enforcer.signal(&r.control, signal);
            }
        }
    }

    /// Stops the jobs the source cancelled: an arrived one never starts, a running one is killed.
    pub(super) fn cancel_asked(&mut self) -> Result<(), Error> {
        for id in self.source.take_cancelled() {
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            if let State::Arrived = job.state {
                self.end_unstarted(id, "cancelled before it started".into())?;
                continue;
            }
            let (wait_status, usage) = self.kill_running(id);
            self.finish(id, wait_status, usage, Some("cancelled".into()))?;
        }
        Ok(())
    }

    /// Kills running job `id` and gives its wait status and usage (for an attached job, whose
    /// status only its parent learns, that of a SIGKILL).
    pub(super) fn kill_running(&mut self, id: JobId) -> (libc::c_int, Usage) {
        let killed = (libc::SIGKILL, Usage::default());
        let Some(r) = running_mut(&mut self.jobs, id) else {
            return killed;
        };
        // A frozen process does not die of SIGKILL until it is thawed.
        let _ = self.enforcer.set_frozen(&mut r.control, false);
        let _ = self.enforcer.signal(&r.control, Signal::SIGKILL);
        match r.adopted {
            // Our child; the wait lasts only the instant the kill takes.
            None => self.children.wait(r.pid).unwrap_or(killed),
            Some(_) => killed,
        }
    }

    /// A plan that cannot be enforced on job `id` (a thread refuses its CPUs, a cgroup its change)
    /// is that job's failure, never the run's: the job is ended as a cancel ends it, with the
    /// reason, and the other jobs go on.
    pub(super) fn end_unenforceable(
        &mut self,
        id: JobId,
        source: std::io::Error,
    ) -> Result<(), Error> {
        let reason = format!("cosched could not enforce its plan on the job: {source}");
        eprintln!("cosched: job {}: {reason}; the job is ended", id.0);
        let (wait_status, usage) = self.kill_running(id);
        self.finish(id, wait_status, usage, Some(reason))
    }

    /// Records the end of job `id`, whose main process ended with wait status `status`; `stopped` says
    /// why the run stopped it, if it did.
    pub(super) fn finish(
        &mut self,
        id: JobId,
        status: libc::c_int,
        usage: Usage,
        stopped: Option<String>,
    ) -> Result<(), Error> {
        let cpu_seconds = usage.user_seconds + usage.system_seconds;
        let now = self.now();
        self.account_held(id, now);
        let Some(job) = self.jobs.remove(&id) else {
            return Ok(());
        };
        let State::Running(r) = job.state else {
            return Ok(());
        };
        let Running {
            control,
            page,
            mark,
            held_total,
            adopted,
            peak,
            ..
        } = *r;
        let memory = self.enforcer.memory_use(&control);
        self.enforcer.release(control);
        let final_reading = Reading {
            t: now,
            cpu_seconds: cpu_seconds.max(mark.cpu_seconds),
            progress: page.counters().progress(),
            regions_started: page.counters().regions_started,
            held: held_total,
        };
        drop(page);
        if let Some(sample) = mark.sample_until(&final_reading, id) {
            self.emit(Record::Sample(sample))?;
        }
        let signal = (!libc::WIFEXITED(status)).then(|| libc::WTERMSIG(status));
        let (mut status, mut exit_code, mut error) = shutdown::describe_wait_status(status);
        // Ended badly with processes killed for its memory limit: that is why it ended. How an
        // adopted job ended is known only to its parent, so for one the kills alone tell.
        let oom_killed = memory.oom_kills > 0 && (status != ExitStatus::Ok || adopted.is_some());
        if oom_killed {
            status = ExitStatus::Failed;
            let how = error.map(|e| format!("; {e}")).unwrap_or_default();
            error = Some(format!(
                "out of memory: the kernel killed {} of its processes for passing the job's memory \
                 limit{how}",
                memory.oom_kills,
            ));
        }
        if adopted.is_some() && stopped.is_none() {
            // Not our child: it ended, but how is known only to its parent.
            exit_code = None;
        }
        let mut outcome = job.outcome;
        outcome.finished = Some(now);
        outcome.status = status.clone();
        outcome.exit_code = exit_code;
        // The status of an adopted job's main process is its parent's to learn, unless our kill
        // ended it.
        outcome.signal = signal.filter(|_| adopted.is_none() || stopped.is_some());
        outcome.error = stopped.or(error.clone());
        outcome.cpu_seconds = cpu_seconds;
        outcome.user_seconds = usage.user_seconds;
        outcome.system_seconds = usage.system_seconds;
        outcome.peak_memory = memory.peak.or(peak.at_end(usage.max_rss));
        outcome.oom_killed = oom_killed;
        if status == ExitStatus::Ok {
            self.done += 1;
        } else {
            self.failed += 1;
        }
        self.source.finished(outcome);
        self.active.retain(|a| a.spec.id != id);
        self.emit(Record::Finish {
            job: id,
            status,
            exit_code,
            error,
        })?;
        self.report_progress(true);
        self.decide(Event::Finished { job: id })
    }
}
