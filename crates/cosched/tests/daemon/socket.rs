//! The socket: hostile or trickled requests get errors or time out while the daemon keeps serving, and
//! a client talks only to a socket its user or root controls.

use crate::common::*;
use cosched_service::harness::submission;
use cosched_service::protocol::{JobState, Reply, Request, Submission};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn raw_exchange(socket: &Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut answer = String::new();
    let _ = BufReader::new(&stream).read_line(&mut answer);
    answer
}

#[test]
fn hostile_requests_get_errors_or_timeouts_and_the_daemon_keeps_serving() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "gang");
    // Two jobs as wide as the machine, time-sliced by gang (100 ms slots) while the attack goes on.
    let cpus = std::thread::available_parallelism().unwrap().get() as u32;
    let wide = Submission {
        min_threads: Some(cpus),
        max_threads: Some(cpus),
        kind: cosched_core::JobKind::Rigid,
        ..submission(&["sleep", "4"])
    };
    let busy: Vec<u64> = (0..2)
        .map(
            |_| match daemon.ask(Request::Submit(wide.clone())).unwrap() {
                Reply::Submitted { id } => id,
                other => panic!("{other:?}"),
            },
        )
        .collect();
    assert!(
        wait::until(Duration::from_secs(10), || daemon.switches().0 > 0),
        "gang never switched slots"
    );
    let (before_attack, _) = daemon.switches();
    let idle: Vec<UnixStream> = (0..200)
        .map(|_| UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    let malformed = raw_exchange(&daemon.socket, b"{not json\n");
    assert!(malformed.contains("malformed request"), "{malformed}");
    let unknown = raw_exchange(
        &daemon.socket,
        b"{\"version\":1,\"request\":{\"jobs\":{\"all\":true,\"sudo\":true}}}\n",
    );
    assert!(unknown.contains("unknown field"), "{unknown}");
    let wrong_version = raw_exchange(
        &daemon.socket,
        b"{\"version\":9,\"request\":{\"jobs\":{\"all\":true}}}\n",
    );
    assert!(wrong_version.contains("version 9"), "{wrong_version}");
    let mut huge = vec![b'x'; 1 << 20];
    huge.push(b'\n');
    let too_long = raw_exchange(&daemon.socket, &huge);
    assert!(too_long.contains("longer than"), "{too_long}");
    let silent = raw_exchange(&daemon.socket, b"");
    assert!(silent.contains("no complete request"), "{silent}");
    // While 200 connections sit idle, requests are still answered and jobs still run.
    let started = Instant::now();
    let id = daemon.submit(&["/bin/true"]);
    println!(
        "submission during the attack answered in {:?}",
        started.elapsed()
    );
    for mut stream in idle {
        let mut answer = String::new();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.contains("no complete request"), "{answer}");
    }
    // Scheduling went on during the attack: slots kept switching, and not a whole slot late.
    let (after_attack, lateness) = daemon.switches();
    let during = (after_attack - before_attack) as usize;
    let mut late = lateness[lateness.len() - during.min(lateness.len())..].to_vec();
    late.sort_by(f64::total_cmp);
    println!(
        "{during} slot switches during the attack, lateness median {:?} s, max {:?} s",
        late.get(late.len() / 2),
        late.last()
    );
    assert!(during >= 2, "only {during} slot switches during the attack");
    assert!(late[late.len() / 2] < 0.1, "switches fell behind: {late:?}");
    let jobs = daemon.wait(busy.into_iter().chain([id]).collect());
    assert!(jobs.iter().all(|j| j.state == JobState::Done), "{jobs:?}");
    daemon.stop();
}

#[test]
fn a_request_trickled_a_byte_at_a_time_is_cut_off_at_its_deadline() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let stream = UnixStream::connect(&daemon.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let started = Instant::now();
    // A byte every 200 ms: every read comes well within the 1 s timeout, the request never does.
    let trickle = std::thread::spawn(move || {
        for byte in br#"{"version":1,"request":{"jobs":{"all":true}}}"# {
            if writer.write_all(&[*byte]).is_err() {
                return;
            }
            // The pace of the trickle is what is tested, not a wait for anything.
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = writer.write_all(b"\n");
    });
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).unwrap();
    let took = started.elapsed();
    assert!(answer.contains("no complete request within"), "{answer}");
    assert!(took < Duration::from_secs(3), "cut off after {took:?}");
    trickle.join().unwrap();
    daemon.stop();
}

#[test]
fn a_client_sends_nothing_to_a_socket_its_user_or_root_does_not_control() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    // A directory anyone may write to, and one of a third user's.
    for (name, mode, owner) in [("open", 0o777, 0), ("theirs", 0o755, 4242)] {
        let planted = dir.path().join(name);
        std::fs::create_dir(&planted).unwrap();
        set_mode(&planted, mode);
        std::os::unix::fs::chown(&planted, Some(owner), Some(owner)).unwrap();
        let socket = planted.join("cosched.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        set_mode(&socket, 0o666);
        listener.set_nonblocking(true).unwrap();
        let mut client = Command::new("setpriv")
            .args(NOBODY)
            .arg(env!("CARGO_BIN_EXE_cosched"))
            .args(["submit", "--socket"])
            .arg(&socket)
            .args(["--", "true"])
            .env("SECRET_TOKEN", "hunter2")
            .current_dir("/")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut heard = Vec::new();
        // Whatever the client sends before it gives up is heard.
        wait::until(Duration::from_secs(5), || {
            if let Ok((mut stream, _)) = listener.accept() {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                let mut chunk = [0u8; 65536];
                if let Ok(n) = stream.read(&mut chunk) {
                    heard.extend_from_slice(&chunk[..n]);
                }
                drop(stream);
            }
            !matches!(client.try_wait(), Ok(None))
        });
        let _ = client.kill();
        let out = client.wait_with_output().unwrap();
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(
            heard.is_empty(),
            "the client sent its request to a socket in {} (mode {mode:o}, uid {owner}): {}",
            planted.display(),
            String::from_utf8_lossy(&heard)
        );
        assert!(!out.status.success());
        assert!(
            message.contains(&planted.display().to_string()),
            "the refusal does not name the directory: {message}"
        );
    }
}
