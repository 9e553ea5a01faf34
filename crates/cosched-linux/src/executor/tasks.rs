//! Jobs made of several attached process trees: the tasks of one Slurm step on this node, each
//! attached on its own by the step's TaskProlog, run as one job (one gang, one partition). A task
//! that joins a job waiting to start joins it when it starts; the job ends when its last task does.

use super::source::Adopt;
use super::{Executor, State};
use crate::Error;
use cosched_core::JobId;

impl Executor<'_> {
    /// Takes the tasks the source says joined a job, and makes each part of its job.
    pub(super) fn join_tasks(&mut self) -> Result<(), Error> {
        for (id, task) in self.source.take_joined() {
            let Some(job) = self.jobs.get_mut(&id) else {
                eprintln!(
                    "cosched: process {} joined job {}, which has ended; it runs unscheduled",
                    task.pid, id.0
                );
                continue;
            };
            job.joined.push(task);
            if matches!(job.state, State::Running(_)) {
                self.enclose_joined(id, task)?;
            }
        }
        Ok(())
    }

    /// Puts the joined `task` under job `id`'s control, on the CPUs the current slot gives the job.
    pub(super) fn enclose_joined(&mut self, id: JobId, task: Adopt) -> Result<(), Error> {
        let Some(job) = self.jobs.get_mut(&id) else {
            return Ok(());
        };
        let State::Running(r) = &mut job.state else {
            return Ok(());
        };
        let joined = match task.is_alive() {
            true => self.enforcer.join(&mut r.control, task.pid),
            false => Err(std::io::Error::other("it has ended")),
        };
        if let Err(e) = joined {
            // A task that ends as it joins ends its part of the job; the job goes on.
            eprintln!(
                "cosched: process {} could not join job {}: {e}",
                task.pid, id.0
            );
            job.joined.retain(|t| *t != task);
            return Ok(());
        }
        // The job's allocation may have grown by the task's CPUs.
        let Some(cpus) = self.plan.cpus_in_slot(self.slot, id) else {
            return Ok(());
        };
        match self.enforcer.place(&mut r.control, cpus) {
            Ok(()) => Ok(()),
            Err(e) => self.end_unenforceable(id, e),
        }
    }

    /// Whether an attached job has ended: none of its tasks still runs. Forgets the tasks that ended,
    /// and makes a task that still runs the job's main process when the main one ended first.
    pub(super) fn attached_job_ended(&mut self, id: JobId) -> bool {
        let Some(job) = self.jobs.get_mut(&id) else {
            return true;
        };
        let State::Running(r) = &mut job.state else {
            return false;
        };
        job.joined.retain(|task| task.is_alive());
        r.control.joined = job.joined.iter().map(|task| task.pid).collect();
        if r.adopted.is_some_and(|main| main.is_alive()) {
            return false;
        }
        if job.joined.is_empty() {
            return true;
        }
        let next = job.joined.remove(0);
        r.control.joined.retain(|&pid| pid != next.pid);
        if let crate::enforce::Members::Tree(_, uid) = r.control.members {
            r.control.members = crate::enforce::Members::Tree(next.pid, uid);
        }
        r.pid = next.pid;
        r.adopted = Some(next);
        false
    }
}
