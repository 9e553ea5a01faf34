//! The daemon's jobs as clients see them, and what the executor has yet to take: submissions (handed
//! over fairly among users), processes that joined a job, cancellations, new weights, a policy
//! switch. A plain data structure: the caller
//! holds the lock (`state.rs`) and journals each change (`requests.rs`, `source.rs`).

use crate::config::{History, ShareTable};
use crate::error::ServiceError;
use crate::protocol::{Accounting, JobState, JobView, Submission};
use crate::slowdown::ShortestRuns;
use cosched_core::memory::admits;
use cosched_core::{CpuSet, Policy};
use cosched_linux::Adopt;
use ended::EndedByUser;
use pending::Gate;
use queues::{Kind, Queues};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;

mod ended;
mod pending;
mod queues;

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
    /// Processes of it were killed for passing its memory limit, as the executor said at its end.
    oom: bool,
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
            oom: false,
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

/// What cancelling a job did.
pub enum Cancelled {
    /// The executor has it: it is to kill it.
    Running,
    /// The executor never saw it: it has ended here, and these processes it would have adopted (a job
    /// an earlier daemon started, an attached process, its step's tasks) are to be killed.
    BeforeStart { processes: Vec<Adopt> },
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

    /// Adds a new job under [`Registry::next_id`] and queues it for the executor.
    pub fn enqueue(&mut self, job: Tracked) {
        let id = job.view.id;
        debug_assert_eq!(id, self.next_id, "jobs are enqueued under the next id");
        self.next_id = id + 1;
        self.users.entry(job.view.uid).or_default().queued += 1;
        self.incoming
            .push(id, job.view.uid, job.view.priority, job.queue_kind());
        if let Some(begin) = job.submission.as_ref().and_then(|s| s.begin) {
            self.next_begin = self.next_begin.min(begin);
        }
        self.jobs.insert(id, Box::new(job));
        self.takeable = true;
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
        self.jobs.insert(id, Box::new(job));
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

    /// Makes `task` part of job `id`, as another task of its Slurm step.
    pub fn join(&mut self, id: u64, task: Adopt) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.view.tasks.push(task.pid as u32);
            self.joins.push((id, task));
        }
    }

    /// The jobs of `uid` not yet ended.
    pub fn load_of(&self, uid: u32) -> UserLoad {
        self.users.get(&uid).copied().unwrap_or_default()
    }

    /// Hands queued jobs to the executor fairly among users, as a fair-share queue orders them: the
    /// next job is always the first of the user who runs the fewest jobs for their share, a user's
    /// jobs coming highest priority first, then oldest first. An array with a limit has at most that
    /// many elements handed over and not ended. A user
    /// (root included) has at most `awaiting_per_user` jobs handed over and not yet started, so that
    /// no user's backlog waits in the executor's queue ahead of another user's first job; a user
    /// (root excepted) who runs `running_per_user` jobs gets none until one of theirs ends. A running
    /// process to adopt is always taken: it runs whether or not cosched watches it. A job whose memory
    /// request does not fit beside those running ([`admits`]) waits in its place while later jobs
    /// that fit go ahead.
    pub fn take_incoming(
        &mut self,
        running_per_user: usize,
        awaiting_per_user: usize,
    ) -> Vec<Incoming> {
        if !std::mem::take(&mut self.takeable) {
            return Vec::new();
        }
        let mut chosen = self.incoming.take_adopt();
        self.release_held();
        // Processes adopted in this take run already: they count against their users' limits.
        let mut handed: HashMap<u32, usize> = HashMap::new();
        let mut memory_handed = 0u64;
        for id in &chosen {
            *handed.entry(self.jobs[id].view.uid).or_default() += 1;
            memory_handed += self.jobs[id].view.mem.unwrap_or(0);
        }
        let mut in_array = self.handed_per_array(&chosen);
        // One cancelled or held since no longer keeps the others waiting.
        if self
            .draining_for
            .is_some_and(|id| !self.incoming.contains(id) || !matches!(self.gate(id), Gate::Go))
        {
            self.draining_for = None;
        }
        let mut exclusive_running = self
            .running_of
            .values()
            .flatten()
            .chain(&chosen)
            .any(|id| self.jobs[id].exclusive);
        loop {
            if exclusive_running {
                break;
            }
            let fronts: Vec<(u32, u64)> = self.incoming.fronts().collect();
            let node_busy = !self.running_of.is_empty() || !chosen.is_empty();
            if self.draining_for.is_none() && node_busy {
                // An exclusive job first in its user's queue: the others wait with it, or a
                // busy node might never empty.
                let exclusive = fronts
                    .iter()
                    .find(|(_, id)| self.jobs[id].exclusive && matches!(self.gate(*id), Gate::Go));
                self.draining_for = exclusive.map(|&(_, id)| id);
            }
            let next = fronts
                .into_iter()
                .filter_map(|(uid, front)| {
                    let load = self.users.get(&uid).copied().unwrap_or_default();
                    let running = load.running + handed.get(&uid).copied().unwrap_or(0);
                    let awaiting = self.awaiting_start.get(&uid).copied().unwrap_or(0)
                        + handed.get(&uid).copied().unwrap_or(0);
                    // A job that outranks what its user has waiting in the executor goes there
                    // too, so that the policy starts it first (`Registry::outranks_awaiting`).
                    let room = awaiting < awaiting_per_user
                        || self.outranks_awaiting(uid, front, &chosen, awaiting_per_user);
                    let eligible = (uid == 0 || running < running_per_user) && room;
                    let usage = running as f64 / self.shares.of(uid, self.jobs[&front].gid);
                    eligible.then_some((usage, front, uid))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let Some((_, _, uid)) = next else {
                break;
            };
            let id = self.incoming.pop_front(uid).expect("a front was named");
            // Held or given a later begin while queued: its place in its user's queue stayed.
            if !matches!(self.gate(id), Gate::Go) {
                self.incoming.hold(id);
                continue;
            }
            let job = &self.jobs[&id];
            match (job.exclusive, self.draining_for) {
                (true, _) if node_busy => {
                    // Nothing else starts until the node is empty and it has started.
                    self.draining_for = Some(id);
                    self.incoming.hold(id);
                    break;
                }
                (false, Some(_)) => {
                    self.incoming.hold(id);
                    continue;
                }
                _ => {}
            }
            exclusive_running = job.exclusive;
            if exclusive_running {
                self.draining_for = None;
            }
            let array = job.view.array_id;
            let limit = job.submission.as_ref().and_then(|s| s.array?.limit);
            let array_full = match (array, limit) {
                (Some(array), Some(limit)) => {
                    in_array.get(&array).copied().unwrap_or(0) >= limit as usize
                }
                _ => false,
            };
            let in_use = self.memory_in_use.saturating_add(memory_handed);
            if array_full || !admits(self.memory_for_jobs, in_use, job.view.mem) {
                // Out of the way until a job ends; the user's jobs behind it may start.
                self.incoming.hold(id);
                continue;
            }
            if let Some(array) = array {
                *in_array.entry(array).or_default() += 1;
            }
            memory_handed += job.view.mem.unwrap_or(0);
            self.incoming.taken(id);
            *handed.entry(uid).or_default() += 1;
            chosen.push(id);
        }
        let users_before = self.running_of.len();
        let mut taken = Vec::with_capacity(chosen.len());
        let mut users = Vec::new();
        for id in chosen {
            let job = self.jobs.get_mut(&id).expect("queued jobs are held");
            let Some(submission) = job.submission.take() else {
                continue;
            };
            let uid = job.view.uid;
            let load = self.users.entry(uid).or_default();
            load.queued -= 1;
            load.running += 1;
            job.running = true;
            self.memory_in_use = (self.memory_in_use).saturating_add(job.view.mem.unwrap_or(0));
            if job.adopt.is_none() {
                job.awaiting_start = true;
                *self.awaiting_start.entry(uid).or_default() += 1;
            }
            self.running_of.entry(uid).or_default().push(id);
            users.push(uid);
            taken.push(Incoming {
                id,
                uid,
                gid: job.gid,
                submission: *submission,
                weight: 1.0,
                share: self.shares.of(uid, job.gid),
                stdout: job.view.stdout.clone(),
                stderr: job.view.stderr.clone(),
                adopt: job.adopt,
            });
        }
        users.sort_unstable();
        users.dedup();
        self.reweigh_after(users_before, users);
        for job in &mut taken {
            job.weight = self.jobs[&job.id].fair_weight;
        }
        taken
    }

    /// Whether queued job `front` of `uid` is among the `limit` highest-priority jobs of its user
    /// that would wait in the executor beside those there now (`handed`: handed in this take):
    /// the executor holds at most `limit` of a user's jobs waiting to start, but a later job of
    /// higher priority must not queue behind them in the registry while they wait there.
    fn outranks_awaiting(&self, uid: u32, front: u64, handed: &[u64], limit: usize) -> bool {
        let priority = self.jobs[&front].view.priority;
        let ahead = (self.running_of.get(&uid).into_iter().flatten())
            .chain(handed)
            .filter_map(|id| self.jobs.get(id))
            .filter(|job| job.view.uid == uid && job.view.started.is_none())
            .filter(|job| job.adopt.is_none() && job.view.priority >= priority)
            .count();
        ahead < limit
    }

    /// Gives back to their users' queues the held jobs that may go now that a job has ended (those
    /// still held by an array's limit or by memory are held again when they come to the front),
    /// and notes the dependencies that can never be met; looks only after a job has ended.
    fn release_held(&mut self) {
        for id in self.incoming.take_unchecked_held() {
            match self.gate(id) {
                Gate::Go => self.incoming.release(id),
                Gate::Begin(begin) | Gate::Later(begin) => {
                    self.next_begin = self.next_begin.min(begin);
                    self.incoming.hold(id);
                }
                Gate::Never(why) if self.kill_invalid_depend => {
                    self.unsatisfiable.push((id, why));
                    self.incoming.hold(id);
                }
                Gate::Held | Gate::Dependency | Gate::Never(_) => self.incoming.hold(id),
            }
        }
    }

    /// How many elements of each array are running or among `adopted`.
    fn handed_per_array(&self, adopted: &[u64]) -> HashMap<u64, usize> {
        let mut counts = HashMap::new();
        let running = self.running_of.values().flatten();
        for id in running.chain(adopted) {
            if let Some(array) = self.jobs[id].view.array_id {
                *counts.entry(array).or_default() += 1;
            }
        }
        counts
    }

    /// Queued jobs found, at the last take, never to be able to start, with why.
    pub fn take_unsatisfiable(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.unsatisfiable)
    }

    /// Gives each running job of `uid` its fair weight: the user's share, divided among their
    /// running jobs in proportion to the weights they were submitted with. The user's CPU time then
    /// does not grow with the number of jobs they run.
    fn reweigh(&mut self, uid: u32) {
        let Some(ids) = self.running_of.get(&uid) else {
            return;
        };
        let total: f64 = ids.iter().map(|id| self.jobs[id].weight).sum();
        let Some(first) = ids.first() else {
            return;
        };
        let share = self.shares.of(uid, self.jobs[first].gid);
        // A user alone on the machine shares it with no one: their jobs keep their own weights.
        let alone = self.running_of.len() <= 1;
        for id in ids {
            let job = self.jobs.get_mut(id).expect("running jobs are held");
            let weight = match alone {
                true => job.weight,
                false => share * job.weight / total,
            };
            if job.fair_weight != weight {
                job.fair_weight = weight;
                self.reweighted.push((*id, weight));
            }
        }
    }

    /// Reweighs `changed` users, or every user when the machine went from one user to several or
    /// back (`users_before` had running jobs before the change).
    fn reweigh_after(&mut self, users_before: usize, changed: Vec<u32>) {
        let crossed = (users_before <= 1) != (self.running_of.len() <= 1);
        let users = match crossed {
            true => self.running_of.keys().copied().collect(),
            false => changed,
        };
        for uid in users {
            self.reweigh(uid);
        }
    }

    /// The jobs whose fair weight changed since the last call, with the new weight.
    pub fn take_reweighted(&mut self) -> Vec<(u64, f64)> {
        std::mem::take(&mut self.reweighted)
    }

    /// Whether the next [`Registry::take_incoming`] may hand over a job it held back.
    pub fn takeable(&self) -> bool {
        self.takeable
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
            .partition(|(id, _)| self.incoming.contains(*id));
        self.joins = waiting;
        ready
    }

    /// Running jobs cancelled since the last call, for the executor to kill.
    pub fn take_cancelled(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.cancelled)
    }

    /// Running jobs past their time limit at `now` that are to be sent SIGTERM now; each is
    /// `timeout` from then on. Those sent it `kill_wait` seconds ago or more are handed to the
    /// executor to kill, as cancelled jobs are.
    pub fn take_overdue(&mut self, now: f64, kill_wait: f64) -> Vec<u64> {
        let mut overdue = Vec::new();
        let jobs = &mut self.jobs;
        let cancelled = &mut self.cancelled;
        self.limited.retain(|id| {
            let Some(job) = jobs.get_mut(id) else {
                return false;
            };
            let view = &mut job.view;
            match (job.terminated, view.started, view.time_limit) {
                (Some(sent), _, _) if now >= sent + kill_wait => {
                    cancelled.push(*id);
                    false
                }
                (None, Some(started), Some(limit)) if now >= started + limit as f64 => {
                    job.terminated = Some(now);
                    if !view.state.ended_by_daemon() {
                        view.state = JobState::Timeout;
                    }
                    overdue.push(*id);
                    true
                }
                _ => true,
            }
        });
        overdue
    }

    /// Records that the executor started (or adopted) job `id`; whether it was adopted, or `None`
    /// for a job the registry does not hold.
    pub fn mark_started(&mut self, id: u64, pid: u32, threads: u32, t: f64) -> Option<bool> {
        let job = self.jobs.get_mut(&id)?;
        if std::mem::take(&mut job.awaiting_start) {
            let uid = job.view.uid;
            if let Some(awaiting) = self.awaiting_start.get_mut(&uid) {
                *awaiting -= 1;
            }
            self.takeable |= self.users.get(&uid).is_some_and(|l| l.queued > 0);
        }
        let job = self.jobs.get_mut(&id)?;
        // An attached process is adopted when a later daemon takes it over again.
        let adopted = job.adopt.is_some() && (!job.view.attached || job.view.started.is_some());
        let view = &mut job.view;
        if !view.state.ended_by_daemon() {
            view.state = JobState::Running;
        }
        view.pid = Some(pid);
        view.threads = Some(threads);
        view.started.get_or_insert(t);
        view.adopted = adopted;
        if view.time_limit.is_some() && !self.limited.contains(&id) {
            self.limited.push(id);
        }
        // A job that waits for this one to start (`after`) may go.
        self.incoming.job_ended();
        self.takeable |= self.incoming.any_held();
        Some(adopted)
    }

    /// Records the CPUs job `id` has in the plan; whether they changed.
    pub fn mark_placed(&mut self, id: u64, cpus: &str) -> bool {
        match self.jobs.get_mut(&id) {
            Some(job) if job.view.cpus.as_deref() != Some(cpus) => {
                job.view.cpus = Some(cpus.to_string());
                if let Ok(set) = cpus.parse::<CpuSet>() {
                    job.ran_on = job.ran_on.union(&set);
                }
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

    /// Records what job `id` used, as the executor measured it at its end, before
    /// [`Registry::finish`]: CPU time and peak memory, and whether processes of it were killed for
    /// passing its memory limit (then it ends `oom` unless it ended well). The CPUs are those the
    /// plans gave it.
    pub fn account(&mut self, id: u64, mut accounting: Accounting, oom: bool) {
        if let Some(job) = self.jobs.get_mut(&id) {
            if !job.ran_on.is_empty() {
                accounting.cpus = Some(job.ran_on.to_string());
            }
            job.view.accounting = Some(Box::new(accounting));
            job.oom = oom;
        }
    }

    /// Records the signal that ended job `id`'s main process, before [`Registry::finish`].
    pub fn killed_by(&mut self, id: u64, signal: i32) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.view.signal = Some(signal);
        }
    }

    /// Records the end of job `id` at `t` (`None`: unknown, it ended while no daemon watched it);
    /// a cancelled job stays cancelled. Whether a job its user holds queued may start now.
    pub fn finish(
        &mut self,
        id: u64,
        t: Option<f64>,
        ok: bool,
        exit_code: Option<i32>,
        error: Option<String>,
    ) -> bool {
        let Some(job) = self.jobs.get_mut(&id) else {
            return false;
        };
        let mut may_start = false;
        let uid = job.view.uid;
        if std::mem::take(&mut job.awaiting_start) {
            if let Some(awaiting) = self.awaiting_start.get_mut(&uid) {
                *awaiting -= 1;
            }
        }
        let was_running = std::mem::take(&mut job.running);
        // The jobs an exclusive one kept waiting may start now, whoever's they are.
        let node_freed = was_running && job.exclusive;
        job.submission = None;
        self.limited.retain(|&limited| limited != id);
        // Killed like a cancelled job, but for its time limit: say so, as a kill.
        let killed = error
            .as_deref()
            .is_some_and(|e| e.starts_with("killed by signal"));
        let error = match job.terminated {
            Some(_) if exit_code.is_none() && !killed => {
                job.view.signal.get_or_insert(libc::SIGKILL);
                Some(format!(
                    "killed by signal {} (SIGKILL): still running when the grace after its time \
                     limit ended",
                    libc::SIGKILL
                ))
            }
            _ => error,
        };
        // The kernel's out-of-memory killer sends SIGKILL; a job whose own exit is unknown
        // (adopted) ended by it all the same.
        if job.oom && !ok && exit_code.is_none() {
            job.view.signal.get_or_insert(libc::SIGKILL);
        }
        let view = &mut job.view;
        if !view.state.ended_by_daemon() {
            view.state = match (ok, job.oom) {
                (true, _) => JobState::Done,
                (false, true) => JobState::Oom,
                (false, false) => JobState::Failed,
            };
        }
        view.finished = t;
        // As shells give it: 128 + the signal.
        view.exit_code = exit_code.or(view.signal.map(|s| 128 + s));
        view.error = error;
        view.cpus = None;
        let users_before = self.running_of.len();
        if was_running {
            self.memory_in_use = (self.memory_in_use).saturating_sub(view.mem.unwrap_or(0));
            let load = self.users.entry(uid).or_default();
            load.running -= 1;
            may_start = load.queued > 0;
            if let Some(running) = self.running_of.get_mut(&uid) {
                running.retain(|&r| r != id);
                if running.is_empty() {
                    self.running_of.remove(&uid);
                }
            }
            self.reweigh_after(users_before, vec![uid]);
        }
        self.ended_now(id);
        self.incoming.job_ended();
        may_start |= self.incoming.any_held() || node_freed;
        self.takeable |= may_start;
        may_start
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

    /// Holds queued job `id` (`held`) or releases it, checked with [`Registry::check_hold`]. A held
    /// job keeps its place in its user's queue until it comes to the front.
    pub fn set_held(&mut self, id: u64, held: bool) {
        let Some(submission) = self.jobs.get_mut(&id).and_then(|j| j.submission.as_mut()) else {
            return;
        };
        submission.hold = held;
        if !held {
            self.incoming.job_ended();
            self.takeable = true;
        }
    }

    /// Cancels job `id`, checked with [`Registry::check_cancel`].
    pub fn cancel(&mut self, id: u64) -> Cancelled {
        let queued = self.incoming.remove(id);
        let job = self.jobs.get_mut(&id).expect("checked by check_cancel");
        job.view.state = JobState::Cancelled;
        if !queued {
            self.cancelled.push(id);
            return Cancelled::Running;
        }
        self.users.entry(job.view.uid).or_default().queued -= 1;
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

    /// The views of jobs `ids` once every one has ended, `None` while one has not. `checked`: how
    /// many of `ids`, from the first, an earlier call found ended (an end is final), so that a wait
    /// for many jobs looks at each once, not at all of them at each end.
    pub fn ended(
        &self,
        ids: &[u64],
        checked: &mut usize,
    ) -> Result<Option<Vec<JobView>>, ServiceError> {
        for &id in &ids[(*checked).min(ids.len())..] {
            let job = self.job(id).ok_or(ServiceError::NoSuchJob(id))?;
            // A cancelled job has ended once the executor reports its end.
            if !job.state.ended() || job.finished.is_none() {
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

    /// Switches to `policy`, called `name`, at the executor's next pass.
    pub fn switch_policy(&mut self, name: String, policy: Box<dyn Policy>) {
        self.policy = name;
        self.policy_switch = Some(policy);
    }

    pub fn take_policy_switch(&mut self) -> Option<Box<dyn Policy>> {
        self.policy_switch.take()
    }
}

#[cfg(test)]
mod tests;
