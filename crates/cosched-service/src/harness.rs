//! A daemon of a `cosched` executable started as a child process and driven over its socket: what
//! the daemon's integration tests and `cosched bench daemon` share. The child is stopped (SIGTERM)
//! when dropped, so that a failing test or bench leaves no daemon behind.

use crate::client::{request, ClientError};
use crate::journal::Entry;
use crate::protocol::{JobView, Reply, Request, Submission};
use cosched_core::test_util::wait;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// How long a daemon may take to listen.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot start the daemon: {0}")]
    Spawn(io::Error),
    #[error("the daemon ended with {status} before it listened{}", log_hint(.log))]
    EndedEarly {
        status: ExitStatus,
        log: Option<PathBuf>,
    },
    #[error("the daemon did not listen on {socket} within {LISTEN_LIMIT:?}")]
    NotListening { socket: PathBuf },
    #[error("the daemon ended with {0}")]
    Failed(ExitStatus),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the daemon answered {reply} to {request}")]
    Unexpected {
        request: &'static str,
        reply: String,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

fn log_hint(log: &Option<PathBuf>) -> String {
    log.as_ref()
        .map(|l| format!("; see {}", l.display()))
        .unwrap_or_default()
}

/// How to start a daemon: `cosched daemon --socket DIR/cosched.sock --state-dir DIR/STATE`, then
/// whatever [`Launch::arg`] adds.
pub struct Launch {
    command: Command,
    socket: PathBuf,
    state: PathBuf,
    log: Option<PathBuf>,
}

impl Launch {
    /// A daemon of executable `cosched` with its socket and its state directory (`state`, a name)
    /// in `dir`.
    pub fn new(cosched: &Path, dir: &Path, state: &str) -> Launch {
        let socket = dir.join("cosched.sock");
        let state = dir.join(state);
        let mut command = Command::new(cosched);
        command
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state);
        Launch {
            command,
            socket,
            state,
            log: None,
        }
    }

    /// Adds arguments to `cosched daemon`.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Launch {
        self.command.args(args);
        self
    }

    /// Appends the daemon's standard error to `log`, and drops its standard output.
    pub fn log_to(mut self, log: &Path) -> Launch {
        self.log = Some(log.to_path_buf());
        self
    }

    /// The command, to change further before the start.
    pub fn command(&mut self) -> &mut Command {
        &mut self.command
    }

    /// Starts the daemon and returns once it listens.
    pub fn start(mut self) -> Result<DaemonProcess, HarnessError> {
        if let Some(log) = &self.log {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|source| HarnessError::Io {
                    what: format!("cannot open {}", log.display()),
                    source,
                })?;
            self.command.stdout(Stdio::null()).stderr(file);
        }
        let child = self.command.spawn().map_err(HarnessError::Spawn)?;
        let mut daemon = DaemonProcess {
            child,
            socket: self.socket,
            state: self.state,
        };
        let mut ended = None;
        let listening = wait::until(LISTEN_LIMIT, || {
            ended = daemon.child.try_wait().ok().flatten();
            ended.is_some() || UnixStream::connect(&daemon.socket).is_ok()
        });
        match (ended, listening) {
            (Some(status), _) => Err(HarnessError::EndedEarly {
                status,
                log: self.log,
            }),
            (None, false) => Err(HarnessError::NotListening {
                socket: daemon.socket.clone(),
            }),
            (None, true) => Ok(daemon),
        }
    }
}

/// A running daemon, stopped with SIGTERM when dropped.
pub struct DaemonProcess {
    pub child: Child,
    pub socket: PathBuf,
    pub state: PathBuf,
}

impl DaemonProcess {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn ask(&self, r: Request) -> Result<Reply, ClientError> {
        request(&self.socket, r)
    }

    pub fn submit(&self, submission: Submission) -> Result<u64, HarnessError> {
        match self.ask(Request::Submit(submission))? {
            Reply::Submitted { id } => Ok(id),
            other => Err(unexpected("submit", other)),
        }
    }

    /// The jobs `ids` once all have ended.
    pub fn wait(&self, ids: Vec<u64>) -> Result<Vec<JobView>, HarnessError> {
        match self.ask(Request::Wait { ids })? {
            Reply::Ended { jobs } => Ok(jobs),
            other => Err(unexpected("wait", other)),
        }
    }

    /// Cancels `ids` and waits until they have ended.
    pub fn cancel(&self, ids: &[u64]) -> Result<(), HarnessError> {
        self.ask(Request::Cancel { ids: ids.to_vec() })?;
        self.wait(ids.to_vec())?;
        Ok(())
    }

    /// Slot switches so far and the latest ones' lateness, seconds.
    pub fn switches(&self) -> Result<(u64, Vec<f64>), HarnessError> {
        match self.ask(Request::Switches {})? {
            Reply::Switches {
                total,
                recent_lateness,
            } => Ok((total, recent_lateness)),
            other => Err(unexpected("switches", other)),
        }
    }

    /// The entries of its journal; a line that does not read is an error.
    pub fn journal(&self) -> Result<Vec<Entry>, HarnessError> {
        let path = self.state.join("journal.jsonl");
        let text = std::fs::read_to_string(&path).map_err(|source| HarnessError::Io {
            what: format!("cannot read {}", path.display()),
            source,
        })?;
        text.lines()
            .map(|l| {
                serde_json::from_str(l).map_err(|e| HarnessError::Io {
                    what: format!("{}: {l:?}", path.display()),
                    source: e.into(),
                })
            })
            .collect()
    }

    /// Stops it with SIGTERM; it must end well.
    pub fn stop(&mut self) -> Result<(), HarnessError> {
        let _ = kill(Pid::from_raw(self.pid()), Signal::SIGTERM);
        let status = self.child.wait().map_err(|source| HarnessError::Io {
            what: "cannot wait for the daemon".into(),
            source,
        })?;
        match status.success() {
            true => Ok(()),
            false => Err(HarnessError::Failed(status)),
        }
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = kill(Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

fn unexpected(request: &'static str, reply: Reply) -> HarnessError {
    HarnessError::Unexpected {
        request,
        reply: format!("{reply:?}"),
    }
}

/// A one-thread job running `command` from `/` with only `PATH` set, named after its program.
pub fn submission(command: &[&str]) -> Submission {
    let mut submission = Submission::of(command[0]);
    if let Some(name) = Path::new(command[0]).file_name() {
        submission.name = name.to_string_lossy().into();
    }
    submission.command = command.iter().map(|s| s.to_string()).collect();
    submission.env = BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]);
    submission.min_threads = Some(1);
    submission.max_threads = Some(1);
    submission
}

/// Writes a journal of `jobs` ended jobs of root's, each as a daemon journals it, ended within the
/// retention, for a daemon to start over: its size in bytes.
pub fn write_ended_history(state: &Path, jobs: usize) -> io::Result<u64> {
    std::fs::create_dir_all(state)?;
    let path = state.join("journal.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let t = crate::protocol::now_unix() - 60.0;
    let logs = state.join("logs").join("0");
    for id in 1..=jobs as u64 {
        let entries = [
            Entry::Submitted {
                id,
                t,
                uid: 0,
                gid: 0,
                submission: submission(&["/bin/true"]),
                stdout: logs.join(format!("{id}.stdout")),
                stderr: logs.join(format!("{id}.stderr")),
            },
            Entry::Started {
                id,
                t,
                pid: 1000 + id as u32,
                start_ticks: 1,
                threads: 1,
                adopted: false,
            },
            Entry::Placed {
                id,
                t,
                cpus: "0".into(),
            },
            Entry::Finished {
                id,
                t: Some(t + 0.01),
                ok: true,
                exit_code: Some(0),
                signal: None,
                error: None,
                oom: false,
                accounting: None,
            },
        ];
        for entry in entries {
            serde_json::to_writer(&mut out, &entry).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(std::fs::metadata(&path)?.len())
}

/// Whether tests can play a second user (uid 65534, through `setpriv`), saying `SKIPPED` and why on
/// standard error when they cannot; when they can, `dir` is opened to that user (mode 755).
pub fn open_to_a_second_user(dir: &Path) -> io::Result<bool> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root to run a second user");
        return Ok(false);
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED: setpriv (util-linux) is not installed");
        return Ok(false);
    }
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(true)
}
