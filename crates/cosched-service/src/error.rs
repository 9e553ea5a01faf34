//! Why the daemon refuses a request or cannot record it. The message is what the client prints, so
//! each names what is wrong and, where there is one, the fix.

use crate::protocol::JobState;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no job {0}; `cosched jobs --all` lists them")]
    NoSuchJob(u64),
    #[error("job {id} belongs to uid {owner}; only its owner or root may cancel it")]
    NotOwner { id: u64, owner: u32 },
    #[error("job {id} has already ended ({state:?})")]
    AlreadyEnded { id: u64, state: JobState },
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
    #[error("weight {weight} is above 1; only root or the daemon's own user (uid {daemon}) may weigh a job above others")]
    WeightAboveOne { weight: f64, daemon: u32 },
    #[error("uid {uid} has {limit} jobs queued, the most one user may (limits.queued_jobs_per_user in the daemon's configuration); wait until some have started, or cancel some")]
    QueueFull { uid: u32, limit: usize },
    #[error("{0} labels; at most 32 are kept")]
    TooManyLabels(usize),
    #[error("label key {0:?}: use 1 to 64 letters, digits, '_', '-' or '.'")]
    BadLabelKey(String),
    #[error("label {0}: values are at most 256 printable characters")]
    BadLabelValue(String),
    #[error("process {pid} is already part of job {job} ({name})")]
    AlreadyAttached { pid: i32, job: u64, name: String },
    /// `cosched attach` refused the process; the text says why (`attach.rs`).
    #[error("{0}")]
    NotAttachable(String),
    #[error(transparent)]
    Policy(#[from] cosched_policies::UnknownPolicy),
    #[error("cannot write the journal {path}: {source}")]
    Journal { path: PathBuf, source: io::Error },
    #[error("job {id} is queued, but {source}")]
    QueuedNotDurable { id: u64, source: Box<ServiceError> },
}
