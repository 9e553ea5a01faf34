//! `cosched daemon` with real processes: many clients at once, a SIGKILLed daemon restarted, two
//! users, and hostile requests. Each test runs its own daemon on a socket and state directory of its
//! own.

use cosched_service::client::request;
use cosched_service::harness::{submission, DaemonProcess, Launch};
use cosched_service::journal::Entry;
use cosched_service::protocol::{JobState, Reply, Request, Submission};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The daemons raise the executor to SCHED_FIFO and load the CPUs: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A daemon of the test's own (`cosched_service::harness`), with the panicking helpers tests want.
struct Daemon(DaemonProcess);

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
    fn start(dir: &Path, policy: &str) -> Daemon {
        Daemon::start_with(dir, Some(policy), |_| {})
    }

    /// [`Daemon::start`], its command changed by `adjust` first.
    /// `policy` `None`: none given, so the journal's last one, else the default.
    fn start_with(dir: &Path, policy: Option<&str>, adjust: impl FnOnce(&mut Command)) -> Daemon {
        let mut launch = Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), dir, "state")
            .args(["--idle-timeout", "1"]);
        if let Some(policy) = policy {
            launch = launch.args(["--policy", policy]);
        }
        adjust(launch.command());
        Daemon(launch.start().unwrap())
    }

    fn submit(&self, command: &[&str]) -> u64 {
        self.0.submit(submission(command)).unwrap()
    }

    fn wait(&self, ids: Vec<u64>) -> Vec<cosched_service::protocol::JobView> {
        self.0.wait(ids).unwrap()
    }

    /// Slot switches so far and the latest ones' lateness, seconds.
    fn switches(&self) -> (u64, Vec<f64>) {
        self.0.switches().unwrap()
    }

    fn journal(&self) -> Vec<Entry> {
        self.0.journal().unwrap()
    }

    fn stop(&mut self) {
        self.0.stop().unwrap()
    }
}

fn children_of(pid: i32) -> Vec<cosched_linux::procfs::ProcStat> {
    let status = |p: i32| std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
    cosched_linux::procfs::all_processes()
        .into_iter()
        .filter(|p| {
            status(p.pid)
                .lines()
                .any(|l| l.starts_with("PPid:") && l[5..].trim() == pid.to_string())
        })
        .collect()
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Cgroups named after `pid` (the daemon's), in every hierarchy.
fn cgroups_of(pid: i32) -> Vec<PathBuf> {
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

fn poll(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn a_thousand_jobs_from_eight_clients_are_all_journaled_and_leave_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let warmup: Vec<u64> = (0..8).map(|_| daemon.submit(&["/bin/true"])).collect();
    daemon.wait(warmup);
    let (fds, rss) = (open_fds(daemon.pid()), rss_kib(daemon.pid()));
    let ids: Vec<u64> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..125)
                        .map(|_| daemon.submit(&["/bin/true"]))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    });
    assert_eq!(ids.len(), 1000);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 1000, "duplicate ids");
    let jobs = daemon.wait(ids.clone());
    assert!(
        jobs.iter().all(|j| j.state == JobState::Done),
        "{:?}",
        jobs.iter().find(|j| j.state != JobState::Done)
    );
    let journal = daemon.journal();
    for id in &ids {
        let count = |pred: &dyn Fn(&Entry) -> bool| journal.iter().filter(|e| pred(e)).count();
        assert_eq!(
            count(&|e| matches!(e, Entry::Submitted { id: i, .. } if i == id)),
            1,
            "job {id} submitted"
        );
        assert_eq!(
            count(&|e| matches!(e, Entry::Started { id: i, .. } if i == id)),
            1,
            "job {id} started"
        );
        assert_eq!(
            count(&|e| matches!(e, Entry::Finished { id: i, ok: true, .. } if i == id)),
            1,
            "job {id} finished"
        );
    }
    assert!(
        poll(Duration::from_secs(5), || children_of(daemon.pid())
            .iter()
            .all(|p| p.state != 'Z')),
        "zombies left"
    );
    assert!(
        poll(Duration::from_secs(5), || cgroups_of(daemon.pid())
            .is_empty()),
        "stray cgroups: {:?}",
        cgroups_of(daemon.pid())
    );
    assert!(
        poll(Duration::from_secs(5), || open_fds(daemon.pid()) <= fds + 2),
        "open descriptors grew from {fds} to {}",
        open_fds(daemon.pid())
    );
    let grown = rss_kib(daemon.pid()).saturating_sub(rss);
    println!("daemon RSS {rss} KiB before, grew by {grown} KiB over 1000 jobs");
    // The registry keeps one small record per job of its history; 8 MiB bounds a leak of anything more.
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
    daemon.stop();
}

fn frozen_or_stopped(pids: &[i32]) -> Vec<(i32, char)> {
    pids.iter()
        .filter_map(|&p| cosched_linux::procfs::stat(p).ok())
        .filter(|s| s.state == 'T')
        .map(|s| (s.pid, s.state))
        .collect()
}

#[test]
fn a_daemon_signalled_while_it_replays_its_journal_stops_as_asked() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Long enough to replay that the SIGTERM surely comes before the executor runs.
    cosched_service::harness::write_ended_history(&dir.path().join("state"), 50_000).unwrap();
    let mut launch = Launch::new(
        Path::new(env!("CARGO_BIN_EXE_cosched")),
        dir.path(),
        "state",
    );
    let mut daemon = launch.command().stderr(Stdio::piped()).spawn().unwrap();
    let journal = dir.path().join("state").join("journal.jsonl");
    let reading = |pid: u32| {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten();
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == journal))
    };
    assert!(
        poll(Duration::from_secs(30), || reading(daemon.id())),
        "the daemon never opened its journal"
    );
    assert!(
        !dir.path().join("cosched.sock").exists(),
        "the daemon listened before the signal: the journal replayed too fast for this test"
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let mut stderr = String::new();
    daemon
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
}

#[test]
fn a_sigkilled_daemon_leaves_jobs_thawed_and_its_successor_adopts_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Gang time-slices the jobs, so some are frozen at any moment.
    let mut daemon = Daemon::start(dir.path(), "gang");
    let running: Vec<u64> = (0..3).map(|_| daemon.submit(&["sleep", "3"])).collect();
    assert!(poll(Duration::from_secs(10), || {
        running.iter().all(|&id| matches!(daemon.ask(Request::Show { id }), Ok(Reply::Job { job }) if job.state == JobState::Running))
    }));
    let old_pid = daemon.pid();
    // Killed right after these are submitted: they are journaled, most not started yet.
    let waiting: Vec<u64> = (0..5).map(|_| daemon.submit(&["sleep", "1"])).collect();
    let pids: Vec<i32> = running
        .iter()
        .map(|&id| match daemon.ask(Request::Show { id }).unwrap() {
            Reply::Job { job } => job.pid.unwrap() as i32,
            other => panic!("{other:?}"),
        })
        .collect();
    unsafe { libc::kill(old_pid, libc::SIGKILL) };
    daemon.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        frozen_or_stopped(&pids).is_empty(),
        "stopped while no daemon runs: {:?}",
        frozen_or_stopped(&pids)
    );
    for cgroup in cgroups_of(old_pid) {
        if let Ok(state) = std::fs::read_to_string(cgroup.join("freezer.state")) {
            assert_eq!(state.trim(), "THAWED", "{}", cgroup.display());
        }
        if let Ok(state) = std::fs::read_to_string(cgroup.join("cgroup.freeze")) {
            assert_eq!(state.trim(), "0", "{}", cgroup.display());
        }
    }
    assert!(
        pids.iter().all(|&p| cosched_linux::procfs::stat(p).is_ok()),
        "the jobs were killed with the daemon"
    );
    let mut successor = Daemon::start(dir.path(), "gang");
    let jobs = successor.wait(running.iter().chain(&waiting).copied().collect());
    for job in &jobs {
        // A short job the dead daemon had started may have ended before its successor came.
        let ended_unwatched = job.state == JobState::Failed
            && job
                .error
                .as_deref()
                .is_some_and(|e| e.contains("no cosched daemon watched it"));
        assert!(job.state == JobState::Done || ended_unwatched, "{job:?}");
    }
    assert!(
        jobs[..3]
            .iter()
            .all(|j| j.adopted && j.state == JobState::Done),
        "running jobs were not adopted: {jobs:?}"
    );
    let journal = successor.journal();
    for id in running.iter().chain(&waiting) {
        assert!(
            journal
                .iter()
                .any(|e| matches!(e, Entry::Finished { id: i, .. } if i == id)),
            "job {id} has no end in the journal"
        );
    }
    assert!(
        poll(Duration::from_secs(5), || cgroups_of(old_pid).is_empty()),
        "the dead daemon's cgroups remain: {:?}",
        cgroups_of(old_pid)
    );
    successor.stop();
}

/// A directory uid 65534 may enter, or `None` (saying why) where a second user cannot be had.
fn dir_for_two_users() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    cosched_service::harness::open_to_a_second_user(dir.path())
        .unwrap()
        .then_some(dir)
}

const NOBODY: [&str; 3] = ["--reuid=65534", "--regid=65534", "--clear-groups"];

/// `sleep SECONDS` run as uid 65534, returned once the kernel shows the new uid: `setpriv` starts as
/// root, so an attach sent before it has switched would name a root process.
fn sleep_as_nobody(seconds: u32) -> Child {
    let child = Command::new("setpriv")
        .args(NOBODY)
        .args(["sleep", &seconds.to_string()])
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    assert!(
        poll(Duration::from_secs(10), || {
            cosched_linux::procfs::uids(pid).is_ok_and(|ids| ids == [65534; 4])
        }),
        "setpriv did not switch process {pid} to uid 65534"
    );
    child
}

/// `cosched ARGS…` run as uid 65534.
fn as_nobody(daemon: &Daemon, args: &[&str]) -> std::process::Output {
    Command::new("setpriv")
        .args(NOBODY)
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(&daemon.socket)
        .args(&args[1..])
        .current_dir("/")
        .output()
        .unwrap()
}

#[test]
fn users_see_all_jobs_but_touch_only_their_own() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = Daemon::start(dir.path(), "eq");
    let as_nobody = |args: &[&str]| as_nobody(&daemon, args);
    let roots = daemon.submit(&["sleep", "30"]);
    let out = as_nobody(&["submit", "--", "sleep", "30"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let refused = as_nobody(&["cancel", &roots.to_string()]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("belongs to uid 0"), "{message}");
    let listed = as_nobody(&["jobs", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed["jobs"].as_array().unwrap().len(),
        2,
        "every user lists every job"
    );
    let pid = poll(
        Duration::from_secs(10),
        || matches!(daemon.ask(Request::Show { id: theirs }), Ok(Reply::Job { job }) if job.pid.is_some()),
    );
    assert!(pid);
    let Reply::Job { job } = daemon.ask(Request::Show { id: theirs }).unwrap() else {
        panic!()
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", job.pid.unwrap())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|u| u == "65534"),
        "{uid}"
    );
    let own = as_nobody(&["cancel", &theirs.to_string()]);
    assert!(
        own.status.success(),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    daemon.ask(Request::Cancel { ids: vec![roots] }).unwrap();
    daemon.wait(vec![roots, theirs]);
    daemon.stop();
}

/// `cosched ARGS…` as uid 65534, which must succeed: its standard output as JSON.
fn json_as_nobody(daemon: &Daemon, args: &[&str]) -> serde_json::Value {
    let out = as_nobody(daemon, args);
    assert!(
        out.status.success(),
        "cosched {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes `text` as a daemon configuration file in `dir` and gives the arguments naming it.
fn config(dir: &Path, text: &str) -> impl FnOnce(&mut Command) {
    let path = dir.join("daemon.toml");
    std::fs::write(&path, text).unwrap();
    move |command: &mut Command| {
        command.arg("--config").arg(path);
    }
}

#[test]
fn other_users_jobs_are_listed_without_their_command_line_unless_configured_otherwise() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = Daemon::start(dir.path(), "eq");
    let roots = daemon.submit(&["sh", "-c", "sleep 30", "secret-token"]);
    let theirs = json_as_nobody(&daemon, &["submit", "--", "sleep", "31"])
        .as_u64()
        .unwrap();
    let listed = json_as_nobody(&daemon, &["jobs", "--all", "--json"]);
    let command_of = |id: u64| {
        let job = listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("job {id} not listed: {listed}"));
        job["command"].clone()
    };
    assert_eq!(command_of(roots), serde_json::json!([]), "{listed}");
    assert_eq!(command_of(theirs), serde_json::json!(["sleep", "31"]));
    let shown = as_nobody(&daemon, &["show", &roots.to_string(), "--json"]);
    assert!(shown.status.success());
    assert!(
        !String::from_utf8_lossy(&shown.stdout).contains("secret"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    // Root sees everything.
    assert_eq!(show(&daemon, theirs).command, ["sleep", "31"]);
    daemon
        .ask(Request::Cancel {
            ids: vec![roots, theirs],
        })
        .unwrap();
    daemon.wait(vec![roots, theirs]);
    daemon.stop();

    let open = config(dir.path(), "[privacy]\nprivate_jobs = false\n");
    let mut daemon = Daemon::start_with(dir.path(), Some("eq"), open);
    let shown = json_as_nobody(&daemon, &["show", &roots.to_string(), "--json"]);
    assert_eq!(
        shown["jobs"][0]["command"],
        serde_json::json!(["sh", "-c", "sleep 30", "secret-token"])
    );
    daemon.stop();
}

/// `cosched ARGS…` as uid 65534, which must be refused: its error message.
fn refused_as_nobody(daemon: &Daemon, args: &[&str]) -> String {
    let out = as_nobody(daemon, args);
    assert!(!out.status.success(), "cosched {args:?} was not refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn per_user_limits_refuse_naming_their_key_and_leave_root_a_way_in() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let limits = "[limits]\nqueued_jobs_per_user = 2\nrunning_jobs_per_user = 1\n\
                  connections_per_user = 2\n";
    let mut daemon = Daemon::start_with(dir.path(), Some("eq"), config(dir.path(), limits));
    let heavy = refused_as_nobody(&daemon, &["submit", "--weight", "5", "--", "true"]);
    assert!(heavy.contains("only root"), "{heavy}");
    let root_heavy = Submission {
        weight: 5.0,
        ..submission(&["true"])
    };
    assert!(matches!(
        daemon.ask(Request::Submit(root_heavy)),
        Ok(Reply::Submitted { .. })
    ));
    let submit = |seconds: &str| {
        json_as_nobody(&daemon, &["submit", "--", "sleep", seconds])
            .as_u64()
            .unwrap()
    };
    let first = submit("30");
    assert!(poll(Duration::from_secs(10), || show(&daemon, first).state
        == JobState::Running));
    // One running job is the most: the next ones wait, queued, up to two of them.
    let held = [submit("30"), submit("30")];
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(show(&daemon, held[0]).state, JobState::Queued);
    let full = refused_as_nobody(&daemon, &["submit", "--", "sleep", "30"]);
    assert!(full.contains("limits.queued_jobs_per_user"), "{full}");

    // Two `cosched wait`s hold the user's two connections: a third is refused, root still gets in.
    let socket = daemon.socket.to_str().unwrap().to_string();
    let first_id = first.to_string();
    let mut waits: Vec<Child> = Vec::new();
    while waits.len() < 2 {
        let mut wait = Command::new("setpriv")
            .args(NOBODY)
            .arg(env!("CARGO_BIN_EXE_cosched"))
            .args(["wait", "--socket", &socket, &first_id])
            .current_dir("/")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Refused, it would end at once; served, it waits for the job.
        std::thread::sleep(Duration::from_millis(500));
        if wait.try_wait().unwrap().is_none() {
            waits.push(wait);
            continue;
        }
        // `wait` first lists the ids on a connection of its own: the daemon may still count that
        // one (or an earlier command's), just closed, when the waiting connection comes. Refused
        // for it, the wait is retried.
        let mut said = String::new();
        wait.stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert!(
            said.contains("limits.connections_per_user"),
            "`cosched wait` ended: {said}"
        );
    }
    let mut message = String::new();
    assert!(
        poll(Duration::from_secs(10), || {
            let out = as_nobody(&daemon, &["jobs"]);
            message = String::from_utf8_lossy(&out.stderr).into_owned();
            !out.status.success()
        }),
        "a third connection of uid 65534 was served"
    );
    assert!(message.contains("limits.connections_per_user"), "{message}");
    daemon.ask(Request::Cancel { ids: vec![first] }).unwrap();
    for wait in &mut waits {
        wait.wait().unwrap();
    }
    // The running job ended: the first held one starts.
    assert!(poll(Duration::from_secs(10), || show(&daemon, held[0])
        .state
        == JobState::Running));
    daemon.ask(Request::Cancel { ids: held.to_vec() }).unwrap();
    daemon.wait(held.to_vec());
    daemon.stop();
}

#[test]
fn ended_jobs_are_forgotten_after_the_retention_a_torn_journal_is_cut_and_ids_never_come_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let ids: Vec<u64> = (0..3).map(|_| daemon.submit(&["true"])).collect();
    daemon.wait(ids.clone());
    daemon.stop();
    let journal = dir.path().join("state/journal.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    file.write_all(b"\xff\xfe not an entry\n{\"event\":\"submitted\",\"id\":")
        .unwrap();
    drop(file);

    let log = dir.path().join("daemon.log");
    let stderr = std::fs::File::create(&log).unwrap();
    let forget_at_once = config(dir.path(), "[history]\nretention_seconds = 0\n");
    let mut daemon = Daemon::start_with(dir.path(), Some("eq"), |command| {
        forget_at_once(command);
        command.stderr(stderr);
    });
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("skipped 1 unreadable"), "{said}");
    assert!(said.contains("cut off"), "{said}");
    for &id in &ids {
        let message = daemon.ask(Request::Show { id }).unwrap_err().to_string();
        assert!(message.contains("no job"), "{message}");
    }
    let next = daemon.submit(&["true"]);
    assert!(next > *ids.iter().max().unwrap(), "id {next} given again");
    daemon.wait(vec![next]);
    // A job that ends while the daemon runs is forgotten too, once its retention has passed.
    assert!(poll(Duration::from_secs(5), || daemon
        .ask(Request::Show { id: next })
        .is_err()));
    daemon.stop();
    let daemon = Daemon::start_with(dir.path(), Some("eq"), config(dir.path(), ""));
    let again = daemon.submit(&["true"]);
    assert!(again > next, "id {again} given again");
    let journaled: Vec<u64> = daemon
        .journal()
        .iter()
        .filter_map(|e| match e {
            Entry::Submitted { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(journaled, [next, again], "the journal was not compacted");
}

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
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
        poll(Duration::from_secs(10), || daemon.switches().0 > 0),
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
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
fn systemd_hears_ready_once_the_socket_listens_and_stopping_at_the_end() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cosched-daemon-notify-{}", std::process::id());
    let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixDatagram::bind_addr(&address).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut daemon = Daemon::start_with(dir.path(), Some("eq"), |command| {
        command.env("NOTIFY_SOCKET", format!("@{name}"));
    });
    let mut messages = Vec::new();
    let mut buffer = [0u8; 4096];
    while !messages.iter().any(|m: &String| m.contains("READY=1")) {
        let n = listener.recv(&mut buffer).expect("no READY=1 within 20 s");
        messages.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    let ready = messages.last().unwrap();
    assert!(ready.contains("STATUS=serving"), "{messages:?}");
    // Ready means clients are served: a request made right after READY=1 is answered.
    assert!(matches!(
        daemon.ask(Request::Jobs {
            all: true,
            filter: Default::default()
        }),
        Ok(Reply::Jobs { .. })
    ));
    daemon.stop();
    let n = listener.recv(&mut buffer).expect("no message at the stop");
    let stopping = String::from_utf8_lossy(&buffer[..n]);
    assert!(stopping.contains("STOPPING=1"), "{stopping}");
}

#[test]
fn bench_daemon_prints_every_figure() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["bench", "daemon", "--clients", "2", "--jobs", "20"])
        .args(["--idle-jobs", "3", "--idle-seconds", "1"])
        .args([
            "--attack",
            "--attack-seconds",
            "1",
            "--history",
            "500",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(figures["jobs"], 20);
    assert!(figures["submissions_per_s"].as_f64().unwrap() > 0.0);
    for quantile in ["p50", "p99", "max"] {
        assert!(figures["latency_ms"][quantile].as_f64().unwrap() > 0.0);
    }
    assert!(figures["idle_cpu_percent"].as_f64().unwrap() >= 0.0);
    let attack = &figures["attack"];
    for half in ["quiet", "attacked"] {
        assert!(
            attack[half]["switches"].as_u64().unwrap() > 0,
            "no slot switch {half}: {figures}"
        );
    }
    assert!(attack["hostile_requests"].as_u64().unwrap() > 0);
    let users = &attack["users"];
    if users.is_null() {
        eprintln!("SKIPPED: the hostile users need root and setpriv");
    } else {
        // The per-user connection limit (64 by default) holds the hostile user, and the others
        // get in beside it.
        assert_eq!(users["hostile_connections_held"], 64, "{users}");
        assert_eq!(users["polite_users_connected"], 3, "{users}");
        assert_eq!(users["fair_share"].as_array().unwrap().len(), 3, "{users}");
        assert!(users["switches"].as_u64().unwrap() > 0, "{users}");
    }
    let history = &figures["history"];
    assert_eq!(history["jobs"], 500);
    for figure in ["restart_s", "rss_mib", "empty_restart_s", "list_all_s"] {
        assert!(
            history[figure].as_f64().unwrap() > 0.0,
            "{figure}: {history}"
        );
    }
    assert_eq!(figures["targets"]["submissions_per_s"], 500.0);
}

/// A process the test starts itself (not the daemon), killed and reaped when the test ends.
struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        Spinner(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        )
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    fn cpu_ticks(&self) -> u64 {
        cpu_ticks(self.pid())
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cosched(daemon: &Daemon, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(&daemon.socket)
        .args(&args[1..])
        .output()
        .unwrap()
}

/// Runs `cosched attach ARGS…` and gives its job id, or its error message.
fn attach(daemon: &Daemon, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["attach"];
    all.extend_from_slice(args);
    let out = cosched(daemon, &all);
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// A rigid spinner as wide as the machine: under gang, a job beside it must take turns with it.
fn submit_machine_wide_spinner(daemon: &Daemon, cpus: usize) -> u64 {
    let wide = cpus.to_string();
    let spin = ["sh", "-c", "while :; do :; done"];
    let mut args = vec!["submit", "--threads", &wide, "--kind", "rigid", "--"];
    args.extend(spin);
    let out = cosched(daemon, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn show(daemon: &Daemon, id: u64) -> cosched_service::protocol::JobView {
    match daemon.ask(Request::Show { id }).unwrap() {
        Reply::Job { job } => *job,
        other => panic!("{other:?}"),
    }
}

fn cpus_allowed(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    line.trim().to_string()
}

fn cpu_ticks(pid: i32) -> u64 {
    cosched_linux::procfs::stat(pid)
        .map(|s| s.cpu_ticks)
        .unwrap_or(0)
}

/// Whether process `pid` made no progress for a whole half second at some point within `limit`: it
/// was frozen while its slot was off.
/// Whether process `pid` has ended (gone, or a zombie nobody has reaped yet).
fn dead(pid: i32) -> bool {
    !cosched_linux::procfs::stat(pid).is_ok_and(|s| s.state != 'Z')
}

fn was_frozen_a_while(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    let (mut ticks, mut since) = (cpu_ticks(pid), Instant::now());
    while start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
        let now = cpu_ticks(pid);
        if now != ticks {
            (ticks, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_millis(500) {
            return true;
        }
    }
    false
}

#[test]
fn an_attached_process_is_placed_time_sliced_and_readopted_after_a_restart() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    // A job as wide as the machine and the attached one cannot share a row: gang alternates them.
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    let wide_id = submit_machine_wide_spinner(&daemon, cpus);
    let spinner = Spinner::start();
    let pid = spinner.pid().to_string();
    let id = attach(
        &daemon,
        &[
            "--threads",
            "1",
            "--kind",
            "rigid",
            "--label",
            "slurm_job=42,slurm_step=0",
            &pid,
        ],
    )
    .unwrap();
    assert!(poll(Duration::from_secs(10), || {
        let job = show(&daemon, id);
        job.state == JobState::Running && job.cpus.is_some()
    }));
    let job = show(&daemon, id);
    assert!(job.attached && !job.adopted, "{job:?}");
    assert_eq!(job.labels.get("slurm_job").map(String::as_str), Some("42"));
    assert_eq!(job.labels.get("slurm_step").map(String::as_str), Some("0"));
    let moved_into = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    if !cgroups_of(daemon.pid()).is_empty() {
        let ours = format!("cosched-{}-", daemon.pid());
        assert!(
            moved_into.contains(&ours),
            "not moved into cosched's cgroups: {moved_into}"
        );
    }
    let listed = String::from_utf8_lossy(&cosched(&daemon, &["jobs"]).stdout).into_owned();
    assert!(listed.contains("slurm_job=42,slurm_step=0"), "{listed}");
    // Its CPUs are those of its partition in the plan.
    let planned = job.cpus.clone().unwrap();
    assert!(
        poll(Duration::from_secs(5), || cpus_allowed(spinner.pid())
            == planned),
        "Cpus_allowed_list {} but the plan gives {planned}",
        cpus_allowed(spinner.pid())
    );
    if cpus > 1 {
        assert_ne!(planned, format!("0-{}", cpus - 1), "one thread, all CPUs");
    }
    assert!(
        was_frozen_a_while(spinner.pid(), Duration::from_secs(8)),
        "the attached process never stopped while its slot was off"
    );
    let before = spinner.cpu_ticks();
    assert!(
        poll(Duration::from_secs(8), || spinner.cpu_ticks() > before),
        "the attached process never ran again"
    );

    // Refusals, each with its reason.
    let refused = |target: &str, expected: &str| {
        let message = attach(&daemon, &[target]).unwrap_err();
        assert!(message.contains(expected), "attach {target}: {message}");
    };
    refused(&pid, &format!("already part of job {id}"));
    refused("1", "init");
    refused(&daemon.pid().to_string(), "cosched daemon");
    refused(&std::process::id().to_string(), "ancestors");
    refused("4194304", "not yours or not running");
    let wide_pid = show(&daemon, wide_id).pid.unwrap().to_string();
    refused(&wide_pid, "job cosched started");

    // Restart: the attached process keeps running unfrozen, and the next daemon adopts it again.
    let old_pid = daemon.pid();
    unsafe { libc::kill(old_pid, libc::SIGKILL) };
    daemon.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        frozen_or_stopped(&[spinner.pid()]).is_empty(),
        "stopped while no daemon runs"
    );
    let before = spinner.cpu_ticks();
    assert!(
        poll(Duration::from_secs(5), || spinner.cpu_ticks() > before),
        "frozen while no daemon runs"
    );
    let mut successor = Daemon::start(dir.path(), "gang:slice=1");
    assert!(poll(Duration::from_secs(10), || {
        let job = show(&successor, id);
        job.adopted && job.state == JobState::Running
    }));
    assert!(
        was_frozen_a_while(spinner.pid(), Duration::from_secs(8)),
        "the re-adopted process is not time-sliced"
    );
    // It ends on its own: done, its exit status unknown (cosched is not its parent).
    drop(spinner);
    let ended = successor.wait(vec![id]);
    assert_eq!(ended[0].state, JobState::Done, "{:?}", ended[0]);
    assert_eq!(ended[0].exit_code, None);
    successor
        .ask(Request::Cancel { ids: vec![wide_id] })
        .unwrap();
    successor.wait(vec![wide_id]);
    assert!(successor
        .journal()
        .iter()
        .any(|e| matches!(e, Entry::Attached { id: i, .. } if *i == id)));
    successor.stop();
}

#[test]
fn a_user_attaches_their_own_processes_only() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = Daemon::start(dir.path(), "eq");
    let as_nobody = |args: &[&str]| as_nobody(&daemon, args);
    let roots = Spinner::start();
    let refused = as_nobody(&["attach", &roots.pid().to_string()]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    // Whose it is stays untold: the same words as for a process that does not run.
    assert!(
        message.contains("not yours or not running") && !message.contains("uid"),
        "{message}"
    );
    let mut theirs = sleep_as_nobody(30);
    let out = as_nobody(&["attach", &theirs.id().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(poll(Duration::from_secs(10), || show(&daemon, id).state
        == JobState::Running));
    assert_eq!(show(&daemon, id).uid, 65534);
    // Cancelling an attached job kills its process.
    let cancel = as_nobody(&["cancel", &id.to_string()]);
    assert!(
        cancel.status.success(),
        "{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    daemon.wait(vec![id]);
    let status = theirs.wait().unwrap();
    assert!(
        !status.success(),
        "the cancelled process ended with {status}"
    );
    daemon.stop();
}

#[test]
fn an_attached_process_left_in_place_keeps_its_cgroups_follows_the_plan_and_a_dying_daemon_continues_it(
) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    let cpus = std::thread::available_parallelism().unwrap().get();
    let wide_id = submit_machine_wide_spinner(&daemon, cpus);
    // A spinning shell with a child in a session and group of its own, as a Slurm task has its
    // TaskProlog: stopped with the tree, it must be continued with it.
    let spinner = Spinner(
        Command::new("sh")
            .args(["-c", "setsid sleep 600 & while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    let child = || {
        cosched_linux::procfs::all_processes()
            .into_iter()
            .find(|p| p.ppid == spinner.pid())
            .map(|p| p.pid)
    };
    assert!(poll(Duration::from_secs(10), || child().is_some()));
    let child = child().unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap();
    let id = attach(
        &daemon,
        &[
            "--in-place",
            "--threads",
            "1",
            "--kind",
            "rigid",
            &spinner.pid().to_string(),
        ],
    )
    .unwrap();
    assert!(poll(Duration::from_secs(10), || show(&daemon, id)
        .cpus
        .is_some()));
    let planned = show(&daemon, id).cpus.unwrap();
    assert!(
        poll(Duration::from_secs(5), || cpus_allowed(spinner.pid())
            == planned),
        "Cpus_allowed_list {} but the plan gives {planned}",
        cpus_allowed(spinner.pid())
    );
    assert!(
        was_frozen_a_while(spinner.pid(), Duration::from_secs(8)),
        "the process left in place never stopped while its slot was off"
    );
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap(),
        cgroups,
        "the process was moved out of its cgroups"
    );

    let wide_pid = show(&daemon, wide_id).pid.expect("the spinner started") as i32;
    // Killed while it has the tree stopped: its watchdog continues both processes.
    let tree = [spinner.pid(), child];
    let stopped_together = poll(Duration::from_secs(10), || {
        frozen_or_stopped(&tree).len() == 2
    });
    unsafe { libc::kill(daemon.pid(), libc::SIGKILL) };
    daemon.child.wait().unwrap();
    let continued = poll(Duration::from_secs(5), || {
        frozen_or_stopped(&tree).is_empty()
    });
    let left_stopped = frozen_or_stopped(&tree);
    // Cleaned up before judging, so that a failure leaves no spinner behind.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let mut successor = Daemon::start(dir.path(), "gang:slice=1");
    // Cancelled before the successor has taken the jobs over, as likely as not: their processes
    // die all the same.
    successor
        .ask(Request::Cancel {
            ids: vec![id, wide_id],
        })
        .unwrap();
    successor.wait(vec![id, wide_id]);
    successor.stop();
    assert!(
        poll(Duration::from_secs(5), || dead(wide_pid)),
        "the cancelled spinner {wide_pid} outlived its cancel"
    );
    assert!(
        stopped_together,
        "the daemon never stopped the process and its child together"
    );
    assert!(
        continued,
        "stopped with no daemon running: {left_stopped:?}"
    );
}

#[test]
fn report_since_covers_the_jobs_of_every_daemon_run_in_the_window() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut first = Daemon::start(dir.path(), "eq");
    let early: Vec<u64> = (0..2).map(|_| first.submit(&["/bin/true"])).collect();
    first.wait(early);
    first.stop();
    let between = cosched_service::protocol::now_unix();
    let second = Daemon::start(dir.path(), "eq");
    let late = second.submit(&["/bin/true"]);
    second.wait(vec![late]);
    let report = |window: &[&str], out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cosched"))
            .arg("report")
            .args(window)
            .arg("--state")
            .arg(&second.state)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    };
    // The running daemon's trace is read as it stands.
    let all = dir.path().join("all");
    let out = report(&["--since", "1h"], &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.join("report.html").is_file());
    let csv = std::fs::read_to_string(all.join("jobs.csv")).unwrap();
    let ok_jobs = |csv: &str| csv.lines().skip(1).filter(|l| l.contains(",ok,")).count();
    assert_eq!(ok_jobs(&csv), 3, "{csv}");
    let since_restart = dir.path().join("late");
    let at = format!("@{between}");
    let out = report(&["--since", &at], &since_restart);
    assert!(out.status.success());
    let csv = std::fs::read_to_string(since_restart.join("jobs.csv")).unwrap();
    assert_eq!(ok_jobs(&csv), 1, "{csv}");
    // The journal's accounting of the jobs that ended in the window, one line each.
    let accounting = std::fs::read_to_string(since_restart.join("accounting.csv")).unwrap();
    let rows: Vec<&str> = accounting.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{accounting}");
    assert!(
        rows[0].starts_with(&format!("{late},true,")),
        "{accounting}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("accounting: 1 jobs ended"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = report(
        &["--since", "3h", "--until", "2h"],
        &dir.path().join("none"),
    );
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("no job reached the daemon"), "{message}");
}

#[test]
fn the_policy_switches_live_over_running_jobs_and_a_restart_keeps_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let all = if cpus > 1 {
        format!("0-{}", cpus - 1)
    } else {
        "0".into()
    };
    // EQ splits the machine between two machine-wide jobs; gang gives each all of it in turn.
    let mut daemon = Daemon::start(dir.path(), "eq");
    let ids = [
        submit_machine_wide_spinner(&daemon, cpus),
        submit_machine_wide_spinner(&daemon, cpus),
    ];
    // Placed first, then started: the plan is journaled before the jobs it places are launched.
    assert!(poll(Duration::from_secs(10), || ids.iter().all(|&id| {
        let job = show(&daemon, id);
        job.cpus.is_some() && job.pid.is_some()
    })));
    let pids: Vec<i32> = ids
        .iter()
        .map(|&id| show(&daemon, id).pid.unwrap() as i32)
        .collect();
    if cpus > 1 {
        assert_ne!(
            show(&daemon, ids[0]).cpus.unwrap(),
            all,
            "eq gave one job all"
        );
    }
    let unknown = cosched(&daemon, &["policy", "fastest"]);
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && message.contains("valid policies"),
        "{message}"
    );
    if unsafe { libc::geteuid() } == 0 && Command::new("setpriv").arg("--version").output().is_ok()
    {
        let refused = as_nobody(&daemon, &["policy", "gang"]);
        let message = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && message.contains("only root"),
            "{message}"
        );
    }
    let switched = cosched(&daemon, &["policy", "gang:slice=1"]);
    assert!(
        switched.status.success(),
        "{}",
        String::from_utf8_lossy(&switched.stderr)
    );
    // The same processes run on, placed again under gang: all the CPUs, in turns.
    assert!(
        poll(Duration::from_secs(10), || show(&daemon, ids[0])
            .cpus
            .as_deref()
            == Some(all.as_str())),
        "not re-planned: {:?}",
        show(&daemon, ids[0]).cpus
    );
    for (&id, &pid) in ids.iter().zip(&pids) {
        let job = show(&daemon, id);
        assert_eq!((job.state, job.pid), (JobState::Running, Some(pid as u32)));
    }
    assert!(
        was_frozen_a_while(pids[0], Duration::from_secs(8)),
        "gang never froze a job after the switch"
    );
    let shown = cosched(&daemon, &["policy"]);
    assert_eq!(
        String::from_utf8_lossy(&shown.stdout).trim(),
        "gang:slice=1"
    );
    assert!(daemon
        .journal()
        .iter()
        .any(|e| matches!(e, Entry::Policy { name, .. } if name == "gang:slice=1")));
    // A restart without --policy comes back with the last one set.
    daemon.stop();
    let mut successor = Daemon::start_with(dir.path(), None, |_| {});
    let shown = cosched(&successor, &["policy"]);
    assert_eq!(
        String::from_utf8_lossy(&shown.stdout).trim(),
        "gang:slice=1"
    );
    successor
        .ask(Request::Cancel { ids: ids.to_vec() })
        .unwrap();
    successor.wait(ids.to_vec());
    successor.stop();
}

#[test]
fn jobs_show_the_slowdown_so_far_of_a_command_seen_to_finish_before() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let first = daemon.submit(&["sleep", "0.5"]);
    let [done] = &daemon.wait(vec![first])[..] else {
        panic!("one job")
    };
    assert_eq!(done.state, JobState::Done);
    let alone = done.finished.unwrap() - done.started.unwrap();
    assert_eq!(
        show(&daemon, first).slowdown,
        Some(1.0),
        "the shortest run is itself"
    );

    let again = daemon.submit(&["sleep", "0.5"]);
    let never_seen = daemon.submit(&["sleep", "3"]);
    assert!(poll(Duration::from_secs(10), || show(&daemon, again).state
        == JobState::Running));
    let running = show(&daemon, again);
    let so_far = running
        .slowdown
        .expect("a command seen to finish has a slowdown");
    let elapsed = cosched_service::protocol::now_unix() - running.started.unwrap();
    assert!(
        so_far > 0.0 && so_far <= elapsed / alone + 0.01,
        "{so_far} against {elapsed} s over {alone} s"
    );
    assert_eq!(show(&daemon, never_seen).slowdown, None);

    let listing = cosched(&daemon, &["jobs"]);
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(text.lines().next().unwrap().contains("slowdown"), "{text}");
    daemon.wait(vec![again, never_seen]);
    daemon.stop();
}

/// A cgroup named as Slurm names a job step's (`…/job_J/step_S`), made by the test so that the tasks
/// of a step can be attached without Slurm; removed when dropped, after the processes in it ended.
struct FakeSlurmStep {
    top: PathBuf,
    step: PathBuf,
}

impl FakeSlurmStep {
    /// Job 77's step 0, in the unified hierarchy or else in cgroup v1's pids one (a controller the
    /// daemon does not use), or why it cannot be made here.
    fn create() -> Result<FakeSlurmStep, String> {
        let root = match Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            true => Path::new("/sys/fs/cgroup"),
            false => Path::new("/sys/fs/cgroup/pids"),
        };
        let top = root.join(format!("cosched-test-{}", std::process::id()));
        let step = top.join("job_77/step_0");
        std::fs::create_dir_all(&step)
            .map_err(|e| format!("cannot make {}: {e}", step.display()))?;
        Ok(FakeSlurmStep { top, step })
    }

    fn enter(&self, pid: i32) -> Result<(), String> {
        let procs = self.step.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .map_err(|e| format!("cannot move {pid} into {}: {e}", procs.display()))
    }
}

impl Drop for FakeSlurmStep {
    fn drop(&mut self) {
        for dir in [self.step.clone(), self.top.join("job_77"), self.top.clone()] {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn the_tasks_of_one_slurm_step_run_as_one_job_stopped_together_readopted_and_cancelled_together_and_joined_by_no_other_user(
) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let step = match FakeSlurmStep::create() {
        Ok(step) => step,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let tasks = [Spinner::start(), Spinner::start()];
    for task in &tasks {
        if let Err(why) = step.enter(task.pid()) {
            eprintln!("skipped: {why}");
            return;
        }
    }
    let dir = dir_for_two_users();
    let two_users = dir.is_some();
    let dir = dir.unwrap_or_else(|| tempfile::tempdir().unwrap());
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    let cpus = std::thread::available_parallelism().unwrap().get();
    let wide_id = submit_machine_wide_spinner(&daemon, cpus);
    // Each task attached on its own, as the step's TaskProlog does.
    let pids: Vec<String> = tasks.iter().map(|t| t.pid().to_string()).collect();
    let ids: Vec<u64> = pids
        .iter()
        .map(|pid| {
            attach(
                &daemon,
                &["--in-place", "--threads", "1", "--kind", "rigid", pid],
            )
            .unwrap()
        })
        .collect();
    assert_eq!(
        ids[0], ids[1],
        "the step's second task became a job of its own"
    );
    let id = ids[0];
    assert!(poll(Duration::from_secs(10), || show(&daemon, id)
        .cpus
        .is_some()));
    let job = show(&daemon, id);
    assert_eq!(job.pid, Some(tasks[0].pid() as u32), "{job:?}");
    assert_eq!(job.tasks, [tasks[1].pid() as u32], "{job:?}");
    let listed = String::from_utf8_lossy(&cosched(&daemon, &["jobs"]).stdout).into_owned();
    let lines: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("slurm=77.0"))
        .collect();
    assert_eq!(lines.len(), 1, "{listed}");
    assert!(lines[0].contains("tasks=2"), "{listed}");
    if two_users {
        // Another user's process in the same step joins no job of root's: it is a job of its own.
        let theirs = Spinner(sleep_as_nobody(60));
        step.enter(theirs.pid()).unwrap();
        let out = as_nobody(
            &daemon,
            &["attach", "--in-place", &theirs.pid().to_string()],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let their_id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_ne!(their_id, id, "another user's process joined root's job");
        assert_eq!(show(&daemon, id).tasks.len(), 1);
        daemon
            .ask(Request::Cancel {
                ids: vec![their_id],
            })
            .unwrap();
        daemon.wait(vec![their_id]);
    }

    // Both tasks run on the job's CPUs, and stop and run again together.
    let planned = job.cpus.unwrap();
    for task in &tasks {
        assert!(
            poll(Duration::from_secs(5), || cpus_allowed(task.pid())
                == planned),
            "task {}: Cpus_allowed_list {} but the plan gives {planned}",
            task.pid(),
            cpus_allowed(task.pid())
        );
    }
    let both = [tasks[0].pid(), tasks[1].pid()];
    let stopped_together = |limit| {
        poll(limit, || {
            let stopped = frozen_or_stopped(&both).len() == 2;
            let ticks = both.map(cpu_ticks);
            std::thread::sleep(Duration::from_millis(300));
            stopped && frozen_or_stopped(&both).len() == 2 && both.map(cpu_ticks) == ticks
        })
    };
    assert!(
        stopped_together(Duration::from_secs(10)),
        "the step's tasks were never stopped together, without progress, while their slot was off"
    );
    let before = both.map(cpu_ticks);
    assert!(
        poll(Duration::from_secs(10), || {
            let now = both.map(cpu_ticks);
            now[0] > before[0] && now[1] > before[1]
        }),
        "the step's tasks did not both run again"
    );

    // Killed, the daemon leaves neither task stopped; the next one adopts both as the one job again.
    unsafe { libc::kill(daemon.pid(), libc::SIGKILL) };
    daemon.child.wait().unwrap();
    assert!(
        poll(Duration::from_secs(5), || frozen_or_stopped(&both)
            .is_empty()),
        "stopped while no daemon runs: {:?}",
        frozen_or_stopped(&both)
    );
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    assert!(poll(Duration::from_secs(10), || {
        let job = show(&daemon, id);
        job.adopted && job.state == JobState::Running
    }));
    assert_eq!(show(&daemon, id).tasks, [tasks[1].pid() as u32]);
    assert!(
        stopped_together(Duration::from_secs(10)),
        "the re-adopted tasks were never stopped together"
    );

    // The job outlives its first task, and a cancel kills the task left.
    let [first, mut second] = tasks;
    drop(first);
    std::thread::sleep(Duration::from_secs(2));
    let job = show(&daemon, id);
    assert_eq!(
        job.state,
        JobState::Running,
        "ended with one task left: {job:?}"
    );
    daemon
        .ask(Request::Cancel {
            ids: vec![id, wide_id],
        })
        .unwrap();
    daemon.wait(vec![id, wide_id]);
    let status = second.0.wait().unwrap();
    assert!(
        !status.success(),
        "the cancelled step's task ended with {status}"
    );
    daemon.stop();
}

/// `cosched ARGS…` run as uid 65534 in directory `cwd`, entered while still root: as from a shell
/// left in a directory its user may not enter.
fn as_nobody_in(daemon: &Daemon, cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new("setpriv")
        .args(NOBODY)
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .arg(args[0])
        .arg("--socket")
        .arg(&daemon.socket)
        .args(&args[1..])
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
}

#[test]
fn a_job_enters_its_working_directory_as_its_user_and_reads_no_secret_through_root() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
    let out = as_nobody_in(&daemon, &public, &["submit", "--", "cat", "s.txt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
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

#[test]
fn a_job_cosched_cannot_place_fails_alone_and_the_daemon_keeps_serving() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpus = std::thread::available_parallelism().unwrap().get();
    if unsafe { libc::geteuid() } != 0 || cpus < 2 {
        eprintln!("SKIPPED: needs root (for SCHED_DEADLINE) and 2 CPUs");
        return;
    }
    if Command::new("chrt").arg("--version").output().is_err() {
        eprintln!("SKIPPED: chrt (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    // A SCHED_DEADLINE task refuses a CPU mask narrower than its root domain (EBUSY): started alone
    // on every CPU, it cannot be narrowed when a second job comes.
    let width = format!("1:{cpus}");
    let deadline = [
        "submit",
        "--threads",
        &width,
        "--",
        "chrt",
        "-d",
        "--sched-runtime",
        "1000000",
        "--sched-deadline",
        "10000000",
        "--sched-period",
        "10000000",
        "0",
        "sleep",
        "60",
    ];
    let out = cosched(&daemon, &deadline);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stubborn: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let is_deadline = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/sched")).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("policy") && l.ends_with(" 6"))
        })
    };
    let became_deadline = poll(Duration::from_secs(10), || {
        let job = show(&daemon, stubborn);
        job.state.ended() || job.pid.is_some_and(is_deadline)
    });
    if !became_deadline || show(&daemon, stubborn).state.ended() {
        eprintln!(
            "SKIPPED: the job could not become SCHED_DEADLINE here: {:?}",
            show(&daemon, stubborn)
        );
        return;
    }
    let other = daemon.submit(&["sleep", "60"]);
    let ended = daemon.wait(vec![stubborn]).remove(0);
    assert_eq!(ended.state, JobState::Failed, "{ended:?}");
    let error = ended.error.clone().unwrap_or_default();
    assert!(error.contains("plan"), "the reason is not said: {error}");
    // The daemon goes on: the other job runs, a new one runs to its end.
    let quick = daemon.submit(&["/bin/true"]);
    assert_eq!(daemon.wait(vec![quick])[0].state, JobState::Done);
    assert_eq!(show(&daemon, other).state, JobState::Running);
    daemon.ask(Request::Cancel { ids: vec![other] }).unwrap();
    daemon.wait(vec![other]);
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
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
    let out = as_nobody(&daemon, &["submit", "--", "sh", "-c", report]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
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
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
    let listening = poll(Duration::from_secs(20), || {
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

#[test]
fn a_client_sends_nothing_to_a_socket_its_user_or_root_does_not_control() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) && matches!(client.try_wait(), Ok(None)) {
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
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// `/usr/bin/sleep` copied and made set-uid root, or `None` (said) where set-uid has no effect.
fn setuid_sleep(dir: &Path) -> Option<PathBuf> {
    let copy = dir.join("suid-sleep");
    std::fs::copy("/usr/bin/sleep", &copy).ok()?;
    set_mode(&copy, 0o4755);
    Some(copy)
}

#[test]
fn an_attached_tree_leaves_alone_a_descendant_that_became_another_user() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let Some(suid) = setuid_sleep(dir.path()) else {
        eprintln!("SKIPPED: cannot copy /usr/bin/sleep");
        return;
    };
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    let cpus = std::thread::available_parallelism().unwrap().get();
    let wide_id = submit_machine_wide_spinner(&daemon, cpus);
    // uid 65534's spinning shell whose child becomes set-uid root a second after the attach.
    let script = format!(
        "(sleep 1; exec {} 120) & while :; do :; done",
        suid.display()
    );
    let root = Spinner(
        Command::new("setpriv")
            .args(NOBODY)
            .args(["sh", "-c", &script])
            .spawn()
            .unwrap(),
    );
    assert!(poll(Duration::from_secs(10), || {
        cosched_linux::procfs::uids(root.pid()).is_ok_and(|ids| ids == [65534; 4])
    }));
    let pid = root.pid().to_string();
    let out = as_nobody(
        &daemon,
        &[
            "attach",
            "--in-place",
            "--threads",
            "1",
            "--kind",
            "rigid",
            &pid,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let child = || {
        cosched_linux::procfs::all_processes()
            .into_iter()
            .find(|p| p.ppid == root.pid())
            .map(|p| p.pid)
            .filter(|&c| cosched_linux::procfs::uids(c).is_ok_and(|ids| ids[1] == 0))
    };
    let became_root = poll(Duration::from_secs(10), || child().is_some());
    let Some(child) = child().filter(|_| became_root) else {
        eprintln!("SKIPPED: set-uid has no effect here (a nosuid file system?)");
        return;
    };
    // The tree's own process is stopped and continued with its slots; the set-uid one never.
    let (mut root_stopped, mut child_stopped) = (false, false);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        let state = |p: i32| {
            cosched_linux::procfs::stat(p)
                .map(|s| s.state)
                .unwrap_or('?')
        };
        root_stopped |= state(root.pid()) == 'T';
        child_stopped |= state(child) == 'T';
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancel = as_nobody(&daemon, &["cancel", &id.to_string()]);
    assert!(cancel.status.success());
    daemon.wait(vec![id]);
    let child_survived = !poll(Duration::from_millis(500), || dead(child));
    unsafe { libc::kill(child, libc::SIGKILL) };
    daemon.ask(Request::Cancel { ids: vec![wide_id] }).unwrap();
    daemon.wait(vec![wide_id]);
    daemon.stop();
    assert!(root_stopped, "the attached process was never stopped");
    assert!(!child_stopped, "the set-uid descendant was stopped");
    assert!(child_survived, "the set-uid descendant was killed");
}

#[test]
fn attach_leaves_a_process_in_the_cgroup_that_limits_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to make a cgroup");
        return;
    }
    let hierarchy = Path::new("/sys/fs/cgroup/cpuset");
    let cpus = std::thread::available_parallelism().unwrap().get();
    if !hierarchy.join("cpuset.cpus").exists() || cpus < 2 {
        eprintln!("SKIPPED: needs a cgroup v1 cpuset hierarchy and 2 CPUs");
        return;
    }
    // A cgroup another manager made, limiting its processes to CPU 0.
    let limit = hierarchy.join(format!("limits-{}", std::process::id()));
    std::fs::create_dir(&limit).unwrap();
    let mems = std::fs::read_to_string(hierarchy.join("cpuset.mems")).unwrap();
    std::fs::write(limit.join("cpuset.mems"), mems.trim()).unwrap();
    std::fs::write(limit.join("cpuset.cpus"), "0").unwrap();
    let spinner = Spinner::start();
    std::fs::write(limit.join("cgroup.procs"), spinner.pid().to_string()).unwrap();
    let before = std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let attached = attach(
        &daemon,
        &[
            "--threads",
            "1",
            "--kind",
            "rigid",
            &spinner.pid().to_string(),
        ],
    );
    let id = attached.unwrap();
    let placed = poll(Duration::from_secs(10), || show(&daemon, id).cpus.is_some());
    std::thread::sleep(Duration::from_millis(500));
    let after = std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap();
    let allowed = cpus_allowed(spinner.pid());
    drop(spinner);
    daemon.wait(vec![id]);
    daemon.stop();
    let _ = poll(Duration::from_secs(5), || {
        std::fs::remove_dir(&limit).is_ok()
    });
    assert!(placed);
    assert_eq!(after, before, "attach moved the process out of its limits");
    assert_eq!(allowed, "0", "the process left the CPUs its cgroup allows");
}

/// Under gang, a user's many jobs share that user's half of the machine: root's one job, submitted
/// after another user's twelve, gets about half of the CPU time the jobs get (first come first
/// served, with equal weights per job, would give it a thirteenth).
#[test]
fn one_users_many_jobs_do_not_starve_another_users_one_job() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = Daemon::start(dir.path(), "gang");
    let spin = [
        "submit",
        "--threads",
        "2",
        "--kind",
        "rigid",
        "--",
        "sh",
        "-c",
    ];
    let mut theirs = Vec::new();
    for _ in 0..12 {
        let mut args = spin.to_vec();
        args.push("while :; do :; done");
        let out = as_nobody(&daemon, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        theirs.push(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap(),
        );
    }
    let ours = submit_machine_wide_spinner(&daemon, 2);
    let pid_of = |id: u64| show(&daemon, id).pid.filter(|&p| p != 0).map(|p| p as i32);
    let all: Vec<u64> = theirs.iter().copied().chain([ours]).collect();
    assert!(
        poll(Duration::from_secs(30), || all
            .iter()
            .all(|&id| pid_of(id).is_some())),
        "every job starts (gang has rows for thirteen)"
    );
    let pids: Vec<i32> = all.iter().map(|&id| pid_of(id).unwrap()).collect();
    let ticks = |pids: &[i32]| pids.iter().map(|&p| cpu_ticks(p)).collect::<Vec<u64>>();
    let before = ticks(&pids);
    std::thread::sleep(Duration::from_secs(6));
    let after = ticks(&pids);
    let used: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let total: u64 = used.iter().sum();
    let root_fraction = *used.last().unwrap() as f64 / total.max(1) as f64;
    let ids: Vec<String> = all.iter().map(u64::to_string).collect();
    let mut cancel = vec!["cancel"];
    cancel.extend(ids.iter().map(String::as_str));
    cosched(&daemon, &cancel);
    daemon.stop();
    assert!(total > 0, "the jobs ran");
    assert!(
        root_fraction >= 0.35,
        "root's one job got {root_fraction:.2} of the jobs' CPU time beside another user's 12 \
         (ticks {used:?}); its user's share is 0.5"
    );
}

/// A job that runs one thread, whatever it is advised.
const ONE_THREAD: [&str; 6] = ["submit", "--threads", "1", "--kind", "rigid", "--"];

/// Under eq, users share the CPUs before their jobs do: another user's jobs hold every CPU and one
/// more of theirs waits; root's job, submitted after it, gets the first CPU freed (first come first
/// served would give it to the other user's older job). The CPUs are those the processes really
/// have.
#[test]
fn under_eq_a_freed_cpu_goes_to_the_user_without_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mut daemon = Daemon::start(dir.path(), "eq");
    let submit_as_nobody = |command: &str| -> u64 {
        let out = as_nobody(&daemon, &[&ONE_THREAD[..], &["sh", "-c", command]].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let pid_of = |id: u64| show(&daemon, id).pid.filter(|&p| p != 0).map(|p| p as i32);
    // One CPU each: a job that ends soon and spinners on the others.
    let ending = submit_as_nobody("sleep 5");
    let spinning: Vec<u64> = (1..cpus)
        .map(|_| submit_as_nobody("while :; do :; done"))
        .collect();
    let all_started = poll(Duration::from_secs(20), || {
        spinning
            .iter()
            .chain([&ending])
            .all(|&id| pid_of(id).is_some())
    });
    let theirs_waiting = submit_as_nobody("while :; do :; done");
    std::thread::sleep(Duration::from_secs(1));
    let spin = ["sh", "-c", "while :; do :; done"];
    let out = cosched(&daemon, &[&ONE_THREAD[..], &spin].concat());
    let ours: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let ours_started = poll(Duration::from_secs(20), || pid_of(ours).is_some());
    let waiting_started = pid_of(theirs_waiting).is_some();
    let ours_cpus = pid_of(ours).map(cpus_allowed);
    let spinning_cpus: Vec<String> = spinning
        .iter()
        .filter_map(|&id| pid_of(id).map(cpus_allowed))
        .collect();
    // The job that ended cannot be cancelled; waiting for the others leaves no spinner behind.
    let live: Vec<u64> = spinning
        .iter()
        .copied()
        .chain([ending, theirs_waiting, ours])
        .filter(|&id| !show(&daemon, id).state.ended())
        .collect();
    let ids: Vec<String> = live.iter().map(u64::to_string).collect();
    let mut cancel = vec!["cancel"];
    cancel.extend(ids.iter().map(String::as_str));
    let cancelled = cosched(&daemon, &cancel);
    assert!(
        cancelled.status.success(),
        "{}",
        String::from_utf8_lossy(&cancelled.stderr)
    );
    daemon.wait(live);
    daemon.stop();
    assert!(all_started, "the other user's first {cpus} jobs start");
    assert!(ours_started, "root's job got no CPU when one was freed");
    assert!(
        !waiting_started,
        "the other user's older waiting job took the freed CPU"
    );
    let ours_cpus = ours_cpus.unwrap();
    assert!(
        !ours_cpus.contains(['-', ',']),
        "root's job has one CPU: {ours_cpus}"
    );
    assert!(
        !spinning_cpus.contains(&ours_cpus),
        "root's job shares CPU {ours_cpus} with the other user's: {spinning_cpus:?}"
    );
}
