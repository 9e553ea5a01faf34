//! A world of scripted processes, and fakes of the loop's seams that share it: the enforcement
//! acts on its processes and logs what it did, the children start and reap them, the clock moves
//! only in sleeps.

use super::super::seams::{Children, Clock, Enforcement};
use super::super::shutdown::Usage;
use crate::enforce::{JobControl, Members, MemoryUse, Prepared, ProcessTable};
use crate::launch::Launch;
use cosched_core::CpuSet;
use nix::sys::signal::Signal;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::fd::BorrowedFd;
use std::rc::Rc;

/// Fake pids lie above any kernel's pid_max, so a look-up in /proc finds none of them.
pub(super) const FIRST_PID: i32 = 1 << 30;

/// How a job's fake process behaves; a job is named by its command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Script {
    /// Ends `after` seconds past its start with wait status `status`.
    Ends { after: f64, status: libc::c_int },
    /// Runs until a signal ends it.
    Runs,
    /// Cannot be started.
    Unstartable,
}

/// What the fake enforcement did to a job.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Act {
    Place(CpuSet),
    Freeze,
    Thaw,
    Signal(Signal),
    Release,
}

#[derive(Debug)]
pub(super) struct Process {
    pub(super) name: String,
    pub(super) cpus: CpuSet,
    pub(super) frozen: bool,
    /// When and with which wait status it ends (a signal may end it sooner).
    pub(super) ends: Option<(f64, libc::c_int)>,
    /// A signal sent while it was frozen, acted on when it is thawed.
    pub(super) pending: Option<Signal>,
    pub(super) reaped: bool,
}

#[derive(Debug, Default)]
pub(super) struct World {
    pub(super) now: f64,
    pub(super) scripts: HashMap<String, Script>,
    /// Jobs whose moves and freezes the enforcement refuses.
    pub(super) refused: HashSet<String>,
    pub(super) processes: BTreeMap<i32, Process>,
    pub(super) log: Vec<(f64, String, Act)>,
    /// Seconds of the clock that starting a job takes, by job.
    pub(super) start_costs: HashMap<String, f64>,
}

impl World {
    pub(super) fn process(&mut self, pid: i32) -> &mut Process {
        self.processes.get_mut(&pid).expect("a fake pid")
    }

    pub(super) fn act(&mut self, pid: i32, act: Act) {
        let name = self.process(pid).name.clone();
        self.log.push((self.now, name, act));
    }

    /// What was done to job `name`, with when.
    pub(super) fn acts(&self, name: &str) -> Vec<(f64, Act)> {
        (self.log.iter())
            .filter(|(_, n, _)| n == name)
            .map(|(t, _, act)| (*t, act.clone()))
            .collect()
    }

    pub(super) fn end(&mut self, pid: i32, status: libc::c_int) {
        let now = self.now;
        let process = self.process(pid);
        if process.ends.is_none_or(|(t, _)| t > now) {
            process.ends = Some((now, status));
        }
    }

    pub(super) fn deliver(&mut self, pid: i32, signal: Signal) {
        match signal {
            Signal::SIGKILL => self.end(pid, signal as libc::c_int),
            _ if self.process(pid).frozen => self.process(pid).pending = Some(signal),
            Signal::SIGTERM => self.end(pid, signal as libc::c_int),
            _ => {}
        }
    }
}

pub(super) type Shared = Rc<RefCell<World>>;

pub(super) struct FakeEnforcement(pub(super) Shared);

impl FakeEnforcement {
    pub(super) fn refused(&self, job: &JobControl) -> io::Result<()> {
        let mut world = self.0.borrow_mut();
        let name = world.process(job.members.pid()).name.clone();
        match world.refused.contains(&name) {
            true => Err(io::Error::other("the fake refuses this job")),
            false => Ok(()),
        }
    }
}

impl Enforcement for FakeEnforcement {
    fn prepare(&mut self, cpus: &CpuSet, _: bool, _: Option<u64>) -> io::Result<Prepared> {
        Ok(Prepared::new(0, cpus))
    }
    fn enclose(&self, _: &Prepared, _: Members) -> io::Result<()> {
        Ok(())
    }
    fn abandon(&mut self, _: Prepared) {}
    fn started(&mut self, prepared: Prepared, members: Members) -> JobControl {
        let control = JobControl::new(prepared, members);
        self.0.borrow_mut().process(members.pid()).cpus = control.cpus.clone();
        control
    }
    fn join(&mut self, _: &mut JobControl, root: i32) -> io::Result<()> {
        Err(io::Error::other(format!("the fake has no process {root}")))
    }
    fn place(&self, job: &mut JobControl, cpus: &CpuSet) -> io::Result<()> {
        if &job.cpus == cpus {
            return Ok(());
        }
        self.refused(job)?;
        let pid = job.members.pid();
        let mut world = self.0.borrow_mut();
        world.process(pid).cpus = cpus.clone();
        world.act(pid, Act::Place(cpus.clone()));
        job.cpus = cpus.clone();
        Ok(())
    }
    fn set_frozen(&self, job: &mut JobControl, frozen: bool) -> io::Result<()> {
        if job.frozen == frozen {
            return Ok(());
        }
        self.refused(job)?;
        let pid = job.members.pid();
        let mut world = self.0.borrow_mut();
        world.process(pid).frozen = frozen;
        world.act(pid, if frozen { Act::Freeze } else { Act::Thaw });
        if let Some(signal) = (!frozen)
            .then(|| world.process(pid).pending.take())
            .flatten()
        {
            world.deliver(pid, signal);
        }
        job.frozen = frozen;
        Ok(())
    }
    fn signal(&self, job: &JobControl, signal: Signal) -> io::Result<()> {
        let pid = job.members.pid();
        let mut world = self.0.borrow_mut();
        world.act(pid, Act::Signal(signal));
        world.deliver(pid, signal);
        Ok(())
    }
    fn reapplies(&self, _: &JobControl) -> bool {
        false
    }
    fn reapply(&self, _: &JobControl, _: &ProcessTable) -> io::Result<()> {
        Ok(())
    }
    fn members(&self, _: &JobControl, _: &ProcessTable) -> Vec<i32> {
        Vec::new()
    }
    fn memory_use(&self, _: &JobControl) -> MemoryUse {
        MemoryUse::default()
    }
    fn release(&mut self, job: JobControl) {
        self.0.borrow_mut().act(job.members.pid(), Act::Release);
    }
    fn let_go(&mut self, _: JobControl) {}
    fn retry_busy(&mut self) -> bool {
        true
    }
}

pub(super) struct FakeChildren(pub(super) Shared);

impl FakeChildren {
    pub(super) fn reap(&mut self, pid: i32, by: f64) -> Option<(libc::c_int, Usage)> {
        let mut world = self.0.borrow_mut();
        let process = world.process(pid);
        match process.ends {
            Some((t, status)) if t <= by && !process.reaped => {
                process.reaped = true;
                Some((status, Usage::default()))
            }
            _ => None,
        }
    }
}

impl Children for FakeChildren {
    fn spawn(&mut self, launch: Launch<'_>) -> io::Result<i32> {
        let mut world = self.0.borrow_mut();
        let name = launch.command[0].clone();
        let ends = match world.scripts[&name] {
            Script::Unstartable => return Err(io::Error::other("no such program")),
            Script::Runs => None,
            Script::Ends { after, status } => Some((world.now + after, status)),
        };
        world.now += world.start_costs.get(&name).copied().unwrap_or(0.0);
        let pid = FIRST_PID + world.processes.len() as i32;
        let process = Process {
            name,
            cpus: CpuSet::new(),
            frozen: false,
            ends,
            pending: None,
            reaped: false,
        };
        world.processes.insert(pid, process);
        Ok(pid)
    }
    fn try_wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)> {
        let now = self.0.borrow().now;
        self.reap(pid, now)
    }
    fn wait(&mut self, pid: i32) -> Option<(libc::c_int, Usage)> {
        self.reap(pid, f64::INFINITY)
    }
}

/// Time passes only in sleeps, and a sleep ends at its deadline or at the first end of a process
/// it watches, as a pidfd would wake it.
pub(super) struct FakeClock(pub(super) Shared);

impl Clock for FakeClock {
    fn now(&self) -> f64 {
        self.0.borrow().now
    }
    fn sleep_until(&mut self, deadline: f64, pids: &[i32], _: &[BorrowedFd<'_>]) {
        let mut world = self.0.borrow_mut();
        let ends = pids.iter().filter_map(|pid| world.processes[pid].ends);
        let wake = ends.map(|(t, _)| t).fold(deadline, f64::min);
        world.now = world.now.max(wake);
    }
}
