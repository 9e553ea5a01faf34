//! Ending a run: every job still running is thawed, asked to stop (SIGTERM) and killed after a grace
//! period, every cgroup is removed and the trace gets its last line — after success, failure,
//! interruption, and (through `Drop`) a panic alike. Also reaping a job's main process.

use super::clock::{monotonic, thread_cpu_seconds};
use super::{running_mut, Executor, State};
use cosched_core::trace::{ExitStatus, Record};
use nix::sys::signal::Signal;

/// How long jobs get to exit after SIGTERM when a run stops early.
const TERMINATE_GRACE: f64 = 0.5;
/// How long killed jobs get to leave their cgroups at the end.
const REMOVAL_GRACE: f64 = 1.0;

impl Executor<'_> {
    /// Ends every job still running (SIGTERM, then SIGKILL after a grace period), removes every cgroup,
    /// and writes the trace's last line.
    pub(super) fn shutdown(&mut self, note: Option<&str>) {
        let running = self.running_ids();
        for &id in &running {
            if let Some(r) = running_mut(&mut self.jobs, id) {
                let _ = self.enforcer.set_frozen(&mut r.control, false);
                let _ = self.enforcer.signal(&r.control, Signal::SIGTERM);
            }
        }
        self.deciding = true; // the run is over: no more plans
        let deadline = monotonic() + TERMINATE_GRACE;
        let mut left = running;
        while !left.is_empty() {
            left.retain(|&id| {
                let Some(r) = running_mut(&mut self.jobs, id) else {
                    return false;
                };
                match self.children.try_wait(r.pid) {
                    Some((status, usage)) => {
                        let stopped = note.map(|n| format!("stopped: {n}"));
                        let _ = self.finish(id, status, usage, stopped);
                        false
                    }
                    None => true,
                }
            });
            if monotonic() > deadline {
                for &id in &left {
                    if let Some(r) = running_mut(&mut self.jobs, id) {
                        let _ = self.enforcer.signal(&r.control, Signal::SIGKILL);
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.wait_for_cgroup_removal();
        let overhead = thread_cpu_seconds() - self.cpu_origin;
        let _ = self.emit(Record::RunEnd {
            overhead_seconds: Some(overhead),
            note: note.map(str::to_string),
        });
        let _ = self.trace.flush();
    }

    /// Ends a daemon's run: every job is thawed and left running in its cgroups, for the next daemon to
    /// adopt.
    pub(super) fn let_go(&mut self, note: Option<&str>) {
        for (_, job) in std::mem::take(&mut self.jobs) {
            if let State::Running(r) = job.state {
                self.enforcer.let_go(r.control);
            }
        }
        let overhead = thread_cpu_seconds() - self.cpu_origin;
        let _ = self.emit(Record::RunEnd {
            overhead_seconds: Some(overhead),
            note: note.map(str::to_string),
        });
        let _ = self.trace.flush();
    }

    fn wait_for_cgroup_removal(&mut self) {
        let deadline = monotonic() + REMOVAL_GRACE;
        while !self.enforcer.retry_busy() && monotonic() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for Executor<'_> {
    /// After a panic the normal shutdown did not run: thaw, kill and remove what is left.
    fn drop(&mut self) {
        for (_, job) in std::mem::take(&mut self.jobs) {
            if let State::Running(r) = job.state {
                self.enforcer.release(r.control);
            }
        }
        self.wait_for_cgroup_removal();
    }
}

/// What the kernel counted of a reaped process and the children it waited for (`wait4`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Usage {
    pub user_seconds: f64,
    pub system_seconds: f64,
    /// The largest resident set of any one of them, in bytes (0: unknown).
    pub max_rss: u64,
}

/// Reaps `pid` if it has ended: its wait status and usage.
pub(super) fn try_wait(pid: i32) -> Option<(libc::c_int, Usage)> {
    wait4(pid, libc::WNOHANG)
}

/// Reaps `pid`, waiting for it to end.
pub(super) fn wait(pid: i32) -> Option<(libc::c_int, Usage)> {
    wait4(pid, 0)
}

fn wait4(pid: i32, options: libc::c_int) -> Option<(libc::c_int, Usage)> {
    let mut status = 0;
    // The usage of one reaped child is only in wait4's answer, and neither std nor nix wraps wait4.
    // SAFETY: rusage is plain integers, valid zeroed; wait4 writes only into `status` and `usage`,
    // which outlive the call.
    let (reaped, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let reaped = libc::wait4(pid, &mut status, options, &mut usage);
        (reaped, usage)
    };
    if reaped != pid {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let usage = Usage {
        user_seconds: tv(usage.ru_utime),
        system_seconds: tv(usage.ru_stime),
        // Linux gives it in kibibytes.
        max_rss: (usage.ru_maxrss.max(0) as u64) << 10,
    };
    Some((status, usage))
}

pub(super) fn describe_wait_status(
    status: libc::c_int,
) -> (ExitStatus, Option<i32>, Option<String>) {
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => (ExitStatus::Ok, Some(0), None),
            code => (ExitStatus::Failed, Some(code), None),
        }
    } else {
        let signal = libc::WTERMSIG(status);
        // SAFETY: strsignal returns a static string for any number.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(signal)) };
        (
            ExitStatus::Failed,
            None,
            Some(format!(
                "killed by signal {signal} ({})",
                name.to_string_lossy()
            )),
        )
    }
}
