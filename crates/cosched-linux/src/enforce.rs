//! Putting a plan into effect for one job: its cgroups, its CPUs, frozen or running, and its removal.

use crate::affinity::Mask;
use crate::cgroup::{numa_nodes_of, Cgroup};
use crate::mechanism::{Freezer, Mechanisms, Placement};
use crate::procfs::ProcStat;
use crate::watchdog::Watchdog;
use cosched_core::CpuSet;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// Distinguishes runs made by one process (tests run several at once).
static RUNS: AtomicU32 = AtomicU32::new(0);

pub struct Enforcer {
    pub mechanisms: Mechanisms,
    /// `cosched-<pid>-<run>`: prefix of every cgroup of this run.
    tag: String,
}

/// The executor's handle on one running job.
#[derive(Debug)]
pub struct JobControl {
    pub index: usize,
    pub pgid: i32,
    pub cgroups: Vec<Cgroup>,
    pub cpus: CpuSet,
    pub frozen: bool,
}

/// Cgroups created for a job before its process exists, and what the process must do before exec.
pub struct Prepared {
    pub cgroups: Vec<Cgroup>,
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
    pub fn new(mechanisms: Mechanisms) -> Enforcer {
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        Enforcer {
            mechanisms,
            tag: format!("cosched-{}-{run}", std::process::id()),
        }
    }

    /// `cosched-<pid>-<run>`, the prefix of this run's cgroups and control pages.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn uses_affinity(&self) -> bool {
        self.mechanisms.placement == Placement::Affinity
    }

    /// Creates the job's cgroups (registered with the watchdog before anything joins them).
    pub fn prepare(
        &self,
        index: usize,
        cpus: &CpuSet,
        watchdog: &Watchdog,
    ) -> io::Result<Prepared> {
        let name = format!("{}-{index}", self.tag);
        let mems = numa_nodes_of(cpus);
        let mut prepared = Prepared {
            cgroups: Vec::new(),
            join: Vec::new(),
            mask: None,
        };
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
            let cgroup = match hierarchy.create(&name, cpus, &mems) {
                Ok(cgroup) => cgroup,
                Err(e) => {
                    self.remove_now(&prepared.cgroups, index, watchdog);
                    return Err(e);
                }
            };
            watchdog.add_cgroup(index, &cgroup)?;
            prepared.join.push(cgroup.procs_file());
            prepared.cgroups.push(cgroup);
        }
        if self.uses_affinity() {
            prepared.mask = Some(Mask::new(cpus)?);
        }
        Ok(prepared)
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
            Some(cgroup) => cgroup.set_cpus(cpus)?,
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
    /// removes its cgroups; returns those that could not be removed yet (processes still exiting).
    pub fn release(&self, job: &mut JobControl, watchdog: &Watchdog) -> Vec<Cgroup> {
        let _ = self.set_frozen(job, false);
        for cgroup in &job.cgroups {
            let _ = cgroup.set_frozen(false);
        }
        // SAFETY: signals to the job's own process group.
        unsafe {
            libc::kill(-job.pgid, libc::SIGKILL);
            libc::kill(-job.pgid, libc::SIGCONT);
        }
        watchdog.clear_process_group(job.index);
        let cgroups = std::mem::take(&mut job.cgroups);
        self.remove_now(&cgroups, job.index, watchdog)
    }

    /// Tries to remove cgroups once; returns those still busy.
    pub fn remove_now(&self, cgroups: &[Cgroup], index: usize, watchdog: &Watchdog) -> Vec<Cgroup> {
        cgroups
            .iter()
            .filter(|cgroup| {
                for pid in cgroup.pids() {
                    // SAFETY: only processes inside the job's own cgroup are signalled.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                match cgroup.remove() {
                    Ok(()) => {
                        watchdog.remove_cgroup(index, cgroup);
                        false
                    }
                    Err(_) => true,
                }
            })
            .cloned()
            .collect()
    }
}
