//! What the hostile-user tests share: a daemon of their own, two unprivileged users, and waiting
//! for a condition with a deadline.
#![allow(dead_code)] // each attack module uses a part of what is here

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
