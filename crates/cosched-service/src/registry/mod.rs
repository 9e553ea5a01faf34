//! The daemon's jobs as clients see them, and what the executor has yet to take: submissions (handed
//! over fairly among users), processes that joined a job, cancellations, new weights, a policy
//! switch. A plain data structure: the caller holds the lock (`state.rs`), and every change of a
//! job's state is a journal entry applied to it (`apply.rs`); what the executor takes is in
//! `take.rs`.

use crate::config::{History, ShareTable};
use crate::error::ServiceError;
use crate::protocol::{JobView, Submission};
use crate::slowdown::ShortestRuns;
use cosched_core::{CpuSet, Policy};
use cosched_linux::Adopt;
use ended::EndedByUser;
use queues::{Kind, Queues};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;

mod apply;
mod ended;
mod pending;
mod queues;
mod take;

pub use apply::{Applied, Ending};

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
    /// Until the executor takes the job (boxed: most jobs of a long history have none).
    submission: Option<Box<Submission>>,
    /// A job an earlier daemon started, still running: adopted instead of started.
    adopt: Option<Adopt>,
    /// Handed to the executor and not ended: counted among its user's running jobs.
    running: bool,
    /// When it was sent SIGTERM for passing its time limit.
    terminated: Option<f64>,
    /// Handed to the executor, which has not started it yet.
    awaiting_start: bool,
    /// The weight it was submitted with.
    weight: f64,
    /// The weight the executor was last given for it.
    fair_weight: f64,
    /// Every CPU the plans gave it while it ran.
    ran_on: CpuSet,
    /// Its end is applied (a cancelled job ends once the executor reports its end).
    ended: bool,
    /// Bytes it takes in the journal ([`JobView::footprint`]), counted once it has ended.
    footprint: u64,
    /// It runs with no other job beside it ([`Submission::exclusive`]).
    exclusive: bool,
}

impl Tracked {
    /// Where it queues until the executor takes it.
    fn queue_kind(&self) -> Kind {
        match (&self.adopt, &self.submission) {
            (Some(_), _) => Kind::Adopt,
            (None, Some(s))
                if !s.dependency.is_empty() || s.singleton || s.hold || s.begin.is_some() =>
            {
                Kind::Dependent
            }
            _ => Kind::Plain,
        }
    }

    /// `submission`: what the executor is to run (or, with `adopt`, take over); `None` for a job
    /// the executor already has or that has ended.
    pub fn new(
        view: JobView,
        gid: u32,
        submission: Option<Submission>,
        adopt: Option<Adopt>,
    ) -> Tracked {
        Tracked {
            weight: submission.as_ref().map_or(1.0, |s| s.weight),
            exclusive: submission.as_ref().is_some_and(|s| s.exclusive),
            footprint: view.footprint(),
            view,
            gid,
            submission: submission.map(Box::new),
            adopt,
            running: false,
            terminated: None,
            awaiting_start: false,
            fair_weight: f64::NAN,
            ran_on: CpuSet::new(),
            ended: false,
        }
    }
}

/// A job handed to the executor.
pub struct Incoming {
    pub id: u64,
    pub uid: u32,
    pub gid: u32,
    pub submission: Submission,
    /// The weight the policy is to see: the job's share of its user's share (`fair_weights`).
    pub weight: f64,
    /// Its user's share of the machine (`[shares]`), which the policy shares CPUs by.
    pub share: f64,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub adopt: Option<Adopt>,
}

/// A user's jobs not yet ended, as the per-user limits count them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UserLoad {
    /// Not yet handed to the executor.
    pub queued: usize,
    /// Handed to the executor and not ended.
    pub running: usize,
}

pub struct Registry {
    /// Boxed: a B-tree's nodes are half empty after inserts in order, and a long history is
    /// mostly ended jobs' views.
    jobs: BTreeMap<u64, Box<Tracked>>,
    users: HashMap<u32, UserLoad>,
    /// Each user's jobs handed to the executor and not ended.
    running_of: HashMap<u32, Vec<u64>>,
    /// Each user's jobs handed to the executor and not started yet.
    awaiting_start: HashMap<u32, usize>,
    shares: ShareTable,
    /// New weights of jobs the executor has, not yet handed to it.
    reweighted: Vec<(u64, f64)>,
    /// Ended jobs in the order they ended, with when, to forget them after the retention.
    ended: VecDeque<(f64, u64)>,
    /// Each user's ended jobs, to forget the oldest past the history's bounds.
    ended_by_user: EndedByUser,
    /// How many ended jobs, and how many bytes of them, a user keeps.
    bounds: History,
    shortest: ShortestRuns,
    next_id: u64,
    /// Submitted, not yet handed to the executor.
    incoming: Queues,
    /// Whether a job of `incoming` may be taken that was not at the last take: the executor asks
    /// on every pass, and the jobs held back by a running limit may be many.
    takeable: bool,
    /// Running jobs to kill.
    cancelled: Vec<u64>,
    /// Queued jobs whose dependencies can no longer be met, with why, to be cancelled.
    unsatisfiable: Vec<(u64, String)>,
    /// Running jobs with a time limit, not yet killed for it.
    limited: Vec<u64>,
    /// Processes that joined a job (further tasks of its Slurm step), not yet handed to the executor.
    joins: Vec<(u64, Adopt)>,
    /// The policy's name, as the last `--policy` or `cosched policy P` gave it.
    policy: String,
    /// A policy to take over, not yet handed to the executor.
    policy_switch: Option<Box<dyn Policy>>,
    /// Bytes of the node's memory for jobs: the requests (`mem`) of the jobs handed to the
    /// executor and not ended stay within it.
    memory_for_jobs: u64,
    /// The requests of the jobs handed to the executor and not ended, added up.
    memory_in_use: u64,
    /// Cancel the jobs whose dependencies can never be met (`jobs.kill_invalid_depend`), instead
    /// of keeping them pending.
    kill_invalid_depend: bool,
    /// Unix time as the executor last told it ([`Registry::tick`]): what `--begin` is compared with.
    clock: f64,
    /// The earliest `--begin` of a held job still to come.
    next_begin: f64,
    /// An exclusive job that waits for the node to empty: no other job starts meanwhile.
    draining_for: Option<u64>,
}

impl Registry {
    /// An empty registry whose first job gets `next_id`.
    pub fn new(policy: String, next_id: u64, shares: ShareTable) -> Registry {
        Registry {
            jobs: BTreeMap::new(),
            users: HashMap::new(),
            running_of: HashMap::new(),
            awaiting_start: HashMap::new(),
            shares,
            reweighted: Vec::new(),
            ended: VecDeque::new(),
            ended_by_user: EndedByUser::default(),
            bounds: History::default(),
            shortest: ShortestRuns::default(),
            next_id,
            incoming: Queues::default(),
            takeable: false,
            cancelled: Vec::new(),
            unsatisfiable: Vec::new(),
            limited: Vec::new(),
            joins: Vec::new(),
            policy,
            policy_switch: None,
            memory_for_jobs: u64::MAX,
            memory_in_use: 0,
            kill_invalid_depend: false,
            clock: 0.0,
            next_begin: f64::INFINITY,
            draining_for: None,
        }
    }

    /// The registry cancelling jobs whose dependencies can never be met
    /// (`jobs.kill_invalid_depend`).
    pub fn with_kill_invalid_depend(mut self, kill: bool) -> Registry {
        self.kill_invalid_depend = kill;
        self
    }

    /// Tells the registry the time, `now` (Unix seconds): jobs whose `--begin` has come may be
    /// taken at the next [`Registry::take_incoming`].
    pub fn tick(&mut self, now: f64) {
        self.clock = now;
        if self.next_begin <= now {
            self.next_begin = f64::INFINITY;
            self.incoming.job_ended();
            self.takeable = true;
        }
    }

    /// The registry with `bytes` of memory for jobs: jobs whose requests do not fit beside the
    /// running ones' wait, `pending` for `memory`.
    pub fn with_memory_for_jobs(mut self, bytes: u64) -> Registry {
        self.memory_for_jobs = bytes;
        self
    }

    /// The registry with a user's history within `bounds` (`history.jobs_per_user`,
    /// `history.bytes_per_user`).
    pub fn with_history_bounds(mut self, bounds: History) -> Registry {
        self.bounds = bounds;
        self
    }

    pub fn memory_for_jobs(&self) -> u64 {
        self.memory_for_jobs
    }

    /// The id the next job gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The id a new job gets, refused once ids pass what the executor holds (its `JobId` has 32
    /// bits): every job the registry holds then has the same id in the executor (`source.rs`).
    pub fn new_id(&self) -> Result<u64, ServiceError> {
        match u32::try_from(self.next_id) {
            Ok(_) => Ok(self.next_id),
            Err(_) => Err(ServiceError::IdsExhausted),
        }
    }

    /// Adds a job the journal gave back; one with a submission queues for the executor again, with
    /// `joined`, the further tasks of its step that still run.
    pub fn restore(&mut self, job: Tracked, joined: Vec<Adopt>) {
        let id = job.view.id;
        self.next_id = self.next_id.max(id + 1);
        if job.submission.is_some() {
            self.users.entry(job.view.uid).or_default().queued += 1;
            self.incoming
                .push(id, job.view.uid, job.view.priority, job.queue_kind());
            if let Some(begin) = job.submission.as_ref().and_then(|s| s.begin) {
                self.next_begin = self.next_begin.min(begin);
            }
            self.takeable = true;
            self.joins.extend(joined.into_iter().map(|task| (id, task)));
        }
        let ended = job.view.state.ended();
        self.jobs.insert(id, Box::new(Tracked { ended, ..job }));
        if ended {
            self.ended_now(id);
        }
    }

    /// `view` with its slowdown so far at `now` (`slowdown.rs`).
    pub fn with_slowdown(&self, mut view: JobView, now: f64) -> JobView {
        view.slowdown = self.shortest.slowdown(&view, now);
        view
    }

    pub fn job(&self, id: u64) -> Option<&JobView> {
        self.jobs.get(&id).map(|j| &j.view)
    }

    /// Every job, by id.
    pub fn jobs(&self) -> impl Iterator<Item = &JobView> {
        self.jobs.values().map(|j| &j.view)
    }

    /// Jobs held, ended ones included.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// The jobs from id `from` on, by id.
    pub fn jobs_from(&self, from: u64) -> impl Iterator<Item = &JobView> {
        self.jobs.range(from..).map(|(_, j)| &j.view)
    }

    /// Jobs waiting for the executor: (running jobs to adopt, jobs to start).
    pub fn waiting(&self) -> (usize, usize) {
        let adopted = self.incoming.adopt_len();
        (adopted, self.incoming.len() - adopted)
    }

    /// The jobs of `uid` not yet ended.
    pub fn load_of(&self, uid: u32) -> UserLoad {
        self.users.get(&uid).copied().unwrap_or_default()
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

    /// Whether `uid` may hold or release every job of `ids`: they exist, are its own (or it is
    /// root), and have not been handed to the executor.
    pub fn check_hold(&self, ids: &[u64], uid: u32) -> Result<(), ServiceError> {
        for &id in ids {
            let job = self.jobs.get(&id).ok_or(ServiceError::NoSuchJob(id))?;
            if uid != 0 && job.view.uid != uid {
                return Err(ServiceError::NotOwner {
                    id,
                    owner: job.view.uid,
                });
            }
            if job.submission.is_none() || job.adopt.is_some() {
                return Err(ServiceError::NotPending {
                    id,
                    state: job.view.state,
                });
            }
        }
        Ok(())
    }

    /// The views of jobs `ids` once every one has ended, `None` while one has not. `checked`: how
    /// many of `ids`, from the first, an earlier call found ended (an end is final), so that a wait
    /// for many jobs looks at each once, not at all of them at each end.
    pub fn ended(
        &self,
        ids: &[u64],
        checked: &mut usize,
    ) -> Result<Option<Vec<JobView>>, ServiceError> {
        for &id in &ids[(*checked).min(ids.len())..] {
            let job = self.jobs.get(&id).ok_or(ServiceError::NoSuchJob(id))?;
            if !job.ended {
                return Ok(None);
            }
            *checked += 1;
        }
        let views = ids
            .iter()
            .map(|&id| self.job(id).ok_or(ServiceError::NoSuchJob(id)));
        views
            .map(|view| view.cloned())
            .collect::<Result<_, _>>()
            .map(Some)
    }

    pub fn policy(&self) -> &str {
        &self.policy
    }

    pub fn take_policy_switch(&mut self) -> Option<Box<dyn Policy>> {
        self.policy_switch.take()
    }
}

#[cfg(test)]
mod tests;
