//! The daemon's jobs as clients see them, shared between the connection threads and the executor's
//! thread. Every change is journaled (under the registry's lock, so the journal's order is the
//! registry's) before it is acknowledged or acted upon.

use crate::daemon::kill_unwatched;
use crate::journal::{Appended, Entry, Journal};
use crate::protocol::{now_unix, Attachment, JobState, JobView, Reply, Request, Submission};
use crate::slowdown;
use crate::switches::SwitchLog;
use cosched_core::Policy;
use cosched_linux::Adopt;
use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Who sent a request, from the socket's SO_PEERCRED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// A job of the registry, with what the executor needs until it has taken it.
pub struct Tracked {
    pub view: JobView,
    pub gid: u32,
    /// Until the executor takes the job.
    pub submission: Option<Submission>,
    /// A job an earlier daemon started, still running: adopted instead of started.
    pub adopt: Option<Adopt>,
}

#[derive(Default)]
pub struct Registry {
    pub jobs: BTreeMap<u64, Tracked>,
    pub next_id: u64,
    /// Submitted, not yet handed to the executor, in order.
    pub incoming: VecDeque<u64>,
    /// Running jobs to kill.
    pub cancelled: Vec<u64>,
    /// Processes that joined a job (further tasks of its Slurm step), not yet handed to the executor.
    pub joins: Vec<(u64, Adopt)>,
    /// The policy's name, as the last `--policy` or `cosched policy P` gave it.
    pub policy: String,
    /// A policy to take over, not yet handed to the executor.
    pub policy_switch: Option<Box<dyn Policy>>,
}

pub struct Shared {
    registry: Mutex<Registry>,
    /// Signalled whenever a job ends.
    ended: Condvar,
    pub journal: Journal,
    /// Readable when the executor has news to take (an eventfd).
    wake: OwnedFd,
    pub logs: PathBuf,
    /// The uid the daemon runs as; a user daemon serves that user only.
    pub daemon_uid: u32,
    pub switches: Mutex<SwitchLog>,
}

impl Shared {
    pub fn new(registry: Registry, journal: Journal, logs: PathBuf) -> Shared {
        // SAFETY: plain system call; the descriptor is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
        Shared {
            registry: Mutex::new(registry),
            ended: Condvar::new(),
            journal,
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            logs,
            // SAFETY: geteuid has no preconditions.
            daemon_uid: unsafe { libc::geteuid() },
            switches: Mutex::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends to the journal and waits until the entry is on disk; a journal that cannot be written
    /// is reported, not hidden.
    pub fn journal(&self, entry: &Entry) -> Result<(), String> {
        self.sync(self.append(entry)?)
    }

    /// Appends to the journal, in the order of the calls: called under the registry's lock, the
    /// journal's order is the registry's. The entry is durable once [`Shared::sync`] returns.
    pub fn append(&self, entry: &Entry) -> Result<Appended, String> {
        self.journal
            .append(entry)
            .map_err(|e| self.journal_error(e))
    }

    /// Waits until the entry at `position` and all before it are on disk; called without the
    /// registry's lock, so that other requests go on while the disk works.
    pub fn sync(&self, position: Appended) -> Result<(), String> {
        self.journal
            .sync(position)
            .map_err(|e| self.journal_error(e))
    }

    fn journal_error(&self, e: std::io::Error) -> String {
        format!(
            "cannot write the journal {}: {e}",
            self.journal.path().display()
        )
    }

    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    pub fn wake_executor(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn clear_wake(&self) {
        let mut count = 0u64;
        // SAFETY: reading 8 bytes from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }

    pub fn notify_ended(&self) {
        self.ended.notify_all();
    }

    /// Answers one request from `peer`.
    pub fn handle(&self, request: Request, peer: Peer) -> Reply {
        let result = match request {
            Request::Submit(submission) => self.submit(submission, peer),
            Request::Jobs { all } => {
                let registry = self.lock();
                let shortest = slowdown::shortest_runs(registry.jobs.values().map(|j| &j.view));
                let now = now_unix();
                Ok(Reply::Jobs {
                    jobs: registry
                        .jobs
                        .values()
                        .filter(|j| all || !j.view.state.ended())
                        .map(|j| slowdown::with_slowdown(j.view.clone(), &shortest, now))
                        .collect(),
                })
            }
            Request::Show { id } => {
                let registry = self.lock();
                let shortest = slowdown::shortest_runs(registry.jobs.values().map(|j| &j.view));
                registry
                    .jobs
                    .get(&id)
                    .map(|j| Reply::Job {
                        job: Box::new(slowdown::with_slowdown(
                            j.view.clone(),
                            &shortest,
                            now_unix(),
                        )),
                    })
                    .ok_or_else(|| no_such_job(id))
            }
            Request::Cancel { ids } => self.cancel(&ids, peer),
            Request::Wait { ids } => self.wait(&ids),
            Request::Policy { set: None } => Ok(Reply::Policy {
                name: self.lock().policy.clone(),
            }),
            Request::Switches {} => {
                let log = self.switches.lock().unwrap_or_else(|p| p.into_inner());
                Ok(Reply::Switches {
                    total: log.total(),
                    recent_lateness: log.recent(),
                })
            }
            Request::Policy { set: Some(name) } => self.switch_policy(name, peer),
            Request::Attach(attachment) => self.attach(attachment, peer),
        };
        result.unwrap_or_else(|message| Reply::Error { message })
    }

    /// A user daemon serves its own user only.
    fn check_served(&self, peer: Peer) -> Result<(), String> {
        if self.daemon_uid != 0 && peer.uid != self.daemon_uid {
            return Err(format!(
                "this is the personal daemon of uid {}; uid {} may not use it",
                self.daemon_uid, peer.uid
            ));
        }
        Ok(())
    }

    fn submit(&self, submission: Submission, peer: Peer) -> Result<Reply, String> {
        check_submission(&submission)?;
        self.check_served(peer)?;
        let mut registry = self.lock();
        let id = registry.next_id;
        let t = now_unix();
        let stdout = self.logs.join(format!("{id}.stdout"));
        let stderr = self.logs.join(format!("{id}.stderr"));
        let position = self.append(&Entry::Submitted {
            id,
            t,
            uid: peer.uid,
            gid: peer.gid,
            submission: submission.clone(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
        })?;
        registry.next_id += 1;
        registry.jobs.insert(
            id,
            Tracked {
                view: JobView::queued(id, peer.uid, t, &submission, stdout, stderr),
                gid: peer.gid,
                submission: Some(submission),
                adopt: None,
            },
        );
        registry.incoming.push_back(id);
        drop(registry);
        // Acknowledged only once durable. The executor may take the job before this returns, but its
        // `started` entry, synced in the same file, cannot reach the disk before this one.
        self.sync(position)
            .map_err(|e| format!("job {id} is queued, but {e}"))?;
        self.wake_executor();
        Ok(Reply::Submitted { id })
    }

    fn attach(&self, a: Attachment, peer: Peer) -> Result<Reply, String> {
        self.check_served(peer)?;
        let found = crate::attach::inspect(a.pid, peer)?;
        let a = crate::attach::as_slurm_task(a, &found);
        let a = crate::attach::in_place_under_limits(a, &found);
        let submission = Submission {
            name: a.name.unwrap_or_else(|| found.comm.clone()),
            command: found.command.clone(),
            cwd: found.cwd.clone(),
            env: Default::default(),
            min_threads: a.min_threads,
            max_threads: a.max_threads,
            kind: a.kind,
            weight: a.weight,
            coschedule: a.coschedule,
            hints: a.hints,
            labels: a.labels,
        };
        check_submission(&submission)?;
        let mut registry = self.lock();
        // Under the lock: two requests for one process cannot both pass.
        let ancestors = cosched_linux::procfs::ancestors(found.pid);
        let owner = registry.jobs.values().find(|j| {
            !j.view.state.ended()
                && j.view
                    .pids()
                    .any(|p| crate::attach::overlaps(found.pid, &ancestors, p as i32))
        });
        if let Some(owner) = owner {
            return Err(format!(
                "process {} is already part of job {} ({})",
                found.pid, owner.view.id, owner.view.name
            ));
        }
        let step_job = found
            .slurm
            .as_ref()
            .and_then(|step| crate::attach::job_of_step(&registry, step, found.uid));
        if let Some(id) = step_job {
            let task = Adopt {
                pid: found.pid,
                start_ticks: found.start_ticks,
                attached: true,
                in_place: a.in_place,
            };
            return self.join(registry, id, task);
        }
        let id = registry.next_id;
        let t = now_unix();
        self.journal(&Entry::Attached {
            id,
            t,
            uid: found.uid,
            gid: peer.gid,
            submission: submission.clone(),
            pid: found.pid as u32,
            start_ticks: found.start_ticks,
            in_place: a.in_place,
        })?;
        registry.next_id += 1;
        let mut view = JobView::queued(
            id,
            found.uid,
            t,
            &submission,
            PathBuf::new(),
            PathBuf::new(),
        );
        view.pid = Some(found.pid as u32);
        view.attached = true;
        registry.jobs.insert(
            id,
            Tracked {
                view,
                gid: peer.gid,
                submission: Some(submission),
                adopt: Some(Adopt {
                    pid: found.pid,
                    start_ticks: found.start_ticks,
                    attached: true,
                    in_place: a.in_place,
                }),
            },
        );
        registry.incoming.push_back(id);
        drop(registry);
        self.wake_executor();
        Ok(Reply::Attached { id })
    }

    /// Makes `task` part of attached job `id`, as another task of its Slurm step: one gang, one
    /// partition, ended when its last task ends.
    fn join(
        &self,
        mut registry: MutexGuard<'_, Registry>,
        id: u64,
        task: Adopt,
    ) -> Result<Reply, String> {
        self.journal(&Entry::Joined {
            id,
            t: now_unix(),
            pid: task.pid as u32,
            start_ticks: task.start_ticks,
        })?;
        let job = registry.jobs.get_mut(&id).expect("found under this lock");
        job.view.tasks.push(task.pid as u32);
        registry.joins.push((id, task));
        drop(registry);
        self.wake_executor();
        Ok(Reply::Attached { id })
    }

    /// Switches the running policy: it takes over every job at the executor's next pass, and the
    /// journal keeps it for the next daemon.
    fn switch_policy(&self, name: String, peer: Peer) -> Result<Reply, String> {
        if peer.uid != 0 && peer.uid != self.daemon_uid {
            return Err(format!(
                "only root or the daemon's own user (uid {}) may switch its policy",
                self.daemon_uid
            ));
        }
        let policy = cosched_policies::create(&name).map_err(|e| e.to_string())?;
        let mut registry = self.lock();
        self.journal(&Entry::Policy {
            t: now_unix(),
            name: name.clone(),
            uid: peer.uid,
        })?;
        registry.policy = name.clone();
        registry.policy_switch = Some(policy);
        drop(registry);
        self.wake_executor();
        Ok(Reply::Policy { name })
    }

    fn cancel(&self, ids: &[u64], peer: Peer) -> Result<Reply, String> {
        let mut registry = self.lock();
        for id in ids {
            let job = registry.jobs.get(id).ok_or_else(|| no_such_job(*id))?;
            if peer.uid != 0 && job.view.uid != peer.uid {
                return Err(format!(
                    "job {id} belongs to uid {}; only its owner or root may cancel it",
                    job.view.uid
                ));
            }
            if job.view.state.ended() {
                return Err(format!("job {id} has already ended ({:?})", job.view.state));
            }
        }
        for &id in ids {
            let t = now_unix();
            self.journal(&Entry::Cancelled { id, t })?;
            let queued = registry.incoming.iter().position(|&q| q == id);
            if let Some(at) = queued {
                // The executor never saw it: it ends here, and so do the processes it would have
                // adopted (a job an earlier daemon started, an attached process, its step's tasks).
                registry.incoming.remove(at);
                let job = registry.jobs.get_mut(&id).expect("checked above");
                let owner = job.view.uid;
                let mut processes: Vec<Adopt> = job.adopt.take().into_iter().collect();
                registry.joins.retain(|&(joined, task)| {
                    let ours = joined == id;
                    if ours {
                        processes.push(task);
                    }
                    !ours
                });
                let error = match processes.is_empty() {
                    true => "cancelled before it started",
                    false => "cancelled before this daemon took it over",
                }
                .to_string();
                processes.into_iter().for_each(|p| kill_unwatched(p, owner));
                self.journal(&Entry::Finished {
                    id,
                    t: Some(t),
                    ok: false,
                    exit_code: None,
                    error: Some(error.clone()),
                })?;
                let job = registry.jobs.get_mut(&id).expect("checked above");
                job.submission = None;
                job.view.finished = Some(t);
                job.view.error = Some(error);
            } else {
                registry.cancelled.push(id);
            }
            registry
                .jobs
                .get_mut(&id)
                .expect("checked above")
                .view
                .state = JobState::Cancelled;
        }
        drop(registry);
        self.wake_executor();
        self.notify_ended();
        Ok(Reply::Cancelled { ids: ids.to_vec() })
    }

    fn wait(&self, ids: &[u64]) -> Result<Reply, String> {
        let mut registry = self.lock();
        loop {
            let mut views = Vec::new();
            for id in ids {
                let job = registry.jobs.get(id).ok_or_else(|| no_such_job(*id))?;
                // A cancelled job has ended once the executor reports its end.
                if !job.view.state.ended() || job.view.finished.is_none() {
                    break;
                }
                views.push(job.view.clone());
            }
            if views.len() == ids.len() {
                return Ok(Reply::Ended { jobs: views });
            }
            registry = self.ended.wait(registry).unwrap_or_else(|p| p.into_inner());
        }
    }
}

fn no_such_job(id: u64) -> String {
    format!("no job {id}; `cosched jobs --all` lists them")
}

fn check_submission(s: &Submission) -> Result<(), String> {
    if s.command.first().is_none_or(|p| p.is_empty()) {
        return Err("the job has no command; give one after `--`".into());
    }
    if s.name.is_empty() || s.name.len() > 200 || s.name.chars().any(char::is_control) {
        return Err("job names must be 1 to 200 printable characters".into());
    }
    if !s.cwd.is_absolute() {
        return Err(format!("working directory {:?} is not absolute", s.cwd));
    }
    if let (Some(min), Some(max)) = (s.min_threads, s.max_threads) {
        if min == 0 || min > max {
            return Err(format!("threads {min}:{max}: need 1 ≤ MIN ≤ MAX"));
        }
    }
    if !(s.weight.is_finite() && s.weight > 0.0) {
        return Err(format!("weight {} must be a positive number", s.weight));
    }
    check_labels(&s.labels)
}

/// Labels are shown to every user and written to the journal: short, printable, a bounded number.
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    if labels.len() > 32 {
        return Err(format!("{} labels; at most 32 are kept", labels.len()));
    }
    for (key, value) in labels {
        let key_ok = (1..=64).contains(&key.len())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !key_ok {
            return Err(format!(
                "label key {key:?}: use 1 to 64 letters, digits, '_', '-' or '.'"
            ));
        }
        if value.len() > 256 || value.chars().any(char::is_control) {
            return Err(format!(
                "label {key}: values are at most 256 printable characters"
            ));
        }
    }
    Ok(())
}
