//! Answering clients' requests: who may do what, and the entries that make the change asked for.
//!
//! Each change is committed through `Shared::commit`: its entries are appended to the journal under
//! the registry's lock, so the journal's order is the registry's, applied to the registry, and made
//! durable (fsync) after the lock is released, so that no request holds the registry while it
//! waits on the disk; the client hears of it only once it is durable.

use crate::error::ServiceError;
use crate::journal::Entry;
use crate::protocol::{
    now_unix, After, Attachment, JobFilter, JobState, JobView, Reply, Request, Submission, MAX_NICE,
};
use crate::registry::{Peer, Registry};
use crate::state::{CommitError, Shared};
use cosched_core::memory::Size;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

mod privacy;

/// Answers one request from `peer`.
pub fn handle(shared: &Shared, request: Request, peer: Peer) -> Reply {
    let result = match request {
        Request::Submit(submission) => submit(shared, submission, peer),
        Request::Jobs { all, filter } => Ok(jobs(shared, all, &filter, peer)),
        Request::Show { id } => show(shared, id, peer),
        Request::Cancel { ids } => cancel(shared, &ids, peer),
        Request::Hold { ids } => hold(shared, &ids, true, peer),
        Request::Release { ids } => hold(shared, &ids, false, peer),
        Request::Wait { ids } => wait(shared, &ids, peer),
        Request::Policy { set: None } => Ok(Reply::Policy {
            name: shared.lock().policy().to_string(),
        }),
        Request::Policy { set: Some(name) } => switch_policy(shared, name, peer),
        Request::Switches {} => {
            let (total, recent_lateness) = shared.switch_lateness();
            Ok(Reply::Switches {
                total,
                recent_lateness,
            })
        }
        Request::Attach(attachment) => attach(shared, attachment, peer),
        Request::RemoveLogs { id } => crate::logs::remove(shared, id, peer),
    };
    result.unwrap_or_else(|e| Reply::Error {
        message: e.to_string(),
    })
}

/// A user daemon serves its own user only.
fn check_served(shared: &Shared, peer: Peer) -> Result<(), ServiceError> {
    if shared.daemon_uid() != 0 && peer.uid != shared.daemon_uid() {
        return Err(ServiceError::NotServed {
            daemon: shared.daemon_uid(),
            peer: peer.uid,
        });
    }
    Ok(())
}

/// Whether `view` is hidden from `peer`: another user's job where jobs are private
/// (`privacy.private_jobs`). Root and the daemon's own user see everything.
fn hidden_from(shared: &Shared, peer: Peer, view: &JobView) -> bool {
    shared.config().privacy.private_jobs && view.uid != peer.uid && !shared.privileged(peer.uid)
}

/// What `peer` may see of `view`: all of its own jobs, and of a job hidden from it what
/// [`privacy::hidden`] keeps.
fn as_seen_by(shared: &Shared, peer: Peer, view: JobView) -> JobView {
    match hidden_from(shared, peer, &view) {
        true => privacy::hidden(view),
        false => view,
    }
}

/// Jobs looked at per hold of the registry's lock: a long history is listed in turns with the
/// executor.
const LISTED_PER_LOCK: usize = 1024;
/// Jobs a `jobs` reply holds in memory at once, per connection, while it is written.
const LISTED_PER_CHUNK: usize = 64;

/// Which jobs a `jobs` request lists, taken a chunk at a time from the registry.
pub struct Listing<'a> {
    shared: &'a Shared,
    all: bool,
    filter: &'a JobFilter,
    peer: Peer,
    now: f64,
    suspended: HashSet<u64>,
    /// The id to look from; `None` once the registry has been looked through.
    from: Option<u64>,
}

impl<'a> Listing<'a> {
    pub fn new(shared: &'a Shared, all: bool, filter: &'a JobFilter, peer: Peer) -> Listing<'a> {
        Listing {
            shared,
            all,
            filter,
            peer,
            now: now_unix(),
            suspended: shared.suspended(),
            from: Some(0),
        }
    }

    /// The next jobs listed, at most [`LISTED_PER_CHUNK`], as `peer` may see them; empty at the
    /// end. The registry is held while they are copied, never while they are written out.
    pub fn next_chunk(&mut self) -> Vec<JobView> {
        let mut jobs = Vec::new();
        let running_per_user = self.shared.config().limits.running_jobs_per_user;
        while let Some(from) = self.from {
            let registry = self.shared.lock();
            let mut scanned = 0;
            self.from = None;
            for view in registry.jobs_from(from).take(LISTED_PER_LOCK) {
                scanned += 1;
                if jobs.len() == LISTED_PER_CHUNK {
                    self.from = Some(view.id);
                    break;
                }
                if scanned == LISTED_PER_LOCK {
                    self.from = Some(view.id + 1);
                }
                if !self.all && view.state.ended() {
                    continue;
                }
                let state = match view.state {
                    JobState::Running if self.suspended.contains(&view.id) => JobState::Suspended,
                    state => state,
                };
                // Filtered before the copy: a filtered listing of a long history copies little. By
                // the name `peer` sees, or `--name` would tell which program a hidden job runs.
                let name = match hidden_from(self.shared, self.peer, view) {
                    true => privacy::seen_name(view),
                    false => &view.name,
                };
                if !self.filter.keeps(view, state, name) {
                    continue;
                }
                let mut listed = registry.with_slowdown(view.clone(), self.now);
                listed.state = state;
                listed.reason = registry
                    .pending_reason(view.id, running_per_user)
                    .map(String::from);
                jobs.push(listed);
            }
            drop(registry);
            if !jobs.is_empty() {
                break;
            }
        }
        jobs.into_iter()
            .map(|view| as_seen_by(self.shared, self.peer, view))
            .collect()
    }
}

fn jobs(shared: &Shared, all: bool, filter: &JobFilter, peer: Peer) -> Reply {
    let mut listing = Listing::new(shared, all, filter, peer);
    let mut jobs = Vec::new();
    loop {
        let chunk = listing.next_chunk();
        if chunk.is_empty() {
            return Reply::Jobs { jobs };
        }
        jobs.extend(chunk);
    }
}

fn show(shared: &Shared, id: u64, peer: Peer) -> Result<Reply, ServiceError> {
    let registry = shared.lock();
    let view = registry.job(id).ok_or(ServiceError::NoSuchJob(id))?;
    let view = registry.with_slowdown(view.clone(), now_unix());
    drop(registry);
    Ok(Reply::Job {
        job: Box::new(as_seen_by(shared, peer, view)),
    })
}

/// A weight above 1 puts a job ahead of every other user's: root and the daemon's own user only.
fn check_weight(shared: &Shared, weight: f64, peer: Peer) -> Result<(), ServiceError> {
    if weight > 1.0 && !shared.privileged(peer.uid) {
        return Err(ServiceError::WeightAboveOne {
            weight,
            daemon: shared.daemon_uid(),
        });
    }
    Ok(())
}

/// A negative nice or a priority puts a job ahead of its user's others, as Slurm lets only its
/// administrators: root and the daemon's own user only.
fn check_priority(shared: &Shared, s: &Submission, peer: Peer) -> Result<(), ServiceError> {
    let action = match (s.nice < 0, s.priority.is_some()) {
        (_, true) => "give a job a --priority",
        (true, false) => "give a job a negative --nice",
        (false, false) => return Ok(()),
    };
    if !shared.privileged(peer.uid) {
        return Err(ServiceError::NotPrivileged {
            daemon: shared.daemon_uid(),
            action,
        });
    }
    Ok(())
}

/// Whether `uid` may queue one more job (`limits.queued_jobs_per_user`; root has no limit).
fn check_queue(shared: &Shared, registry: &Registry, uid: u32) -> Result<(), ServiceError> {
    let limit = shared.config().limits.queued_jobs_per_user;
    if uid != 0 && registry.load_of(uid).queued >= limit {
        return Err(ServiceError::QueueFull { uid, limit });
    }
    Ok(())
}

/// The journal keeps a job's command line and environment until it ends, and its command line for
/// its history: `limits.submission_bytes` bounds them (root has no limit).
fn check_size(shared: &Shared, s: &Submission, peer: Peer) -> Result<(), ServiceError> {
    let limit = shared.config().limits.submission_bytes;
    let command: usize = s.command.iter().map(String::len).sum();
    let env: usize = s.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let bytes = command + env;
    if peer.uid != 0 && bytes > limit {
        return Err(ServiceError::SubmissionTooLarge { bytes, limit });
    }
    Ok(())
}

fn submit(shared: &Shared, mut submission: Submission, peer: Peer) -> Result<Reply, ServiceError> {
    check_submission(&submission)?;
    check_served(shared, peer)?;
    check_size(shared, &submission, peer)?;
    check_weight(shared, submission.weight, peer)?;
    check_priority(shared, &submission, peer)?;
    // Looked up before the lock: the user database may be a network service.
    let user = submission
        .names_its_output()
        .then(|| crate::output_paths::user_name(peer.uid));
    // Without `-o`, standard output at least goes to the state directory's logs.
    if submission.output.is_none() {
        crate::logs::make_room(shared, peer.uid)?;
    }
    let committed = shared.commit(|registry| {
        check_queue(shared, registry, peer.uid)?;
        check_array(registry, &submission, peer.uid)?;
        check_memory(shared, registry, submission.mem)?;
        // `--mem 0`, as in Slurm: all of the node's memory for jobs.
        if submission.mem == Some(0) {
            submission.mem = Some(registry.memory_for_jobs());
        }
        check_dependencies(registry, &submission, peer.uid)?;
        let id = registry.new_id()?;
        let (stdout, stderr) = output_files(shared, &submission, id, peer.uid, user.as_deref())?;
        let submitted = Entry::Submitted {
            id,
            t: now_unix(),
            uid: peer.uid,
            gid: peer.gid,
            submission,
            stdout,
            stderr,
        };
        Ok((vec![submitted], id))
    });
    // Acknowledged only once durable. The executor may take the job before this returns, but its
    // `started` entry, synced in the same file, cannot reach the disk before this one.
    match committed {
        Ok(id) => Ok(Reply::Submitted { id }),
        Err(CommitError::NotDurable(id, e)) => Err(ServiceError::QueuedNotDurable {
            id,
            reason: Box::new(e),
        }),
        Err(e) => Err(e.into()),
    }
}

/// The jobs `s` depends on exist, and are `uid`'s own (or `uid` is root); one named by
/// `aftercorr` begins an array.
fn check_dependencies(registry: &Registry, s: &Submission, uid: u32) -> Result<(), ServiceError> {
    for dependency in &s.dependency {
        match registry.job(dependency.id) {
            Some(job) if dependency.after == After::Corr && job.array_id != Some(job.id) => {
                return Err(ServiceError::BadDependency {
                    id: dependency.id,
                    why: "aftercorr names a job array by its id (its first element's); \
                          this job begins no array",
                })
            }
            Some(job) if job.uid == uid || uid == 0 => {}
            Some(job) => {
                return Err(ServiceError::NotOwner {
                    id: dependency.id,
                    owner: job.uid,
                })
            }
            None => return Err(ServiceError::NoSuchJob(dependency.id)),
        }
    }
    Ok(())
}

/// A memory request must be enforceable here and fit the node's memory for jobs, or it would
/// never start.
fn check_memory(
    shared: &Shared,
    registry: &Registry,
    mem: Option<u64>,
) -> Result<(), ServiceError> {
    let Some(asked) = mem else {
        return Ok(());
    };
    if let Err(why) = shared.memory_limits() {
        return Err(ServiceError::MemoryNotEnforced(why.to_string()));
    }
    let available = registry.memory_for_jobs();
    match asked <= available {
        true => Ok(()),
        false => Err(ServiceError::MemoryAboveNode {
            asked: Size(asked),
            available: Size(available),
        }),
    }
}

/// A later element of an array names its first element, which must be the same user's and
/// begin an array.
fn check_array(registry: &Registry, s: &Submission, uid: u32) -> Result<(), ServiceError> {
    let Some(first) = s.array.and_then(|a| a.of) else {
        return Ok(());
    };
    match registry.job(first) {
        Some(job) if job.uid == uid && job.array_id == Some(first) => Ok(()),
        _ => Err(ServiceError::NoSuchArray(first)),
    }
}

/// Where job `id` writes: the files its user named (Slurm's `-o`/`-e`; standard error to standard
/// output's file unless named apart), else `<id>.stdout` and `<id>.stderr` in the state directory.
/// `user`: the submitter's name, needed when the user named a file.
fn output_files(
    shared: &Shared,
    s: &Submission,
    id: u64,
    peer_uid: u32,
    user: Option<&str>,
) -> Result<(PathBuf, PathBuf), ServiceError> {
    let default = |stream: &str| shared.logs_of(peer_uid).join(format!("{id}.{stream}"));
    let Some(user) = user else {
        return Ok((default("stdout"), default("stderr")));
    };
    let job = crate::output_paths::JobNames {
        id,
        name: &s.name,
        user,
        array: s.array.map(|a| (a.of.unwrap_or(id), a.index)),
    };
    let expand = |pattern: &str| crate::output_paths::expand(pattern, &job, &s.cwd);
    let stdout = match &s.output {
        Some(pattern) => expand(pattern)?,
        None => default("stdout"),
    };
    let stderr = match (&s.error, &s.output) {
        (Some(pattern), _) => expand(pattern)?,
        (None, Some(_)) => stdout.clone(),
        (None, None) => default("stderr"),
    };
    Ok((stdout, stderr))
}

fn attach(shared: &Shared, a: Attachment, peer: Peer) -> Result<Reply, ServiceError> {
    check_served(shared, peer)?;
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
        ..Submission::of("")
    };
    check_submission(&submission)?;
    check_weight(shared, submission.weight, peer)?;
    let committed = shared.commit(|registry| {
        // Under the lock: two requests for one process cannot both pass.
        let ancestors = cosched_linux::procfs::ancestors(found.pid);
        let holder = registry.jobs().find(|j| {
            !j.state.ended()
                && j.pids()
                    .any(|p| crate::attach::overlaps(found.pid, &ancestors, p as i32))
        });
        if let Some(holder) = holder {
            return Err(ServiceError::AlreadyAttached {
                pid: found.pid,
                job: holder.id,
                name: holder.name.clone(),
            });
        }
        let step_job = found
            .slurm
            .as_ref()
            .and_then(|step| crate::attach::job_of_step(registry, step, found.uid));
        if let Some(id) = step_job {
            // Another task of its Slurm step: one gang, one partition, ended when its last task
            // ends.
            let joined = Entry::Joined {
                id,
                t: now_unix(),
                pid: found.pid as u32,
                start_ticks: found.start_ticks,
            };
            return Ok((vec![joined], id));
        }
        check_queue(shared, registry, found.uid)?;
        let id = registry.new_id()?;
        let attached = Entry::Attached {
            id,
            t: now_unix(),
            uid: found.uid,
            gid: peer.gid,
            submission,
            pid: found.pid as u32,
            start_ticks: found.start_ticks,
            in_place: a.in_place,
        };
        Ok((vec![attached], id))
    });
    Ok(Reply::Attached { id: committed? })
}

/// Switches the running policy: it takes over every job at the executor's next pass, and the
/// journal keeps it for the next daemon.
fn switch_policy(shared: &Shared, name: String, peer: Peer) -> Result<Reply, ServiceError> {
    if !shared.privileged(peer.uid) {
        return Err(ServiceError::NotPrivileged {
            daemon: shared.daemon_uid(),
            action: "switch its policy",
        });
    }
    // Checked before it is journaled; the registry creates it again from its name.
    cosched_policies::create(&name)?;
    let policy = Entry::Policy {
        t: now_unix(),
        name: name.clone(),
        uid: peer.uid,
    };
    shared.commit(|_| Ok((vec![policy], ())))?;
    Ok(Reply::Policy { name })
}

/// Cancels every job of `ids` or none: all are checked before any is cancelled, and one fsync after
/// the registry's lock is released makes every cancellation durable.
fn cancel(shared: &Shared, ids: &[u64], peer: Peer) -> Result<Reply, ServiceError> {
    shared.commit(|registry| {
        registry.check_cancel(ids, peer.uid)?;
        let t = now_unix();
        let entries = ids
            .iter()
            .flat_map(|&id| registry.cancellation(id, t, None))
            .collect();
        Ok((entries, ()))
    })?;
    Ok(Reply::Cancelled { ids: ids.to_vec() })
}

/// Holds (`held`) or releases pending jobs `ids`.
fn hold(shared: &Shared, ids: &[u64], held: bool, peer: Peer) -> Result<Reply, ServiceError> {
    shared.commit(|registry| {
        registry.check_hold(ids, peer.uid)?;
        let t = now_unix();
        let entries = ids.iter().map(|&id| Entry::Held { id, t, held }).collect();
        Ok((entries, ()))
    })?;
    Ok(Reply::Held {
        ids: ids.to_vec(),
        held,
    })
}

fn wait(shared: &Shared, ids: &[u64], peer: Peer) -> Result<Reply, ServiceError> {
    let mut registry = shared.lock();
    let mut checked = 0;
    loop {
        if let Some(jobs) = registry.ended(ids, &mut checked)? {
            let jobs = jobs
                .into_iter()
                .map(|view| as_seen_by(shared, peer, view))
                .collect();
            return Ok(Reply::Ended { jobs });
        }
        registry = shared.wait_for_an_end(registry);
    }
}

/// The longest working directory or output file name taken (Linux's `PATH_MAX`): they are kept with
/// the job's history.
const MAX_PATH_BYTES: usize = 4096;

/// The longest time limit taken: 100 years, in seconds.
const MAX_TIME_LIMIT: u64 = 100 * 365 * 86400;

fn check_submission(s: &Submission) -> Result<(), ServiceError> {
    if s.command.first().is_none_or(|p| p.is_empty()) {
        return Err(ServiceError::NoCommand);
    }
    if s.name.is_empty() || s.name.len() > 200 || s.name.chars().any(char::is_control) {
        return Err(ServiceError::BadName);
    }
    if !s.cwd.is_absolute() {
        return Err(ServiceError::RelativeCwd(s.cwd.clone()));
    }
    let mut paths = [s.cwd.as_os_str().len()]
        .into_iter()
        .chain([&s.output, &s.error].into_iter().flatten().map(String::len));
    if paths.any(|len| len > MAX_PATH_BYTES) {
        return Err(ServiceError::PathTooLong(MAX_PATH_BYTES));
    }
    if let (Some(min), Some(max)) = (s.min_threads, s.max_threads) {
        if min == 0 || min > max {
            return Err(ServiceError::BadThreads { min, max });
        }
    }
    if !(s.weight.is_finite() && s.weight > 0.0) {
        return Err(ServiceError::BadWeight(s.weight));
    }
    if let Some(limit) = s.time_limit.filter(|l| !(1..=MAX_TIME_LIMIT).contains(l)) {
        return Err(ServiceError::BadTimeLimit(limit));
    }
    if !(-MAX_NICE..=MAX_NICE).contains(&s.nice) {
        return Err(ServiceError::BadNice(s.nice));
    }
    if s.array.is_some_and(|a| a.limit == Some(0)) {
        return Err(ServiceError::BadArrayLimit);
    }
    check_labels(&s.labels)
}

/// Labels are shown to every user and written to the journal: short, printable, a bounded number.
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), ServiceError> {
    if labels.len() > 32 {
        return Err(ServiceError::TooManyLabels(labels.len()));
    }
    for (key, value) in labels {
        let key_ok = (1..=64).contains(&key.len())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !key_ok {
            return Err(ServiceError::BadLabelKey(key.clone()));
        }
        if value.len() > 256 || value.chars().any(char::is_control) {
            return Err(ServiceError::BadLabelValue(key.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
