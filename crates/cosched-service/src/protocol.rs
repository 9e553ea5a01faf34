//! The wire format between clients and the daemon: one JSON object per line each way, over a Unix
//! stream socket. A request is `{"version":1,"request":{…}}`, a response `{"version":1,"reply":{…}}`.
//! Unknown fields are refused, so a typo is an error rather than a silently ignored option.
//! `docs/service.md` documents every request.

use cosched_core::{JobHints, JobKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub const PROTOCOL_VERSION: u32 = 1;
/// The longest request line the daemon reads; longer ones are refused without being buffered.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub version: u32,
    pub request: Request,
}

/// One request line as a client sent it: the request, or the error the client is told.
pub fn decode(line: &[u8]) -> Result<Request, String> {
    match serde_json::from_slice::<Envelope>(line) {
        Err(e) => Err(format!("malformed request: {e}")),
        Ok(envelope) if envelope.version != PROTOCOL_VERSION => Err(format!(
            "protocol version {} is not spoken here; this daemon speaks version {PROTOCOL_VERSION}",
            envelope.version
        )),
        Ok(envelope) => Ok(envelope.request),
    }
}

// One request is decoded per message and handled at once: never stored in bulk, so the size of its
// largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Submit(Submission),
    /// Every job of the daemon's history with `all`, else those queued or running; those `filter`
    /// keeps.
    Jobs {
        all: bool,
        #[serde(default)]
        filter: JobFilter,
    },
    Show {
        id: u64,
    },
    Cancel {
        ids: Vec<u64>,
    },
    /// Holds pending jobs (Slurm's `scontrol hold`): they do not start until released.
    Hold {
        ids: Vec<u64>,
    },
    /// Releases held jobs (Slurm's `scontrol release`, for `submit --hold`).
    Release {
        ids: Vec<u64>,
    },
    /// Answered once every job named has ended.
    Wait {
        ids: Vec<u64>,
    },
    /// The running policy, switched to `set` when given (root or the daemon's own user only).
    Policy {
        set: Option<String>,
    },
    /// How many slot switches the daemon made and how late the latest ones came.
    Switches {},
    /// Adopt a running process and its descendants as a job (the process's owner or root only).
    Attach(Attachment),
    /// Remove the logs the daemon keeps for job `id`, which has ended or been forgotten (its owner's
    /// own, or any with root).
    RemoveLogs {
        id: u64,
    },
}

/// Which jobs a listing keeps: each list that is not empty must hold the job's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobFilter {
    pub users: Vec<u32>,
    /// States as listed (`suspended` is a running job frozen between its slots).
    pub states: Vec<JobState>,
    pub names: Vec<String>,
    /// Jobs that had not ended by this Unix time.
    pub since: Option<f64>,
    /// Elements of these arrays (by the array's id).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arrays: Vec<u64>,
}

impl JobFilter {
    /// Whether `view`, listed in `state` and under `name` (its own, or the one a user who may not
    /// see it is shown), is kept.
    pub fn keeps(&self, view: &JobView, state: JobState, name: &str) -> bool {
        (self.users.is_empty() || self.users.contains(&view.uid))
            && (self.states.is_empty() || self.states.contains(&state))
            && (self.names.is_empty() || self.names.iter().any(|n| n == name))
            && (self.arrays.is_empty() || view.array_id.is_some_and(|a| self.arrays.contains(&a)))
            && self
                .since
                .is_none_or(|t| !view.state.ended() || view.finished.is_none_or(|f| f >= t))
    }
}

/// A job as a client submits it. The daemon adds who submitted it (from the socket's credentials).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub name: String,
    /// Program and arguments, run without a shell.
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// The job's whole environment (the executor adds its own variables).
    pub env: BTreeMap<String, String>,
    pub min_threads: Option<u32>,
    pub max_threads: Option<u32>,
    pub kind: JobKind,
    pub weight: f64,
    pub coschedule: bool,
    pub hints: JobHints,
    /// Free KEY=VALUE pairs shown with the job (a batch system's job and step ids, say); cosched
    /// itself ignores them.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Seconds the job may run (Slurm's `--time`): then it is sent SIGTERM, and SIGKILL after the
    /// daemon's `jobs.kill_wait_seconds`. `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    /// Where standard output goes (Slurm's `--output`), relative to `cwd`, with `%j`-style symbols
    /// (`output_paths.rs`); the file is opened as the job's user. `None`: the state directory's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Where standard error goes (`--error`); `None` with an `output`: the same file, as in Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An element of a job array (`submit --array`, `--each-line`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayElement>,
    /// Jobs that must end (or start) first, and how (Slurm's `--dependency`); all must be met,
    /// or one with `dependency_any`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependency: Vec<Dependency>,
    /// One of `dependency` met is enough (Slurm's `?` between them), not all (`,`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dependency_any: bool,
    /// Starts only once no earlier job of its user with its name is left to end (Slurm's
    /// `singleton`): one such job runs at a time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub singleton: bool,
    /// Unix time before which it does not start (Slurm's `--begin`), pending for `begin_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<f64>,
    /// Held (Slurm's `--hold`): pending for `job_held_user` until `cosched release`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
    /// Runs with no other job beside it (Slurm's `--exclusive`): it starts once the node is
    /// empty, and no other starts until it has ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// Bytes of memory the job's processes may hold together (Slurm's `--mem`): its cgroup's limit,
    /// and what admission counts against the node's memory. `None`: no limit, not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<u64>,
    /// Lowers the job's priority by this much (Slurm's `--nice`); below 0 (root or the daemon's own
    /// user only) raises it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nice: i32,
    /// The job's priority before its `nice` (Slurm's `--priority`; root or the daemon's own user
    /// only); `None`: [`DEFAULT_PRIORITY`]. A user's queued jobs start highest priority first,
    /// then in submission order; users' turns stay fair whatever their jobs' priorities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// The submitter's file mode creation mask, which the job starts with; `None` (a client that
    /// does not send it): [`DEFAULT_UMASK`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// The umask of a job whose client did not send one: files it makes are readable by all, as in
/// most distributions' login shells.
pub const DEFAULT_UMASK: u32 = 0o022;

/// The priority of a job submitted without `--priority`.
pub const DEFAULT_PRIORITY: u32 = 0;
/// The largest `nice` either way, as in Slurm.
pub const MAX_NICE: i32 = 2_147_483_645;

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A job this one waits for (Slurm's `after`, `afterok`, `afterany`, `afternotok`, `aftercorr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    pub after: After,
    pub id: u64,
    /// Minutes to wait after job `id` started (Slurm's `after:ID+MINUTES`; `after` only).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub minutes: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum After {
    /// Once it has started, or ended without starting (Slurm's `after`).
    Start,
    /// Once it has ended done (exit 0).
    Ok,
    /// Once it has ended, however.
    Any,
    /// Once it has ended other than done.
    NotOk,
    /// Each element of an array once the element of the same index of array `id` has ended done
    /// (Slurm's `aftercorr`); an element with no such counterpart does not wait.
    Corr,
}

impl Dependency {
    /// Whether a job that ended in `state` meets it.
    pub fn met_by(&self, state: JobState) -> bool {
        match self.after {
            After::Any | After::Start => true,
            After::Ok | After::Corr => state == JobState::Done,
            After::NotOk => state != JobState::Done,
        }
    }
}

impl std::fmt::Display for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let after = match self.after {
            After::Start => "after",
            After::Corr => "aftercorr",
            After::Ok => "afterok",
            After::Any => "afterany",
            After::NotOk => "afternotok",
        };
        match self.minutes {
            0 => write!(f, "{after}:{}", self.id),
            minutes => write!(f, "{after}:{}+{minutes}", self.id),
        }
    }
}

/// Where a job stands in its array: the array is named by the id of its first element, which
/// the client learns when it submits that one (`of: None`) and names for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayElement {
    pub index: u64,
    pub of: Option<u64>,
    /// At most this many elements of the array run at once (sbatch's `--array …%MAX`); the others
    /// wait `pending`, reason `array_task_limit`. Every element carries the array's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl Submission {
    /// The priority its queued job is ordered by: `priority` less `nice`.
    pub fn effective_priority(&self) -> i64 {
        i64::from(self.priority.unwrap_or(DEFAULT_PRIORITY)) - i64::from(self.nice)
    }

    /// Whether the user named the output files, which are then opened with the user's rights.
    pub fn names_its_output(&self) -> bool {
        self.output.is_some() || self.error.is_some()
    }
}

impl Submission {
    /// One program without arguments, from `/`, with every other field at its default: what tests
    /// and benches build on.
    pub fn of(program: &str) -> Submission {
        Submission {
            name: program.into(),
            command: vec![program.into()],
            cwd: "/".into(),
            env: Default::default(),
            min_threads: None,
            max_threads: None,
            kind: Default::default(),
            weight: 1.0,
            coschedule: true,
            hints: Default::default(),
            labels: Default::default(),
            time_limit: None,
            output: None,
            error: None,
            array: None,
            dependency: Vec::new(),
            dependency_any: false,
            singleton: false,
            begin: None,
            hold: false,
            exclusive: false,
            nice: 0,
            priority: None,
            mem: None,
            umask: None,
        }
    }
}

/// A running process to adopt as a job, as `cosched attach` sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// In the daemon's pid namespace.
    pub pid: u32,
    /// The job's name; the process's own (`comm`) when absent.
    pub name: Option<String>,
    pub min_threads: Option<u32>,
    pub max_threads: Option<u32>,
    pub kind: JobKind,
    pub weight: f64,
    pub coschedule: bool,
    pub hints: JobHints,
    pub labels: BTreeMap<String, String>,
    /// Leave the process in the cgroups it is in (a batch system's): it is then placed by affinity
    /// and frozen by signals instead of being moved into cosched's cgroups.
    pub in_place: bool,
    /// Move the process into cosched's cgroups even out of cgroups that limit it (which it then
    /// escapes); without it, a process under another cgroup manager's limits stays in place.
    #[serde(default)]
    pub move_out: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub version: u32,
    pub reply: Reply,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Submitted {
        id: u64,
    },
    Attached {
        id: u64,
    },
    Jobs {
        jobs: Vec<JobView>,
    },
    Job {
        job: Box<JobView>,
    },
    Cancelled {
        ids: Vec<u64>,
    },
    /// The jobs `ids` are held (`held`) or released.
    Held {
        ids: Vec<u64>,
        held: bool,
    },
    Ended {
        jobs: Vec<JobView>,
    },
    Policy {
        name: String,
    },
    /// `recent_lateness`: seconds after its deadline each of the latest switches began, oldest first.
    Switches {
        total: u64,
        recent_lateness: Vec<f64>,
    },
    /// The logs of job `id` were removed, `bytes` in all.
    LogsRemoved {
        id: u64,
        bytes: u64,
    },
    Error {
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Not started: `reason` in its view says why (Slurm's `PENDING`).
    Queued,
    Running,
    /// Running, but frozen now between its slots (only as listed, never journaled).
    Suspended,
    Done,
    Failed,
    Cancelled,
    /// Its time limit passed: it was sent SIGTERM (and SIGKILL if it outlived the grace).
    Timeout,
    /// It failed after the kernel killed processes of it for passing its memory limit (Slurm's
    /// `OUT_OF_MEMORY`).
    Oom,
}

impl JobState {
    pub fn ended(self) -> bool {
        matches!(
            self,
            JobState::Done
                | JobState::Failed
                | JobState::Cancelled
                | JobState::Timeout
                | JobState::Oom
        )
    }

    /// Whether the daemon ended the job (cancelled, timed out): its state stays so whatever its
    /// process's exit says.
    pub fn ended_by_daemon(self) -> bool {
        matches!(self, JobState::Cancelled | JobState::Timeout)
    }
}

/// What the daemon knows of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobView {
    pub id: u64,
    pub name: String,
    pub uid: u32,
    pub state: JobState,
    pub command: Vec<String>,
    pub pid: Option<u32>,
    /// CPUs of its partition in the current plan (slot 0 or pinned), as a CPU list.
    pub cpus: Option<String>,
    pub threads: Option<u32>,
    /// Unix times, seconds.
    pub submitted: f64,
    pub started: Option<f64>,
    pub finished: Option<f64>,
    /// The exit status of its main process; 128 + the signal for one a signal ended, as shells
    /// give it.
    pub exit_code: Option<i32>,
    /// The signal that ended its main process: the SIGKILL of a cancel, of the kernel's
    /// out-of-memory killer, or after its time limit's grace; the SIGTERM of its time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub error: Option<String>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Started by an earlier daemon and adopted by this one.
    pub adopted: bool,
    /// A process cosched did not start (`cosched attach`); its exit status stays unknown.
    #[serde(default)]
    pub attached: bool,
    /// The pids of the further tasks that joined an attached job beside `pid`: the other tasks of
    /// its Slurm step on this node, all run as this one job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<u32>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Elapsed time over the shortest run of the same command that ended well, as far as the
    /// daemon's history goes (`slowdown.rs`); none for a command never seen to finish.
    #[serde(default)]
    pub slowdown: Option<f64>,
    /// Seconds it may run ([`Submission::time_limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    /// Why a queued job has not started: `job_held_user` (held until `cosched release`),
    /// `begin_time` (its `--begin` has not come), `dependency` (a job it depends on has not ended),
    /// `dependency_never_satisfied` (one ended so that its dependency cannot be met),
    /// `array_task_limit` (its array runs as many elements as its limit), `resources` (the policy
    /// has no CPUs for it yet), `user_limit` (its user runs `limits.running_jobs_per_user` jobs
    /// already) or `memory` (its `mem` does not fit beside the running jobs' within the node's
    /// memory for jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The array it belongs to (the id of its first element) and its index there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_index: Option<u64>,
    /// The order it starts in among its user's queued jobs, highest first
    /// ([`Submission::effective_priority`]), and the `nice` that lowered it.
    #[serde(default)]
    pub priority: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nice: i32,
    /// Bytes of memory it asked for ([`Submission::mem`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<u64>,
    /// What it used, once it has ended (none for a job that never started or whose end no daemon
    /// saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<Box<Accounting>>,
}

/// What an ended job used, kept in the journal with its end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accounting {
    /// CPU seconds in user mode and in the kernel, of its main process and the children it waited
    /// for (`wait4`'s usage); none for a job an earlier daemon started, whose parent alone learned
    /// them.
    pub user_seconds: Option<f64>,
    pub system_seconds: Option<f64>,
    /// The most memory it held at once, in bytes: its memory cgroup's peak where it had one
    /// (`--mem`), else the largest resident set of one of its processes, sampled while it ran and
    /// never counting the daemon's own memory.
    pub peak_memory: Option<u64>,
    /// Every CPU it was given while it ran, as a CPU list.
    pub cpus: Option<String>,
}

/// Bytes of an ended job's command line kept in the daemon's memory (the journal keeps it whole).
pub const ENDED_COMMAND_BYTES: usize = 1024;

impl JobView {
    /// Bytes the job takes in the journal once its environment is gone, near enough: what a user's
    /// history is bounded by (`history.bytes_per_user`).
    pub fn footprint(&self) -> u64 {
        let text = |s: &str| s.len() as u64 + 4;
        let command: u64 = self.command.iter().map(|a| text(a)).sum();
        let labels: u64 = self.labels.iter().map(|(k, v)| text(k) + text(v)).sum();
        let paths = self.stdout.as_os_str().len() + self.stderr.as_os_str().len();
        // The fixed fields of its entries, written out.
        const FIELDS: u64 = 512;
        FIELDS + text(&self.name) + command + labels + paths as u64
    }

    /// Cuts the command line of an ended job to its first [`ENDED_COMMAND_BYTES`], ending with
    /// `…` where it was cut: an ended job stays in memory for the whole history, a long command
    /// line does not.
    pub fn summarise(&mut self) {
        let total: usize = self.command.iter().map(String::len).sum();
        if total <= ENDED_COMMAND_BYTES {
            return;
        }
        let mut left = ENDED_COMMAND_BYTES;
        let mut kept = Vec::new();
        for arg in std::mem::take(&mut self.command) {
            if arg.len() <= left {
                left -= arg.len();
                kept.push(arg);
                continue;
            }
            let cut = (0..=left)
                .rev()
                .find(|&i| arg.is_char_boundary(i))
                .unwrap_or(0);
            kept.push(format!("{}…", &arg[..cut]));
            break;
        }
        self.command = kept;
    }

    /// Every pid the job holds: its main process and the tasks that joined it.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.pid.into_iter().chain(self.tasks.iter().copied())
    }

    /// A job just submitted by `uid` at `t`.
    pub fn queued(
        id: u64,
        uid: u32,
        t: f64,
        submission: &Submission,
        stdout: PathBuf,
        stderr: PathBuf,
    ) -> JobView {
        JobView {
            id,
            name: submission.name.clone(),
            uid,
            state: JobState::Queued,
            command: submission.command.clone(),
            pid: None,
            cpus: None,
            threads: None,
            submitted: t,
            started: None,
            finished: None,
            exit_code: None,
            signal: None,
            error: None,
            stdout,
            stderr,
            adopted: false,
            attached: false,
            tasks: Vec::new(),
            labels: submission.labels.clone(),
            slowdown: None,
            time_limit: submission.time_limit,
            reason: None,
            array_id: submission.array.map(|a| a.of.unwrap_or(id)),
            array_index: submission.array.map(|a| a.index),
            priority: submission.effective_priority(),
            nice: submission.nice,
            mem: submission.mem,
            accounting: None,
        }
    }

    /// The exit status `cosched wait` gives for this job: its own exit code, 128 + signal when
    /// killed (137 when the kernel's out-of-memory killer ended it), 1 for any other failure (a job
    /// cancelled or timed out that exited 0 included), and 0 while it has not ended.
    pub fn wait_status(&self) -> i32 {
        if let Some(signal) = self.signal {
            return 128 + signal;
        }
        match (self.state, self.exit_code) {
            (state, Some(0)) if state.ended_by_daemon() => 1,
            (JobState::Oom, None) => 128 + libc::SIGKILL,
            (_, Some(code)) => code,
            (JobState::Done, None) => 0,
            (JobState::Queued | JobState::Running | JobState::Suspended, None) => 0,
            _ => self
                .error
                .as_deref()
                .and_then(|e| e.strip_prefix("killed by signal "))
                .and_then(|rest| rest.split(' ').next()?.parse::<i32>().ok())
                .map_or(1, |signal| 128 + signal),
        }
    }
}

pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_versionless_requests_are_refused() {
        let ok: Envelope =
            serde_json::from_str(r#"{"version":1,"request":{"jobs":{"all":true}}}"#).unwrap();
        assert_eq!(
            ok.request,
            Request::Jobs {
                all: true,
                filter: JobFilter::default()
            }
        );
        for bad in [
            r#"{"version":1,"request":{"jobs":{"all":true,"extra":1}}}"#,
            r#"{"version":1,"request":{"jobs":{"all":true}},"x":2}"#,
            r#"{"request":{"jobs":{"all":true}}}"#,
            r#"{"version":1,"request":{"format_disk":{}}}"#,
        ] {
            assert!(serde_json::from_str::<Envelope>(bad).is_err(), "{bad}");
        }
    }

    /// Lines of every kind of request, as a client sends them.
    fn valid_lines() -> Vec<Vec<u8>> {
        let mut submission = Submission::of("/bin/true");
        submission.output = Some("out-%j".into());
        submission.labels.insert("k".into(), "v".into());
        let submit = serde_json::to_string(&Envelope {
            version: PROTOCOL_VERSION,
            request: Request::Submit(submission),
        })
        .unwrap();
        let requests = [
            r#"{"jobs":{"all":true,"filter":{"users":[1],"states":["running"],"names":["a"],"since":1.5}}}"#,
            r#"{"show":{"id":3}}"#,
            r#"{"cancel":{"ids":[1,2]}}"#,
            r#"{"wait":{"ids":[4]}}"#,
            r#"{"policy":{"set":"eq"}}"#,
            r#"{"switches":{}}"#,
            r#"{"attach":{"pid":1,"name":null,"min_threads":null,"max_threads":2,"kind":"rigid","weight":1.0,"coschedule":true,"hints":{},"labels":{},"in_place":false}}"#,
        ];
        let lines = requests.map(|r| format!(r#"{{"version":1,"request":{r}}}"#));
        let lines: Vec<Vec<u8>> = lines
            .into_iter()
            .chain([submit])
            .map(String::into_bytes)
            .collect();
        for line in &lines {
            assert!(decode(line).is_ok(), "{}", String::from_utf8_lossy(line));
        }
        lines
    }

    /// What the daemon makes of `line`: a request that encodes back to one it decodes alike, or
    /// an error to send.
    fn check(line: &[u8]) {
        match decode(line) {
            Ok(request) => {
                let again = serde_json::to_vec(&Envelope {
                    version: PROTOCOL_VERSION,
                    request,
                })
                .unwrap();
                assert!(decode(&again).is_ok());
            }
            Err(message) => assert!(!message.is_empty()),
        }
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_are_refused_or_a_request(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            check(&bytes);
        }

        #[test]
        fn cut_and_mutated_requests_are_refused_or_a_request(
            which in 0usize..8,
            cut in proptest::num::usize::ANY,
            edits in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY, 0u8..3), 0..6),
        ) {
            let mut line = valid_lines()[which].clone();
            for (at, byte, how) in edits {
                let at = at % (line.len() + 1);
                match how {
                    0 => line.insert(at, byte),
                    1 if at < line.len() => line[at] = byte,
                    _ if at < line.len() => { line.remove(at); }
                    _ => {}
                }
            }
            check(&line);
            line.truncate(cut % (line.len() + 1));
            check(&line);
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        for open in ["[", "{\"a\":"] {
            let line = format!(
                r#"{{"version":1,"request":{{"jobs":{{"all":{}"#,
                open.repeat(100_000)
            );
            assert!(decode(line.as_bytes()).is_err());
        }
    }
}
