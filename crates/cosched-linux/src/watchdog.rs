//! A process that cleans up after a cosched that died without doing it itself (SIGKILL, abort).
//!
//! Forked at the start of a run, the watchdog blocks on the read end of a pipe whose only writer is
//! cosched; the read returns end-of-file when cosched's process is gone, however it ended. The run
//! registers every job's process group, cgroups and control page in a table in shared memory as it creates them and
//! clears them as it cleans them itself, and every process it stops one by one (an attached process
//! tree, paused by signals) before it stops it. On end-of-file the watchdog thaws every registered
//! cgroup, sends SIGCONT to every process registered as stopped,
//! then SIGCONT and SIGKILL to every registered process group and to every process left in those
//! cgroups, removes the control pages, and removes the cgroups, retrying for up to a second while killed processes exit. Orphaned
//! jobs are killed rather than left running unsupervised: nothing would enforce their plan any more.
//!
//! A daemon's watchdog ([`OnDeath::Thaw`]) only thaws: the daemon's jobs keep running, unconstrained,
//! until a restarted daemon adopts them again (`docs/service.md`).
//!
//! The child runs after `fork` in a possibly multi-threaded process, so it only makes async-signal-safe
//! system calls on memory prepared before the fork: no allocation, no locks, no Rust I/O.

use crate::cgroup::{Cgroup, CgroupKind};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

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
    dir: [u8; DIR_CAPACITY],
}

#[repr(C)]
struct JobEntry {
    /// 0 = none.
    pgid: AtomicI32,
    cgroups: [CgroupEntry; CGROUPS_PER_JOB],
    /// The job's control page file; `kind` 1 = present.
    page: CgroupEntry,
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

pub struct Watchdog {
    entries: *mut JobEntry,
    jobs: usize,
    map_len: usize,
    pid: libc::pid_t,
    write_fd: libc::c_int,
}

// The shared table is only accessed through atomics and through bytes published by them.
unsafe impl Send for Watchdog {}

fn kind_code(kind: CgroupKind) -> u32 {
    match kind {
        CgroupKind::V2 => 1,
        CgroupKind::V1Cpuset => 2,
        CgroupKind::V1Freezer => 3,
    }
}

impl Watchdog {
    /// Forks the watchdog with room for `jobs` jobs.
    pub fn start(jobs: usize, on_death: OnDeath) -> io::Result<Watchdog> {
        let jobs = jobs.max(1);
        let map_len = jobs * std::mem::size_of::<JobEntry>();
        // SAFETY: an anonymous shared mapping, zero-filled by the kernel; all-zero is a valid table.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            let e = io::Error::last_os_error();
            unsafe { libc::munmap(map, map_len) };
            return Err(e);
        }
        let entries = map.cast::<JobEntry>();
        // SAFETY: the child only runs `watch`, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => {
                let e = io::Error::last_os_error();
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                    libc::munmap(map, map_len);
                }
                Err(e)
            }
            0 => unsafe { watch(fds[0], entries, jobs, on_death) },
            pid => {
                unsafe { libc::close(fds[0]) };
                Ok(Watchdog {
                    entries,
                    jobs,
                    map_len,
                    pid,
                    write_fd: fds[1],
                })
            }
        }
    }

    fn entry(&self, job: usize) -> &JobEntry {
        assert!(
            job < self.jobs,
            "job index {job} beyond the watchdog's table"
        );
        // SAFETY: in bounds of the mapping, which lives as long as self.
        unsafe { &*self.entries.add(job) }
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

    pub fn set_control_page(&self, job: usize, path: &Path) -> io::Result<()> {
        publish(&self.entry(job).page, path, 1)
    }

    pub fn clear_control_page(&self, job: usize) {
        self.entry(job).page.kind.store(0, Ordering::Release);
    }

    pub fn remove_cgroup(&self, job: usize, cgroup: &Cgroup) {
        let bytes = cgroup.dir.as_os_str().as_bytes();
        for slot in &self.entry(job).cgroups {
            let stored = &slot.dir[..bytes.len().min(DIR_CAPACITY)];
            if slot.kind.load(Ordering::Acquire) != 0
                && stored == bytes
                && slot.dir.get(bytes.len()) == Some(&0)
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
    // SAFETY: a free slot is written only by this process, and published by the store below.
    unsafe {
        let dir = slot.dir.as_ptr().cast_mut();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dir, bytes.len());
        *dir.add(bytes.len()) = 0;
    }
    slot.kind.store(code, Ordering::Release);
    Ok(())
}

impl Drop for Watchdog {
    /// Closes the pipe, so the watchdog sweeps whatever is still registered (normally nothing) and exits.
    fn drop(&mut self) {
        unsafe {
            libc::close(self.write_fd);
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) == -1
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
            libc::munmap(self.entries.cast(), self.map_len);
        }
    }
}

/// The watchdog child. Never returns.
unsafe fn watch(read_fd: libc::c_int, entries: *mut JobEntry, jobs: usize, on_death: OnDeath) -> ! {
    for signal in [
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGHUP,
        libc::SIGTERM,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGPIPE,
    ] {
        libc::signal(signal, libc::SIG_IGN);
    }
    let empty: libc::sigset_t = std::mem::zeroed();
    libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    // Other descriptors (other runs' pipes, terminals) must not be kept open by us.
    if read_fd > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, (read_fd - 1) as u32, 0u32);
    }
    libc::syscall(libc::SYS_close_range, (read_fd + 1) as u32, u32::MAX, 0u32);
    libc::prctl(libc::PR_SET_NAME, c"cosched-watch".as_ptr());
    let mut byte = 0u8;
    loop {
        let n = libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
        if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
            break;
        }
    }
    let table = std::slice::from_raw_parts(entries, jobs);
    sweep(table, on_death);
    libc::_exit(0)
}

unsafe fn sweep(table: &[JobEntry], on_death: OnDeath) {
    for entry in table {
        for cgroup in &entry.cgroups {
            let code = cgroup.kind.load(Ordering::Acquire);
            let (file, value): (&[u8], &[u8]) = match code {
                1 => (b"/cgroup.freeze\0", b"0"),
                3 => (b"/freezer.state\0", b"THAWED"),
                _ => continue,
            };
            let mut path = [0u8; DIR_CAPACITY + 32];
            if join(&cgroup.dir, file, &mut path) {
                write_file(&path, value);
            }
        }
        for slot in &entry.stopped {
            let pid = slot.load(Ordering::Acquire);
            if pid > 0 {
                libc::kill(pid, libc::SIGCONT);
            }
        }
    }
    if on_death == OnDeath::Thaw {
        for entry in table {
            let pgid = entry.pgid.load(Ordering::Acquire);
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGCONT);
            }
        }
        return;
    }
    for entry in table {
        if entry.page.kind.load(Ordering::Acquire) != 0 {
            libc::unlink(entry.page.dir.as_ptr().cast());
        }
        let pgid = entry.pgid.load(Ordering::Acquire);
        if pgid > 0 {
            libc::kill(-pgid, libc::SIGKILL);
            libc::kill(-pgid, libc::SIGCONT);
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
                kill_members(&cgroup.dir);
                if libc::rmdir(cgroup.dir.as_ptr().cast()) == 0
                    || *libc::__errno_location() == libc::ENOENT
                {
                    cgroup.kind.store(0, Ordering::Release);
                } else {
                    remaining += 1;
                }
            }
        }
        if remaining == 0 {
            return;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
}

/// Copies the NUL-terminated `dir` and then `file` (NUL-terminated) into `out`.
fn join(dir: &[u8], file: &[u8], out: &mut [u8]) -> bool {
    let len = dir.iter().position(|&b| b == 0).unwrap_or(dir.len());
    if len + file.len() > out.len() {
        return false;
    }
    out[..len].copy_from_slice(&dir[..len]);
    out[len..len + file.len()].copy_from_slice(file);
    true
}

unsafe fn write_file(path: &[u8], value: &[u8]) {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd >= 0 {
        libc::write(fd, value.as_ptr().cast(), value.len());
        libc::close(fd);
    }
}

/// SIGKILLs (and SIGCONTs, for stopped ones) every process listed in the cgroup's `cgroup.procs`.
unsafe fn kill_members(dir: &[u8]) {
    let mut path = [0u8; DIR_CAPACITY + 32];
    if !join(dir, b"/cgroup.procs\0", &mut path) {
        return;
    }
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return;
    }
    let mut buffer = [0u8; 4096];
    let mut pid: i32 = 0;
    loop {
        let n = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        if n <= 0 {
            break;
        }
        for &b in &buffer[..n as usize] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
            } else {
                if pid > 0 {
                    libc::kill(pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGCONT);
                }
                pid = 0;
            }
        }
    }
    if pid > 0 {
        libc::kill(pid, libc::SIGKILL);
    }
    libc::close(fd);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_within_bounds() {
        let mut out = [0u8; 16];
        assert!(join(b"/a/b\0junk", b"/x\0", &mut out));
        assert_eq!(&out[..7], b"/a/b/x\0");
        assert!(!join(b"/a/very/long/dir\0", b"/cgroup.procs\0", &mut out));
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
        unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
        child
    }

    fn state(pid: u32) -> char {
        crate::procfs::stat(pid as i32).unwrap().state
    }

    fn wait_state(pid: u32, wanted: impl Fn(char) -> bool) -> char {
        for _ in 0..500 {
            if wanted(state(pid)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
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
