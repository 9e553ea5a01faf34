//! What users of a batch system expect from `cosched daemon`'s clients, run against a real daemon:
//! exit statuses a script can rely on, time limits, output files named by the user, listings
//! filtered as squeue filters them, job arrays (with a limit of elements run at once, named as
//! ARRAY_INDEX), dependencies and the order of a user's pending jobs (nice, priority). Each test runs its own daemon on a socket
//! and state directory of its own.

mod common;

use common::{
    cosched, cosched_as_on, dir_for_two_users, memory_cgroups_here, one_at_a_time, start_daemon,
    stderr, submitted_id, wait,
};
use cosched_service::harness::{DaemonProcess, Launch};
use cosched_service::protocol::{JobState, JobView, Reply, Request};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn start(dir: &Path) -> DaemonProcess {
    start_configured(dir, "")
}

/// A daemon under `eq` reading `config` as its daemon.toml.
fn start_configured(dir: &Path, config: &str) -> DaemonProcess {
    start_daemon(dir, "eq", config)
}

fn show(daemon: &DaemonProcess, id: u64) -> JobView {
    match daemon.ask(Request::Show { id }).unwrap() {
        Reply::Job { job } => *job,
        other => panic!("{other:?}"),
    }
}

/// Process `pid` and every process descended from it, by parent pid.
fn tree_of(pid: i32) -> Vec<i32> {
    let all = cosched_linux::procfs::all_processes();
    let mut tree = vec![pid];
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        tree.extend(all.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
        at += 1;
    }
    tree
}

fn alive(pid: i32) -> bool {
    cosched_linux::procfs::stat(pid).is_ok_and(|s| s.state != 'Z')
}

/// Asserts that a command was refused (exit status 2) with a message that says `says`.
fn assert_refused(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(says), "{}", stderr(out));
}

#[test]
fn wait_tells_an_unreachable_daemon_from_a_failed_job_and_submit_wait_names_the_job_first() {
    let _serial = one_at_a_time();
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

#[test]
fn a_job_past_its_time_limit_is_terminated_then_killed_with_its_whole_tree() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let kill_wait = 2.0;
    let mut daemon = start_configured(
        dir.path(),
        &format!("[jobs]\nkill_wait_seconds = {kill_wait}\n"),
    );
    let tree = "sleep 100 & sleep 100; wait";
    let polite = submitted_id(&cosched(
        &daemon.socket,
        &["submit", "-t", "0:02", "--", "sh", "-c", tree],
    ));
    let stubborn_script = format!("trap '' TERM; {tree}");
    let stubborn = submitted_id(&cosched(
        &daemon.socket,
        &[
            "submit",
            "--time",
            "0:02",
            "--",
            "sh",
            "-c",
            &stubborn_script,
        ],
    ));
    let unlimited = submitted_id(&cosched(&daemon.socket, &["submit", "--", "sleep", "100"]));

    // Each tree as it runs: the shell, its background sleep and its foreground one.
    let mut trees = Vec::new();
    for id in [polite, stubborn] {
        let mut tree = Vec::new();
        assert!(
            wait::until(Duration::from_secs(10), || {
                tree = show(&daemon, id)
                    .pid
                    .map_or(Vec::new(), |p| tree_of(p as i32));
                tree.len() == 3
            }),
            "job {id} never ran its three processes: {tree:?}"
        );
        assert_eq!(show(&daemon, id).time_limit, Some(2));
        trees.push(tree);
    }

    let ended = daemon.wait(vec![polite, stubborn]).unwrap();
    for (job, tree) in ended.iter().zip(&trees) {
        assert_eq!(job.state, JobState::Timeout, "{job:?}");
        let ran = job.finished.unwrap() - job.started.unwrap();
        assert!(
            ran >= 2.0,
            "job {} ended after {ran:.1} s, before its limit",
            job.id
        );
        assert!(
            wait::until(Duration::from_secs(5), || tree.iter().all(|&p| !alive(p))),
            "processes of job {} outlived it: {:?}",
            job.id,
            tree.iter().filter(|&&p| alive(p)).collect::<Vec<_>>()
        );
    }
    // SIGTERM ended the first; the second ignored it and lived until SIGKILL, the grace later.
    let ran = |job: &JobView| job.finished.unwrap() - job.started.unwrap();
    assert!(ran(&ended[0]) < 2.0 + kill_wait, "{:?}", ended[0]);
    assert!(ran(&ended[1]) >= 2.0 + kill_wait, "{:?}", ended[1]);
    assert_eq!(ended[0].wait_status(), 128 + libc::SIGTERM);
    assert_eq!(ended[1].wait_status(), 128 + libc::SIGKILL);
    assert_eq!(show(&daemon, unlimited).state, JobState::Running);

    // A restarted daemon still knows them as timed out.
    daemon.cancel(&[unlimited]).unwrap();
    daemon.wait(vec![unlimited]).unwrap();
    daemon.stop().unwrap();
    let mut daemon = start_configured(dir.path(), "");
    assert_eq!(show(&daemon, polite).state, JobState::Timeout);
    assert_eq!(show(&daemon, stubborn).state, JobState::Timeout);

    let bad = cosched(&daemon.socket, &["submit", "-t", "1h", "--", "true"]);
    assert_refused(&bad, "HH:MM:SS");
    daemon.stop().unwrap();
}

/// `cosched ARGS…` run as uid 65534, from `/`.
fn as_nobody(socket: &Path, args: &[&str]) -> Output {
    as_nobody_in(Path::new("/"), socket, args)
}

/// `cosched ARGS…` run as uid 65534, from `cwd`.
fn as_nobody_in(cwd: &Path, socket: &Path, args: &[&str]) -> Output {
    cosched_as_on(65534, socket, cwd, args)
}

/// The rows of `cosched jobs ARGS…` as printed, header left out, each split into its cells.
fn listed(socket: &Path, args: &[&str]) -> Vec<Vec<String>> {
    let mut all = vec!["jobs"];
    all.extend_from_slice(args);
    let out = cosched(socket, &all);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn jobs_filter_by_user_name_and_state_show_frozen_jobs_suspended_and_cancel_by_filter() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = start_daemon(dir.path(), "gang", "");
    let socket = daemon.socket.clone();
    // Two spinners as wide as the machine: gang gives each every other slot, so one is frozen.
    let cpus = std::thread::available_parallelism()
        .unwrap()
        .get()
        .to_string();
    let spin = |name: &str| {
        submitted_id(&cosched(
            &socket,
            &[
                "submit",
                "--name",
                name,
                "--threads",
                &cpus,
                "--kind",
                "rigid",
                "--",
                "sh",
                "-c",
                "while :; do :; done",
            ],
        ))
    };
    let spinners = [spin("spin"), spin("spin")];
    let theirs = as_nobody(
        &socket,
        &["submit", "--name", "theirs", "--", "sleep", "60"],
    );
    assert!(theirs.status.success(), "{}", stderr(&theirs));
    let theirs: u64 = String::from_utf8_lossy(&theirs.stdout)
        .trim()
        .parse()
        .unwrap();

    let mut suspended = Vec::new();
    assert!(
        wait::until(Duration::from_secs(15), || {
            suspended = listed(&socket, &["--state", "suspended", "--format", "id,state"]);
            !suspended.is_empty()
        }),
        "no job was ever listed suspended under gang"
    );
    for row in &suspended {
        assert_eq!(row[1], "suspended");
        let id: u64 = row[0].parse().unwrap();
        assert!(spinners.contains(&id) || id == theirs, "{row:?}");
    }

    let by_user = listed(&socket, &["--user", "nobody", "--format", "id,user,name"]);
    assert_eq!(
        by_user,
        [vec![theirs.to_string(), "nobody".into(), "theirs".into()]]
    );
    let by_name = listed(&socket, &["--name", "spin", "--format", "id,user"]);
    let ids: Vec<u64> = by_name.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(ids, spinners);
    assert!(by_name.iter().all(|r| r[1] == "root"), "{by_name:?}");
    let bad = cosched(&socket, &["jobs", "--state", "sleeping"]);
    assert_refused(&bad, "pending (PD), running (R)");

    // A user's filters choose among their own jobs only.
    let out = as_nobody(&socket, &["cancel", "--name", "spin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no job matches"), "{}", stderr(&out));
    let out = cosched(&socket, &["cancel", "--name", "spin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ended = daemon.wait(spinners.to_vec()).unwrap();
    assert!(
        ended.iter().all(|j| j.state == JobState::Cancelled),
        "{ended:?}"
    );
    assert_eq!(show(&daemon, theirs).state, JobState::Running);
    let out = as_nobody(&socket, &["cancel", "--state", "running"]);
    assert!(out.status.success(), "{}", stderr(&out));
    daemon.wait(vec![theirs]).unwrap();
    let all_ended = listed(&socket, &["--all", "--since", "1h", "--format", "id,state"]);
    assert_eq!(all_ended.len(), 3, "{all_ended:?}");
    daemon.stop().unwrap();
}

#[test]
fn output_files_named_by_the_user_are_opened_as_the_user() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = start(dir.path());
    let socket = daemon.socket.clone();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let submit_as_nobody = |args: &[&str]| {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        all.extend(["--", "sh", "-c", "echo out; echo err >&2"]);
        let out = as_nobody_in(&theirs, &socket, &all);
        submitted_id(&out)
    };

    // -o alone: both streams in one file, relative to the working directory, the user's own.
    let together = submit_as_nobody(&["-o", "out-%j.txt"]);
    // -o and -e apart, with the job's name and user.
    let apart = submit_as_nobody(&["--name", "pair", "-o", "%x-%j.out", "-e", "%x-%u-%j.err"]);
    // Where uid 65534 may not write: the job fails, and nothing is created there for it.
    let forbidden_dir = dir.path().join("roots");
    std::fs::create_dir(&forbidden_dir).unwrap();
    std::fs::set_permissions(
        &forbidden_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let forbidden = forbidden_dir.join("planted-%j.txt");
    let refused = submit_as_nobody(&["-o", forbidden.to_str().unwrap()]);
    let ended = daemon.wait(vec![together, apart, refused]).unwrap();

    assert_eq!(ended[0].state, JobState::Done, "{:?}", ended[0]);
    let file = theirs.join(format!("out-{together}.txt"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "out\nerr\n");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&file).unwrap());
    assert_eq!(owner, 65534, "{} belongs to uid {owner}", file.display());
    assert_eq!(ended[0].stdout, file);

    assert_eq!(ended[1].state, JobState::Done, "{:?}", ended[1]);
    let out = theirs.join(format!("pair-{apart}.out"));
    let err = theirs.join(format!("pair-nobody-{apart}.err"));
    assert_eq!(std::fs::read_to_string(out).unwrap(), "out\n");
    assert_eq!(std::fs::read_to_string(err).unwrap(), "err\n");

    let failed = &ended[2];
    assert_eq!(failed.state, JobState::Failed, "{failed:?}");
    let reason = failed.error.as_deref().unwrap_or_default();
    assert!(
        reason.contains("cannot open")
            && reason.contains("standard output")
            && reason.contains("Permission denied"),
        "{reason}"
    );
    assert_eq!(
        std::fs::read_dir(&forbidden_dir).unwrap().count(),
        0,
        "a file was created where uid 65534 may not write"
    );

    let bad = as_nobody_in(&theirs, &socket, &["submit", "-o", "out-%q", "--", "true"]);
    assert_refused(&bad, "%q");
    daemon.stop().unwrap();
}

/// The ids `cosched submit ARGS…` printed, one a line.
fn submitted_ids(out: &Output) -> Vec<u64> {
    assert!(out.status.success(), "{}", stderr(out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn an_array_gives_one_job_per_index_shown_and_cancelled_as_array_index() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());
    let socket = daemon.socket.clone();
    let print = "echo \"$COSCHED_ARRAY_TASK_ID ${SLURM_ARRAY_TASK_ID:-unset} ${COSCHED_ENTRY:-}\"";
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["submit", "--socket"])
        .arg(&socket)
        .args([
            "--array",
            "1-4",
            "-o",
            "out-%A_%a.txt",
            "--",
            "sh",
            "-c",
            print,
        ])
        .env("SLURM_ARRAY_TASK_ID", "99")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let ids = submitted_ids(&out);
    assert_eq!(ids.len(), 4);
    let array = ids[0];
    let ended = daemon.wait(ids.clone()).unwrap();
    for (job, index) in ended.iter().zip(1..) {
        assert_eq!(job.state, JobState::Done, "{job:?}");
        assert_eq!((job.array_id, job.array_index), (Some(array), Some(index)));
        let file = dir.path().join(format!("out-{array}_{index}.txt"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text.trim_end(),
            format!("{index} unset"),
            "{}",
            file.display()
        );
    }
    let shown = listed(&socket, &["--all", "--format", "id"]);
    let shown: Vec<&str> = shown.iter().map(|r| r[0].as_str()).collect();
    let expected: Vec<String> = (1..=4).map(|i| format!("{array}_{i}")).collect();
    assert_eq!(shown, expected);

    // One line, one job.
    let lines = dir.path().join("inputs.txt");
    std::fs::write(&lines, "alpha\nbeta\n").unwrap();
    let out = cosched(
        &socket,
        &[
            "submit",
            "--each-line",
            lines.to_str().unwrap(),
            "-o",
            dir.path().join("line-%a.txt").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            print,
        ],
    );
    let ids = submitted_ids(&out);
    daemon.wait(ids).unwrap();
    for (index, line) in ["alpha", "beta"].iter().enumerate() {
        let text = std::fs::read_to_string(dir.path().join(format!("line-{index}.txt"))).unwrap();
        assert_eq!(text.trim_end(), format!("{index} unset {line}"));
    }

    // Cancelled one element at a time, then as a whole.
    let ids = submitted_ids(&cosched(
        &socket,
        &["submit", "--array", "0-4:2", "--", "sleep", "60"],
    ));
    assert_eq!(ids.len(), 3);
    let array = ids[0];
    let one = cosched(&socket, &["cancel", &format!("{array}_2")]);
    assert!(one.status.success(), "{}", stderr(&one));
    let ended = daemon.wait(vec![ids[1]]).unwrap();
    assert_eq!(ended[0].state, JobState::Cancelled);
    // The others go on: they start (if they had not yet) and keep running.
    let running = |id: u64| show(&daemon, id).state == JobState::Running;
    assert!(wait::until(Duration::from_secs(10), || running(ids[0])
        && running(ids[2])));
    let all = cosched(&socket, &["cancel", &array.to_string()]);
    assert!(all.status.success(), "{}", stderr(&all));
    let ended = daemon.wait(vec![ids[0], ids[2]]).unwrap();
    assert!(
        ended.iter().all(|j| j.state == JobState::Cancelled),
        "{ended:?}"
    );

    daemon.stop().unwrap();
}

#[test]
fn a_dependent_job_waits_pending_and_one_whose_dependency_fails_is_cancelled_saying_why() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Cancelled only where the daemon is told to, as Slurm's kill_invalid_depend.
    let mut daemon = start_configured(dir.path(), "[jobs]\nkill_invalid_depend = true\n");
    let socket = daemon.socket.clone();
    let first = submitted_id(&cosched(&socket, &["submit", "--", "sleep", "2"]));
    let after_first = format!("afterok:{first}");
    let then = submitted_id(&cosched(
        &socket,
        &["submit", "-d", &after_first, "--", "true"],
    ));
    let rows = listed(&socket, &["--format", "job_id,state,reason"]);
    assert!(
        rows.contains(&vec![
            then.to_string(),
            "pending".into(),
            "dependency".into()
        ]),
        "{rows:?}"
    );
    let failing = submitted_id(&cosched(&socket, &["submit", "--", "sh", "-c", "exit 1"]));
    let never = submitted_id(&cosched(
        &socket,
        &[
            "submit",
            "--dependency",
            &format!("afterok:{failing}"),
            "--",
            "true",
        ],
    ));
    let on_failure = submitted_id(&cosched(
        &socket,
        &[
            "submit",
            "--dependency",
            &format!("afternotok:{failing},afterany:{first}"),
            "--",
            "true",
        ],
    ));
    let ended = daemon.wait(vec![first, then, never, on_failure]).unwrap();
    assert_eq!(ended[0].state, JobState::Done);
    assert_eq!(ended[1].state, JobState::Done, "{:?}", ended[1]);
    assert!(
        ended[1].started.unwrap() >= ended[0].finished.unwrap(),
        "started before its dependency ended: {:?}",
        ended[1]
    );
    assert_eq!(ended[2].state, JobState::Cancelled, "{:?}", ended[2]);
    let why = ended[2].error.as_deref().unwrap_or_default();
    assert!(
        why.contains(&format!("afterok:{failing}")) && why.contains("never satisfied"),
        "{why}"
    );
    assert!(ended[2].started.is_none());
    assert_eq!(ended[3].state, JobState::Done, "{:?}", ended[3]);

    let bad = cosched(&socket, &["submit", "-d", "afterok:999", "--", "true"]);
    assert_refused(&bad, "no job 999");
    let bad = cosched(
        &socket,
        &["submit", "-d", "afterburstbuffer:1", "--", "true"],
    );
    assert_eq!(bad.status.code(), Some(2));
    daemon.stop().unwrap();
}

/// The most jobs of `jobs` running at one time, by the start and end the daemon recorded.
fn most_at_once(jobs: &[JobView]) -> usize {
    jobs.iter()
        .filter_map(|j| j.started)
        .map(|t| {
            jobs.iter()
                .filter(|j| j.started.is_some_and(|s| s <= t) && j.finished.is_none_or(|f| f > t))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn an_array_limit_runs_at_most_max_elements_and_array_index_names_them_in_wait_and_show() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());
    let socket = daemon.socket.clone();
    let ids = submitted_ids(&cosched(
        &socket,
        &["submit", "--array", "1-4%2", "--", "sleep", "1"],
    ));
    assert_eq!(ids.len(), 4);
    let array = ids[0].to_string();
    let mut rows = Vec::new();
    let two_held = wait::until(Duration::from_secs(10), || {
        rows = listed(&socket, &["--format", "id,state,reason"]);
        let count = |state: &str, reason: &str| {
            rows.iter()
                .filter(|r| r[1] == state && r[2] == reason)
                .count()
        };
        count("running", "-") == 2 && count("pending", "array_task_limit") == 2
    });
    assert!(
        two_held,
        "never two running and two held by the limit: {rows:?}"
    );

    let out = cosched(&socket, &["wait", &array]);
    assert!(out.status.success(), "{}", stderr(&out));
    let jobs = daemon.wait(ids.clone()).unwrap();
    assert!(jobs.iter().all(|j| j.state == JobState::Done), "{jobs:?}");
    assert_eq!(most_at_once(&jobs), 2, "{jobs:?}");

    // ARRAY_INDEX names one element, the array's id all of them.
    let out = cosched(&socket, &["show", "--json", &format!("{array}_3")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["jobs"][0]["id"], ids[2]);
    let out = cosched(&socket, &["show", "--json", &array]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown: Vec<u64> = (shown["jobs"].as_array().unwrap().iter())
        .map(|job| job["id"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, ids);
    let out = cosched(&socket, &["show", &format!("{array}_9")]);
    assert_refused(&out, "no element 9");

    // Waiting on one element gives its status; on the array, the first failure's.
    let exits = submitted_ids(&cosched(
        &socket,
        &[
            "submit",
            "--array",
            "0-1",
            "--",
            "sh",
            "-c",
            "exit $COSCHED_ARRAY_TASK_ID",
        ],
    ));
    let array = exits[0].to_string();
    let status = |name: String| cosched(&socket, &["wait", &name]).status.code();
    assert_eq!(status(format!("{array}_0")), Some(0));
    assert_eq!(status(format!("{array}_1")), Some(1));
    assert_eq!(status(array.clone()), Some(1));

    let bad = cosched(&socket, &["submit", "--array", "1-4%0", "--", "true"]);
    assert_refused(&bad, "%MAX");
    daemon.stop().unwrap();
}

#[test]
fn a_nicer_job_submitted_first_starts_after_a_plain_one_across_a_restart() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    // One running job per user (root has no limit): uid 65534's jobs start one at a time.
    let config = "[limits]\nrunning_jobs_per_user = 1\n";
    let mut daemon = start_configured(dir.path(), config);
    let socket = daemon.socket.clone();
    let go = dir.path().join("go");
    let hold = format!("while [ ! -e {} ]; do sleep 0.1; done", go.display());
    let blocker = submitted_id(&as_nobody(&socket, &["submit", "--", "sh", "-c", &hold]));
    assert!(wait::until(Duration::from_secs(10), || show(
        &daemon, blocker
    )
    .state
        == JobState::Running));
    let nicer = submitted_id(&as_nobody(
        &socket,
        &["submit", "--nice", "50", "--", "true"],
    ));
    let plain = submitted_id(&as_nobody(&socket, &["submit", "--", "true"]));
    let expected = vec![
        vec![nicer.to_string(), "-50".into(), "50".into()],
        vec![plain.to_string(), "0".into(), "0".into()],
    ];
    let pending = ["--state", "pending", "--format", "job_id,priority,nice"];
    assert_eq!(listed(&socket, &pending), expected);

    // Only root may raise a job above its user's others.
    for raise in [&["--nice=-5"][..], &["--priority", "10"]] {
        let mut args = vec!["submit"];
        args.extend_from_slice(raise);
        args.extend(["--", "true"]);
        let refused = as_nobody(&socket, &args);
        assert_refused(&refused, "only root");
    }
    let raised = submitted_id(&cosched(
        &socket,
        &["submit", "--priority", "7", "--nice=-2", "--", "true"],
    ));
    assert_eq!(daemon.wait(vec![raised]).unwrap()[0].priority, 9);

    // The order is journaled: a restarted daemon keeps it.
    daemon.stop().unwrap();
    let daemon = start_configured(dir.path(), config);
    assert_eq!(listed(&socket, &pending), expected);
    std::fs::write(&go, "").unwrap();
    let ended = daemon.wait(vec![blocker, nicer, plain]).unwrap();
    assert!(ended.iter().all(|j| j.state == JobState::Done), "{ended:?}");
    let (nicer, plain) = (&ended[1], &ended[2]);
    assert!(
        nicer.started.unwrap() >= plain.finished.unwrap(),
        "the nicer job started first: {nicer:?} {plain:?}"
    );
}

/// The row of job `id` in `cosched jobs --all --since 1h --format id,FIELDS`, by field name.
fn accounted(socket: &Path, id: u64, fields: &str) -> std::collections::HashMap<String, String> {
    let format = format!("id,{fields}");
    let rows = listed(socket, &["--all", "--since", "1h", "--format", &format]);
    let row = rows
        .into_iter()
        .find(|r| r[0] == id.to_string())
        .unwrap_or_else(|| panic!("job {id} is not listed"));
    format.split(',').map(String::from).zip(row).collect()
}

#[test]
fn a_job_past_its_memory_limit_ends_oom_while_another_job_finishes() {
    let _serial = one_at_a_time();
    if !memory_cgroups_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());
    // `tail` keeps a line whole, and /dev/zero has no line end: it holds all 400 MB.
    let hungry = submitted_id(&cosched(
        &daemon.socket,
        &[
            "submit",
            "--mem",
            "64M",
            "--",
            "sh",
            "-c",
            "head -c 400M /dev/zero | tail",
        ],
    ));
    let other = submitted_id(&cosched(
        &daemon.socket,
        &["submit", "--", "sh", "-c", "sleep 1; exit 0"],
    ));
    let ended = daemon.wait(vec![hungry, other]).unwrap();
    assert_eq!(ended[0].state, JobState::Oom, "{:?}", ended[0]);
    assert!(
        ended[0].error.as_deref().unwrap().contains("out of memory"),
        "{:?}",
        ended[0]
    );
    assert_eq!(ended[0].mem, Some(64 << 20));
    let peak = ended[0].accounting.as_ref().unwrap().peak_memory.unwrap();
    assert!(peak <= 64 << 20, "peak {peak} above the limit");
    assert_eq!(ended[1].state, JobState::Done, "{:?}", ended[1]);
    let row = accounted(&daemon.socket, hungry, "state,mem,exit");
    assert_eq!((&*row["state"], &*row["mem"]), ("oom", "64M"), "{row:?}");

    // The journal keeps it: a restarted daemon still knows it as oom.
    daemon.stop().unwrap();
    let mut daemon = start(dir.path());
    assert_eq!(show(&daemon, hungry).state, JobState::Oom);
    let oom = listed(
        &daemon.socket,
        &["--all", "--state", "oom", "--format", "id"],
    );
    assert_eq!(oom, vec![vec![hungry.to_string()]]);
    daemon.stop().unwrap();
}

#[test]
fn accounting_keeps_a_jobs_cpu_time_and_peak_memory_across_a_restart() {
    let _serial = one_at_a_time();
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start(dir.path());
    // 300 MB written (so resident), then 1.5 s of CPU, in user mode but for the clock's reads.
    let script = "import time\n\
                  block = b'x' * (300 << 20)\n\
                  start = time.process_time()\n\
                  while time.process_time() - start < 1.5:\n    sum(range(100000))\n";
    let python = Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .unwrap();
    let python = String::from_utf8_lossy(&python.stdout).trim().to_string();
    let id = submitted_id(&cosched(
        &daemon.socket,
        &["submit", "--", &python, "-c", script],
    ));
    let job = daemon.wait(vec![id]).unwrap().remove(0);
    assert_eq!(job.state, JobState::Done, "{job:?}");
    let check = |job: &JobView| {
        let accounting = job.accounting.as_ref().expect("an ended job is accounted");
        let user = accounting.user_seconds.unwrap();
        let total = user + accounting.system_seconds.unwrap();
        assert!((1.5..3.0).contains(&total), "{accounting:?}");
        assert!(user > 1.0, "{accounting:?}");
        let peak = accounting.peak_memory.unwrap();
        assert!(
            (300 << 20..700 << 20).contains(&peak),
            "peak {peak} for 300 MB held"
        );
        assert!(accounting.cpus.is_some(), "{accounting:?}");
    };
    check(&job);
    let row = accounted(&daemon.socket, id, "cputime,maxrss,cpus,exit,state");
    assert!(row["cputime"].starts_with("0:00:0"), "{row:?}");
    assert!(row["maxrss"].ends_with('M'), "{row:?}");
    assert_eq!((&*row["exit"], &*row["state"]), ("0", "done"), "{row:?}");

    daemon.stop().unwrap();
    let mut daemon = start(dir.path());
    let again = show(&daemon, id);
    assert_eq!(again.accounting, job.accounting);
    check(&again);
    daemon.stop().unwrap();
}

#[test]
fn jobs_whose_memory_does_not_fit_wait_pending_for_memory() {
    let _serial = one_at_a_time();
    if !memory_cgroups_here() {
        return;
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    // 1 GiB left for jobs.
    let reserved = total_kib - (1 << 20);
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_configured(
        dir.path(),
        &format!("[memory]\nreserved = \"{reserved}K\"\n"),
    );

    let big = submitted_id(&cosched(
        &daemon.socket,
        &["submit", "--mem", "600M", "--", "sleep", "100"],
    ));
    assert!(wait::until(Duration::from_secs(10), || show(&daemon, big)
        .state
        == JobState::Running));
    let second = submitted_id(&cosched(
        &daemon.socket,
        &["submit", "--mem", "600M", "--", "true"],
    ));
    let unlimited = submitted_id(&cosched(&daemon.socket, &["submit", "--", "true"]));
    assert_eq!(
        daemon.wait(vec![unlimited]).unwrap()[0].state,
        JobState::Done
    );
    let row = accounted(&daemon.socket, second, "state,reason,mem");
    assert_eq!(
        (&*row["state"], &*row["reason"], &*row["mem"]),
        ("pending", "memory", "600M"),
        "{row:?}"
    );

    let too_big = cosched(&daemon.socket, &["submit", "--mem", "2G", "--", "true"]);
    assert_eq!(too_big.status.code(), Some(2));
    assert!(
        stderr(&too_big).contains("memory.reserved"),
        "{}",
        stderr(&too_big)
    );
    let unreadable = cosched(&daemon.socket, &["submit", "--mem", "lots", "--", "true"]);
    assert!(
        stderr(&unreadable).contains("e.g. 64M"),
        "{}",
        stderr(&unreadable)
    );

    // Once the first ends, the second fits.
    daemon.cancel(&[big]).unwrap();
    assert_eq!(daemon.wait(vec![second]).unwrap()[0].state, JobState::Done);
    daemon.stop().unwrap();
}

#[test]
fn a_user_daemon_refuses_mem_that_it_cannot_enforce() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let home = dir.path().join("nobody");
    std::fs::create_dir(&home).unwrap();
    nix::unistd::chown(&home, Some(65534.into()), Some(65534.into())).unwrap();
    let mut launch = Launch::new(Path::new(env!("CARGO_BIN_EXE_cosched")), &home, "state").args([
        "--idle-timeout",
        "1",
        "--policy",
        "eq",
    ]);
    std::os::unix::process::CommandExt::uid(launch.command(), 65534);
    std::os::unix::process::CommandExt::gid(launch.command(), 65534);
    launch.command().env("HOME", &home);
    let mut daemon = launch.start().unwrap();
    let refused = as_nobody(&daemon.socket, &["submit", "--mem", "64M", "--", "true"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--mem cannot be enforced"),
        "{}",
        stderr(&refused)
    );
    let plain = as_nobody(&daemon.socket, &["submit", "--", "true"]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    daemon.stop().unwrap();
}
