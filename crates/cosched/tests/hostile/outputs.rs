//! Output files, logs and listings: no link followed into another user's file, no unbounded
//! read, no terminal escape, nothing private shown to another user.

use crate::common::{self, cosched_as, ok_as, wait, ALICE, MALLORY};
use cosched_service::harness::DaemonProcess;
use serde_json::Value;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::MutexGuard;
use std::time::Duration;

/// Long enough for any of these jobs to start and end on a loaded machine.
const LIMIT: Duration = Duration::from_secs(60);

/// A directory `name` in `parent`, owned by `uid`, with `mode`.
fn owned_dir(parent: &Path, name: &str, uid: u32, mode: u32) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(mode)).unwrap();
    dir
}

/// What each test here runs against: a daemon of the default settings in a directory both users
/// may enter, one test at a time. Dropped in this order: the daemon, its directory, the turn.
struct Setting {
    daemon: DaemonProcess,
    dir: tempfile::TempDir,
    _turn: MutexGuard<'static, ()>,
}

/// The [`Setting`], or `None` (saying why) where two users cannot be had.
fn setting() -> Option<Setting> {
    let turn = common::one_at_a_time();
    let dir = common::dir_for_two_users()?;
    let daemon = common::start_daemon(dir.path(), "eq", "");
    Some(Setting {
        daemon,
        dir,
        _turn: turn,
    })
}

/// `cosched submit ARGS…` as `uid` from `cwd`: the job's id.
fn submit_as(uid: u32, daemon: &DaemonProcess, cwd: &Path, args: &[&str]) -> u64 {
    let out = ok_as(uid, daemon, cwd, &[&["submit"], args].concat());
    out.trim().parse().unwrap()
}

/// `cosched ARGS… --json` as `uid`, whatever its exit status: its output, parsed.
fn json_as(uid: u32, daemon: &DaemonProcess, args: &[&str]) -> Value {
    let out = cosched_as(uid, daemon, Path::new("/"), &[args, &["--json"]].concat());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "cosched {args:?} --json as uid {uid}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Job `id` once it has ended, as `uid` sees it.
fn ended(uid: u32, daemon: &DaemonProcess, id: u64) -> Value {
    json_as(uid, daemon, &["wait", &id.to_string()])["jobs"][0].clone()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn another_user_sees_no_path_program_error_or_pid_of_a_private_job() {
    let Some(mut setting) = setting() else {
        return;
    };
    let (daemon, dir) = (&setting.daemon, &setting.dir);
    let hideout = owned_dir(dir.path(), "hideout-q7z", ALICE, 0o755);
    let program = hideout.join("solver-k2p9");
    std::fs::copy("/bin/sleep", &program).unwrap();
    let program = program.to_str().unwrap();
    // It fails, with an error naming its program; its output goes to a file in its directory.
    let failed = submit_as(
        ALICE,
        daemon,
        &hideout,
        &["-o", "out-%j", "--", "/no/solver-k2p9"],
    );
    let running = submit_as(ALICE, daemon, &hideout, &["--", program, "30"]);
    let error = ended(ALICE, daemon, failed)["error"].clone();
    assert!(error.to_string().contains("/no/solver-k2p9"), "{error}");
    let pid_of = |uid| {
        let shown = json_as(uid, daemon, &["show", &running.to_string()]);
        shown["jobs"][0]["pid"].as_u64()
    };
    assert!(
        wait::until(LIMIT, || pid_of(ALICE).is_some()),
        "never started"
    );
    assert_eq!(pid_of(MALLORY), None);

    let (ids, root) = ([failed, running].map(|id| id.to_string()), Path::new("/"));
    let as_mallory = |args: &[&str]| text(&cosched_as(MALLORY, daemon, root, args));
    let seen_by_mallory = [
        as_mallory(&["jobs", "--all", "--json"]),
        as_mallory(&[
            "jobs",
            "--all",
            "--format",
            "id,name,state,reason,error,labels",
        ]),
        as_mallory(&["show", "--json", &ids[0], &ids[1]]),
        as_mallory(&["show", &ids[0], &ids[1]]),
        as_mallory(&["wait", "--json", &ids[0]]),
        as_mallory(&["jobs", "--name", "solver-k2p9"]),
    ];
    for seen in &seen_by_mallory {
        for secret in ["hideout-q7z", "solver-k2p9", "/no/"] {
            assert!(
                !seen.contains(secret),
                "{secret} shown to another user: {seen}"
            );
        }
    }
    let logs = cosched_as(MALLORY, daemon, root, &["logs", &ids[0]]);
    assert!(!logs.status.success());
    assert!(text(&logs).contains("another user's"), "{}", text(&logs));
    let listed = json_as(MALLORY, daemon, &["jobs", "--all"]);
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2, "{listed}");
    // Its owner sees everything.
    let theirs = as_alice_and_root(daemon, &["jobs", "--all", "--json"]);
    for seen in theirs {
        for secret in ["hideout-q7z/out-", "/no/solver-k2p9", program] {
            assert!(
                seen.contains(secret),
                "{secret} not shown to its owner: {seen}"
            );
        }
    }
    ok_as(ALICE, daemon, root, &["cancel", &ids[1]]);
    setting.daemon.stop().unwrap();
}

/// What `cosched ARGS…` prints to the job's owner and to root.
fn as_alice_and_root(daemon: &DaemonProcess, args: &[&str]) -> [String; 2] {
    [ALICE, 0].map(|uid| ok_as(uid, daemon, Path::new("/"), args))
}

#[test]
fn a_link_another_user_planted_is_not_followed_but_the_users_own_is() {
    let Some(mut setting) = setting() else {
        return;
    };
    let (daemon, dir) = (&setting.daemon, &setting.dir);
    let shared = owned_dir(dir.path(), "shared", 0, 0o1777);
    let home = owned_dir(dir.path(), "home", ALICE, 0o755);
    let precious = home.join("precious");
    std::fs::write(&precious, "precious data\n").unwrap();
    std::os::unix::fs::chown(&precious, Some(ALICE), Some(ALICE)).unwrap();
    let planted = shared.join("out.log");
    symlink(&precious, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(MALLORY), Some(MALLORY)).unwrap();

    let planted = planted.to_str().unwrap();
    let id = submit_as(
        ALICE,
        daemon,
        &home,
        &["-o", planted, "--", "echo", "overwritten"],
    );
    let job = ended(ALICE, daemon, id);
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("{planted} is a symbolic link another user owns")),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&precious).unwrap(),
        "precious data\n"
    );

    let own = shared.join("mine.log");
    symlink(home.join("target"), &own).unwrap();
    std::os::unix::fs::lchown(&own, Some(ALICE), Some(ALICE)).unwrap();
    let own = own.to_str().unwrap();
    let id = submit_as(ALICE, daemon, &home, &["-o", own, "--", "echo", "followed"]);
    assert_eq!(ended(ALICE, daemon, id)["state"], "done");
    assert_eq!(
        std::fs::read_to_string(home.join("target")).unwrap(),
        "followed\n"
    );
    setting.daemon.stop().unwrap();
}

/// `cosched logs ARGS…` as `uid`, killed if it has not ended within [`LIMIT`]: its output, or
/// `None` if it had to be killed.
fn logs_within_limit(uid: u32, daemon: &DaemonProcess, args: &[&str]) -> Option<Output> {
    let mut child = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(env!("CARGO_BIN_EXE_cosched"))
        .args(["logs", "--socket"])
        .arg(&daemon.socket)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = wait::until(LIMIT, || child.try_wait().unwrap().is_some());
    if !ended {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    ended.then_some(out)
}

#[test]
fn logs_refuse_what_is_not_a_regular_file_and_tail_reads_the_end() {
    let Some(mut setting) = setting() else {
        return;
    };
    let (daemon, dir) = (&setting.daemon, &setting.dir);
    let home = owned_dir(dir.path(), "home", ALICE, 0o755);
    let lines = ["-o", "big", "--", "seq", "-f", "line %.0f", "200000"];
    let big = submit_as(ALICE, daemon, &home, &lines).to_string();
    assert_eq!(ended(ALICE, daemon, big.parse().unwrap())["state"], "done");
    let tail = ok_as(ALICE, daemon, &home, &["logs", "--tail", "3", &big]);
    assert_eq!(tail, "line 199998\nline 199999\nline 200000\n");

    // Its log replaced by a FIFO, which would keep a reader waiting for a writer.
    let fifo = submit_as(ALICE, daemon, &home, &["-o", "fifo", "--", "true"]);
    assert_eq!(ended(ALICE, daemon, fifo)["state"], "done");
    std::fs::remove_file(home.join("fifo")).unwrap();
    nix::unistd::mkfifo(
        &home.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let zero = submit_as(ALICE, daemon, &home, &["-o", "/dev/zero", "--", "true"]);
    assert_eq!(ended(ALICE, daemon, zero)["state"], "done");
    for (id, what) in [
        (fifo, "fifo is a FIFO"),
        (zero, "/dev/zero is a character device"),
    ] {
        let out = logs_within_limit(ALICE, daemon, &[&id.to_string()])
            .unwrap_or_else(|| panic!("`cosched logs` of job {id} did not end"));
        assert!(!out.status.success());
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(message.contains(what), "{message}");
    }
    setting.daemon.stop().unwrap();
}

#[test]
fn control_characters_show_escaped_in_tables_and_exact_in_json() {
    let Some(mut setting) = setting() else {
        return;
    };
    let (daemon, dir) = (&setting.daemon, &setting.dir);
    let cwd = owned_dir(dir.path(), "ctl\x1b[31mred\ndir", ALICE, 0o755);
    let program = "/no/\x1b[2J\nforged line";
    let bad_program = submit_as(ALICE, daemon, &cwd, &["--name", "a", "--", program]);
    // Its output cannot be opened: the error names the working directory.
    let bad_output = submit_as(
        ALICE,
        daemon,
        &cwd,
        &["--name", "b", "-o", "no/out", "--", "true"],
    );
    let root = Path::new("/");
    let as_root = |args: &[&str]| text(&cosched_as(0, daemon, root, args));
    let waited = as_root(&["wait", &bad_program.to_string(), &bad_output.to_string()]);
    let tables = [
        waited,
        as_root(&["jobs", "--all", "--format", "id,name,reason,error"]),
        as_root(&["show", &bad_program.to_string(), &bad_output.to_string()]),
    ];
    for table in &tables {
        assert!(!table.contains(['\x1b', '\r']), "{table:?}");
        assert!(table.contains("/no/\\x1b[2J\\nforged line"), "{table}");
        assert!(table.contains("ctl\\x1b[31mred\\ndir/no/out"), "{table}");
        assert!(!table.lines().any(|l| l.starts_with("forged")), "{table}");
    }
    let listed = json_as(0, daemon, &["jobs", "--all"]);
    let errors: Vec<&str> = (listed["jobs"].as_array().unwrap().iter())
        .map(|job| job["error"].as_str().unwrap())
        .collect();
    assert!(errors[0].contains(program), "{errors:?}");
    let cwd = cwd.to_str().unwrap();
    assert!(errors[1].contains(&format!("{cwd}/no/out")), "{errors:?}");
    setting.daemon.stop().unwrap();
}
