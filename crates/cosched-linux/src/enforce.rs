//! Putting a plan into effect for one job: its cgroups, its CPUs, frozen or running, and its removal.
//!
//! The enforcer owns the watchdog: whatever it creates that must be undone if cosched dies (a control
//! page, cgroups, a process group) it registers there itself, before the thing exists or is joined, and
//! it unregisters it once it has undone it. The executor never talks to the watchdog.

use crate::affinity::Mask;
use crate::cgroup::{numa_nodes_of, Cgroup};
use crate::mechanism::{Freezer, Mechanisms, Placement};
use crate::procfs::ProcStat;
use crate::watchdog::{OnDeath, Watchdog};
use cosched_core::CpuSet;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

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

/// The executor's handle on one running job.
#[derive(Debug)]
pub struct JobControl {
    /// The job's entry in the watchdog's table.
    entry: usize,
    pub pgid: i32,
    pub cgroups: Vec<Cgroup>,
    pub cpus: CpuSet,
    pub frozen: bool,
}

/// A job's control page and cgroups, created and registered before its process exists, and what the
/// process must do before exec.
pub struct Prepared {
    entry: usize,
    cgroups: Vec<Cgroup>,
    cpus: CpuSet,
    pub join: Vec<PathBuf>,
    pub mask: Option<Mask>,
}

/// Which processes belong to which process group, from one pass over /proc.
pub type ProcessGroups = HashMap<i32, Vec<ProcStat>>;

pub fn process_groups() -> ProcessGroups {
    let mut groups: ProcessGroups = HashMap::new();
    for process in crate::procfs::all_processes() {
        groups.entry(process.pgid).or_default().push(process);
    }
    groups
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

    /// `cosched-<pid>-<run>`, the prefix of this run's cgroups and control pages.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn uses_affinity(&self) -> bool {
        self.mechanisms.placement == Placement::Affinity
    }

    /// Registers the job's control page and creates its cgroups on `cpus`, each registered with the
    /// watchdog before anything joins it. On error nothing is left behind.
    pub fn prepare(&mut self, cpus: &CpuSet, page: &Path) -> io::Result<Prepared> {
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
        let mut prepared = Prepared {
            entry,
            cgroups: Vec::new(),
            cpus: cpus.clone(),
            join: Vec::new(),
            mask: None,
        };
        if let Err(e) = self.create_cgroups(&mut prepared, page) {
            self.abandon(prepared);
            return Err(e);
        }
        Ok(prepared)
    }

    fn create_cgroups(&mut self, prepared: &mut Prepared, page: &Path) -> io::Result<()> {
        self.watchdog.set_control_page(prepared.entry, page)?;
        let name = format!("{}-{}", self.tag, prepared.entry);
        let mems = numa_nodes_of(&prepared.cpus);
        let hierarchies = [
            self.mechanisms.placement_hierarchy.as_ref(),
            self.mechanisms.freezer_hierarchy.as_ref(),
        ];
        for (i, hierarchy) in hierarchies.into_iter().enumerate() {
            let Some(hierarchy) = hierarchy else { continue };
            // Placement and freezer in the same cgroup v2 hierarchy share one cgroup.
            if i == 1 && prepared.cgroups.iter().any(|c| c.kind == hierarchy.kind) {
                continue;
            }
            let cgroup = hierarchy.create(&name, &prepared.cpus, &mems)?;
            let registered = self.watchdog.add_cgroup(prepared.entry, &cgroup);
            prepared.join.push(cgroup.procs_file());
            prepared.cgroups.push(cgroup);
            registered?;
        }
        if self.uses_affinity() {
            prepared.mask = Some(Mask::new(&prepared.cpus)?);
        }
        Ok(())
    }

    /// Moves every process of the existing process group `pgid` into the prepared cgroups (or mask).
    pub fn enclose(&self, prepared: &Prepared, pgid: i32) -> io::Result<()> {
        let members: Vec<i32> = crate::procfs::all_processes()
            .into_iter()
            .filter(|p| p.pgid == pgid)
            .map(|p| p.pid)
            .collect();
        if members.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("process group {pgid} has no process left"),
            ));
        }
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
        self.watchdog.clear_control_page(job.entry);
        for cgroup in &job.cgroups {
            self.watchdog.remove_cgroup(job.entry, cgroup);
        }
        self.entries_used[job.entry] = false;
    }

    /// Undoes [`Enforcer::prepare`] for a job whose process could not be started.
    pub fn abandon(&mut self, prepared: Prepared) {
        self.watchdog.clear_control_page(prepared.entry);
        self.remove_cgroups(prepared.entry, prepared.cgroups);
    }

    /// The job's process started as `pgid`, the leader of its own process group: registers the group.
    pub fn started(&mut self, prepared: Prepared, pgid: i32) -> JobControl {
        self.watchdog.set_process_group(prepared.entry, pgid);
        JobControl {
            entry: prepared.entry,
            pgid,
            cgroups: prepared.cgroups,
            cpus: prepared.cpus,
            frozen: false,
        }
    }

    fn placement_cgroup<'a>(&self, job: &'a JobControl) -> Option<&'a Cgroup> {
        let kind = self.mechanisms.placement_hierarchy.as_ref()?.kind;
        job.cgroups.iter().find(|c| c.kind == kind)
    }

    fn freezer_cgroup<'a>(&self, job: &'a JobControl) -> Option<&'a Cgroup> {
        let kind = self.mechanisms.freezer_hierarchy.as_ref()?.kind;
        job.cgroups.iter().find(|c| c.kind == kind)
    }

    /// The job's processes now: its cgroup's members, or the members of its process group.
    pub fn members(&self, job: &JobControl, groups: &ProcessGroups) -> Vec<i32> {
        match job.cgroups.first() {
            Some(cgroup) => cgroup.pids(),
            None => groups
                .get(&job.pgid)
                .map(|g| g.iter().map(|p| p.pid).collect())
                .unwrap_or_default(),
        }
    }

    /// Moves the job to `cpus`.
    pub fn place(&self, job: &mut JobControl, cpus: &CpuSet) -> io::Result<()> {
        if &job.cpus == cpus {
            return Ok(());
        }
        match self.placement_cgroup(job) {
            Some(cgroup) => {
                cgroup.set_cpus(cpus)?;
                // A thread bound by its OpenMP runtime (OMP_PROC_BIND, launch::placement_env) keeps
                // that mask inside a new cpuset, so a grown partition would go unused: set it again.
                Mask::new(cpus)?.apply_to_processes(&cgroup.pids())?
            }
            None => {
                let groups = process_groups();
                Mask::new(cpus)?.apply_to_processes(&self.members(job, &groups))?
            }
        }
        job.cpus = cpus.clone();
        Ok(())
    }

    /// Affinity placement only: sets the mask again on every thread, for threads that raced a change.
    pub fn reapply(&self, job: &JobControl, groups: &ProcessGroups) -> io::Result<()> {
        if !self.uses_affinity() {
            return Ok(());
        }
        Mask::new(&job.cpus)?.apply_to_processes(&self.members(job, groups))
    }

    pub fn set_frozen(&self, job: &mut JobControl, frozen: bool) -> io::Result<()> {
        if job.frozen == frozen {
            return Ok(());
        }
        match (self.mechanisms.freezer, self.freezer_cgroup(job)) {
            (Freezer::Signal, _) | (_, None) => {
                let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
                // SAFETY: plain system call on the job's own process group.
                if unsafe { libc::kill(-job.pgid, signal) } != 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        return Err(e);
                    }
                }
            }
            (_, Some(cgroup)) => cgroup.set_frozen(frozen)?,
        }
        job.frozen = frozen;
        Ok(())
    }

    /// Kills whatever is left of the job (after its main process ended, or when the run stops) and
    /// removes its cgroups; those still busy with exiting processes are retried by
    /// [`Enforcer::retry_busy`].
    pub fn release(&mut self, mut job: JobControl) {
        let _ = self.set_frozen(&mut job, false);
        for cgroup in &job.cgroups {
            let _ = cgroup.set_frozen(false);
        }
        // SAFETY: signals to the job's own process group.
        unsafe {
            libc::kill(-job.pgid, libc::SIGKILL);
            libc::kill(-job.pgid, libc::SIGCONT);
        }
        self.watchdog.clear_process_group(job.entry);
        self.watchdog.clear_control_page(job.entry);
        self.remove_cgroups(job.entry, job.cgroups);
        // Jobs a dead daemon left in its cgroups may end after they were adopted or found gone.
        self.remove_stale_cgroups();
    }

    /// Tries once to remove cgroups (killing what is left in them); keeps the busy ones for a retry and
    /// frees the job's watchdog entry once none is left.
    fn remove_cgroups(&mut self, entry: usize, cgroups: Vec<Cgroup>) {
        for cgroup in cgroups {
            for pid in cgroup.pids() {
                // SAFETY: only processes inside the job's own cgroup are signalled.
                unsafe { libc::kill(pid, libc::SIGKILL) };
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
