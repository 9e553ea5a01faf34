//! One user cannot grow the daemon's memory, journal or disk without bound; a full disk loses no
//! acknowledged job.

use crate::common::{
    cosched_as, dir_for_two_users, ok_as, one_at_a_time, start_daemon, wait, ALICE, MALLORY,
};
use cosched_service::harness::{submission, write_ended_history, DaemonProcess, Launch};
use cosched_service::protocol::{JobState, JobView, Reply, Request};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MIB: f64 = 1024.0 * 1024.0;

/// Resident memory of `daemon`, bytes.
fn rss(daemon: &DaemonProcess) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid())).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kib * 1024.0
}

fn listed(daemon: &DaemonProcess, all: bool) -> Vec<JobView> {
    let request = Request::Jobs {
        all,
        filter: Default::default(),
    };
    match daemon.ask(request).unwrap() {
        Reply::Jobs { jobs } => jobs,
        other => panic!("jobs: {other:?}"),
    }
}

#[test]
fn a_thousand_ended_jobs_with_long_command_lines_leave_the_daemon_small() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    // The history's bytes are not what bounds memory here: summaries are.
    let config = "[limits]\nsubmission_bytes = 230000\n[history]\nbytes_per_user = 1073741824\n";
    let daemon = start_daemon(dir.path(), "eq", config);
    let long = "x".repeat(100_000);
    let longer = "y".repeat(120_000);
    let refused = cosched_as(
        ALICE,
        &daemon,
        dir.path(),
        &["submit", "--", "/missing", &longer, &longer],
    );
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(message.contains("limits.submission_bytes"), "{message}");
    let before = rss(&daemon);
    // A missing program: each job ends as soon as it is taken.
    let args = [
        "submit", "--array", "1-1000", "--", "/missing", &long, &long,
    ];
    let out = cosched_as(ALICE, &daemon, dir.path(), &args);
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{message}");
    let ended = wait::until(Duration::from_secs(300), || {
        listed(&daemon, false).is_empty()
    });
    assert!(ended, "the jobs did not end");
    let all = listed(&daemon, true);
    assert_eq!(all.len(), 1000);
    let grown = (rss(&daemon) - before) / MIB;
    assert!(grown < 64.0, "the daemon grew by {grown:.0} MiB");
}

#[test]
fn replies_to_jobs_all_left_unread_hold_little_of_the_daemons_memory() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    write_ended_history(&dir.path().join("state"), 100_000).unwrap();
    // Writes to a client that does not read are given up after the idle timeout: a long one, so
    // that the unread replies are still held when the daemon is measured.
    let cosched = Path::new(env!("CARGO_BIN_EXE_cosched"));
    let daemon = Launch::new(cosched, dir.path(), "state")
        .args(["--idle-timeout", "120", "--policy", "eq"])
        .start()
        .unwrap();
    // Once listed, the daemon's allocator holds what a listing needs.
    assert_eq!(listed(&daemon, true).len(), 100_000);
    let before = rss(&daemon);
    let unread: Vec<UnixStream> = (0..3)
        .map(|_| {
            let mut stream = UnixStream::connect(&daemon.socket).unwrap();
            stream
                .write_all(b"{\"version\":1,\"request\":{\"jobs\":{\"all\":true}}}\n")
                .unwrap();
            stream
        })
        .collect();
    // A listing read to its end: the unread ones have had as long to be made.
    assert_eq!(listed(&daemon, true).len(), 100_000);
    let grown = (rss(&daemon) - before) / MIB;
    eprintln!("three unread replies over 100,000 jobs took {grown:.1} MiB");
    assert!(grown < 64.0, "three unread replies took {grown:.0} MiB");
    // Read at last, each is whole.
    for stream in unread {
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        let reply: cosched_service::protocol::Response = serde_json::from_str(&line).unwrap();
        assert!(matches!(reply.reply, Reply::Jobs { jobs } if jobs.len() == 100_000));
    }
}

/// A small tmpfs mounted on `path` while it lives, or `None` (saying why) where mounting fails.
struct SmallFileSystem(PathBuf);

impl SmallFileSystem {
    fn mount(path: &Path, size: &str) -> Option<SmallFileSystem> {
        std::fs::create_dir_all(path).unwrap();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=755"),
                "tmpfs",
            ])
            .arg(path)
            .status();
        match mounted {
            Ok(status) if status.success() => Some(SmallFileSystem(path.to_path_buf())),
            _ => {
                eprintln!("SKIPPED: cannot mount a tmpfs for the state directory");
                None
            }
        }
    }

    /// Fills it with a file of root's until no byte more fits.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 4096];
        while file.write_all(&block).is_ok() {}
        while file.write_all(&block[..1]).is_ok() {}
        path
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn submitted_ids(daemon: &DaemonProcess, how_many: usize) -> (Vec<u64>, Vec<String>) {
    let mut ids = Vec::new();
    let mut refusals = Vec::new();
    for n in 0..how_many {
        // A missing program: nothing is left running.
        let mut job = submission(&["/missing"]);
        job.name = format!("job-{n}-{}", "n".repeat(150));
        match daemon.submit(job) {
            Ok(id) => ids.push(id),
            Err(e) => refusals.push(e.to_string()),
        }
    }
    (ids, refusals)
}

#[test]
fn a_full_state_file_system_refuses_clearly_and_loses_no_acknowledged_job() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let Some(fs) = SmallFileSystem::mount(&dir.path().join("state"), "4m") else {
        return;
    };
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let (mut acknowledged, _) = submitted_ids(&daemon, 3);
    let filler = fs.fill();
    // Every entry now crosses into a page that is not there: each fails part way.
    let (ids, refusals) = submitted_ids(&daemon, 20);
    acknowledged.extend(&ids);
    assert!(!refusals.is_empty(), "nothing refused on a full disk");
    assert!(refusals[0].contains("is full"), "{}", refusals[0]);
    std::fs::remove_file(filler).unwrap();
    let (ids, refusals) = submitted_ids(&daemon, 3);
    assert!(refusals.is_empty(), "{refusals:?}");
    acknowledged.extend(&ids);
    daemon.kill();
    // Its watchdog may hold the state directory's lock a moment longer.
    let lock = daemon.state.join("lock");
    let free = || {
        let file = std::fs::File::open(&lock).unwrap();
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
    };
    assert!(
        wait::until(Duration::from_secs(30), free),
        "the lock stays held"
    );
    let daemon = start_daemon(dir.path(), "eq", "");
    let kept: Vec<u64> = listed(&daemon, true).iter().map(|j| j.id).collect();
    for id in &acknowledged {
        assert!(kept.contains(id), "job {id} lost: {kept:?}");
    }
    let (next, _) = submitted_ids(&daemon, 1);
    assert!(
        acknowledged.iter().all(|id| *id < next[0]),
        "id {} given again",
        next[0]
    );
}

#[test]
fn a_jobs_log_stops_at_its_users_limit_and_only_its_owner_removes_it() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let config = "[limits]\nlog_bytes_per_user = 1048576\n";
    let daemon = start_daemon(dir.path(), "eq", config);
    let out = ok_as(
        ALICE,
        &daemon,
        dir.path(),
        &["submit", "--", "head", "-c", "5000000", "/dev/zero"],
    );
    let id: u64 = out.trim().parse().unwrap();
    let jobs = daemon.wait(vec![id]).unwrap();
    assert_ne!(jobs[0].state, JobState::Done, "{jobs:?}");
    let log = jobs[0].stdout.clone();
    assert!(log.starts_with(daemon.state.join("logs")), "{log:?}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 1 << 20);
    let id = id.to_string();
    let refused = cosched_as(MALLORY, &daemon, dir.path(), &["logs", &id, "--remove"]);
    assert!(!refused.status.success());
    assert!(log.exists(), "another user removed the log");
    ok_as(ALICE, &daemon, dir.path(), &["logs", &id, "--remove"]);
    assert!(!log.exists());
}
