//! What the connection threads and the executor's thread share: the registry under its lock, the
//! journal, and the ways they tell each other of news (an eventfd for the executor, a condition
//! variable for clients waiting on jobs). Every change of a job's state goes through here, as a
//! journal entry appended and then applied to the registry ([`Shared::commit`] for clients'
//! requests, [`Shared::record`] for what the executor reports).

use crate::config::DaemonConfig;
use crate::error::ServiceError;
use crate::journal::{Compaction, Entry, Journal};
use crate::processes::kill_unwatched;
use crate::registry::{Applied, Registry};
use crate::switches::SwitchLog;
use crate::syncer::Syncer;
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub struct Shared {
    registry: Mutex<Registry>,
    /// Signalled whenever a job's end is durable.
    ended: Condvar,
    journal: Journal,
    /// Makes the executor's entries durable off its thread.
    syncer: Syncer,
    /// Readable when the executor has news to take (an eventfd).
    wake: EventFd,
    /// The state directory's logs, a directory per user.
    logs: PathBuf,
    /// The uid the daemon runs as; a user daemon serves that user only.
    daemon_uid: u32,
    switches: Mutex<SwitchLog>,
    config: DaemonConfig,
    /// Running jobs the slot in force leaves frozen, as the executor last said; apart from the
    /// registry, so that the executor never waits on a request to say it.
    suspended: Mutex<HashSet<u64>>,
    /// Whether jobs' memory can be limited here (`submit --mem`), or why not.
    memory_limits: Result<(), String>,
}

/// Why a change a client asked for was not made, or not made durable.
#[derive(Debug)]
pub enum CommitError<T> {
    /// Refused, or the journal could not take it (a full disk): it was not made.
    Refused(ServiceError),
    /// Made, with this answer, but the journal could not make it durable.
    NotDurable(T, ServiceError),
}

impl<T> From<CommitError<T>> for ServiceError {
    fn from(e: CommitError<T>) -> ServiceError {
        match e {
            CommitError::Refused(e) | CommitError::NotDurable(_, e) => e,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Makes a change a client asked for. Under the registry's lock, `decide` says from the
    /// registry as it is which entries make it, and what to answer; each entry is appended to the
    /// journal, then applied to the registry. Once the lock is released, processes no executor
    /// watches are killed, the change is waited on until it is durable (an fsync that covers
    /// whatever others appended meanwhile: no request holds the registry while it waits on the
    /// disk), and only then do the executor and the clients waiting on ends hear of it. An entry
    /// the journal refuses (a full disk) is applied no more than any after it.
    pub fn commit<T>(
        &self,
        decide: impl FnOnce(&Registry) -> Result<(Vec<Entry>, T), ServiceError>,
    ) -> Result<T, CommitError<T>> {
        let mut registry = self.lock();
        let (entries, answer) = decide(&registry).map_err(CommitError::Refused)?;
        let mut applied = Applied::default();
        let mut last = None;
        let mut refused = None;
        for entry in entries {
            match self.journal.append(&entry) {
                Ok(position) => {
                    last = Some(position);
                    applied = applied.and(registry.apply(entry));
                }
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        drop(registry);
        kill_all_unwatched(&applied);
        if let Some(position) = last {
            if let Err(e) = self.journal.sync(position) {
                return Err(match refused {
                    Some(refused) => CommitError::Refused(refused),
                    None => CommitError::NotDurable(answer, e),
                });
            }
        }
        self.tell(&applied);
        match refused {
            Some(e) => Err(CommitError::Refused(e)),
            None => Ok(answer),
        }
    }

    /// Records what the executor reports. Under the registry's lock, `decide` (which may also take
    /// what the executor is to be handed) says which entries tell it; each is appended to the
    /// journal and applied to the registry, even when the journal refuses it (that is reported):
    /// it has happened. Once the lock is released the syncer's thread makes the entries durable,
    /// so that the executor never waits on the disk, and clients waiting on ends hear of them
    /// once they are.
    pub fn record<T>(&self, decide: impl FnOnce(&mut Registry) -> (Vec<Entry>, T)) -> T {
        let mut registry = self.lock();
        let (entries, answer) = decide(&mut registry);
        let mut applied = Applied::default();
        let mut last = None;
        for entry in entries {
            match self.journal.append(&entry) {
                Ok(position) => last = Some(position),
                Err(e) => eprintln!("cosched daemon: {e}"),
            }
            applied = applied.and(registry.apply(entry));
        }
        drop(registry);
        kill_all_unwatched(&applied);
        if let Some(position) = last {
            self.syncer.request(position, applied.ended);
        }
        if applied.wake {
            self.wake_executor();
        }
        answer
    }

    /// Wakes whoever `applied` concerns.
    fn tell(&self, applied: &Applied) {
        if applied.wake {
            self.wake_executor();
        }
        if applied.ended {
            self.ended.notify_all();
        }
    }

    /// Starts the thread that makes the executor's entries durable (`syncer.rs`), for as long as
    /// the daemon runs.
    pub fn start_syncing(self: &Arc<Self>) -> io::Result<()> {
        let shared = self.clone();
        std::thread::Builder::new()
            .name("cosched-sync".into())
            .spawn(move || loop {
                let (upto, ended) = shared.syncer.next();
                if let Err(e) = shared.journal.sync(upto) {
                    eprintln!("cosched daemon: {e}");
                }
                if ended {
                    shared.ended.notify_all();
                }
            })
            .map(drop)
    }

    /// Forgets the jobs that ended before `cutoff` (Unix seconds), and compacts the journal when
    /// it has grown far past the jobs kept since it last was (`Journal::needs_compaction`): what
    /// that did, if it was due.
    pub fn forget_ended_before(&self, cutoff: f64) -> Option<io::Result<Compaction>> {
        let jobs = {
            let mut registry = self.lock();
            registry.forget_ended_before(cutoff);
            registry.job_count()
        };
        self.journal
            .needs_compaction(jobs)
            .then(|| self.journal.compact(&self.config.history))
    }

    /// The running jobs frozen between their slots now.
    pub fn suspended(&self) -> HashSet<u64> {
        lock(&self.suspended).clone()
    }

    /// The executor says which running jobs the slot in force leaves frozen.
    pub fn set_suspended(&self, frozen: impl IntoIterator<Item = u64>) {
        let mut suspended = lock(&self.suspended);
        suspended.clear();
        suspended.extend(frozen);
    }

    /// A slot switch came `lateness` seconds late.
    pub fn record_switch(&self, lateness: f64) {
        lock(&self.switches).record(lateness);
    }

    /// The slot switches so far, and how late the recent ones came.
    pub fn switch_lateness(&self) -> (u64, Vec<f64>) {
        let log = lock(&self.switches);
        (log.total(), log.recent())
    }

    /// The registry, for a look or for what the executor takes; its jobs change through
    /// [`Shared::commit`] and [`Shared::record`] only.
    pub fn lock(&self) -> MutexGuard<'_, Registry> {
        lock(&self.registry)
    }

    /// Releases the registry until a job's end is durable, then takes it again.
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

    /// The uid the daemon runs as.
    pub fn daemon_uid(&self) -> u32 {
        self.daemon_uid
    }

    pub fn config(&self) -> &DaemonConfig {
        &self.config
    }

    /// Whether jobs' memory can be limited here, or why not.
    pub fn memory_limits(&self) -> Result<(), &str> {
        self.memory_limits.as_ref().map_err(String::as_str).copied()
    }

    /// The directory of `uid`'s logs in the state directory.
    pub fn logs_of(&self, uid: u32) -> PathBuf {
        self.logs.join(uid.to_string())
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

    /// The journal, for tests of how its writes are grouped and of a disk that hangs.
    #[cfg(test)]
    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }
}

/// Kills the processes no executor watches that `applied` names.
fn kill_all_unwatched(applied: &Applied) {
    for &(process, owner) in &applied.unwatched {
        kill_unwatched(process, owner);
    }
}
