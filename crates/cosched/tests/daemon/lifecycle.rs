//! A daemon's life: a thousand jobs from many clients at once, its journal and what it forgets, a
//! signal while it starts, a SIGKILL and the successor that adopts its jobs, systemd's readiness,
//! a policy switched live, and a job it cannot place.

use crate::common::*;
use cosched_service::harness::Launch;
use cosched_service::journal::Entry;
use cosched_service::protocol::{JobState, Reply, Request};
use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

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

#[test]
fn a_thousand_jobs_from_eight_clients_are_all_journaled_and_leave_nothing_behind() {
    let _serial = one_at_a_time();
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
        wait::until(Duration::from_secs(5), || children_of(daemon.pid())
            .iter()
            .all(|p| p.state != 'Z')),
        "zombies left"
    );
    assert!(
        wait::until(Duration::from_secs(5), || cgroups_of(daemon.pid())
            .is_empty()),
        "stray cgroups: {:?}",
        cgroups_of(daemon.pid())
    );
    assert!(
        wait::until(Duration::from_secs(5), || open_fds(daemon.pid()) <= fds + 2),
        "open descriptors grew from {fds} to {}",
        open_fds(daemon.pid())
    );
    let grown = rss_kib(daemon.pid()).saturating_sub(rss);
    println!("daemon RSS {rss} KiB before, grew by {grown} KiB over 1000 jobs");
    // The registry keeps one small record per job of its history; 8 MiB bounds a leak of anything more.
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
    daemon.stop();
}

#[test]
fn a_daemon_signalled_while_it_replays_its_journal_stops_as_asked() {
    let _serial = one_at_a_time();
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
        wait::until(Duration::from_secs(30), || reading(daemon.id())),
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
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Gang time-slices the jobs, so some are frozen at any moment.
    let mut daemon = Daemon::start(dir.path(), "gang");
    let running: Vec<u64> = (0..3).map(|_| daemon.submit(&["sleep", "3"])).collect();
    assert!(wait::until(Duration::from_secs(10), || {
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
    // The daemon's watchdog thaws the jobs once it sees the daemon die.
    let thawed = |cgroup: &Path| {
        let read = |file: &str| std::fs::read_to_string(cgroup.join(file)).ok();
        read("freezer.state").is_none_or(|s| s.trim() == "THAWED")
            && read("cgroup.freeze").is_none_or(|s| s.trim() == "0")
    };
    wait::until(Duration::from_secs(5), || {
        frozen_or_stopped(&pids).is_empty() && cgroups_of(old_pid).iter().all(|c| thawed(c))
    });
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
        wait::until(Duration::from_secs(5), || cgroups_of(old_pid).is_empty()),
        "the dead daemon's cgroups remain: {:?}",
        cgroups_of(old_pid)
    );
    successor.stop();
}

#[test]
fn ended_jobs_are_forgotten_after_the_retention_a_torn_journal_is_cut_and_ids_never_come_back() {
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(5), || daemon
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

#[test]
fn systemd_hears_ready_once_the_socket_listens_and_stopping_at_the_end() {
    let _serial = one_at_a_time();
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
fn the_policy_switches_live_over_running_jobs_and_a_restart_keeps_it() {
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || ids.iter().all(
        |&id| {
            let job = show(&daemon, id);
            job.cpus.is_some() && job.pid.is_some()
        }
    )));
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
    let unknown = daemon.cosched(&["policy", "fastest"]);
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
    let switched = daemon.cosched(&["policy", "gang:slice=1"]);
    assert!(
        switched.status.success(),
        "{}",
        String::from_utf8_lossy(&switched.stderr)
    );
    // The same processes run on, placed again under gang: all the CPUs, in turns.
    assert!(
        wait::until(Duration::from_secs(10), || show(&daemon, ids[0])
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
    let shown = daemon.cosched(&["policy"]);
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
    let shown = successor.cosched(&["policy"]);
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
fn a_job_cosched_cannot_place_fails_alone_and_the_daemon_keeps_serving() {
    let _serial = one_at_a_time();
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
    let out = daemon.cosched(&deadline);
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
    let became_deadline = wait::until(Duration::from_secs(10), || {
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
