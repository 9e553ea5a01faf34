//! The daemon's jobs as clients see them, and what the executor has yet to take: submissions,
//! processes that joined a job, cancellations, a policy switch. A plain data structure: the caller
//! holds the lock (`state.rs`) and journals each change (`requests.rs`, `source.rs`).

use crate::error::ServiceError;
use crate::protocol::{JobState, JobView, Submission};
use cosched_core::Policy;
use cosched_linux::Adopt;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

/// Who sent a request, from the socket's SO_PEERCRED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// A job of the registry, with what the executor needs until it has taken it.
pub struct Tracked {
    view: JobView,
    gid: u32,
    /// Until the executor takes the job.
    submission: Option<Submission>,
    /// A job an earlier daemon started, still running: adopted instead of started.
    adopt: Option<Adopt>,
}

impl Tracked {
    /// `submission`: what the executor is to run (or, with `adopt`, take over); `None` for a job
    /// the executor already has or that has ended.
    pub fn new(
        view: JobView,
        gid: u32,
        submission: Option<Submission>,
        adopt: Option<Adopt>,
    ) -> Tracked {
        Tracked {
            view,
            gid,
            submission,
            adopt,
        }
    }
}

/// A job handed to the executor.
pub struct Incoming {
    pub id: u64,
    pub uid: u32,
    pub gid: u32,
    pub submission: Submission,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub adopt: Option<Adopt>,
}

/// What cancelling a job did.
pub enum Cancelled {
    /// The executor has it: it is to kill it.
    Running,
    /// The executor never saw it: it has ended here, and these processes it would have adopted (a job
    /// an earlier daemon started, an attached process, its step's tasks) are to be killed.
    BeforeStart { processes: Vec<Adopt> },
}

pub struct Registry {
    jobs: BTreeMap<u64, Tracked>,
    next_id: u64,
    /// Submitted, not yet handed to the executor, in order.
    incoming: VecDeque<u64>,
    /// Running jobs to kill.
    cancelled: Vec<u64>,
    /// Processes that joined a job (further tasks of its Slurm step), not yet handed to the executor.
    joins: Vec<(u64, Adopt)>,
    /// The policy's name, as the last `--policy` or `cosched policy P` gave it.
    policy: String,
    /// A policy to take over, not yet handed to the executor.
    policy_switch: Option<Box<dyn Policy>>,
}

impl Registry {
    pub fn new(policy: String) -> Registry {
        Registry {
            jobs: BTreeMap::new(),
            next_id: 0,
            incoming: VecDeque::new(),
            cancelled: Vec::new(),
            joins: Vec::new(),
            policy,
            policy_switch: None,
        }
    }

    /// The id the next job gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Adds a new job under [`Registry::next_id`] and queues it for the executor.
    pub fn enqueue(&mut self, job: Tracked) {
        let id = job.view.id;
        debug_assert_eq!(id, self.next_id, "jobs are enqueued under the next id");
        self.next_id = id + 1;
        self.jobs.insert(id, job);
        self.incoming.push_back(id);
    }

    /// Adds a job the journal gave back; one with a submission queues for the executor again, with
    /// `joined`, the further tasks of its step that still run.
    pub fn restore(&mut self, job: Tracked, joined: Vec<Adopt>) {
        let id = job.view.id;
        self.next_id = self.next_id.max(id + 1);
        if job.submission.is_some() {
            self.incoming.push_back(id);
            self.joins.extend(joined.into_iter().map(|task| (id, task)));
        }
        self.jobs.insert(id, job);
    }

    pub fn job(&self, id: u64) -> Option<&JobView> {
        self.jobs.get(&id).map(|j| &j.view)
    }

    /// Every job, by id.
    pub fn jobs(&self) -> impl Iterator<Item = &JobView> {
        self.jobs.values().map(|j| &j.view)
    }

    /// Jobs waiting for the executor: (running jobs to adopt, jobs to start).
    pub fn waiting(&self) -> (usize, usize) {
        let adopted = self
            .incoming
            .iter()
            .filter(|id| self.jobs[id].adopt.is_some())
            .count();
        (adopted, self.incoming.len() - adopted)
    }

    /// Makes `task` part of job `id`, as another task of its Slurm step.
    pub fn join(&mut self, id: u64, task: Adopt) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.view.tasks.push(task.pid as u32);
            self.joins.push((id, task));
        }
    }

    /// Hands every queued job to the executor, in order.
    pub fn take_incoming(&mut self) -> Vec<Incoming> {
        let ids: Vec<u64> = self.incoming.drain(..).collect();
        let mut taken = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let Some(submission) = job.submission.take() else {
                continue;
            };
            taken.push(Incoming {
                id,
                uid: job.view.uid,
                gid: job.gid,
                submission,
                stdout: job.view.stdout.clone(),
                stderr: job.view.stderr.clone(),
                adopt: job.adopt,
            });
        }
        taken
    }

    /// Jobs not yet handed to the executor.
    pub fn incoming_len(&self) -> usize {
        self.incoming.len()
    }

    /// The tasks that joined jobs the executor has. A task may join a job the executor has not taken
    /// yet (both came since its last pass): the task waits for its job, or the executor would take it
    /// for a job that has ended.
    pub fn take_joins(&mut self) -> Vec<(u64, Adopt)> {
        let joins = std::mem::take(&mut self.joins);
        let (waiting, ready): (Vec<_>, Vec<_>) = joins
            .into_iter()
            .partition(|(id, _)| self.incoming.contains(id));
        self.joins = waiting;
        ready
    }

    /// Running jobs cancelled since the last call, for the executor to kill.
    pub fn take_cancelled(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.cancelled)
    }

    /// Records that the executor started (or adopted) job `id`; whether it was adopted, or `None`
    /// for a job the registry does not hold.
    pub fn mark_started(&mut self, id: u64, pid: u32, threads: u32, t: f64) -> Option<bool> {
        let job = self.jobs.get_mut(&id)?;
        // An attached process is adopted when a later daemon takes it over again.
        let adopted = job.adopt.is_some() && (!job.view.attached || job.view.started.is_some());
        let view = &mut job.view;
        if view.state != JobState::Cancelled {
            view.state = JobState::Running;
        }
        view.pid = Some(pid);
        view.threads = Some(threads);
        view.started.get_or_insert(t);
        view.adopted = adopted;
        Some(adopted)
    }

    /// Records the CPUs job `id` has in the plan; whether they changed.
    pub fn mark_placed(&mut self, id: u64, cpus: &str) -> bool {
        match self.jobs.get_mut(&id) {
            Some(job) if job.view.cpus.as_deref() != Some(cpus) => {
                job.view.cpus = Some(cpus.to_string());
                true
            }
            _ => false,
        }
    }

    pub fn set_threads(&mut self, id: u64, threads: u32) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.view.threads = Some(threads);
        }
    }

    /// Records the end of job `id` at `t` (`None`: unknown, it ended while no daemon watched it);
    /// a cancelled job stays cancelled.
    pub fn finish(
        &mut self,
        id: u64,
        t: Option<f64>,
        ok: bool,
        exit_code: Option<i32>,
        error: Option<String>,
    ) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.submission = None;
        let view = &mut job.view;
        if view.state != JobState::Cancelled {
            view.state = if ok { JobState::Done } else { JobState::Failed };
        }
        view.finished = t;
        view.exit_code = exit_code;
        view.error = error;
        view.cpus = None;
    }

    /// Whether `uid` may cancel every job of `ids`: they exist, are its own (or it is root), and
    /// have not ended.
    pub fn check_cancel(&self, ids: &[u64], uid: u32) -> Result<(), ServiceError> {
        for &id in ids {
            let job = self.job(id).ok_or(ServiceError::NoSuchJob(id))?;
            if uid != 0 && job.uid != uid {
                return Err(ServiceError::NotOwner { id, owner: job.uid });
            }
            if job.state.ended() {
                return Err(ServiceError::AlreadyEnded {
                    id,
                    state: job.state,
                });
            }
        }
        Ok(())
    }

    /// Cancels job `id`, checked with [`Registry::check_cancel`].
    pub fn cancel(&mut self, id: u64) -> Cancelled {
        let queued = self.incoming.iter().position(|&q| q == id);
        let job = self.jobs.get_mut(&id).expect("checked by check_cancel");
        job.view.state = JobState::Cancelled;
        let Some(at) = queued else {
            self.cancelled.push(id);
            return Cancelled::Running;
        };
        self.incoming.remove(at);
        let mut processes: Vec<Adopt> = job.adopt.take().into_iter().collect();
        job.submission = None;
        self.joins.retain(|&(joined, task)| {
            let ours = joined == id;
            if ours {
                processes.push(task);
            }
            !ours
        });
        Cancelled::BeforeStart { processes }
    }

    /// The views of jobs `ids` once every one has ended, `None` while one has not.
    pub fn ended(&self, ids: &[u64]) -> Result<Option<Vec<JobView>>, ServiceError> {
        let mut views = Vec::with_capacity(ids.len());
        for &id in ids {
            let job = self.job(id).ok_or(ServiceError::NoSuchJob(id))?;
            // A cancelled job has ended once the executor reports its end.
            if !job.state.ended() || job.finished.is_none() {
                return Ok(None);
            }
            views.push(job.clone());
        }
        Ok(Some(views))
    }

    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// Switches to `policy`, called `name`, at the executor's next pass.
    pub fn switch_policy(&mut self, name: String, policy: Box<dyn Policy>) {
        self.policy = name;
        self.policy_switch = Some(policy);
    }

    pub fn take_policy_switch(&mut self) -> Option<Box<dyn Policy>> {
        self.policy_switch.take()
    }
}
