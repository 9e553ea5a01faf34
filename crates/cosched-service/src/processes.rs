//! Ending the processes of a job no executor watches: one cancelled before this daemon took it over,
//! or one whose cancellation a restart interrupted.

use cosched_linux::{Adopt, Members, ProcessTable};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Kills a job's processes, checked by pid and start time: a started job's process group, or an
/// attached process and those of its descendants still wholly of `uid`, the job's owner.
pub fn kill_unwatched(process: Adopt, uid: u32) {
    let targets = match process.attached {
        false => vec![-process.pid],
        true => {
            let table = ProcessTable::read();
            let tree = table.members(Members::Tree(process.pid, uid));
            tree.into_iter()
                .filter(|&pid| table.still_theirs(pid, uid))
                .collect()
        }
    };
    for target in targets {
        let _ = kill(Pid::from_raw(target), Signal::SIGKILL);
    }
}
