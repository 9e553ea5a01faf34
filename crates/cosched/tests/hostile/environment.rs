//! A job's environment is its submitter's: no descriptor, umask, preload or memory high-water
//! mark of the daemon's.

use crate::common::*;
use cosched_service::harness::submission;
use cosched_service::protocol::{After, Dependency, JobState};
use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// What job `id` wrote on its standard output, once it ended well.
fn output_of(daemon: &cosched_service::harness::DaemonProcess, id: u64) -> String {
    let job = daemon.wait(vec![id]).unwrap().remove(0);
    assert_eq!(job.state, JobState::Done, "{job:?}");
    std::fs::read_to_string(&job.stdout).unwrap()
}

#[test]
fn a_descriptor_the_daemon_inherited_is_not_a_jobs() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "root's own").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = std::fs::File::open(&secret).unwrap();
    let fd = file.as_raw_fd();
    let mut launch = daemon_launch(dir.path(), "eq", "");
    // As a careless parent leaves it: open across exec, at descriptor 7.
    // SAFETY: one dup2 between fork and exec, of a descriptor `file` keeps open.
    unsafe {
        launch.command().pre_exec(move || {
            nix::unistd::dup2(fd, 7)?;
            Ok(())
        })
    };
    let daemon = launch.start().unwrap();
    let script = "cat <&7; echo; echo \"control=$COSCHED_CONTROL\"; ls /proc/$$/fd";
    let said = output_of(
        &daemon,
        submit_script_as(ALICE, &daemon, dir.path(), script),
    );
    assert!(!said.contains("root's own"), "{said}");
    let (_, listing) = said.split_once("control=/proc/self/fd/").expect(&said);
    let mut lines = listing.lines();
    let control: u32 = lines.next().unwrap().parse().unwrap();
    let open: BTreeSet<u32> = lines.map(|l| l.parse().unwrap()).collect();
    assert_eq!(open, BTreeSet::from([0, 1, 2, control]), "{said}");
}

#[test]
fn a_job_makes_files_with_its_submitters_umask() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let daemon = start_daemon(dir.path(), "eq", "");
    let home = dir.path().join("alice");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(ALICE), Some(ALICE)).unwrap();
    for (umask, mode) in [("022", 0o644), ("027", 0o640)] {
        let made = format!("made-{umask}");
        let out = Command::new("setpriv")
            .arg(format!("--reuid={ALICE}"))
            .arg(format!("--regid={ALICE}"))
            .args([
                "--clear-groups",
                "sh",
                "-c",
                "umask \"$0\"; exec \"$@\"",
                umask,
            ])
            .arg(env!("CARGO_BIN_EXE_cosched"))
            .args(["submit", "--socket"])
            .arg(&daemon.socket)
            .args(["--", "touch", &made])
            .current_dir(&home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let id = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        output_of(&daemon, id);
        let meta = std::fs::metadata(home.join(&made)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, mode, "umask {umask}");
    }
}

#[test]
fn the_daemons_preload_is_not_a_jobs() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut launch = daemon_launch(dir.path(), "eq", "");
    // Missing, so that the loader only warns: what matters is whether a job is told of it.
    launch
        .command()
        .env("LD_PRELOAD", "/nonexistent/daemon-only.so");
    let daemon = launch.start().unwrap();
    let script = "printf '%s' \"$LD_PRELOAD\"";
    let said = output_of(
        &daemon,
        submit_script_as(ALICE, &daemon, dir.path(), script),
    );
    // Nothing, or the preload library that every job gets.
    let libraries: Vec<&str> = said.split_whitespace().collect();
    assert!(
        libraries.iter().all(|l| l.ends_with("/libcosched-omp.so")),
        "{said}"
    );
}

/// How much memory `pid` holds resident now, in bytes.
fn resident(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap();
    kib.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        << 10
}

#[test]
fn a_jobs_peak_memory_is_its_own_not_the_daemons() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let daemon = start_daemon(dir.path(), "eq", "");
    // Queued jobs with large environments, which the daemon holds while they wait.
    let blocker = daemon.submit(submission(&["sleep", "60"])).unwrap();
    let mut big = submission(&["true"]);
    big.env.insert("BALLAST".into(), "x".repeat(200 << 10));
    big.dependency = vec![Dependency {
        after: After::Ok,
        id: blocker,
        minutes: 0,
    }];
    for _ in 0..64 {
        daemon.submit(big.clone()).unwrap();
    }
    let limit = 8 << 20;
    let daemons = resident(daemon.pid());
    assert!(daemons > limit, "the daemon holds only {daemons} bytes");
    let id = submit_script_as(ALICE, &daemon, Path::new("/"), "sleep 0.5");
    let job = daemon.wait(vec![id]).unwrap().remove(0);
    assert_eq!(job.state, JobState::Done, "{job:?}");
    let peak = job.accounting.and_then(|a| a.peak_memory);
    assert!(
        peak.is_some_and(|p| p < limit),
        "{peak:?}, the daemon's {daemons}"
    );
    daemon.cancel(&[blocker]).unwrap();
}
