//! A process that cleans up after a cosched that died without doing it itself (SIGKILL, abort).
//!
//! Forked at the start of a run, the watchdog blocks on the read end of a pipe whose only writer is
//! cosched; the read returns end-of-file when cosched's process is gone, however it ended. The run
//! registers every job's process group and cgroups in a table in shared memory as it creates them and
//! clears them as it cleans them itself, and every process it stops one by one (an attached process
//! tree, paused by signals) before it stops it. On end-of-file the watchdog thaws every registered
//! cgroup, sends SIGCONT to every process registered as stopped,
//! then SIGCONT and SIGKILL to every registered process group and to every process left in those
//! cgroups, and removes the cgroups, retrying for up to a second while killed processes exit. Orphaned
//! jobs are killed rather than left running unsupervised: nothing would enforce their plan any more.
//!
//! A daemon's watchdog ([`OnDeath::Thaw`]) only thaws: the daemon's jobs keep running, unconstrained,
//! until a restarted daemon adopts them again (`docs/service.md`).
//!
//! The child runs after `fork` in a possibly multi-threaded process, so it only makes async-signal-safe
//! system calls on memory prepared before the fork: no allocation, no locks, no Rust I/O.

use crate::cgroup::{Cgroup, CgroupKind};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::mman::{MapFlags, ProtFlags};
use nix::sys::signal::{kill, killpg, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::sys::stat::Mode;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, UnlinkatFlags};
use std::ffi::{c_void, CStr};
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU8, Ordering};
use std::time::Duration;

const DIR_CAPACITY: usize = 240;
/// Cgroups per job: at most one per hierarchy (v2, v1 cpuset, v1 freezer).
const CGROUPS_PER_JOB: usize = 3;
/// Processes of one job that can be stopped one by one and continued by the watchdog: an attached
/// process tree (a Slurm task: its shell, its program and the few they start). Processes beyond these
/// are left running through the job's pauses rather than risk being left stopped.
pub const STOPPED_PER_JOB: usize = 256;

#[repr(C)]
struct CgroupEntry {
    /// 0 = free; otherwise a `kind_code`. Stored after `dir` is written.
    kind: AtomicU32,
    /// The path, NUL-terminated.
    dir: [AtomicU8; DIR_CAPACITY],
}

impl CgroupEntry {
    /// The path as last published, NUL-terminated (without allocating: the watchdog reads it).
    fn path(&self) -> [u8; DIR_CAPACITY] {
        let mut path = [0u8; DIR_CAPACITY];
        for (byte, stored) in path.iter_mut().zip(&self.dir) {
            *byte = stored.load(Ordering::Relaxed);
        }
        path
    }
}

#[repr(C)]
struct JobEntry {
    /// 0 = none.
    pgid: AtomicI32,
    cgroups: [CgroupEntry; CGROUPS_PER_JOB],
    /// Processes stopped one by one (SIGSTOP), to be continued; 0 = free.
    stopped: [AtomicI32; STOPPED_PER_JOB],
}

/// What the watchdog does to the registered jobs when cosched dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDeath {
    /// Thaw, kill and remove everything (`cosched run`).
    Kill,
    /// Thaw everything and leave the jobs running (`cosched daemon`).
    Thaw,
}

/// The job table, in memory shared with the watchdog (an anonymous shared mapping survives fork).
struct SharedTable {
    entries: NonNull<JobEntry>,
    jobs: usize,
}

// SAFETY: the table is only accessed through atomics, from whichever thread owns the watchdog.
unsafe impl Send for SharedTable {}

impl SharedTable {
    fn new(jobs: usize) -> io::Result<SharedTable> {
        let length = NonZeroUsize::new(jobs * std::mem::size_of::<JobEntry>())
            .ok_or_else(|| io::Error::other("an empty watchdog table"))?;
        // SAFETY: a new anonymous mapping overlaps no memory of ours; the kernel zero-fills it,
        // and all-zero atomics are a valid (empty) table.
        let map = unsafe {
            nix::sys::mman::mmap_anonymous(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
            )
        }?;
        Ok(SharedTable {
            entries: map.cast(),
            jobs,
        })
    }

    fn entries(&self) -> &[JobEntry] {
        // SAFETY: the mapping holds `jobs` initialised entries and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.entries.as_ptr(), self.jobs) }
    }
}

impl Drop for SharedTable {
    fn drop(&mut self) {
        let length = self.jobs * std::mem::size_of::<JobEntry>();
        // SAFETY: the mapping was made by `new` with this length; no reference into it outlives
        // self, which is being dropped.
        let _ = unsafe { nix::sys::mman::munmap(self.entries.cast::<c_void>(), length) };
    }
}

pub struct Watchdog {
    table: SharedTable,
    pid: Pid,
    /// The only write end of the watchdog's pipe; closing it tells the watchdog to sweep and exit.
    alive: Option<OwnedFd>,
}

fn kind_code(kind: CgroupKind) -> u32 {
    match kind {
        CgroupKind::V2 => 1,
        CgroupKind::V1Cpuset => 2,
        CgroupKind::V1Freezer => 3,
        CgroupKind::V1Memory => 4,
    }
}

impl Watchdog {
    /// Forks the watchdog with room for `jobs` jobs.
    pub fn start(jobs: usize, on_death: OnDeath) -> io::Result<Watchdog> {
        let table = SharedTable::new(jobs.max(1))?;
        let (read_end, write_end) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        // nix 0.29 has neither close_range nor _exit.
        // SAFETY: the child closes every descriptor but its read end (no Rust value of the parent's
        // uses them again in the child), runs `watch`, which makes async-signal-safe system calls on
        // memory prepared before the fork, and leaves with _exit, running no destructor or atexit
        // handler of the parent's state.
        let pid = unsafe {
            match nix::unistd::fork()? {
                ForkResult::Child => {
                    // Other descriptors (other runs' pipes, terminals) must not be kept open by us.
                    let read_fd = read_end.as_raw_fd() as u32;
                    if read_fd > 0 {
                        libc::syscall(libc::SYS_close_range, 0u32, read_fd - 1, 0u32);
                    }
                    libc::syscall(libc::SYS_close_range, read_fd + 1, u32::MAX, 0u32);
                    watch(&read_end, &table, on_death);
                    libc::_exit(0)
                }
                ForkResult::Parent { child } => child,
            }
        };
        Ok(Watchdog {
            table,
            pid,
            alive: Some(write_end),
        })
    }

    fn entry(&self, job: usize) -> &JobEntry {
        self.table
            .entries()
            .get(job)
            .unwrap_or_else(|| panic!("job index {job} beyond the watchdog's table"))
    }

    pub fn set_process_group(&self, job: usize, pgid: i32) {
        self.entry(job).pgid.store(pgid, Ordering::Release);
    }

    pub fn clear_process_group(&self, job: usize) {
        self.entry(job).pgid.store(0, Ordering::Release);
    }

    /// Registers process `pid` as about to be stopped; false when the job's table is full, and then the
    /// process must not be stopped.
    pub fn note_stopped(&self, job: usize, pid: i32) -> bool {
        self.entry(job).stopped.iter().any(|slot| {
            slot.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }

    /// The job's stopped processes were continued.
    pub fn clear_stopped(&self, job: usize) {
        for slot in &self.entry(job).stopped {
            slot.store(0, Ordering::Release);
        }
    }

    pub fn add_cgroup(&self, job: usize, cgroup: &Cgroup) -> io::Result<()> {
        let slot = self
            .entry(job)
            .cgroups
            .iter()
            .find(|c| c.kind.load(Ordering::Acquire) == 0)
            .ok_or_else(|| io::Error::other("more cgroups for one job than hierarchies"))?;
        publish(slot, &cgroup.dir, kind_code(cgroup.kind))
    }

    pub fn remove_cgroup(&self, job: usize, cgroup: &Cgroup) {
        let bytes = cgroup.dir.as_os_str().as_bytes();
        for slot in &self.entry(job).cgroups {
            let stored = slot.path();
            if slot.kind.load(Ordering::Acquire) != 0
                && stored.get(..bytes.len()) == Some(bytes)
                && stored.get(bytes.len()) == Some(&0)
            {
                slot.kind.store(0, Ordering::Release);
            }
        }
    }
}

/// Writes `path` into a free slot and then marks it used with `code`.
fn publish(slot: &CgroupEntry, path: &Path, code: u32) -> io::Result<()> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= DIR_CAPACITY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "path {} is longer than the {} bytes the watchdog can hold",
                path.display(),
                DIR_CAPACITY - 1
            ),
        ));
    }
    for (stored, &byte) in slot.dir.iter().zip(bytes.iter().chain(&[0])) {
        stored.store(byte, Ordering::Relaxed);
    }
    slot.kind.store(code, Ordering::Release);
    Ok(())
}

impl Drop for Watchdog {
    /// Closes the pipe, so the watchdog sweeps whatever is still registered (normally nothing) and exits.
    fn drop(&mut self) {
        drop(self.alive.take());
        while waitpid(self.pid, None) == Err(Errno::EINTR) {}
    }
}

/// Signals that would stop or end the watchdog with its terminal or session (Ctrl-C, hangup, job
/// control) or a broken pipe: blocked, so that only SIGKILL ends it before it has swept.
const IGNORED_SIGNALS: [Signal; 8] = [
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGTERM,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGPIPE,
];

/// The watchdog child: waits for cosched's end, then sweeps the table.
fn watch(read_end: &OwnedFd, table: &SharedTable, on_death: OnDeath) {
    let mut blocked = SigSet::empty();
    for signal in IGNORED_SIGNALS {
        blocked.add(signal);
    }
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&blocked), None);
    let _ = nix::sys::prctl::set_name(c"cosched-watch");
    let mut byte = [0u8];
    loop {
        match nix::unistd::read(read_end.as_raw_fd(), &mut byte) {
            Ok(0) => break,
            Err(e) if e != Errno::EINTR => break,
            _ => {}
        }
    }
    sweep(table.entries(), on_death);
}

fn sweep(table: &[JobEntry], on_death: OnDeath) {
    for entry in table {
        for cgroup in &entry.cgroups {
            let code = cgroup.kind.load(Ordering::Acquire);
            let (file, value): (&[u8], &[u8]) = match code {
                1 => (b"/cgroup.freeze\0", b"0"),
                3 => (b"/freezer.state\0", b"THAWED"),
                _ => continue,
            };
            let mut path = [0u8; DIR_CAPACITY + 32];
            if let Some(path) = join(&cgroup.path(), file, &mut path) {
                write_file(path, value);
            }
        }
        for slot in &entry.stopped {
            let pid = slot.load(Ordering::Acquire);
            if pid > 0 {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
        }
    }
    if on_death == OnDeath::Thaw {
        for entry in table {
            let pgid = entry.pgid.load(Ordering::Acquire);
            if pgid > 0 {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
            }
        }
        return;
    }
    for entry in table {
        let pgid = entry.pgid.load(Ordering::Acquire);
        if pgid > 0 {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
        }
    }
    // Killed processes take a moment to leave their cgroups; give them up to a second.
    for _ in 0..100 {
        let mut remaining = 0;
        for entry in table {
            for cgroup in &entry.cgroups {
                if cgroup.kind.load(Ordering::Acquire) == 0 {
                    continue;
                }
                let dir = cgroup.path();
                let Ok(dir) = CStr::from_bytes_until_nul(&dir) else {
                    continue;
                };
                kill_members(dir.to_bytes_with_nul());
                match nix::unistd::unlinkat(None, dir, UnlinkatFlags::RemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => cgroup.kind.store(0, Ordering::Release),
                    Err(_) => remaining += 1,
                }
            }
        }
        if remaining == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `dir` (up to its NUL) and then `file` (NUL-terminated), written into `out`.
fn join<'a>(dir: &[u8], file: &[u8], out: &'a mut [u8]) -> Option<&'a CStr> {
    let len = dir.iter().position(|&b| b == 0).unwrap_or(dir.len());
    if len + file.len() > out.len() {
        return None;
    }
    out[..len].copy_from_slice(&dir[..len]);
    out[len..len + file.len()].copy_from_slice(file);
    CStr::from_bytes_until_nul(out).ok()
}

/// Opens `path` for the watchdog (nix 0.29's open gives a bare descriptor).
fn open(path: &CStr, flags: OFlag) -> Option<OwnedFd> {
    let fd = nix::fcntl::open(path, flags | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
    // SAFETY: open just returned this descriptor, which nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_file(path: &CStr, value: &[u8]) {
    if let Some(file) = open(path, OFlag::O_WRONLY) {
        let _ = nix::unistd::write(&file, value);
    }
}

/// SIGKILLs (and SIGCONTs, for stopped ones) every process listed in the cgroup's `cgroup.procs`.
fn kill_members(dir: &[u8]) {
    let mut path = [0u8; DIR_CAPACITY + 32];
    let Some(path) = join(dir, b"/cgroup.procs\0", &mut path) else {
        return;
    };
    let Some(procs) = open(path, OFlag::O_RDONLY) else {
        return;
    };
    let end = |pid: i32| {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
    };
    let mut buffer = [0u8; 4096];
    let mut pid: i32 = 0;
    while let Ok(n @ 1..) = nix::unistd::read(procs.as_raw_fd(), &mut buffer) {
        for &b in &buffer[..n] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
            } else {
                if pid > 0 {
                    end(pid);
                }
                pid = 0;
            }
        }
    }
    if pid > 0 {
        end(pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::wait;

    #[test]
    fn paths_are_joined_within_bounds() {
        let mut out = [0u8; 16];
        assert_eq!(join(b"/a/b\0junk", b"/x\0", &mut out), Some(c"/a/b/x"));
        assert_eq!(
            join(b"/a/very/long/dir\0", b"/cgroup.procs\0", &mut out),
            None
        );
    }

    #[test]
    fn a_dropped_watchdog_kills_registered_groups_and_exits() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let watchdog = Watchdog::start(2, OnDeath::Kill).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        watchdog.set_process_group(1, child.id() as i32);
        drop(watchdog);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    /// A process of an attached tree, in a group of its own as a TaskProlog is.
    fn stopped_sleeper() -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        kill(Pid::from_raw(child.id() as i32), Signal::SIGSTOP).unwrap();
        child
    }

    fn state(pid: u32) -> char {
        crate::procfs::stat(pid as i32).unwrap().state
    }

    fn wait_state(pid: u32, wanted: impl Fn(char) -> bool) -> char {
        wait::until(Duration::from_secs(5), || wanted(state(pid)));
        state(pid)
    }

    #[test]
    fn a_dying_daemon_continues_every_process_it_stopped_and_only_those() {
        let watchdog = Watchdog::start(1, OnDeath::Thaw).unwrap();
        let mut noted = stopped_sleeper();
        let mut other = stopped_sleeper();
        assert!(watchdog.note_stopped(0, noted.id() as i32));
        wait_state(other.id(), |s| s == 'T');
        drop(watchdog);
        let noted_state = wait_state(noted.id(), |s| s != 'T');
        let other_state = state(other.id());
        for child in [&mut noted, &mut other] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_ne!(noted_state, 'T', "the stopped process stayed stopped");
        assert_eq!(
            other_state, 'T',
            "a process cosched never stopped was continued"
        );
    }

    #[test]
    fn a_full_table_refuses_another_stopped_process_and_clearing_frees_it() {
        let watchdog = Watchdog::start(1, OnDeath::Thaw).unwrap();
        for pid in 0..STOPPED_PER_JOB as i32 {
            assert!(watchdog.note_stopped(0, i32::MAX - pid));
        }
        assert!(!watchdog.note_stopped(0, 42));
        watchdog.clear_stopped(0);
        assert!(watchdog.note_stopped(0, 42));
        watchdog.clear_stopped(0);
    }
}
