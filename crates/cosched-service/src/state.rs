//! What the connection threads and the executor's thread share: the registry under its lock, the
//! journal, and the ways they tell each other of news (an eventfd for the executor, a condition
//! variable for clients waiting on jobs).

use crate::config::DaemonConfig;
use crate::journal::Journal;
use crate::registry::Registry;
use crate::switches::SwitchLog;
use crate::syncer::Syncer;
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};

pub struct Shared {
    registry: Mutex<Registry>,
    /// Signalled whenever a job ends.
    ended: Condvar,
    pub journal: Journal,
    /// Makes the executor's entries durable off its thread.
    pub syncer: Syncer,
    /// Readable when the executor has news to take (an eventfd).
    wake: EventFd,
    pub logs: PathBuf,
    /// The uid the daemon runs as; a user daemon serves that user only.
    pub daemon_uid: u32,
    pub switches: Mutex<SwitchLog>,
    pub config: DaemonConfig,
    /// Running jobs the slot in force leaves frozen, as the executor last said; apart from the
    /// registry, so that the executor never waits on a request to say it.
    pub suspended: Mutex<HashSet<u64>>,
    /// Whether jobs' memory can be limited here (`submit --mem`), or why not.
    pub memory_limits: Result<(), String>,
}

impl Shared {
    pub fn new(
        registry: Registry,
        journal: Journal,
        logs: PathBuf,
        config: DaemonConfig,
    ) -> Shared {
        let wake = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .unwrap_or_else(|e| panic!("eventfd: {e}"));
        Shared {
            registry: Mutex::new(registry),
            ended: Condvar::new(),
            journal,
            syncer: Syncer::default(),
            wake,
            logs,
            daemon_uid: nix::unistd::geteuid().as_raw(),
            switches: Mutex::default(),
            config,
            suspended: Mutex::default(),
            memory_limits: Ok(()),
        }
    }

    /// Says why jobs' memory cannot be limited here: `--mem` is then refused.
    pub fn without_memory_limits(mut self, why: String) -> Shared {
        self.memory_limits = Err(why);
        self
    }

    /// The running jobs frozen between their slots now.
    pub fn suspended(&self) -> HashSet<u64> {
        self.suspended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Releases the registry until a job ends, then takes it again.
    pub fn wait_for_an_end<'a>(
        &self,
        registry: MutexGuard<'a, Registry>,
    ) -> MutexGuard<'a, Registry> {
        self.ended.wait(registry).unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `uid` is root or the daemon's own user, who may set what affects every user.
    pub fn privileged(&self, uid: u32) -> bool {
        uid == 0 || uid == self.daemon_uid
    }

    pub fn notify_ended(&self) {
        self.ended.notify_all();
    }

    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    pub fn wake_executor(&self) {
        // Only a counter at its maximum refuses, and then the executor is woken already.
        let _ = self.wake.write(1);
    }

    pub fn clear_wake(&self) {
        // EAGAIN when there was no news is expected.
        let _ = self.wake.read();
    }
}
