//! Why the daemon refuses a request or cannot record it. The message is what the client prints, so
//! each names what is wrong and, where there is one, the fix.

use crate::protocol::JobState;
use cosched_core::memory::Size;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no job {0}; `cosched jobs --all` lists them")]
    NoSuchJob(u64),
    #[error(
        "job {id} belongs to uid {owner}; only its owner or root may cancel, hold or release it"
    )]
    NotOwner { id: u64, owner: u32 },
    #[error("job {id} has already ended ({state:?})")]
    AlreadyEnded { id: u64, state: JobState },
    #[error("job {id} ({state:?}) has started or is starting; only a pending job can be held or released")]
    NotPending { id: u64, state: JobState },
    #[error("dependency on job {id}: {why}")]
    BadDependency { id: u64, why: &'static str },
    #[error("this is the personal daemon of uid {daemon}; uid {peer} may not use it")]
    NotServed { daemon: u32, peer: u32 },
    #[error("only root or the daemon's own user (uid {daemon}) may {action}")]
    NotPrivileged { daemon: u32, action: &'static str },
    #[error("the job has no command; give one after `--`")]
    NoCommand,
    #[error("job names must be 1 to 200 printable characters")]
    BadName,
    #[error("working directory {0:?} is not absolute")]
    RelativeCwd(PathBuf),
    #[error("threads {min}:{max}: need 1 ≤ MIN ≤ MAX")]
    BadThreads { min: u32, max: u32 },
    #[error("weight {0} must be a positive number")]
    BadWeight(f64),
    #[error("job {0} is not the first element of an array of yours")]
    NoSuchArray(u64),
    #[error("output file {pattern:?}: {why}")]
    BadOutputPattern { pattern: String, why: String },
    #[error("time limit {0} s: give from 1 s to 100 years; without --time a job has no limit")]
    BadTimeLimit(u64),
    #[error("nice {0}: give from -2147483645 to 2147483645")]
    BadNice(i32),
    #[error("an array's limit of elements run at once (%MAX) must be at least 1")]
    BadArrayLimit,
    #[error("--mem cannot be enforced by this daemon: {0}; submit without --mem, or to a daemon run as root (the system daemon), which limits each job's memory with a cgroup")]
    MemoryNotEnforced(String),
    #[error("--mem {asked}: more than the {available} of this node's memory for jobs (its memory less memory.reserved in the daemon's configuration); ask for less")]
    MemoryAboveNode { asked: Size, available: Size },
    #[error("weight {weight} is above 1; only root or the daemon's own user (uid {daemon}) may weigh a job above others")]
    WeightAboveOne { weight: f64, daemon: u32 },
    #[error("uid {uid} has {limit} jobs queued, the most one user may (limits.queued_jobs_per_user in the daemon's configuration); wait until some have started, or cancel some")]
    QueueFull { uid: u32, limit: usize },
    #[error(
        "no job id is left for a new job: the executor holds ids up to {}",
        u32::MAX
    )]
    IdsExhausted,
    #[error("the job's command line and environment take {bytes} bytes, more than the {limit} one job may carry (limits.submission_bytes in the daemon's configuration); pass long inputs in a file")]
    SubmissionTooLarge { bytes: usize, limit: usize },
    #[error("working directories and output file names are at most {0} bytes")]
    PathTooLong(usize),
    #[error("uid {uid}'s logs in {dir} take {bytes} bytes, the most one user may keep there (limits.log_bytes_per_user in the daemon's configuration); remove some with `cosched logs --remove ID`, or send output elsewhere with -o")]
    LogsFull { uid: u32, dir: PathBuf, bytes: u64 },
    #[error(
        "job {0} has not ended; its logs can be removed once it has (`cosched cancel` ends it)"
    )]
    LogsInUse(u64),
    #[error("job {id} has no logs of uid {uid} in the daemon's state directory (files named with -o or -e are the user's own to remove)")]
    NoLogs { id: u64, uid: u32 },
    #[error("cannot create the log directory {path}: {reason}")]
    LogDirectory { path: PathBuf, reason: io::Error },
    #[error("cannot remove {path}: {reason}")]
    RemoveLogs { path: PathBuf, reason: io::Error },
    #[error("{0} labels; at most 32 are kept")]
    TooManyLabels(usize),
    #[error("label key {0:?}: use 1 to 64 letters, digits, '_', '-' or '.'")]
    BadLabelKey(String),
    #[error("label {0}: values are at most 256 printable characters")]
    BadLabelValue(String),
    #[error("process {pid} is already part of job {job} ({name})")]
    AlreadyAttached { pid: i32, job: u64, name: String },
    #[error(transparent)]
    NotAttachable(#[from] NotAttachable),
    #[error("the daemon serves {open} connections, its most (limits.connections); try again")]
    TooManyConnections { open: usize },
    #[error("the daemon serves {open} connections; the last {reserved} are root's (limits.connections_reserved_for_root); try again")]
    RootsConnections { open: usize, reserved: usize },
    #[error("uid {uid} has {open} connections open, the most one user may (limits.connections_per_user); each `cosched wait` holds one: end some and try again")]
    UsersConnections { uid: u32, open: usize },
    #[error(transparent)]
    Policy(#[from] cosched_policies::UnknownPolicy),
    // `reason`, not `source`: the message includes it, and a chain printed whole would repeat it.
    #[error("cannot write the journal {path}: {reason}")]
    Journal { path: PathBuf, reason: io::Error },
    #[error("the file system at {mount} is full, so the journal {path} cannot record this; nothing was done: free space there and try again")]
    JournalFull { path: PathBuf, mount: PathBuf },
    #[error("job {id} is queued, but {reason}")]
    QueuedNotDurable { id: u64, reason: Box<ServiceError> },
}

/// Why `cosched attach` refuses a process (`attach.rs`). None says whose another user's process is.
#[derive(Debug, thiserror::Error)]
pub enum NotAttachable {
    #[error("{0} is not a process id")]
    NotAPid(u32),
    #[error(
        "process {0} is not yours or not running (pids are those of the daemon's pid namespace)"
    )]
    NotYoursOrGone(i32),
    #[error("process {0} is init or a kernel thread; only user processes can be attached")]
    System(i32),
    #[error(
        "process {0} is the cosched daemon or one of its ancestors; it cannot schedule itself"
    )]
    Daemon(i32),
    #[error("process {0} belongs to a job cosched started (or is its watchdog); `cosched jobs` lists it")]
    CoschedJob(i32),
}
