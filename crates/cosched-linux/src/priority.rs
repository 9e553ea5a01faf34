//! A real-time priority for the executor thread while it runs, where permitted.
//!
//! On a loaded machine a thread it has just thawed preempts the executor in the middle of a slot switch,
//! and the remaining jobs of the slot are thawed a time slice later. As the lowest SCHED_FIFO priority
//! the executor is not preempted by normal tasks, and it sleeps between events, so it takes little. With
//! SCHED_RESET_ON_FORK the jobs (and the watchdog) it starts run at normal priority.

const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

pub struct Realtime {
    /// The policy and real-time priority to go back to.
    previous: Option<(libc::c_int, libc::c_int)>,
}

impl Realtime {
    /// Raises the calling thread; says what it got, for the trace.
    pub fn raise() -> (Realtime, String) {
        let previous = current_scheduler().unwrap_or((libc::SCHED_OTHER, 0));
        match set_scheduler(libc::SCHED_FIFO | SCHED_RESET_ON_FORK, 1) {
            Ok(()) => (
                Realtime {
                    previous: Some(previous),
                },
                "executor SCHED_FIFO 1".into(),
            ),
            Err(why) => (
                Realtime { previous: None },
                format!("executor at normal priority (SCHED_FIFO refused: {why})"),
            ),
        }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if let Some((policy, priority)) = self.previous {
            let _ = set_scheduler(policy, priority);
        }
    }
}

/// The calling thread's scheduling policy and real-time priority (fields 41 and 40 of its stat).
fn current_scheduler() -> Option<(libc::c_int, libc::c_int)> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name, which may hold spaces, start with the third.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.get(38)?.parse().ok()?, fields.get(37)?.parse().ok()?))
}

fn set_scheduler(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // nix has no sched_setscheduler.
    // SAFETY: changes only the calling thread (pid 0); `param` is valid and outlives the call.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_thread_is_fifo_and_gets_its_policy_back() {
        std::thread::spawn(|| {
            let before = current_scheduler().expect("/proc/thread-self/stat");
            let (raised, said) = Realtime::raise();
            if raised.previous.is_none() {
                eprintln!("SKIPPED: {said}");
                return;
            }
            assert_eq!(current_scheduler().map(|(p, _)| p), Some(libc::SCHED_FIFO));
            drop(raised);
            assert_eq!(current_scheduler(), Some(before));
        })
        .join()
        .unwrap();
    }
}
