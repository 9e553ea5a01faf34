//! Ending the processes of a job no executor watches: one cancelled before this daemon took it over,
//! or one whose cancellation a restart interrupted.

use cosched_linux::{Adopt, Members, ProcessTable};

/// Kills a job's processes, checked by pid and start time: a started job's process group, or an
/// attached process and its descendants.
pub fn kill_unwatched(process: Adopt) {
    let targets = match process.attached {
        false => vec![-process.pid],
        true => ProcessTable::read().members(Members::Tree(process.pid)),
    };
    for target in targets {
        // SAFETY: plain system call on the job's own processes.
        unsafe { libc::kill(target, libc::SIGKILL) };
    }
}
