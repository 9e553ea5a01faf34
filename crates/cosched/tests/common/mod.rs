//! What the tests of the daemon's command line share: a daemon of their own, one test at a time,
//! `cosched` run against it (as root or as one of two unprivileged users), processes and cgroups read
//! back from the kernel, and waiting on a condition with a deadline (`wait`).
#![allow(dead_code)] // each test file uses a part of what is here

pub use cosched_core::test_util::wait;
use cosched_service::harness::{submission, DaemonProcess, Launch};
use cosched_service::journal::Entry;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Two unprivileged users, neither root nor the daemon's.
pub const ALICE: u32 = 65534;
pub const MALLORY: u32 = 65533;

/// The daemons raise the executor to SCHED_FIFO and load the CPUs: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A directory both test users may enter, or `None` (saying why) where they cannot be had.
pub fn dir_for_two_users() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    cosched_service::harness::open_to_a_second_user(dir.path())
        .unwrap()
        .then_some(dir)
}

/// A daemon under `policy` with its socket and state in `dir`, reading `config` as its daemon.toml.
pub fn start_daemon(dir: &Path, policy: &str, config: &str) -> DaemonProcess {
    let path = dir.join("daemon.toml");
    std::fs::write(&path, config).unwrap();
    Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), dir, "state")
        .args(["--idle-timeout", "1", "--policy", policy, "--config"])
        .args([&path])
        .start()
        .unwrap()
}

/// `cosched COMMAND --socket SOCKET ARGS…` run as `uid` (its own group, no others) from `cwd`.
pub fn cosched_as(uid: u32, daemon: &DaemonProcess, cwd: &Path, args: &[&str]) -> Output {
    cosched_as_on(uid, &daemon.socket, cwd, args)
}

/// [`cosched_as`] on the daemon listening on `socket`.
pub fn cosched_as_on(uid: u32, socket: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(socket)
        .args(&args[1..])
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// [`cosched_as`], which must succeed: its standard output.
pub fn ok_as(uid: u32, daemon: &DaemonProcess, cwd: &Path, args: &[&str]) -> String {
    let out = cosched_as(uid, daemon, cwd, args);
    assert!(
        out.status.success(),
        "cosched {args:?} as uid {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether this daemon could limit jobs' memory, saying why not when it cannot.
pub fn memory_cgroups_here() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root for memory cgroups");
        return false;
    }
    match cosched_linux::Mechanisms::choose(None, None).map(|m| m.memory_hierarchy) {
        Ok(Ok(_)) => true,
        Ok(Err(why)) => {
            eprintln!("SKIPPED: no memory cgroup here: {why}");
            false
        }
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            false
        }
    }
}

/// `cosched COMMAND --socket SOCKET ARGS…` as the test's own user.
pub fn cosched(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(socket)
        .args(&args[1..])
        .output()
        .unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The id `cosched submit` printed, once it succeeded.
pub fn submitted_id(out: &Output) -> u64 {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out).trim().parse().unwrap()
}

use cosched_service::protocol::{JobState, JobView, Reply, Request};

/// Submits `sh -c SCRIPT` as `uid` from `cwd`: the new job's id.
pub fn submit_script_as(uid: u32, daemon: &DaemonProcess, cwd: &Path, script: &str) -> u64 {
    let said = ok_as(uid, daemon, cwd, &["submit", "--", "sh", "-c", script]);
    said.trim().parse().unwrap()
}

/// Job `id` as the daemon shows it to root.
pub fn show(daemon: &DaemonProcess, id: u64) -> JobView {
    match daemon.ask(Request::Show { id }) {
        Ok(Reply::Job { job }) => *job,
        other => panic!("show {id}: {other:?}"),
    }
}

/// Whether job `id` runs before `limit` runs out.
pub fn runs_within(daemon: &DaemonProcess, id: u64, limit: Duration) -> bool {
    wait::until(limit, || show(daemon, id).state == JobState::Running)
}

/// The daemon answers a `jobs` request from `uid` and runs a new job of theirs to its end.
pub fn assert_serving(uid: u32, daemon: &DaemonProcess, cwd: &Path) {
    ok_as(uid, daemon, cwd, &["jobs"]);
    let id = submit_script_as(uid, daemon, cwd, "exit 0");
    let job = daemon.wait(vec![id]).unwrap().remove(0);
    assert_eq!(job.state, JobState::Done, "{job:?}");
}

/// [`start_daemon`]'s daemon, not yet started: for a test that changes how it starts.
pub fn daemon_launch(dir: &Path, policy: &str, config: &str) -> Launch {
    let path = dir.join("daemon.toml");
    std::fs::write(&path, config).unwrap();
    Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), dir, "state")
        .args(["--idle-timeout", "1", "--policy", policy, "--config"])
        .args([&path])
}

/// A daemon of the test's own (`cosched_service::harness`), with the panicking helpers tests want.
pub struct Daemon(DaemonProcess);

impl std::ops::Deref for Daemon {
    type Target = DaemonProcess;
    fn deref(&self) -> &DaemonProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut DaemonProcess {
        &mut self.0
    }
}

impl Daemon {
    pub fn start(dir: &Path, policy: &str) -> Daemon {
        Daemon::start_with(dir, Some(policy), |_| {})
    }

    /// [`Daemon::start`], its command changed by `adjust` first.
    /// `policy` `None`: none given, so the journal's last one, else the default.
    pub fn start_with(
        dir: &Path,
        policy: Option<&str>,
        adjust: impl FnOnce(&mut Command),
    ) -> Daemon {
        let mut launch = Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), dir, "state")
            .args(["--idle-timeout", "1"]);
        if let Some(policy) = policy {
            launch = launch.args(["--policy", policy]);
        }
        adjust(launch.command());
        Daemon(launch.start().unwrap())
    }

    pub fn submit(&self, command: &[&str]) -> u64 {
        self.0.submit(submission(command)).unwrap()
    }

    pub fn wait(&self, ids: Vec<u64>) -> Vec<cosched_service::protocol::JobView> {
        self.0.wait(ids).unwrap()
    }

    /// Slot switches so far and the latest ones' lateness, seconds.
    pub fn switches(&self) -> (u64, Vec<f64>) {
        self.0.switches().unwrap()
    }

    pub fn journal(&self) -> Vec<Entry> {
        self.0.journal().unwrap()
    }

    pub fn stop(&mut self) {
        self.0.stop().unwrap()
    }

    /// `cosched COMMAND --socket SOCKET ARGS…` against this daemon, as the test's own user.
    pub fn cosched(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_cosched"))
            .arg(args[0])
            .arg("--socket")
            .arg(&self.socket)
            .args(&args[1..])
            .output()
            .unwrap()
    }
}

/// Cgroups named after `pid` (the daemon's), in every hierarchy.
pub fn cgroups_of(pid: i32) -> Vec<PathBuf> {
    let prefix = format!("cosched-{pid}-");
    let mut found = Vec::new();
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpuset",
        "/sys/fs/cgroup/freezer",
    ] {
        if let Ok(entries) = std::fs::read_dir(root) {
            found.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path()),
            );
        }
    }
    found
}

pub fn frozen_or_stopped(pids: &[i32]) -> Vec<(i32, char)> {
    pids.iter()
        .filter_map(|&p| cosched_linux::procfs::stat(p).ok())
        .filter(|s| s.state == 'T')
        .map(|s| (s.pid, s.state))
        .collect()
}

pub const NOBODY: [&str; 3] = ["--reuid=65534", "--regid=65534", "--clear-groups"];

/// `cosched ARGS…` run as uid 65534.
pub fn as_nobody(daemon: &Daemon, args: &[&str]) -> Output {
    cosched_as(65534, daemon, Path::new("/"), args)
}

/// Writes `text` as a daemon configuration file in `dir` and gives the arguments naming it.
pub fn config(dir: &Path, text: &str) -> impl FnOnce(&mut Command) {
    let path = dir.join("daemon.toml");
    std::fs::write(&path, text).unwrap();
    move |command: &mut Command| {
        command.arg("--config").arg(path);
    }
}

/// A rigid spinner as wide as the machine: under gang, a job beside it must take turns with it.
pub fn submit_machine_wide_spinner(daemon: &Daemon, cpus: usize) -> u64 {
    let wide = cpus.to_string();
    let spin = ["sh", "-c", "while :; do :; done"];
    let mut args = vec!["submit", "--threads", &wide, "--kind", "rigid", "--"];
    args.extend(spin);
    let out = daemon.cosched(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

pub fn cpus_allowed(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    line.trim().to_string()
}

pub fn cpu_ticks(pid: i32) -> u64 {
    cosched_linux::procfs::stat(pid)
        .map(|s| s.cpu_ticks)
        .unwrap_or(0)
}

/// Whether process `pid` has ended (gone, or a zombie nobody has reaped yet).
pub fn dead(pid: i32) -> bool {
    !cosched_linux::procfs::stat(pid).is_ok_and(|s| s.state != 'Z')
}

/// Whether process `pid` made no progress for a whole half second at some point within `limit`: it
/// was frozen while its slot was off.
pub fn was_frozen_a_while(pid: i32, limit: Duration) -> bool {
    let (mut ticks, mut since) = (cpu_ticks(pid), Instant::now());
    wait::until(limit, || {
        let now = cpu_ticks(pid);
        if now != ticks {
            (ticks, since) = (now, Instant::now());
        }
        since.elapsed() >= Duration::from_millis(500)
    })
}

pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
}
