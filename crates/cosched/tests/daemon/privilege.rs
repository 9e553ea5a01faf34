//! What a job touches, it touches as its user: its working directory, its control page, and a state
//! directory that another user controls.

use crate::common::*;
use cosched_service::client::request;
use cosched_service::harness::submission;
use cosched_service::protocol::{JobState, Reply, Request};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_job_enters_its_working_directory_as_its_user_and_reads_no_secret_through_root() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    // A readable directory inside root's private one: uid 65534 may not pass through to it.
    let private = dir.path().join("root-home");
    let public = private.join("public");
    std::fs::create_dir_all(&public).unwrap();
    set_mode(&private, 0o700);
    set_mode(&public, 0o755);
    std::fs::write(public.join("s.txt"), "TOPSECRET\n").unwrap();
    set_mode(&public.join("s.txt"), 0o644);
    let mut daemon = Daemon::start(dir.path(), "eq");
    // Submitted from a directory its user may enter, below one it may not: as from a shell left
    // there, entered while still root.
    let id = submitted_id(&cosched_as(
        65534,
        &daemon,
        &public,
        &["submit", "--", "cat", "s.txt"],
    ));
    let job = daemon.wait(vec![id]).remove(0);
    let logs = as_nobody(&daemon, &["logs", &id.to_string()]);
    let shown = String::from_utf8_lossy(&logs.stdout);
    assert!(
        !shown.contains("TOPSECRET"),
        "uid 65534 read a file only root may reach: {shown}"
    );
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let error = job.error.unwrap_or_default();
    assert!(
        error.contains("working directory") && error.contains(&public.display().to_string()),
        "the error does not say which directory could not be entered: {error}"
    );
    daemon.stop();
}

/// A root-owned file a hostile user points links at, with what it holds.
fn victim(dir: &Path) -> (PathBuf, &'static str) {
    let path = dir.join("victim");
    std::fs::write(&path, "precious\n").unwrap();
    set_mode(&path, 0o644);
    (path, "precious\n")
}

fn assert_untouched(victim: &Path, content: &str) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(victim).unwrap();
    let now = std::fs::read(victim).unwrap();
    assert!(
        now == content.as_bytes(),
        "{} was overwritten: it holds {} bytes, {:?}…",
        victim.display(),
        now.len(),
        String::from_utf8_lossy(&now[..now.len().min(16)])
    );
    assert_eq!(meta.uid(), 0, "{} was given away", victim.display());
}

#[test]
fn a_link_planted_where_a_control_page_would_go_is_not_followed() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let (victim, content) = victim(dir.path());
    let mut daemon = Daemon::start(dir.path(), "eq");
    // Where pages used to go: /dev/shm/cosched-<daemon pid>-<run>-<job id>, ids from 0.
    let planted: Vec<PathBuf> = (0..4)
        .map(|id| PathBuf::from(format!("/dev/shm/cosched-{}-0-{id}", daemon.pid())))
        .collect();
    for link in &planted {
        let status = Command::new("setpriv")
            .args(NOBODY)
            .arg("ln")
            .arg("-s")
            .arg(&victim)
            .arg(link)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "uid 65534 could not plant {}",
            link.display()
        );
    }
    let report = "echo \"$COSCHED_CONTROL\"; stat -L -c '%u %a' \"$COSCHED_CONTROL\"";
    let id = submitted_id(&as_nobody(&daemon, &["submit", "--", "sh", "-c", report]));
    let job = daemon.wait(vec![id]).remove(0);
    for link in &planted {
        let _ = std::fs::remove_file(link);
    }
    assert_untouched(&victim, content);
    assert_eq!(job.state, JobState::Done, "{job:?}");
    // The job's page is its user's own, under a name nobody could plant.
    let said = std::fs::read_to_string(&job.stdout).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(!planted.iter().any(|p| p.as_os_str() == lines[0]), "{said}");
    assert_eq!(lines[1], "65534 600", "the page: {said}");
    daemon.stop();
}

#[test]
fn a_daemon_refuses_a_state_directory_another_user_controls() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let (victim, content) = victim(dir.path());
    // The other user made the state directory, and put a link where job 0's output goes.
    let state = dir.path().join("state");
    let logs = state.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for path in [&state, &logs] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }
    let link = logs.join("0.stdout");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let socket = dir.path().join("cosched.sock");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["daemon", "--policy", "eq", "--socket"])
        .arg(&socket)
        .arg("--state")
        .arg(&state)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let listening = wait::until(Duration::from_secs(20), || {
        UnixStream::connect(&socket).is_ok() || !matches!(daemon.try_wait(), Ok(None))
    }) && matches!(daemon.try_wait(), Ok(None));
    if listening {
        // It serves: what a job of root's writes goes where the other user pointed.
        let served = request(&socket, Request::Submit(submission(&["echo", "hi"])));
        if let Ok(Reply::Submitted { id }) = served {
            let _ = request(&socket, Request::Wait { ids: vec![id] });
        }
        unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
        let _ = daemon.wait();
        assert_untouched(&victim, content);
        panic!("the daemon served from a state directory uid 65534 owns");
    }
    let out = daemon.wait_with_output().unwrap();
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        message.contains(&state.display().to_string()) && message.contains("uid 65534"),
        "{message}"
    );
    assert_untouched(&victim, content);
}
