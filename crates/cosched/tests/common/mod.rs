//! What the tests of the daemon's command line share: a daemon of their own, one test at a time,
//! `cosched` run against it (as root or as one of two unprivileged users), and waiting for a
//! condition with a deadline.
#![allow(dead_code)] // each test file uses a part of what is here

use cosched_service::harness::{DaemonProcess, Launch};
use std::path::Path;
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
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(&daemon.socket)
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

/// Whether `done` holds before `limit` runs out, checked every 20 ms.
pub fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
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
    wait_for(limit, || show(daemon, id).state == JobState::Running)
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
