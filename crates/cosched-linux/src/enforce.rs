//! Putting a plan into effect for one job: its cgroups, its CPUs, frozen or running, and its removal.
//!
//! The enforcer owns the watchdog: whatever it creates that must be undone if cosched dies (cgroups,
//! a process group) it registers there itself, before the thing exists or is joined, and
//! it unregisters it once it has undone it. The executor never talks to the watchdog.

use crate::affinity::{within_allocation, Mask};
use crate::cgroup::{numa_nodes_of, Cgroup};
use crate::mechanism::{Freezer, Mechanisms, Placement};
use crate::watchdog::{OnDeath, Watchdog};
use cosched_core::CpuSet;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether every uid of process `pid` (real, effective, saved, file system) is `uid`.
fn wholly_of(pid: i32, uid: u32) -> bool {
    crate::procfs::uids(pid).is_ok_and(|ids| ids == [uid; 4])
}

/// Distinguishes runs made by one process (tests run several at once).
static RUNS: AtomicU32 = AtomicU32::new(0);

pub struct Enforcer {
    pub mechanisms: Mechanisms,
    /// `cosched-<pid>-<run>`: prefix of every cgroup of this run.
    tag: String,
    /// Which entries of the watchdog's table hold a job (started, or with cgroups still to remove).
    entries_used: Vec<bool>,
    /// Cgroups whose processes were still exiting when their job was released, with their entry.
    busy: Vec<(usize, Cgroup)>,
    // Dropped last: its sweep must come after the enforcer's own cleanup.
    watchdog: Watchdog,
}

/// Which processes make up a job outside of a cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Members {
    /// The process group cosched started the job as; the leader's pid is the group's id.
    Group(i32),
    /// A process and its descendants that are wholly (real, effective, saved and file-system uid)
    /// of the given uid, the job's owner: an attached process, whose group may hold processes of
    /// others (all the tasks of a Slurm step share one group). A descendant that became another
    /// user (a set-uid program) is no member, nor are its own descendants.
    Tree(i32, u32),
}

impl Members {
    /// The job's main process.
    pub fn pid(self) -> i32 {
        match self {
            Members::Group(pid) | Members::Tree(pid, _) => pid,
        }
    }
}

/// The executor's handle on one running job.
#[derive(Debug)]
pub struct JobControl {
    /// The job's entry in the watchdog's table.
    entry: usize,
    pub members: Members,
    pub cgroups: Vec<Cgroup>,
    pub cpus: CpuSet,
    /// The cpuset an in-place job is confined to (a batch system's allocation): every partition is
    /// fitted into it.
    pub allocation: Option<CpuSet>,
    pub frozen: bool,
    /// Roots of further process trees that make up the job beside `members`: the other tasks of a
    /// Slurm step on this node, each attached on its own by the step's TaskProlog.
    pub joined: Vec<i32>,
    /// The processes of a tree that this cosched stopped (pid and start time), each registered with
    /// the watchdog first: exactly these are continued, even those that left the tree while stopped.
    stopped: Vec<(i32, u64)>,
}

impl JobControl {
    /// The job `prepared` was for, running (thawed) as `members`.
    pub fn new(prepared: Prepared, members: Members) -> JobControl {
        JobControl {
            entry: prepared.entry,
            members,
            cgroups: prepared.cgroups,
            cpus: prepared.cpus,
            allocation: prepared.allocation,
            frozen: false,
            joined: Vec::new(),
            stopped: Vec::new(),
        }
    }
}

/// A job's memory as its memory cgroup saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Bytes, where the kernel keeps it.
    pub peak: Option<u64>,
    pub oom_kills: u64,
}

/// A job's cgroups, created and registered before its process exists, and what the
/// process must do before exec.
pub struct Prepared {
    entry: usize,
    cgroups: Vec<Cgroup>,
    cpus: CpuSet,
    allocation: Option<CpuSet>,
    pub join: Vec<PathBuf>,
    pub mask: Option<Mask>,
}

impl Prepared {
    /// Nothing made yet for a job on `cpus`, under the watchdog's entry `entry`.
    pub fn new(entry: usize, cpus: &CpuSet) -> Prepared {
        Prepared {
            entry,
            cgroups: Vec::new(),
            cpus: cpus.clone(),
            allocation: None,
            join: Vec::new(),
            mask: None,
        }
    }

    /// Keeps an in-place job inside `allocation`, the cpuset a batch system confines it to: its
    /// partitions are fitted into it from now on ([`within_allocation`]).
    pub fn confine(&mut self, allocation: CpuSet) -> io::Result<()> {
        self.cpus = within_allocation(&self.cpus, &allocation);
        self.mask = Some(Mask::new(&self.cpus)?);
        self.allocation = Some(allocation);
        Ok(())
    }
}

/// Which processes belong to which process group and which parent, and when each started, from one
/// pass over /proc.
#[derive(Default)]
pub struct ProcessTable {
    groups: HashMap<i32, Vec<i32>>,
    children: HashMap<i32, Vec<i32>>,
    start_ticks: HashMap<i32, u64>,
}

impl ProcessTable {
    pub fn read() -> ProcessTable {
        let mut table = ProcessTable::default();
        for process in crate::procfs::all_processes() {
            table
                .groups
                .entry(process.pgid)
                .or_default()
                .push(process.pid);
            table
                .children
                .entry(process.ppid)
                .or_default()
                .push(process.pid);
            table.start_ticks.insert(process.pid, process.start_ticks);
        }
        table
    }

    /// Whether `pid` is still the process this table saw, and still wholly of `uid`: checked again
    /// right before each signal or mask, so that neither a reused pid nor a process that has become
    /// another user since is touched.
    pub fn still_theirs(&self, pid: i32, uid: u32) -> bool {
        let started = self.start_ticks.get(&pid);
        crate::procfs::stat(pid).is_ok_and(|s| Some(&s.start_ticks) == started)
            && wholly_of(pid, uid)
    }

    pub fn members(&self, members: Members) -> Vec<i32> {
        match members {
            Members::Group(pgid) => self.groups.get(&pgid).cloned().unwrap_or_default(),
            Members::Tree(pid, uid) => {
                let mut tree: Vec<i32> = std::iter::once(pid)
                    .filter(|&p| wholly_of(p, uid))
                    .collect();
                let mut i = 0;
                while let Some(&parent) = tree.get(i) {
                    let children = self.children.get(&parent).into_iter().flatten();
                    tree.extend(children.filter(|&&child| wholly_of(child, uid)));
                    i += 1;
                }
                tree
            }
        }
    }
}

impl Enforcer {
    /// Starts the watchdog, with room for `capacity` jobs at once.
    pub fn new(mechanisms: Mechanisms, capacity: usize, on_death: OnDeath) -> io::Result<Enforcer> {
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let capacity = capacity.max(1);
        Ok(Enforcer {
            mechanisms,
            tag: format!("cosched-{}-{run}", std::process::id()),
            entries_used: vec![false; capacity],
            busy: Vec::new(),
            watchdog: Watchdog::start(capacity, on_death)?,
        })
    }

    pub fn uses_affinity(&self) -> bool {
        self.mechanisms.placement == Placement::Affinity
    }

    /// Creates the job's cgroups on `cpus`, each registered with the
    /// watchdog before anything joins it; `memory_limit`: bytes its processes may hold together,
    /// in a memory cgroup. `in_place`: no cgroup of its own, the job stays in the ones it is in and
    /// is placed by affinity (and frozen by signals). On error nothing is left behind.
    pub fn prepare(
        &mut self,
        cpus: &CpuSet,
        in_place: bool,
        memory_limit: Option<u64>,
    ) -> io::Result<Prepared> {
        let entry = self
            .entries_used
            .iter()
            .position(|used| !used)
            .ok_or_else(|| {
                io::Error::other(format!(
                    "more than {} jobs at once; the watchdog has no room for another",
                    self.entries_used.len()
                ))
            })?;
        self.entries_used[entry] = true;
        let mut prepared = Prepared::new(entry, cpus);
        if let Err(e) = self.create_cgroups(&mut prepared, in_place, memory_limit) {
            self.abandon(prepared);
            return Err(e);
        }
        Ok(prepared)
    }

    fn create_cgroups(
        &mut self,
        prepared: &mut Prepared,
        in_place: bool,
        memory_limit: Option<u64>,
    ) -> io::Result<()> {
        if in_place && memory_limit.is_some() {
            return Err(io::Error::other(
                "a memory limit needs the job in a memory cgroup of cosched's, and this job stays \
                 in the cgroups it is in",
            ));
        }
        if in_place {
            prepared.mask = Some(Mask::new(&prepared.cpus)?);
            return Ok(());
        }
        let name = format!("{}-{}", self.tag, prepared.entry);
        let mems = numa_nodes_of(&prepared.cpus);
        let memory = match (memory_limit, &self.mechanisms.memory_hierarchy) {
            (None, _) => None,
            (Some(_), Ok(hierarchy)) => Some(hierarchy),
            (Some(_), Err(why)) => {
                return Err(io::Error::other(format!(
                    "cannot limit the job's memory: {why}"
                )))
            }
        };
        let hierarchies = [
            self.mechanisms.placement_hierarchy.as_ref(),
            self.mechanisms.freezer_hierarchy.as_ref(),
            memory,
        ];
        for hierarchy in hierarchies.into_iter().flatten() {
            // Hierarchies of cgroup v2 are one: the job has one cgroup there for all of them.
            if prepared.cgroups.iter().any(|c| c.kind == hierarchy.kind) {
                continue;
            }
            let cgroup = hierarchy.create(&name, &prepared.cpus, &mems)?;
            let registered = self.watchdog.add_cgroup(prepared.entry, &cgroup);
            prepared.join.push(cgroup.procs_file());
            prepared.cgroups.push(cgroup);
            registered?;
        }
        if let (Some(bytes), Some(hierarchy)) = (memory_limit, memory) {
            let cgroup = prepared.cgroups.iter().find(|c| c.kind == hierarchy.kind);
            cgroup.expect("created above").set_memory_limit(bytes)?;
        }
        if self.uses_affinity() {
            prepared.mask = Some(Mask::new(&prepared.cpus)?);
        }
        Ok(())
    }

    /// Moves every process of a running job into the prepared cgroups (or mask).
    pub fn enclose(&self, prepared: &Prepared, job: Members) -> io::Result<()> {
        let table = ProcessTable::read();
        let members = table.members(job);
        if members.iter().all(|&pid| crate::procfs::stat(pid).is_err()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{job:?} has no process left"),
            ));
        }
        let members = self.checked(job, &table, members);
        for procs in &prepared.join {
            for pid in &members {
                // A process that exited meanwhile cannot be moved, and need not be.
                let _ = std::fs::write(procs, pid.to_string());
            }
        }
        if let Some(mask) = &prepared.mask {
            mask.apply_to_processes(&members)?;
        }
        self.remove_stale_cgroups();
        Ok(())
    }

    /// Removes the empty cgroups left by a cosched that is gone (`cosched-<pid>-…` with no such
    /// process): those of a stopped daemon, emptied as its jobs were adopted or ended.
    fn remove_stale_cgroups(&self) {
        let bases = [
            self.mechanisms.placement_hierarchy.as_ref(),
            self.mechanisms.freezer_hierarchy.as_ref(),
            self.mechanisms.memory_hierarchy.as_ref().ok(),
        ];
        for base in bases.into_iter().flatten().map(|h| &h.base) {
            let Ok(entries) = std::fs::read_dir(base) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(owner) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("cosched-"))
                    .and_then(|rest| rest.split('-').next())
                    .and_then(|pid| pid.parse::<i32>().ok())
                else {
                    continue;
                };
                if crate::procfs::stat(owner).is_ok_and(|p| p.state != 'Z') {
                    continue;
                }
                {
                    // Fails harmlessly while processes remain in it.
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }

    /// Leaves the job running, thawed and unregistered, in its cgroups: a stopping daemon hands it to
    /// the next one.
    pub fn let_go(&mut self, mut job: JobControl) {
        let _ = self.set_frozen(&mut job, false);
        self.watchdog.clear_process_group(job.entry);
        for cgroup in &job.cgroups {
            self.watchdog.remove_cgroup(job.entry, cgroup);
        }
        self.entries_used[job.entry] = false;
    }

    /// Undoes [`Enforcer::prepare`] for a job whose process could not be started.
    pub fn abandon(&mut self, prepared: Prepared) {
        self.remove_cgroups(prepared.entry, prepared.cgroups);
    }

    /// The job runs as `members`: registers its process group with the watchdog. An attached process's
    /// group may hold other processes (all the tasks of a Slurm step share one; a TaskProlog has its
    /// own), so a tree is never signalled by group: the processes it stops are registered one by one.
    pub fn started(&mut self, prepared: Prepared, members: Members) -> JobControl {
        if let Members::Group(pgid) = members {
            self.watchdog.set_process_group(prepared.entry, pgid);
        }
        JobControl::new(prepared, members)
    }

    /// Makes the tree of `root`, a running process, part of the running `job`: it gets the job's
    /// CPUs and state (stopped with it when frozen), and an in-place job's allocation grows by the
    /// CPUs the batch system gave the new tree, so that the job is bound by all of its tasks' CPUs.
    pub fn join(&mut self, job: &mut JobControl, root: i32) -> io::Result<()> {
        let table = ProcessTable::read();
        let uid = match job.members {
            Members::Tree(_, uid) => uid,
            Members::Group(_) => nix::unistd::geteuid().as_raw(),
        };
        let tree = table.members(Members::Tree(root, uid));
        if tree.iter().all(|&pid| crate::procfs::stat(pid).is_err()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {root} has ended"),
            ));
        }
        if let (Some(allocation), Some(theirs)) =
            (job.allocation.as_mut(), crate::cgroup::cpuset_of(root))
        {
            *allocation = allocation.union(&theirs);
        }
        let tree = self.checked(job.members, &table, tree);
        for cgroup in &job.cgroups {
            for pid in &tree {
                // A process that exited meanwhile cannot be moved, and need not be.
                let _ = std::fs::write(cgroup.procs_file(), pid.to_string());
            }
        }
        Mask::new(&job.cpus)?.apply_to_processes(&tree)?;
        job.joined.push(root);
        if job.frozen && self.freezing_cgroup(job).is_none() {
            self.stop_processes(job, &table, tree);
        }
        Ok(())
    }

    fn placement_cgroup<'a>(&self, job: &'a JobControl) -> Option<&'a Cgroup> {
        let kind = self.mechanisms.placement_hierarchy.as_ref()?.kind;
        job.cgroups.iter().find(|c| c.kind == kind)
    }

    /// What the kernel says of the job's memory: the most its processes held at once and how many
    /// of them it killed for passing the job's limit; nothing for a job without a memory cgroup.
    pub fn memory_use(&self, job: &JobControl) -> MemoryUse {
        let kind = self
            .mechanisms
            .memory_hierarchy
            .as_ref()
            .ok()
            .map(|h| h.kind);
        let cgroup = job.cgroups.iter().find(|c| Some(c.kind) == kind);
        MemoryUse {
            peak: cgroup.and_then(Cgroup::memory_peak),
            oom_kills: cgroup.map_or(0, Cgroup::oom_kills),
        }
    }

    /// The cgroup that freezes the job, unless it is frozen by signals.
    fn freezing_cgroup<'a>(&self, job: &'a JobControl) -> Option<&'a Cgroup> {
        if self.mechanisms.freezer == Freezer::Signal {
            return None;
        }
        let kind = self.mechanisms.freezer_hierarchy.as_ref()?.kind;
        job.cgroups.iter().find(|c| c.kind == kind)
    }

    /// The job's processes now: its cgroup's members, or those of its group or trees; of an attached
    /// job, only those wholly of its owner's uid.
    pub fn members(&self, job: &JobControl, table: &ProcessTable) -> Vec<i32> {
        match (job.cgroups.first(), job.members) {
            (Some(cgroup), Members::Group(_)) => cgroup.pids(),
            (Some(cgroup), Members::Tree(_, uid)) => (cgroup.pids().into_iter())
                .filter(|&pid| wholly_of(pid, uid))
                .collect(),
            (None, Members::Group(_)) => table.members(job.members),
            (None, Members::Tree(_, uid)) => {
                let joined = job.joined.iter().map(|&root| Members::Tree(root, uid));
                std::iter::once(job.members)
                    .chain(joined)
                    .flat_map(|m| table.members(m))
                    .collect()
            }
        }
    }

    /// Of an attached job's processes listed in `table`, those that are still the same processes
    /// and still wholly of the job's owner, checked right before they are touched.
    fn checked(&self, members: Members, table: &ProcessTable, pids: Vec<i32>) -> Vec<i32> {
        match members {
            Members::Group(_) => pids,
            Members::Tree(_, uid) => {
                // Processes of a cgroup may be missing from an older table: read them again.
                let fresh;
                let table = match pids.iter().all(|p| table.start_ticks.contains_key(p)) {
                    true => table,
                    false => {
                        fresh = ProcessTable::read();
                        &fresh
                    }
                };
                pids.into_iter()
                    .filter(|&pid| table.still_theirs(pid, uid))
                    .collect()
            }
        }
    }

    /// True when the job is kept on its CPUs by affinity masks alone (no cpuset cgroup), which must be
    /// set again now and then for threads that raced a change.
    pub fn reapplies(&self, job: &JobControl) -> bool {
        self.placement_cgroup(job).is_none()
    }

    /// Sends `signal` to every process of the job: its process group, or each process of its tree.
    pub fn signal(&self, job: &JobControl, signal: Signal) -> io::Result<()> {
        let targets = match job.members {
            Members::Group(pgid) => vec![-pgid],
            Members::Tree(..) => {
                let table = ProcessTable::read();
                self.checked(job.members, &table, self.members(job, &table))
            }
        };
        let mut result = Ok(());
        for target in targets {
            match kill(Pid::from_raw(target), signal) {
                // Processes that exit meanwhile are no error.
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => result = Err(e.into()),
            }
        }
        result
    }

    /// Moves the job to `cpus`.
    pub fn place(&self, job: &mut JobControl, cpus: &CpuSet) -> io::Result<()> {
        let fitted = job.allocation.as_ref().map(|a| within_allocation(cpus, a));
        let cpus = fitted.as_ref().unwrap_or(cpus);
        if &job.cpus == cpus {
            return Ok(());
        }
        let cgroup = self.placement_cgroup(job);
        if let Some(cgroup) = cgroup {
            cgroup.set_cpus(cpus)?;
        }
        // A thread bound by its OpenMP runtime (the job's own OMP_PROC_BIND) keeps that mask
        // inside a new cpuset, so a grown partition would go unused: set it again.
        let members = match (cgroup, job.members) {
            (Some(cgroup), Members::Group(_)) => cgroup.pids(),
            _ => {
                let table = ProcessTable::read();
                self.checked(job.members, &table, self.members(job, &table))
            }
        };
        Mask::new(cpus)?.apply_to_processes(&members)?;
        job.cpus = cpus.clone();
        Ok(())
    }

    /// Placement by affinity only: sets the mask again on every thread, for threads that raced a
    /// change.
    pub fn reapply(&self, job: &JobControl, table: &ProcessTable) -> io::Result<()> {
        if !self.reapplies(job) {
            return Ok(());
        }
        let members = self.checked(job.members, table, self.members(job, table));
        Mask::new(&job.cpus)?.apply_to_processes(&members)
    }

    pub fn set_frozen(&self, job: &mut JobControl, frozen: bool) -> io::Result<()> {
        if job.frozen == frozen {
            return Ok(());
        }
        match (self.freezing_cgroup(job), job.members) {
            (Some(cgroup), _) => cgroup.set_frozen(frozen)?,
            (None, Members::Tree(..)) if frozen => self.stop_tree(job),
            (None, Members::Tree(..)) => self.continue_stopped(job),
            (None, Members::Group(_)) => self.signal(
                job,
                if frozen {
                    Signal::SIGSTOP
                } else {
                    Signal::SIGCONT
                },
            )?,
        }
        job.frozen = frozen;
        Ok(())
    }

    /// Stops every process of the job's tree that the watchdog can continue if cosched dies; a tree
    /// larger than the watchdog holds keeps its other processes running.
    fn stop_tree(&self, job: &mut JobControl) {
        let table = ProcessTable::read();
        let members = self.members(job, &table);
        self.stop_processes(job, &table, members);
    }

    fn stop_processes(&self, job: &mut JobControl, table: &ProcessTable, members: Vec<i32>) {
        for pid in self.checked(job.members, table, members) {
            if !self.watchdog.note_stopped(job.entry, pid) {
                break;
            }
            job.stopped
                .push((pid, table.start_ticks.get(&pid).copied().unwrap_or(0)));
            // A process that exited meanwhile is no error.
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
        }
    }

    /// Continues exactly the processes [`Enforcer::stop_tree`] stopped that are still those
    /// processes (same start time): a pid reused meanwhile is left alone.
    fn continue_stopped(&self, job: &mut JobControl) {
        for (pid, start_ticks) in job.stopped.drain(..) {
            if crate::procfs::stat(pid).is_ok_and(|s| s.start_ticks == start_ticks) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
        }
        self.watchdog.clear_stopped(job.entry);
    }

    /// Kills whatever is left of the job (after its main process ended, or when the run stops) and
    /// removes its cgroups; those still busy with exiting processes are retried by
    /// [`Enforcer::retry_busy`]. Of an attached process's tree only what is left in cosched's own
    /// cgroups is killed; processes that left its tree (reparented) are not cosched's to kill.
    pub fn release(&mut self, mut job: JobControl) {
        let _ = self.set_frozen(&mut job, false);
        for cgroup in &job.cgroups {
            let _ = cgroup.set_frozen(false);
        }
        if let Members::Group(pgid) = job.members {
            let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
            let _ = kill(Pid::from_raw(-pgid), Signal::SIGCONT);
        }
        self.watchdog.clear_process_group(job.entry);
        self.remove_cgroups(job.entry, job.cgroups);
        // Jobs a dead daemon left in its cgroups may end after they were adopted or found gone.
        self.remove_stale_cgroups();
    }

    /// Tries once to remove cgroups (killing what is left in them); keeps the busy ones for a retry and
    /// frees the job's watchdog entry once none is left.
    fn remove_cgroups(&mut self, entry: usize, cgroups: Vec<Cgroup>) {
        for cgroup in cgroups {
            // Only processes inside the job's own cgroup are signalled.
            for pid in cgroup.pids() {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            match cgroup.remove() {
                Ok(()) => self.watchdog.remove_cgroup(entry, &cgroup),
                Err(_) => self.busy.push((entry, cgroup)),
            }
        }
        if !self.busy.iter().any(|(e, _)| *e == entry) {
            self.entries_used[entry] = false;
        }
    }

    /// Tries again to remove the cgroups that were busy; true when none is left.
    pub fn retry_busy(&mut self) -> bool {
        let mut busy = std::mem::take(&mut self.busy);
        while let Some((entry, _)) = busy.first() {
            let entry = *entry;
            let (same, rest): (Vec<_>, Vec<_>) = busy.into_iter().partition(|(e, _)| *e == entry);
            busy = rest;
            self.remove_cgroups(entry, same.into_iter().map(|(_, c)| c).collect());
        }
        self.busy.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::wait;
    use std::time::Duration;

    #[test]
    fn a_tree_leaves_out_the_processes_of_another_user() {
        let have_setpriv = std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok();
        if !nix::unistd::geteuid().is_root() || !have_setpriv {
            eprintln!("SKIPPED: needs root and setpriv to make a process of another user");
            return;
        }
        // Root's shell, with a child of its own and one that became uid 65534 (with a child).
        let mut shell = std::process::Command::new("sh")
            .args([
                "-c",
                "sleep 30 & setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'sleep 30 & wait' & wait",
            ])
            .spawn()
            .unwrap();
        let sh = shell.id() as i32;
        let everything = || ProcessTable::read().members(Members::Tree(sh, u32::MAX));
        let all_of = |uid| ProcessTable::read().members(Members::Tree(sh, uid));
        let descendants = |table: &ProcessTable| {
            let mut tree = vec![sh];
            let mut i = 0;
            while let Some(&parent) = tree.get(i) {
                tree.extend(table.children.get(&parent).into_iter().flatten());
                i += 1;
            }
            tree
        };
        let mut whole = Vec::new();
        wait::until(Duration::from_secs(3), || {
            whole = descendants(&ProcessTable::read());
            let nobody = whole
                .iter()
                .filter(|&&p| crate::procfs::uids(p).is_ok_and(|ids| ids == [65534; 4]))
                .count();
            whole.len() == 4 && nobody == 2
        });
        let roots = all_of(0);
        let table = ProcessTable::read();
        let still: Vec<bool> = roots.iter().map(|&p| table.still_theirs(p, 0)).collect();
        let as_nobody = table.still_theirs(whole[whole.len() - 1], 0);
        assert!(everything().is_empty(), "a tree of a uid none of it has");
        for pid in &whole {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = shell.wait();
        assert_eq!(whole.len(), 4, "{whole:?}");
        // The shell and its own sleep; neither the set-uid shell nor its sleep.
        assert_eq!(roots.len(), 2, "{roots:?} of {whole:?}");
        assert!(still.iter().all(|&s| s), "{roots:?}");
        assert!(!as_nobody, "a process of uid 65534 counted as root's");
    }

    #[test]
    fn a_tree_holds_a_process_and_its_descendants_not_its_group() {
        // `sh` stays in our process group; its `sleep` child is its only descendant.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let sh = shell.id() as i32;
        let mut tree = Vec::new();
        wait::until(Duration::from_secs(2), || {
            let uid = nix::unistd::geteuid().as_raw();
            tree = ProcessTable::read().members(Members::Tree(sh, uid));
            tree.len() == 2
        });
        let me = std::process::id() as i32;
        let group =
            ProcessTable::read().members(Members::Group(crate::procfs::stat(me).unwrap().pgid));
        for pid in &tree {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = shell.wait();
        assert_eq!(tree.len(), 2, "{tree:?}");
        assert_eq!(tree[0], sh);
        assert!(!tree.contains(&me), "the tree took its parent: {tree:?}");
        assert!(group.contains(&me) && group.contains(&sh), "{group:?}");
    }
}
