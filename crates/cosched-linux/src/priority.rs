//! A real-time priority for the executor thread while it runs, where permitted.
//!
//! On a loaded machine a thread it has just thawed preempts the executor in the middle of a slot switch,
//! and the remaining jobs of the slot are thawed a time slice later. As the lowest SCHED_FIFO priority
//! the executor is not preempted by normal tasks, and it sleeps between events, so it takes little. With
//! SCHED_RESET_ON_FORK the jobs (and the watchdog) it starts run at normal priority.

const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

pub struct Realtime {
    previous: Option<(libc::c_int, libc::sched_param)>,
}

impl Realtime {
    /// Raises the calling thread; says what it got, for the trace.
    pub fn raise() -> (Realtime, String) {
        // SAFETY: plain system calls on the calling thread (pid 0) with valid parameters.
        unsafe {
            let policy = libc::sched_getscheduler(0);
            let mut param: libc::sched_param = std::mem::zeroed();
            libc::sched_getparam(0, &mut param);
            let fifo = libc::sched_param { sched_priority: 1 };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO | SCHED_RESET_ON_FORK, &fifo) == 0 {
                let restore = Realtime {
                    previous: Some((policy, param)),
                };
                return (restore, "executor SCHED_FIFO 1".into());
            }
            let why = std::io::Error::last_os_error();
            (
                Realtime { previous: None },
                format!("executor at normal priority (SCHED_FIFO refused: {why})"),
            )
        }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.previous {
            // SAFETY: restores what sched_getscheduler/sched_getparam returned for this thread.
            unsafe { libc::sched_setscheduler(0, policy, &param) };
        }
    }
}
