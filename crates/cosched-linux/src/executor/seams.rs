//! What the loop does to the machine, behind three traits so that a test drives the loop with fakes
//! (`tests.rs`) and no process, cgroup or timer: [`Enforcement`] (cgroups, CPUs, freezing, signals:
//! [`Enforcer`]), [`Children`] (starting and reaping job processes) and [`Clock`] (the run's time, and
//! sleeping). Each trait holds only what the loop calls.

use super::clock::{monotonic, pidfd_open, Sleeper};
use super::io_error;
use super::shutdown::{self, Usage};
use crate::enforce::{Enforcer, JobControl, Members, MemoryUse, Prepared, ProcessTable};
use crate::launch::{self, Launch};
use crate::mechanism::Mechanisms;
use crate::watchdog::OnDeath;
use crate::Error;
use cosched_core::CpuSet;
use nix::sys::signal::Signal;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Putting plans into effect on jobs: [`Enforcer`] documents each call.
pub(crate) trait Enforcement {
    fn prepare(
        &mut self,
        cpus: &CpuSet,
        in_place: bool,
        memory_limit: Option<u64>,
    ) -> io::Result<Prepared>;
    fn enclose(&self, prepared: &Prepared, job: Members) -> io::Result<()>;
    fn abandon(&mut self, prepared: Prepared);
    fn started(&mut self, prepared: Prepared, members: Members) -> JobControl;
    fn join(&mut self, job: &mut JobControl, root: i32) -> io::Result<()>;
    fn place(&self, job: &mut JobControl, cpus: &CpuSet) -> io::Result<()>;
    fn set_frozen(&self, job: &mut JobControl, frozen: bool) -> io::Result<()>;
    fn signal(&self, job: &JobControl, signal: Signal) -> io::Result<()>;
    fn reapplies(&self, job: &JobControl) -> bool;
    fn reapply(&self, job: &JobControl, table: &ProcessTable) -> io::Result<()>;
    fn members(&self, job: &JobControl, table: &ProcessTable) -> Vec<i32>;
    fn memory_use(&self, job: &JobControl) -> MemoryUse;
    fn release(&mut self, job: JobControl);
    fn let_go(&mut self, job: JobControl);
    fn retry_busy(&mut self) -> bool;
}

impl Enforcement for Enforcer {
    fn prepare(
        &mut self,
        cpus: &CpuSet,
        in_place: bool,
        memory_limit: Option<u64>,
    ) -> io::Result<Prepared> {
        Enforcer::prepare(self, cpus, in_place, memory_limit)
    }
    fn enclose(&self, prepared: &Prepared, job: Members) -> io::Result<()> {
        Enforcer::enclose(self, prepared, job)
    }
    fn abandon(&mut self, prepared: Prepared) {
        Enforcer::abandon(self, prepared)
    }
    fn started(&mut self, prepared: Prepared, members: Members) -> JobControl {
        Enforcer::started(self, prepared, members)
    }
    fn join(&mut self, job: &mut JobControl, root: i32) -> io::Result<()> {
        Enforcer::join(self, job, root)
    }
    fn place(&self, job: &mut JobControl, cpus: &CpuSet) -> io::Result<()> {
        Enforcer::place(self, job, cpus)
    }
    fn set_frozen(&self, job: &mut JobControl, frozen: bool) -> io::Result<()> {
        Enforcer::set_frozen(self, job, frozen)
    }
    fn signal(&self, job: &JobControl, signal: Signal) -> io::Result<()> {
        Enforcer::signal(self, job, signal)
    }
    fn reapplies(&self, job: &JobControl) -> bool {
        Enforcer::reapplies(self, job)
    }
    fn reapply(&self, job: &JobControl, table: &ProcessTable) -> io::Result<()> {
        Enforcer::reapply(self, job, table)
    }
    fn members(&self, job: &JobControl, table: &ProcessTable) -> Vec<i32> {
        Enforcer::members(self, job, table)
    }
    fn memory_use(&self, job: &JobControl) -> MemoryUse {
        Enforcer::memory_use(self, job)
    }
    fn release(&mut self, job: JobControl) {
        Enforcer::release(self, job)
    }
    fn let_go(&mut self, job: JobControl) {
        Enforcer::let_go(self, job)
    }
    fn retry_busy(&mut self) -> bool {
        Enforcer::retry_busy(self)
    }
}

/// The job processes the executor starts and reaps.
pub(crate) trait Children {
    /// Starts a job's process as `launch` says: its pid.
    fn spawn(&mut self, launch: Launch<'_>) -> io::Result<i32>;
    /// Reaps child `pid` if it has ended: its wait status and usage.
    fn try_wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)>;
    /// Reaps child `pid`, waiting for it to end.
    fn wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)>;
}

/// Processes of this machine, started by [`launch::spawn`] and reaped with `wait4`.
struct Processes;

impl Children for Processes {
    fn spawn(&mut self, launch: Launch<'_>) -> io::Result<i32> {
        // The executor holds jobs by pid alone: it reaps them by pid, never through `Child`.
        launch::spawn(launch).map(|child| child.id() as i32)
    }
    fn try_wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)> {
        shutdown::try_wait(pid)
    }
    fn wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)> {
        shutdown::wait(pid)
    }
}

/// The run's time.
pub(crate) trait Clock {
    /// Seconds since the run began.
    fn now(&self) -> f64;
    /// Sleeps until `deadline` (seconds since the run began), until one of processes `pids` ends or
    /// until one of `fds` is readable, whichever comes first.
    fn sleep_until(&mut self, deadline: f64, pids: &[i32], fds: &[BorrowedFd<'_>]);
}

/// The monotonic clock, from the moment the run began.
struct Monotonic {
    origin: f64,
    sleeper: Sleeper,
}

impl Clock for Monotonic {
    fn now(&self) -> f64 {
        monotonic() - self.origin
    }
    fn sleep_until(&mut self, deadline: f64, pids: &[i32], fds: &[BorrowedFd<'_>]) {
        // Exits are noticed through pidfds: one per process, which need not be our child.
        let pidfds: Vec<OwnedFd> = pids.iter().copied().filter_map(pidfd_open).collect();
        let fds: Vec<BorrowedFd<'_>> = (fds.iter().copied())
            .chain(pidfds.iter().map(|fd| fd.as_fd()))
            .collect();
        self.sleeper.sleep_until(self.origin + deadline, &fds);
    }
}

/// The three seams of one run, and the line that names how it enforces plans (the trace's
/// `run_start` mechanism).
pub(crate) struct Seams {
    pub enforcement: Box<dyn Enforcement>,
    pub children: Box<dyn Children>,
    pub clock: Box<dyn Clock>,
    pub mechanism: String,
}

impl Seams {
    /// This machine's: an [`Enforcer`] with its watchdog (room for `capacity` jobs), processes, and
    /// the monotonic clock, started last so that the run's time begins once the rest is ready.
    pub fn real(
        mechanisms: Mechanisms,
        capacity: usize,
        on_death: OnDeath,
        mechanism: String,
    ) -> Result<Seams, Error> {
        let sleeper = Sleeper::new().map_err(io_error("cannot create a timerfd".into()))?;
        let enforcer = Enforcer::new(mechanisms, capacity, on_death)
            .map_err(io_error("cannot start the watchdog process".into()))?;
        Ok(Seams {
            enforcement: Box::new(enforcer),
            children: Box::new(Processes),
            clock: Box::new(Monotonic {
                origin: monotonic(),
                sleeper,
            }),
            mechanism,
        })
    }
}
