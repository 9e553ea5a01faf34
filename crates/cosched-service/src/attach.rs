//! `cosched attach`: which running processes a client may hand to the daemon. The request names a pid,
//! which is hostile input like the rest: the process must exist, be no part of the system or of
//! cosched itself, and belong to the client (root may attach anyone's). What it is is read from /proc
//! and never from the request. A process that is not the client's gets the same answer as one that
//! does not run, so that no one learns who owns a pid.

use crate::error::NotAttachable;
use crate::protocol::Attachment;
use crate::registry::{Peer, Registry};
use cosched_linux::procfs;
use cosched_linux::slurm::SlurmStep;
use std::path::PathBuf;

/// A process found fit to attach, as /proc describes it.
#[derive(Debug, Clone)]
pub struct Found {
    pub pid: i32,
    pub start_ticks: u64,
    /// Its real uid: the job's owner.
    pub uid: u32,
    pub comm: String,
    /// Its command line, for display.
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// The Slurm job step it is a task of, from its cgroups.
    pub slurm: Option<SlurmStep>,
}

/// Checks that `peer` may attach process `pid`: it runs, it is not init, a kernel thread, the daemon,
/// one of the daemon's ancestors or descendants (its watchdog, the jobs it started), and its real and
/// effective uids are the client's unless the client is root.
pub fn inspect(pid: u32, peer: Peer) -> Result<Found, NotAttachable> {
    let pid = i32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or(NotAttachable::NotAPid(pid))?;
    let gone = || NotAttachable::NotYoursOrGone(pid);
    let stat = procfs::stat(pid).map_err(|_| gone())?;
    if stat.state == 'Z' {
        return Err(gone());
    }
    let daemon = std::process::id() as i32;
    let ancestors = procfs::ancestors(pid);
    if pid == 1 || pid == 2 || ancestors.contains(&2) {
        return Err(NotAttachable::System(pid));
    }
    // Every uid of the process is the client's: a set-uid program it started is not.
    let uids = procfs::uids(pid).map_err(|_| gone())?;
    if peer.uid != 0 && uids != [peer.uid; 4] {
        return Err(gone());
    }
    let real = uids[0];
    if pid == daemon || procfs::ancestors(daemon).contains(&pid) {
        return Err(NotAttachable::Daemon(pid));
    }
    if ancestors.contains(&daemon) {
        return Err(NotAttachable::CoschedJob(pid));
    }
    let read = |file: &str| std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
    let comm = String::from_utf8_lossy(&read("comm"))
        .trim_end()
        .to_string();
    let mut command: Vec<String> = read("cmdline")
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    if command.is_empty() {
        command.push(comm.clone());
    }
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .ok()
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/"));
    // Read last: a process that exited while we looked (and whose pid may be reused) is refused.
    let again = procfs::stat(pid).map_err(|_| gone())?;
    if again.start_ticks != stat.start_ticks {
        return Err(gone());
    }
    Ok(Found {
        pid,
        start_ticks: stat.start_ticks,
        uid: real,
        comm,
        command,
        cwd,
        slurm: SlurmStep::of_process(pid),
    })
}

/// A process that another cgroup manager limits (a systemd `MemoryMax`, a container's or a batch
/// system's cpuset) stays in its cgroups, placed by affinity and paused by signals, unless the
/// request asks to move it (`--move`): moved into cosched's cgroups, it would escape those limits.
pub fn in_place_under_limits(mut a: Attachment, found: &Found) -> Attachment {
    if !a.in_place && !a.move_out && cosched_linux::cgroup::limit_of(found.pid).is_some() {
        a.in_place = true;
    }
    a
}

/// A task of a Slurm job step (`docs/slurm.md`) stays in Slurm's cgroups, where Slurm's process
/// tracking, `scancel` and accounting find it, so it is attached in place, confined to the CPUs of
/// its allocation; it is labelled `slurm=J.S` and, unless the request names it, named `slurm-J.S`
/// after the step the kernel records, whatever the request says, and uses at most as many threads as
/// the allocation has CPUs unless the request bounds them itself.
pub fn as_slurm_task(mut a: Attachment, found: &Found) -> Attachment {
    let Some(step) = &found.slurm else {
        return a;
    };
    a.in_place = true;
    a.labels.insert("slurm".into(), step.to_string());
    a.name.get_or_insert_with(|| format!("slurm-{step}"));
    if a.max_threads.is_none() {
        a.max_threads = cosched_linux::cgroup::cpuset_of(found.pid).map(|cpus| cpus.len() as u32);
    }
    a
}

/// The running attached job of `uid` that already holds a task of Slurm step `step`, as the kernel
/// records it for the job's processes (a label alone could be set by anyone): the step's further
/// tasks on this node join it instead of becoming jobs of their own.
pub fn job_of_step(registry: &Registry, step: &SlurmStep, uid: u32) -> Option<u64> {
    registry
        .jobs()
        .find(|view| {
            !view.state.ended()
                && view.attached
                && view.uid == uid
                && view
                    .pids()
                    .any(|pid| SlurmStep::of_process(pid as i32).as_ref() == Some(step))
        })
        .map(|view| view.id)
}

/// Whether a job whose main process is `job_pid` already holds process `pid`: it is that process, one
/// of its descendants, or one of its ancestors (attaching a parent would take the job along).
pub fn overlaps(pid: i32, pid_ancestors: &[i32], job_pid: i32) -> bool {
    job_pid == pid || pid_ancestors.contains(&job_pid) || procfs::ancestors(job_pid).contains(&pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::wait;
    use std::time::Duration;

    fn me() -> Peer {
        Peer {
            pid: std::process::id() as i32,
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
        }
    }

    #[test]
    fn init_the_daemon_and_missing_processes_are_refused_with_the_reason() {
        let refused = |pid: u32| inspect(pid, me()).unwrap_err().to_string();
        assert!(refused(1).contains("init"), "{}", refused(1));
        assert!(refused(0).contains("not a process id"));
        assert!(refused(i32::MAX as u32).contains("not running"));
        // The test process plays the daemon here.
        let own = refused(std::process::id());
        assert!(own.contains("cosched daemon"), "{own}");
    }

    #[test]
    fn a_users_own_process_is_found_and_another_users_refused() {
        // An orphan, so that it is no descendant of this test process (which plays the daemon).
        let out = std::process::Command::new("sh")
            .args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
            .output()
            .unwrap();
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        // The forked shell becomes `sleep` when it execs.
        let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        wait::until(Duration::from_secs(5), || comm().trim() == "sleep");
        let stranger = Peer {
            uid: me().uid.wrapping_add(1),
            ..me()
        };
        let as_stranger = inspect(pid, stranger);
        let as_owner = inspect(pid, me());
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let message = as_stranger.unwrap_err().to_string();
        assert!(message.contains("not yours or not running"), "{message}");
        let missing = inspect(i32::MAX as u32, stranger).unwrap_err().to_string();
        assert_eq!(
            message.replace(&pid.to_string(), "P"),
            missing.replace(&i32::MAX.to_string(), "P"),
            "a stranger's process and a missing one are told apart"
        );
        let found = as_owner.unwrap();
        assert_eq!((found.pid, found.comm.as_str()), (pid as i32, "sleep"));
        assert_eq!(found.command, ["sleep", "30"]);
    }
}
