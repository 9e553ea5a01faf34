//! `cosched daemon`: takes the state directory (one daemon per directory), replays the journal and
//! adopts the jobs an earlier daemon left running, listens on the socket, and runs the executor on its
//! own thread until SIGTERM, SIGINT or SIGHUP. On the way out, as when it dies, its jobs keep running,
//! thawed, for the next daemon to adopt (`docs/service.md`).

use crate::config::DaemonConfig;
use crate::error::ServiceError;
use crate::journal::{Entry, Journal, Replayed};
use crate::notify;
use crate::processes::kill_unwatched;
use crate::protocol::{now_unix, JobState};
use crate::registry::{Registry, Tracked};
use crate::scaling_history::ScalingHistory;
use crate::source::DaemonSource;
use crate::state::Shared;
use cosched_core::topology::{sysfs, TopologyError};
use cosched_core::Policy;
use cosched_linux::{Adopt, OnDeath, RunOptions, RunSetup};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::stat::{umask, Mode};
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub struct DaemonOptions {
    pub socket: PathBuf,
    pub state: PathBuf,
    /// `None`: the last policy the journal names, else `auto`.
    pub policy: Option<String>,
    /// How long a client may take to send a whole request before the daemon closes its connection.
    pub idle_timeout: Duration,
    pub config: DaemonConfig,
    /// What the command line records of this start (build, host, kernel, cgroups, privileges,
    /// date, its own arguments), written beside the start's trace as `<trace>.metadata.json` for
    /// `cosched report --since`.
    pub metadata: Option<serde_json::Value>,
}

/// Most jobs running at once (the watchdog's table).
const CAPACITY: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("another cosched daemon already uses {0}; stop it first (`systemctl stop cosched`, or kill the pid in its `lock` file)")]
    AlreadyRunning(PathBuf),
    #[error(transparent)]
    Run(#[from] cosched_linux::Error),
    #[error("cannot read the machine's topology: {0}")]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Policy(#[from] cosched_policies::UnknownPolicy),
    #[error(transparent)]
    Journal(#[from] ServiceError),
    #[error(transparent)]
    UnsafeDirectory(#[from] crate::paths::UnsafePlace),
}

fn io_error(what: String) -> impl FnOnce(io::Error) -> DaemonError {
    move |source| DaemonError::Io { what, source }
}

/// Runs the daemon until a signal stops it.
pub fn run(options: &DaemonOptions) -> Result<(), DaemonError> {
    // Held from the start: a SIGTERM that comes while the journal is replayed or once clients can
    // connect, before the executor's loop has its own handlers, stops the daemon at the loop's
    // first pass like any other, instead of killing it on the spot.
    let _stop_signals = cosched_linux::Interrupts::register()
        .map_err(io_error("cannot install signal handlers".into()))?;
    let system = crate::paths::is_root();
    let (logs, traces) = make_state_dirs(&options.state)?;
    umask(Mode::from_bits_truncate(0o077));
    let _lock = take_lock(&options.state)?;
    let shm = Path::new("/dev/shm");
    match cosched_native::control::remove_stale_pages(shm) {
        0 => {}
        n => eprintln!(
            "cosched: removed {n} control pages that daemons which died left in {}",
            shm.display()
        ),
    }
    notify::tell("STATUS=replaying the journal");
    let topology = sysfs::discover()?;
    let Restored {
        shared,
        policy_name,
        policy,
    } = restore_state(options, logs.clone())?;
    let listener = listen(&options.socket, system)?;
    let server = {
        let shared = shared.clone();
        let idle = options.idle_timeout;
        std::thread::Builder::new()
            .name("cosched-server".into())
            .spawn(move || crate::server::serve(listener, shared, idle))
            .map_err(io_error("cannot start the server thread".into()))?
    };
    drop(server);
    forget_ended_jobs(shared.clone())?;
    let (adopted, queued) = shared.lock().waiting();
    // Ready once clients can connect, every job of the journal is known again, and the executor's
    // loop runs (its signal handlers in place): its first progress report.
    let mut ready = Some(format!(
        "READY=1\nSTATUS=serving {} with policy {}; {adopted} running jobs adopted, {queued} queued",
        options.socket.display(),
        policy_name
    ));
    // With the pid, a daemon restarted within the second does not overwrite its predecessor's.
    let trace = traces.join(format!(
        "daemon-{}-{}.jsonl",
        now_unix() as u64,
        std::process::id()
    ));
    if let Some(metadata) = &options.metadata {
        let path = trace.with_extension("metadata.json");
        fs::write(&path, format!("{metadata:#}\n"))
            .map_err(io_error(format!("cannot write {}", path.display())))?;
    }
    let mut run_options = RunOptions::new(trace, &logs);
    run_options.sample_interval = 1.0;
    let setup = RunSetup {
        name: "daemon".into(),
        capacity: CAPACITY,
        user: None,
        on_death: OnDeath::Thaw,
    };
    let mut source = DaemonSource {
        shared,
        cpus: topology.num_cpus(),
        as_submitter: system,
        history: ScalingHistory::new(options.state.join("scaling"), topology.clone()),
    };
    eprintln!(
        "cosched daemon: policy {}, socket {}, state {}",
        policy_name,
        options.socket.display(),
        options.state.display()
    );
    let result = cosched_linux::execute(
        &setup,
        &topology,
        policy,
        &mut source,
        &run_options,
        &mut |_| {
            if let Some(message) = ready.take() {
                notify::tell(&message);
            }
        },
    );
    notify::tell("STOPPING=1\nSTATUS=stopping; running jobs keep running for the next daemon");
    let _ = fs::remove_file(&options.socket);
    match result {
        Ok(_) | Err(cosched_linux::Error::Interrupted(_)) => {
            eprintln!("cosched daemon: stopped; running jobs keep running for the next daemon");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Creates the state directory and its `logs` and `traces`, owned by the daemon's user and
/// writable by it alone; their paths.
fn make_state_dirs(state: &Path) -> Result<(PathBuf, PathBuf), DaemonError> {
    let logs = state.join("logs");
    let traces = state.join("traces");
    let uid = nix::unistd::geteuid().as_raw();
    for dir in [state, &logs, &traces] {
        // Never writable by group or others, whatever the umask.
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(io_error(format!("cannot create {}", dir.display())))?;
        crate::paths::check_own_dir(dir, uid)?;
    }
    // Everyone may list the log directory's ids; each log belongs to its job's user alone (umask).
    let _ = fs::set_permissions(&logs, fs::Permissions::from_mode(0o755));
    Ok((logs, traces))
}

/// The daemon's state as the journal gave it back, and the policy to run.
struct Restored {
    shared: Arc<Shared>,
    policy_name: String,
    policy: Box<dyn Policy>,
}

/// Replays the journal into the registry that the daemon's threads share, and recovers its jobs
/// (`recover`), with the policy to run: `options`' or the journal's last, journaled when it changed.
fn restore_state(options: &DaemonOptions, logs: PathBuf) -> Result<Restored, DaemonError> {
    let (journal, history) = Journal::open(
        &options.state.join("journal.jsonl"),
        &options.config.history,
    )
    .map_err(io_error(format!(
        "cannot open the journal in {}",
        options.state.display()
    )))?;
    let policy_name = options
        .policy
        .clone()
        .or(history.policy.clone())
        .unwrap_or_else(|| cosched_policies::DEFAULT_POLICY.to_string());
    let policy = cosched_policies::create(&policy_name)?;
    if history.policy.as_ref() != Some(&policy_name) {
        journal.write(&Entry::Policy {
            t: now_unix(),
            name: policy_name.clone(),
            uid: nix::unistd::geteuid().as_raw(),
        })?;
    }
    let node_memory = cosched_linux::procfs::memory_total().map_err(io_error(
        "cannot read the node's memory in /proc/meminfo".into(),
    ))?;
    let memory_for_jobs = options.config.memory.for_jobs(node_memory);
    let registry = Registry::new(
        policy_name.clone(),
        history.next_id,
        options.config.share_table.clone(),
    )
    .with_memory_for_jobs(memory_for_jobs)
    .with_history_bounds(options.config.history.clone())
    .with_kill_invalid_depend(options.config.jobs.kill_invalid_depend);
    let mut shared = Shared::new(registry, journal, logs, options.config.clone());
    if let Err(why) = memory_limits() {
        shared = shared.without_memory_limits(why);
    }
    let shared = Arc::new(shared);
    shared
        .start_syncing()
        .map_err(io_error("cannot start the journal's sync thread".into()))?;
    recover(&shared, history.jobs)?;
    Ok(Restored {
        shared,
        policy_name,
        policy,
    })
}

/// Whether the executor will be able to limit jobs' memory, or why not: it chooses its
/// mechanisms as this does.
fn memory_limits() -> Result<(), String> {
    let mechanisms = cosched_linux::Mechanisms::choose(None, None).map_err(|e| e.to_string())?;
    mechanisms.memory_hierarchy.map(drop)
}

/// Forgets, from now on, the jobs that ended longer than the retention ago, and compacts the journal
/// whenever it has grown far past the jobs kept since it last was (`Shared::forget_ended_before`).
fn forget_ended_jobs(shared: Arc<Shared>) -> Result<(), DaemonError> {
    let retention = shared.config().history.retention();
    let period = (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
    std::thread::Builder::new()
        .name("cosched-history".into())
        .spawn(move || loop {
            std::thread::sleep(period);
            let cutoff = now_unix() - retention.as_secs_f64();
            match shared.forget_ended_before(cutoff) {
                Some(Ok(c)) => eprintln!(
                    "cosched daemon: compacted the journal: {} entries to {} jobs, {} forgotten",
                    c.entries, c.jobs, c.forgotten
                ),
                Some(Err(e)) => eprintln!("cosched daemon: cannot compact the journal: {e}"),
                None => {}
            }
        })
        .map_err(io_error("cannot start the history thread".into()))?;
    Ok(())
}

/// One daemon per state directory: an exclusive lock on `<state>/lock`, held while the daemon lives.
fn take_lock(state: &Path) -> Result<Flock<fs::File>, DaemonError> {
    let path = state.join("lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(format!("cannot open {}", path.display())))?;
    let locked = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| DaemonError::AlreadyRunning(state.to_path_buf()))?;
    let _ = fs::write(&path, format!("{}\n", std::process::id()));
    Ok(locked)
}

fn listen(socket: &Path, system: bool) -> Result<UnixListener, DaemonError> {
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(io_error(format!("cannot create {}", dir.display())))?;
        let uid = nix::unistd::geteuid().as_raw();
        crate::paths::check_own_dir(dir, uid)?;
        if system {
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
        }
    }
    // The lock is ours, so a socket file left there belongs to a daemon that is gone.
    let _ = fs::remove_file(socket);
    let listener = UnixListener::bind(socket)
        .map_err(io_error(format!("cannot listen on {}", socket.display())))?;
    // A system daemon serves every user (each is told apart by SO_PEERCRED); a user daemon its user.
    let mode = if system { 0o666 } else { 0o600 };
    fs::set_permissions(socket, fs::Permissions::from_mode(mode)).map_err(io_error(format!(
        "cannot set the mode of {}",
        socket.display()
    )))?;
    Ok(listener)
}

/// Rebuilds the registry from the journal: queued jobs queue again, running jobs still alive (same
/// pid and start time) are adopted, and running jobs that are gone are marked ended.
fn recover(shared: &Shared, replayed: Vec<Replayed>) -> Result<(), DaemonError> {
    let mut registry = shared.lock();
    let mut ends = Vec::new();
    for job in replayed {
        if job.ended {
            // Its processes have ended: none to look for (most of a long history).
            let mut view = job.view;
            view.tasks.clear();
            registry.restore(Tracked::new(view, job.gid, None, None), Vec::new());
            continue;
        }
        // The process a job runs as, if it still runs: an attached one, or one an earlier daemon
        // started; or, when that one ended, a further task of its Slurm step that still runs.
        let main = match (job.view.pid, job.start_ticks) {
            (Some(pid), Some(start_ticks)) => Some(job.attached.unwrap_or(Adopt {
                pid: pid as i32,
                start_ticks,
                attached: false,
                in_place: false,
            })),
            _ => None,
        };
        let mut alive = main.into_iter().chain(job.joined).filter(|p| p.is_alive());
        let process = alive.next();
        let joined: Vec<Adopt> = alive.collect();
        let mut view = job.view;
        view.tasks = joined.iter().map(|t| t.pid as u32).collect();
        let id = view.id;
        match (view.state, job.attached.is_some(), process) {
            (JobState::Queued, false, _) => {
                registry.restore(
                    Tracked::new(view, job.gid, Some(job.submission), None),
                    joined,
                );
            }
            (JobState::Queued | JobState::Running, _, Some(process)) => {
                let tracked = Tracked::new(view, job.gid, Some(job.submission), Some(process));
                registry.restore(tracked, joined);
            }
            (_, _, process) => {
                // Gone, or cancelled or past its time limit while the daemon went down: finish
                // the cancellation (a job sent SIGTERM is killed without the rest of its grace).
                for process in process.into_iter().chain(joined) {
                    kill_unwatched(process, view.uid);
                }
                registry.restore(Tracked::new(view, job.gid, None, None), Vec::new());
                let error = "ended while no cosched daemon watched it; exit status unknown";
                ends.push(Entry::Finished {
                    id,
                    t: None,
                    ok: false,
                    exit_code: None,
                    signal: None,
                    error: Some(error.to_string()),
                    oom: false,
                    accounting: None,
                });
            }
        }
    }
    drop(registry);
    shared
        .commit(|_| Ok((ends, ())))
        .map_err(ServiceError::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_daemon_on_the_same_state_is_refused_until_the_first_ends() {
        let state = tempfile::tempdir().unwrap();
        let first = take_lock(state.path()).unwrap();
        assert!(matches!(
            take_lock(state.path()),
            Err(DaemonError::AlreadyRunning(_))
        ));
        drop(first);
        assert!(take_lock(state.path()).is_ok());
    }
}
