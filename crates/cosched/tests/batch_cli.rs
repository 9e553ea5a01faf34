//! What users of a batch system expect from `cosched daemon`'s clients, run against a real daemon:
//! exit statuses a script can rely on. Each test runs its own daemon on a socket and state directory
//! of its own.

use cosched_service::harness::{DaemonProcess, Launch};
use cosched_service::protocol::{JobState, Reply, Request};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

/// The daemons raise the executor to SCHED_FIFO and load the CPUs: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn start(dir: &Path) -> DaemonProcess {
    Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), dir, "state")
        .args(["--idle-timeout", "1", "--policy", "eq"])
        .start()
        .unwrap()
}

/// `cosched ARGS…` against `socket`.
fn cosched(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(socket)
        .args(&args[1..])
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn wait_tells_an_unreachable_daemon_from_a_failed_job_and_submit_wait_names_the_job_first() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());

    let out = cosched(
        &daemon.socket,
        &["submit", "--wait", "--", "sh", "-c", "exit 2"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let printed = stderr(&out);
    let id: u64 = printed
        .lines()
        .find_map(|l| l.strip_prefix("submitted "))
        .unwrap_or_else(|| panic!("no id on standard error: {printed:?}"))
        .trim()
        .parse()
        .unwrap();
    match daemon.ask(Request::Show { id }).unwrap() {
        Reply::Job { job } => assert_eq!((job.state, job.exit_code), (JobState::Failed, Some(2))),
        other => panic!("{other:?}"),
    }

    let refused = cosched(&daemon.socket, &["wait", &(id + 1000).to_string()]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));

    daemon.stop().unwrap();
    let unreachable = cosched(&daemon.socket, &["wait", &id.to_string()]);
    assert_eq!(
        unreachable.status.code(),
        Some(3),
        "{}",
        stderr(&unreachable)
    );
    assert!(
        stderr(&unreachable).contains("no cosched daemon answers"),
        "{}",
        stderr(&unreachable)
    );
}
