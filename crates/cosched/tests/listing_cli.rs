//! What Slurm users expect of the daemon's listings, exit statuses and priorities, run against a
//! real daemon: pending jobs start by priority from the first one handed to the executor, a killed
//! job's status is 128 + the signal that killed it in `wait`, the listing and the accounting alike,
//! and `jobs`, `show` and `wait` speak Slurm's state codes and one JSON shape. Each test runs its
//! own daemon on a socket and state directory of its own.

mod common;

use common::{
    cosched, memory_cgroups_here, one_at_a_time, start_daemon, stderr, stdout, submitted_id, wait,
};
use cosched_service::protocol::{JobState, Reply, Request};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A job that waits until file `go` exists: it holds the machine under `bp` until the test lets
/// it end.
fn blocker(socket: &Path, go: &Path) -> u64 {
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    submitted_id(&cosched(socket, &["submit", "--", "sh", "-c", &script]))
}

/// Under `bp` one job runs at a time; with it running, two `--nice 100` jobs and then two
/// `--priority 50` ones are submitted. Each is handed to the executor as it comes (the node has
/// room for that many waiting), yet the priority jobs run first: the order they append to one
/// file is the order they really started in.
#[test]
fn pending_jobs_start_by_priority_from_the_first_handed_to_the_executor() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "bp", "");
    let go = dir.path().join("go");
    let order = dir.path().join("order");
    let first = blocker(&daemon.socket, &go);
    assert!(
        wait::until(Duration::from_secs(10), || cosched(
            &daemon.socket,
            &["jobs", "-t", "R", "--format", "id"]
        )
        .stdout
        .ends_with(format!("\n{first}\n").as_bytes())),
        "the blocking job never ran"
    );
    let mut ids = Vec::new();
    for (name, flag, value) in [
        ("nice1", "--nice", "100"),
        ("nice2", "--nice", "100"),
        ("prio1", "--priority", "50"),
        ("prio2", "--priority", "50"),
    ] {
        let append = format!("echo {name} >> '{}'", order.display());
        let args = ["submit", flag, value, "--", "sh", "-c", &append];
        ids.push(submitted_id(&cosched(&daemon.socket, &args)));
    }
    std::fs::write(&go, "").unwrap();
    let ended = daemon.wait(ids).unwrap();
    daemon.stop().unwrap();
    assert!(ended.iter().all(|j| j.state == JobState::Done), "{ended:?}");
    let order = std::fs::read_to_string(&order).unwrap();
    assert_eq!(
        order.lines().collect::<Vec<_>>(),
        ["prio1", "prio2", "nice1", "nice2"],
        "the start order"
    );
}

/// `cosched wait IDS…`: its exit status.
fn wait_status(socket: &Path, id: u64) -> Option<i32> {
    cosched(socket, &["wait", &id.to_string()]).status.code()
}

/// The rows of `accounting.csv` that `cosched report --since 1h` writes of the daemon's journal,
/// by job id, each a map from column to value.
fn accounting(dir: &Path, state: &Path) -> HashMap<u64, HashMap<String, String>> {
    let out_dir = dir.join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["report", "--since", "1h", "--state-dir"])
        .arg(state)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let csv = std::fs::read_to_string(out_dir.join("accounting.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|line| {
            // The tests' rows have no quoted commas before the columns read here.
            let row: HashMap<String, String> = header
                .iter()
                .cloned()
                .zip(line.split(',').map(String::from))
                .collect();
            (row["job_id"].parse().unwrap(), row)
        })
        .collect()
}

/// One job dies of its time limit's SIGTERM (143), one ignores it and dies of the SIGKILL after
/// the grace (137); `wait`, the listing and the accounting agree on both, and the second is
/// `timeout`, not `cancelled`.
#[test]
fn a_timed_out_job_is_143_when_sigterm_ended_it_and_137_when_the_kill_after_the_grace_did() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "[jobs]\nkill_wait_seconds = 1\n");
    let socket = daemon.socket.clone();
    let polite = submitted_id(&cosched(
        &socket,
        &["submit", "--time", "0:01", "--", "sleep", "100"],
    ));
    // An ignored signal stays ignored across exec: the sleep ignores it too.
    let stubborn = submitted_id(&cosched(
        &socket,
        &[
            "submit",
            "--time",
            "0:01",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 100",
        ],
    ));
    assert_eq!(wait_status(&socket, polite), Some(143));
    assert_eq!(wait_status(&socket, stubborn), Some(137));
    let listed = cosched(
        &socket,
        &["jobs", "-t", "TO", "--format", "id,state,exit_code,signal"],
    );
    let text = stdout(&listed);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![polite.to_string().as_str(), "timeout", "143", "15"],
            vec![stubborn.to_string().as_str(), "timeout", "137", "9"],
        ],
        "{text}{}",
        stderr(&listed)
    );
    let state = daemon.state.clone();
    daemon.stop().unwrap();
    let rows = accounting(dir.path(), &state);
    for (id, code, signal) in [(polite, "143", "15"), (stubborn, "137", "9")] {
        let row = &rows[&id];
        assert_eq!(
            (&*row["state"], &*row["exit_code"], &*row["signal_code"]),
            ("timeout", code, signal),
            "{row:?}"
        );
    }
    assert!(
        rows[&stubborn]["reason"].contains("time limit"),
        "{:?}",
        rows[&stubborn]
    );
}

/// A job whose one process the kernel kills for passing its `--mem`: `wait` gives 137, the
/// listing and the accounting SIGKILL's 9. `--mem 0` asks for all of the node's memory.
#[test]
fn wait_of_a_job_killed_for_its_memory_is_137_and_the_accounting_says_signal_9() {
    let _serial = one_at_a_time();
    if !memory_cgroups_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let socket = daemon.socket.clone();
    // One process that holds all it reads: the one the kernel kills is the job's main process.
    let hungry = submitted_id(&cosched(
        &socket,
        &[
            "submit",
            "--mem",
            "32M",
            "--",
            "/usr/bin/python3",
            "-c",
            "x = bytearray(400 << 20)",
        ],
    ));
    assert_eq!(wait_status(&socket, hungry), Some(137));
    // `--mem 0`, as in Slurm: all of the node's memory for jobs (none is reserved here).
    let whole = submitted_id(&cosched(&socket, &["submit", "--mem", "0", "--", "true"]));
    let asked = daemon.wait(vec![whole]).unwrap()[0].mem;
    let total = cosched_linux::procfs::memory_total().unwrap();
    assert_eq!(asked, Some(total));
    let state = daemon.state.clone();
    daemon.stop().unwrap();
    let row = &accounting(dir.path(), &state)[&hungry];
    assert_eq!(
        (&*row["state"], &*row["exit_code"], &*row["signal_code"]),
        ("oom", "137", "9"),
        "{row:?}"
    );
}

/// The whole output of a `--json` command, parsed.
fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// `jobs -t` takes Slurm's codes, an ended state lists ended jobs without `--all`, and `jobs`,
/// `show` and `wait` print one JSON shape, `{"jobs": [...]}`, whose `cpus` is a count beside
/// `cpu_list`; `--json --format` keeps only the fields named.
#[test]
fn listings_take_slurm_state_codes_and_print_one_json_shape() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let socket = daemon.socket.clone();
    let done = submitted_id(&cosched(&socket, &["submit", "--", "true"]));
    daemon.wait(vec![done]).unwrap();
    let running = submitted_id(&cosched(
        &socket,
        &[
            "submit",
            "--threads",
            "1",
            "--kind",
            "rigid",
            "--",
            "sleep",
            "100",
        ],
    ));
    let listed_running = || {
        let out = cosched(
            &socket,
            &["jobs", "-t", "R", "--format", "id,cpus,cpu_list"],
        );
        let text = stdout(&out);
        let rows: Vec<Vec<String>> = (text.lines().skip(1))
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        (rows, text)
    };
    assert!(
        wait::until(Duration::from_secs(10), || {
            let (rows, _) = listed_running();
            rows.len() == 1 && rows[0][..2] == [running.to_string(), "1".to_string()]
        }),
        "job {running} is never listed by -t R with one CPU: {}",
        listed_running().1
    );
    let (rows, text) = listed_running();
    assert!(rows[0][2].parse::<usize>().is_ok(), "a CPU list: {text}");
    for (asked, listed) in [
        ("CD", done),
        ("completed", done),
        ("done", done),
        ("RUNNING", running),
        ("r", running),
    ] {
        let out = cosched(&socket, &["jobs", "-t", asked, "--format", "id"]);
        assert_eq!(
            stdout(&out),
            format!("id\n{listed}\n"),
            "-t {asked}: {}",
            stderr(&out)
        );
    }
    let bad = cosched(&socket, &["jobs", "-t", "XX"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("PD"), "{}", stderr(&bad));

    let listed = json(&cosched(&socket, &["jobs", "--all", "--json"]));
    let jobs = listed["jobs"].as_array().expect("an object with jobs");
    assert_eq!(jobs.len(), 2, "{listed}");
    let job = jobs.iter().find(|j| j["id"] == running).unwrap();
    assert_eq!(job["cpus"], 1, "{job}");
    assert!(job["cpu_list"].as_str().is_some(), "{job}");
    assert_eq!(job["state_code"], "R", "{job}");
    let shown = json(&cosched(&socket, &["show", "--json", &done.to_string()]));
    assert_eq!(shown["jobs"][0]["id"], done, "{shown}");
    let waited = json(&cosched(&socket, &["wait", "--json", &done.to_string()]));
    assert_eq!(waited["jobs"][0]["state"], "done", "{waited}");
    let chosen = json(&cosched(
        &socket,
        &["jobs", "--json", "--format", "id,state,cpus"],
    ));
    assert_eq!(
        chosen,
        serde_json::json!({"jobs": [{"id": running.to_string(), "state": "running", "cpus": 1}]})
    );
    let typo = cosched(&socket, &["jobs", "--json", "--format", "id,colour"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(stderr(&typo).contains("colour"), "{}", stderr(&typo));
    cosched(&socket, &["cancel", &running.to_string()]);
    daemon.wait(vec![running]).unwrap();
    daemon.stop().unwrap();
}

/// `cosched ARGS…` against `socket` as uid 65534, with `env` set.
fn as_nobody(socket: Option<&Path>, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0]);
    if let Some(socket) = socket {
        command.arg("--socket").arg(socket);
    }
    command.args(&args[1..]).env_remove("COSCHED_SOCKET");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// A second user is needed: root and uid 65534 with `setpriv`, and a directory both may use.
fn two_users() -> Option<tempfile::TempDir> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root to act as a second user");
        return None;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no setpriv");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    Some(dir)
}

/// Refusals by filter are as clear as by id: another user's `cancel --user root` says why and
/// fails, whether or not root has jobs. A user whose own daemon does not run is told of its socket.
#[test]
fn another_users_cancel_by_filter_is_refused_and_a_missing_user_daemon_is_named() {
    let _serial = one_at_a_time();
    let Some(dir) = two_users() else {
        return;
    };
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let socket = daemon.socket.clone();
    let refused = as_nobody(Some(&socket), &["cancel", "--user", "root"], &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("only root may cancel another user's jobs"),
        "{}",
        stderr(&refused)
    );
    daemon.stop().unwrap();

    let runtime = tempfile::tempdir().unwrap();
    let out = as_nobody(None, &["jobs"], &[("XDG_RUNTIME_DIR", runtime.path())]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let user_socket = runtime.path().join("cosched.sock");
    assert!(
        stderr(&out).contains(&user_socket.display().to_string())
            && stderr(&out).contains("cosched daemon"),
        "{}",
        stderr(&out)
    );
}

/// A daemon that stops while a client waits is reported as stopped, not as a stranger speaking
/// another protocol.
#[test]
fn a_daemon_stopping_during_wait_is_reported_as_such() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let socket = daemon.socket.clone();
    let id = submitted_id(&cosched(&socket, &["submit", "--", "sleep", "100"]));
    let waiting = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["wait", "--socket"])
        .arg(&socket)
        .arg(id.to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once it holds a socket, its request is sent or about to be: either way the daemon's
    // stopping closes the connection without an answer.
    let holds_socket = || {
        std::fs::read_dir(format!("/proc/{}/fd", waiting.id()))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.to_string_lossy().starts_with("socket:"))
    };
    assert!(
        wait::until(Duration::from_secs(10), holds_socket),
        "the wait never connected"
    );
    let mut pid = None;
    assert!(wait::until(Duration::from_secs(10), || {
        pid = match daemon.ask(Request::Show { id }) {
            Ok(Reply::Job { job }) => job.pid.filter(|&p| p != 0),
            _ => None,
        };
        pid.is_some()
    }));
    let pid = pid.unwrap() as i32;
    daemon.stop().unwrap();
    let out = waiting.wait_with_output().unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the daemon stopped while waiting for job"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("version"), "{}", stderr(&out));
}

/// `--each-line` makes no task of a blank line, and `--nice` says what it takes.
#[test]
fn each_line_skips_blank_lines_and_a_bad_nice_is_explained() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let socket = daemon.socket.clone();
    let lines = dir.path().join("inputs.txt");
    std::fs::write(&lines, "a\n\nb\n  \n").unwrap();
    let out = cosched(
        &socket,
        &[
            "submit",
            "--each-line",
            lines.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<u64> = stdout(&out).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{}", stdout(&out));
    daemon.wait(ids).unwrap();
    let bad = cosched(&socket, &["submit", "--nice", "abc", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("not a whole number: write --nice N"),
        "{}",
        stderr(&bad)
    );
    daemon.stop().unwrap();
}
