//! Two users of one daemon: what each may see and touch, per-user limits, and shares of the machine
//! taken by users before their jobs.

use crate::common::*;
use cosched_service::harness::submission;
use cosched_service::protocol::{JobState, Reply, Request, Submission};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[test]
fn users_see_all_jobs_but_touch_only_their_own() {
    let _serial = one_at_a_time();
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
    let pid = wait::until(
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

#[test]
fn other_users_jobs_are_listed_without_their_command_line_unless_configured_otherwise() {
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || show(
        &daemon, first
    )
    .state
        == JobState::Running));
    // One running job is the most: the next ones wait, queued, up to two of them.
    let held = [submit("30"), submit("30")];
    // Held by the limit, not merely not started yet: the daemon says why a queued job waits.
    let listed = json_as_nobody(&daemon, &["jobs", "--json"]);
    let view = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == held[0]);
    assert_eq!(show(&daemon, held[0]).state, JobState::Queued);
    assert_eq!(view.unwrap()["reason"], "user_limit", "{listed:#}");
    let full = refused_as_nobody(&daemon, &["submit", "--", "sleep", "30"]);
    assert!(full.contains("limits.queued_jobs_per_user"), "{full}");

    // Two `cosched wait`s hold the user's two connections: a third is refused, root still gets in.
    let socket = daemon.socket.to_str().unwrap().to_string();
    let first_id = first.to_string();
    let mut waits: Vec<Child> = Vec::new();
    while waits.len() < 2 {
        let mut client = Command::new("setpriv")
            .args(NOBODY)
            .arg(env!("CARGO_BIN_EXE_cosched"))
            .args(["wait", "--socket", &socket, &first_id])
            .current_dir("/")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Refused, it would end at once; served, it waits for the job and says nothing: that it
        // keeps waiting can only be watched for a while.
        let served = wait::stays_false_for(Duration::from_millis(500), || {
            client.try_wait().unwrap().is_some()
        });
        if served {
            waits.push(client);
            continue;
        }
        // `wait` first lists the ids on a connection of its own: the daemon may still count that
        // one (or an earlier command's), just closed, when the waiting connection comes. Refused
        // for it, the wait is retried.
        let mut said = String::new();
        client
            .stderr
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
        wait::until(Duration::from_secs(10), || {
            let out = as_nobody(&daemon, &["jobs"]);
            message = String::from_utf8_lossy(&out.stderr).into_owned();
            !out.status.success()
        }),
        "a third connection of uid 65534 was served"
    );
    assert!(message.contains("limits.connections_per_user"), "{message}");
    daemon.ask(Request::Cancel { ids: vec![first] }).unwrap();
    for client in &mut waits {
        client.wait().unwrap();
    }
    // The running job ended: the first held one starts.
    assert!(wait::until(Duration::from_secs(10), || show(
        &daemon, held[0]
    )
    .state
        == JobState::Running));
    daemon.ask(Request::Cancel { ids: held.to_vec() }).unwrap();
    daemon.wait(held.to_vec());
    daemon.stop();
}

/// Under gang, a user's many jobs share that user's half of the machine: root's one job, submitted
/// after another user's twelve, gets about half of the CPU time the jobs get (first come first
/// served, with equal weights per job, would give it a thirteenth).
#[test]
fn one_users_many_jobs_do_not_starve_another_users_one_job() {
    let _serial = one_at_a_time();
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
        wait::until(Duration::from_secs(30), || all
            .iter()
            .all(|&id| pid_of(id).is_some())),
        "every job starts (gang has rows for thirteen)"
    );
    let pids: Vec<i32> = all.iter().map(|&id| pid_of(id).unwrap()).collect();
    let ticks = |pids: &[i32]| pids.iter().map(|&p| cpu_ticks(p)).collect::<Vec<u64>>();
    let before = ticks(&pids);
    let used_since =
        |before: &[u64]| -> u64 { ticks(&pids).iter().zip(before).map(|(a, b)| a - b).sum() };
    // Shares are judged over ten seconds of the jobs' CPU time (1,000 ticks of 10 ms): five of both
    // CPUs on an idle machine, longer on a busy one.
    let enough = wait::until(Duration::from_secs(60), || used_since(&before) >= 1000);
    let after = ticks(&pids);
    let used: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let total: u64 = used.iter().sum();
    let root_fraction = *used.last().unwrap() as f64 / total.max(1) as f64;
    let ids: Vec<String> = all.iter().map(u64::to_string).collect();
    let mut cancel = vec!["cancel"];
    cancel.extend(ids.iter().map(String::as_str));
    daemon.cosched(&cancel);
    daemon.stop();
    assert!(
        enough,
        "the jobs used {total} ticks of CPU time in a minute"
    );
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
    let _serial = one_at_a_time();
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
    let all_started = wait::until(Duration::from_secs(20), || {
        spinning
            .iter()
            .chain([&ending])
            .all(|&id| pid_of(id).is_some())
    });
    let theirs_waiting = submit_as_nobody("while :; do :; done");
    // No CPU is free for it until the short job ends; that it waits has no event, so it is watched
    // for a second, and only then root's job comes, the younger of the two.
    let waited = wait::stays_false_for(Duration::from_secs(1), || pid_of(theirs_waiting).is_some());
    let spin = ["sh", "-c", "while :; do :; done"];
    let out = daemon.cosched(&[&ONE_THREAD[..], &spin].concat());
    let ours: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let ours_started = wait::until(Duration::from_secs(20), || pid_of(ours).is_some());
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
    let cancelled = daemon.cosched(&cancel);
    assert!(
        cancelled.status.success(),
        "{}",
        String::from_utf8_lossy(&cancelled.stderr)
    );
    daemon.wait(live);
    daemon.stop();
    assert!(all_started, "the other user's first {cpus} jobs start");
    assert!(waited, "the other user's job started with no CPU free");
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
