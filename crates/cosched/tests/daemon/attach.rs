//! `cosched attach`: running processes handed to the daemon, placed, time-sliced, readopted after a
//! restart, a Slurm step's tasks as one job, and never another user's processes.

use crate::common::*;
use cosched_service::journal::Entry;
use cosched_service::protocol::{JobState, Request};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

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
        wait::until(Duration::from_secs(10), || {
            cosched_linux::procfs::uids(pid).is_ok_and(|ids| ids == [65534; 4])
        }),
        "setpriv did not switch process {pid} to uid 65534"
    );
    child
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

/// Runs `cosched attach ARGS…` and gives its job id, or its error message.
fn attach(daemon: &Daemon, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["attach"];
    all.extend_from_slice(args);
    let out = daemon.cosched(&all);
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

#[test]
fn an_attached_process_is_placed_time_sliced_and_readopted_after_a_restart() {
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || {
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
    let listed = String::from_utf8_lossy(&daemon.cosched(&["jobs"]).stdout).into_owned();
    assert!(listed.contains("slurm_job=42,slurm_step=0"), "{listed}");
    // Its CPUs are those of its partition in the plan.
    let planned = job.cpus.clone().unwrap();
    assert!(
        wait::until(Duration::from_secs(5), || cpus_allowed(spinner.pid())
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
        wait::until(Duration::from_secs(8), || spinner.cpu_ticks() > before),
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
    assert!(
        wait::until(Duration::from_secs(5), || frozen_or_stopped(&[
            spinner.pid()
        ])
        .is_empty()),
        "stopped while no daemon runs"
    );
    let before = spinner.cpu_ticks();
    assert!(
        wait::until(Duration::from_secs(5), || spinner.cpu_ticks() > before),
        "frozen while no daemon runs"
    );
    let mut successor = Daemon::start(dir.path(), "gang:slice=1");
    assert!(wait::until(Duration::from_secs(10), || {
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
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || show(&daemon, id)
        .state
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
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || child().is_some()));
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
    assert!(wait::until(Duration::from_secs(10), || show(&daemon, id)
        .cpus
        .is_some()));
    let planned = show(&daemon, id).cpus.unwrap();
    assert!(
        wait::until(Duration::from_secs(5), || cpus_allowed(spinner.pid())
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
    let stopped_together = wait::until(Duration::from_secs(10), || {
        frozen_or_stopped(&tree).len() == 2
    });
    unsafe { libc::kill(daemon.pid(), libc::SIGKILL) };
    daemon.child.wait().unwrap();
    let continued = wait::until(Duration::from_secs(5), || {
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
        wait::until(Duration::from_secs(5), || dead(wide_pid)),
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
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || show(&daemon, id)
        .cpus
        .is_some()));
    let job = show(&daemon, id);
    assert_eq!(job.pid, Some(tasks[0].pid() as u32), "{job:?}");
    assert_eq!(job.tasks, [tasks[1].pid() as u32], "{job:?}");
    let listed = String::from_utf8_lossy(&daemon.cosched(&["jobs"]).stdout).into_owned();
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
            wait::until(Duration::from_secs(5), || cpus_allowed(task.pid())
                == planned),
            "task {}: Cpus_allowed_list {} but the plan gives {planned}",
            task.pid(),
            cpus_allowed(task.pid())
        );
    }
    let both = [tasks[0].pid(), tasks[1].pid()];
    let stopped_together = |limit| {
        wait::until(limit, || {
            let ticks = both.map(cpu_ticks);
            // Stopped for a while, not caught at one moment: a stop sends no event to wait for.
            frozen_or_stopped(&both).len() == 2
                && wait::stays_false_for(Duration::from_millis(300), || {
                    frozen_or_stopped(&both).len() < 2 || both.map(cpu_ticks) != ticks
                })
        })
    };
    assert!(
        stopped_together(Duration::from_secs(10)),
        "the step's tasks were never stopped together, without progress, while their slot was off"
    );
    let before = both.map(cpu_ticks);
    assert!(
        wait::until(Duration::from_secs(10), || {
            let now = both.map(cpu_ticks);
            now[0] > before[0] && now[1] > before[1]
        }),
        "the step's tasks did not both run again"
    );

    // Killed, the daemon leaves neither task stopped; the next one adopts both as the one job again.
    unsafe { libc::kill(daemon.pid(), libc::SIGKILL) };
    daemon.child.wait().unwrap();
    assert!(
        wait::until(Duration::from_secs(5), || frozen_or_stopped(&both)
            .is_empty()),
        "stopped while no daemon runs: {:?}",
        frozen_or_stopped(&both)
    );
    let mut daemon = Daemon::start(dir.path(), "gang:slice=1");
    assert!(wait::until(Duration::from_secs(10), || {
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
    // The daemon sees a task's end within a turn of its loop, and keeping the job running sends
    // no event: it is watched for two seconds.
    let kept = wait::stays_false_for(Duration::from_secs(2), || {
        show(&daemon, id).state != JobState::Running
    });
    let job = show(&daemon, id);
    assert!(kept, "ended with one task left: {job:?}");
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

/// `/usr/bin/sleep` copied and made set-uid root, or `None` (said) where set-uid has no effect.
fn setuid_sleep(dir: &Path) -> Option<PathBuf> {
    let copy = dir.join("suid-sleep");
    std::fs::copy("/usr/bin/sleep", &copy).ok()?;
    set_mode(&copy, 0o4755);
    Some(copy)
}

#[test]
fn an_attached_tree_leaves_alone_a_descendant_that_became_another_user() {
    let _serial = one_at_a_time();
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
    assert!(wait::until(Duration::from_secs(10), || {
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
    let became_root = wait::until(Duration::from_secs(10), || child().is_some());
    let Some(child) = child().filter(|_| became_root) else {
        eprintln!("SKIPPED: set-uid has no effect here (a nosuid file system?)");
        return;
    };
    // The tree's own process is stopped and continued with its slots; the set-uid one never.
    // That one is never stopped can only be watched for a while: eight one-second slots.
    let state = |p: i32| {
        cosched_linux::procfs::stat(p)
            .map(|s| s.state)
            .unwrap_or('?')
    };
    let mut root_stopped = false;
    let child_stopped = !wait::stays_false_for(Duration::from_secs(8), || {
        root_stopped |= state(root.pid()) == 'T';
        state(child) == 'T'
    });
    let cancel = as_nobody(&daemon, &["cancel", &id.to_string()]);
    assert!(cancel.status.success());
    daemon.wait(vec![id]);
    let child_survived = !wait::until(Duration::from_millis(500), || dead(child));
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
    let _serial = one_at_a_time();
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
    let placed = wait::until(Duration::from_secs(10), || show(&daemon, id).cpus.is_some());
    // The plan is enforced on the process within the executor's pass that made it, which says
    // nothing to a client: whether the process leaves its cgroup is watched for half a second.
    let stayed = wait::stays_false_for(Duration::from_millis(500), || {
        std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap() != before
    });
    let after = std::fs::read_to_string(format!("/proc/{}/cgroup", spinner.pid())).unwrap();
    let allowed = cpus_allowed(spinner.pid());
    drop(spinner);
    daemon.wait(vec![id]);
    daemon.stop();
    let _ = wait::until(Duration::from_secs(5), || {
        std::fs::remove_dir(&limit).is_ok()
    });
    assert!(placed);
    assert!(
        stayed,
        "attach moved the process out of its limits: {after}"
    );
    assert_eq!(after, before, "attach moved the process out of its limits");
    assert_eq!(allowed, "0", "the process left the CPUs its cgroup allows");
}
