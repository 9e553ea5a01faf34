//! `sched_setaffinity` on every thread of a set of processes: the unprivileged placement mechanism.
//!
//! A new thread inherits the mask of the thread that creates it and a child process that of its parent,
//! so after one pass over the existing threads later ones normally follow; the executor still re-applies
//! the mask periodically to catch threads created while a pass was running.

use crate::procfs;
use cosched_core::CpuSet;
use nix::sched::{sched_setaffinity, CpuSet as KernelCpuSet};
use nix::unistd::Pid;
use std::io;

/// A kernel CPU mask built once and applied to many threads.
pub struct Mask {
    set: KernelCpuSet,
}

impl Mask {
    pub fn new(cpus: &CpuSet) -> io::Result<Mask> {
        let mut set = KernelCpuSet::new();
        let capacity = KernelCpuSet::count();
        for cpu in cpus.iter() {
            let beyond = || {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {cpu} is beyond the {capacity} CPUs sched_setaffinity can name"),
                )
            };
            let index = usize::try_from(cpu).map_err(|_| beyond())?;
            if index >= capacity {
                return Err(beyond());
            }
            set.set(index).map_err(|_| beyond())?;
        }
        Ok(Mask { set })
    }

    /// Applies the mask to one thread (0 = the calling thread). Async-signal-safe, so it may run between
    /// fork and exec.
    pub fn apply_to(&self, tid: i32) -> io::Result<()> {
        sched_setaffinity(Pid::from_raw(tid), &self.set).map_err(io::Error::from)
    }

    /// Applies the mask to every thread of every process in `pids`. Threads that exit meanwhile are
    /// skipped; any other failure (e.g. EPERM on a foreign process) is returned after trying them all.
    pub fn apply_to_processes(&self, pids: &[i32]) -> io::Result<()> {
        let mut failure = None;
        for &pid in pids {
            for tid in procfs::threads(pid) {
                match self.apply_to(tid) {
                    Err(e) if e.raw_os_error() != Some(libc::ESRCH) => failure = Some(e),
                    _ => {}
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

/// The CPUs a thread may run on, read back from `/proc/<pid>/task/<tid>/status`.
pub fn allowed_cpus(pid: i32, tid: i32) -> io::Result<CpuSet> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Cpus_allowed_list"))?;
    list.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The CPUs a job confined to `allocation` (a batch system's cpuset, which it must not leave) uses for
/// the partition `cpus` a policy chose on the whole machine: the partition itself when it lies inside,
/// its part inside when they overlap, and otherwise as many CPUs of the allocation as the partition
/// has, from the allocation's first. The kernel would refuse a mask outside the cpuset altogether.
pub fn within_allocation(cpus: &CpuSet, allocation: &CpuSet) -> CpuSet {
    let inside = cpus.intersection(allocation);
    match inside.is_empty() {
        false => inside,
        true => allocation.take(cpus.len().max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_fitted_into_an_allocation() {
        let set = |s: &str| -> CpuSet { s.parse().unwrap() };
        let allocation = set("4-7");
        assert_eq!(within_allocation(&set("4-5"), &allocation), set("4-5"));
        assert_eq!(within_allocation(&set("2-5"), &allocation), set("4-5"));
        assert_eq!(within_allocation(&set("0-1"), &allocation), set("4-5"));
        assert_eq!(within_allocation(&set("0-15"), &allocation), allocation);
    }

    #[test]
    fn a_thread_reads_back_the_mask_it_was_given() {
        let online: CpuSet = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let first: CpuSet = online.take(1);
        let handle = std::thread::spawn(move || {
            let tid = nix::unistd::gettid().as_raw();
            Mask::new(&first).unwrap().apply_to(0).unwrap();
            let pid = std::process::id() as i32;
            (allowed_cpus(pid, tid).unwrap(), first)
        });
        let (seen, wanted) = handle.join().unwrap();
        assert_eq!(seen, wanted);
    }

    #[test]
    fn cpus_beyond_the_mask_are_refused() {
        let huge: CpuSet = [100_000].into_iter().collect();
        assert!(Mask::new(&huge).is_err());
    }
}
