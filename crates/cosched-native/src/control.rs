//! The executor's end of a job's control page (layout: `docs/control-page.md`, version 1).
//!
//! The executor creates the page, writes the advice and reads the progress counters the job's
//! processes write back through `libcosched-omp.so` or `cosched.h`. The page is an anonymous,
//! sealed memory file that the job inherits as a descriptor: no path names it, so no one can
//! plant, replace or unlink it, and its seals keep its size, so no one can make the executor's
//! mapping fault by truncating it.

use nix::fcntl::{fcntl, FcntlArg, FdFlag, SealFlag};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `CSCH` read as a little-endian u32.
pub const MAGIC: u32 = 0x4843_5343;
pub const VERSION: u32 = 1;
pub const PAGE_SIZE: usize = 4096;
/// Environment variable through which a job learns how to open its control page.
pub const CONTROL_ENV: &str = "COSCHED_CONTROL";
/// How executors that kept pages as files in `/dev/shm` named them: `cosched-<pid>-…`.
const FILE_PREFIX: &str = "cosched-";

/// The version-1 layout; field order and offsets are the documented ones (checked by a test).
#[repr(C)]
struct Layout {
    magic: AtomicU32,
    version: AtomicU32,
    advised_threads: AtomicU32,
    generation: AtomicU32,
    regions_completed: AtomicU64,
    heartbeats: AtomicU64,
    last_team_size: AtomicU32,
    seen_generation: AtomicU32,
    regions_started: AtomicU64,
}

/// What the job has written back, read in one go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub regions_started: u64,
    pub regions_completed: u64,
    pub heartbeats: u64,
    pub last_team_size: u32,
    pub seen_generation: u32,
}

impl Counters {
    /// The job's progress counter: completed top-level regions plus explicit heartbeats.
    pub fn progress(&self) -> u64 {
        self.regions_completed + self.heartbeats
    }
}

/// A mapped control page: the executor's mapping of the job's memory file, which stays the
/// executor's own (the job's user may read and write it, never resize it).
#[derive(Debug)]
pub struct ControlPage {
    file: File,
    map: NonNull<libc::c_void>,
}

// SAFETY: the mapping is only accessed through atomics, from any thread.
unsafe impl Send for ControlPage {}
// SAFETY: as for Send.
unsafe impl Sync for ControlPage {}

impl ControlPage {
    /// Creates a page, given to `owner` (uid, gid) with mode 0600 so that the job's processes, once
    /// they run as that user, may open it again through `/proc/self/fd`; sealed at its size; with a
    /// version-1 header and no advice. The magic is written last so a job never sees a
    /// half-initialised page as valid. The descriptor is close-on-exec: a job gets it only through
    /// [`keep_across_exec`].
    pub fn create(owner: Option<(u32, u32)>) -> io::Result<ControlPage> {
        let flags = MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING;
        let file = File::from(
            memfd_create(c"cosched-control", flags).map_err(failed("create a control page"))?,
        );
        file.set_len(PAGE_SIZE as u64)
            .map_err(failed("size the control page"))?;
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(file.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals))
            .map_err(failed("seal the control page"))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(failed("protect the control page"))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                .map_err(failed("give away the control page"))?;
        }
        let map = map_shared(&file).map_err(failed("map the control page"))?;
        let page = ControlPage { file, map };
        let layout = page.layout();
        layout.version.store(VERSION, Ordering::Relaxed);
        layout.magic.store(MAGIC, Ordering::Release);
        Ok(page)
    }

    /// The descriptor a job inherits, at the same number, through [`keep_across_exec`].
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// What [`CONTROL_ENV`] says to a process that inherited [`ControlPage::fd`]: a path that
    /// opens it again in that process and its children (`open` in the preload library).
    pub fn env_value(&self) -> OsString {
        format!("/proc/self/fd/{}", self.file.as_raw_fd()).into()
    }

    /// Sets the team size for the job's next top-level parallel regions (`0` = no cap) and bumps the
    /// generation so the job can report when it applied the change. Setting the current value again
    /// is not a change and leaves the generation alone.
    pub fn set_advice(&self, threads: u32) {
        let layout = self.layout();
        if layout.advised_threads.swap(threads, Ordering::AcqRel) != threads {
            layout.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    pub fn advice(&self) -> u32 {
        self.layout().advised_threads.load(Ordering::Acquire)
    }

    pub fn generation(&self) -> u32 {
        self.layout().generation.load(Ordering::Acquire)
    }

    pub fn counters(&self) -> Counters {
        let layout = self.layout();
        Counters {
            regions_started: layout.regions_started.load(Ordering::Acquire),
            regions_completed: layout.regions_completed.load(Ordering::Acquire),
            heartbeats: layout.heartbeats.load(Ordering::Acquire),
            last_team_size: layout.last_team_size.load(Ordering::Acquire),
            seen_generation: layout.seen_generation.load(Ordering::Acquire),
        }
    }

    fn layout(&self) -> &Layout {
        // SAFETY: the mapping is PAGE_SIZE bytes, page-aligned, and lives as long as `self`.
        unsafe { self.map.cast::<Layout>().as_ref() }
    }
}

impl Drop for ControlPage {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference to it outlives `self`.
        unsafe {
            libc::munmap(self.map.as_ptr(), PAGE_SIZE);
        }
    }
}

/// In a child between fork and exec: keeps `fd` (a page's, [`ControlPage::fd`]) open across exec.
/// Makes one async-signal-safe system call.
pub fn keep_across_exec(fd: RawFd) -> io::Result<()> {
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty()))?;
    Ok(())
}

/// Removes from `dir` the page files of executors that kept their pages as files and died without
/// removing them (their name carries the pid of an executor that no longer runs); gives how many.
/// A live executor's files, and anything that is not a regular file, are left alone.
pub fn remove_stale_pages(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let stale = entries.flatten().filter(|entry| {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(FILE_PREFIX))
            .and_then(|rest| {
                rest.split('-')
                    .next()?
                    .parse::<i32>()
                    .ok()
                    .filter(|&pid| pid > 0)
            });
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        is_file && pid.is_some_and(|pid| !runs(pid))
    });
    stale
        .filter(|entry| std::fs::remove_file(entry.path()).is_ok())
        .count()
}

/// Whether a process `pid` exists (one of another user's answers EPERM, and runs).
fn runs(pid: i32) -> bool {
    let signal = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None);
    signal != Err(nix::errno::Errno::ESRCH)
}

fn failed<E: Into<io::Error>>(what: &'static str) -> impl Fn(E) -> io::Error {
    move |e| {
        let e = e.into();
        io::Error::new(e.kind(), format!("cannot {what}: {e}"))
    }
}

fn map_shared(file: &File) -> io::Result<NonNull<libc::c_void>> {
    // SAFETY: a fresh shared mapping of a file we hold open, checked below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(addr).ok_or_else(|| io::Error::other("mmap returned null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn layout_matches_the_documented_offsets() {
        assert_eq!(offset_of!(Layout, magic), 0);
        assert_eq!(offset_of!(Layout, version), 4);
        assert_eq!(offset_of!(Layout, advised_threads), 8);
        assert_eq!(offset_of!(Layout, generation), 12);
        assert_eq!(offset_of!(Layout, regions_completed), 16);
        assert_eq!(offset_of!(Layout, heartbeats), 24);
        assert_eq!(offset_of!(Layout, last_team_size), 32);
        assert_eq!(offset_of!(Layout, seen_generation), 36);
        assert_eq!(offset_of!(Layout, regions_started), 40);
    }

    fn read_u32(bytes: &[u8], offset: usize) -> u32 {
        u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
    }

    /// The page opened again by its path in this process, as a job's library opens it.
    fn reopen(page: &ControlPage) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(page.env_value())
            .unwrap()
    }

    #[test]
    fn create_writes_a_header_other_processes_can_read() {
        let page = ControlPage::create(None).unwrap();
        page.set_advice(3);
        let bytes = std::fs::read(page.env_value()).unwrap();
        assert_eq!(bytes.len(), PAGE_SIZE);
        assert_eq!(&bytes[0..4], b"CSCH");
        assert_eq!(read_u32(&bytes, 4), VERSION);
        assert_eq!(read_u32(&bytes, 8), 3);
        assert_eq!(read_u32(&bytes, 12), 1);
        assert!(bytes[16..].iter().all(|&b| b == 0));
    }

    #[test]
    fn advice_changes_bump_the_generation_once_each() {
        let page = ControlPage::create(None).unwrap();
        assert_eq!((page.advice(), page.generation()), (0, 0));
        page.set_advice(2);
        page.set_advice(2);
        assert_eq!((page.advice(), page.generation()), (2, 1));
        page.set_advice(1);
        assert_eq!((page.advice(), page.generation()), (1, 2));
    }

    #[test]
    fn counters_written_through_the_file_are_seen() {
        use std::os::unix::fs::FileExt;
        let page = ControlPage::create(None).unwrap();
        let file = reopen(&page);
        let write_at = |offset: u64, bytes: &[u8]| file.write_all_at(bytes, offset).unwrap();
        write_at(16, &7u64.to_le_bytes());
        write_at(24, &5u64.to_le_bytes());
        write_at(32, &2u32.to_le_bytes());
        write_at(36, &4u32.to_le_bytes());
        write_at(40, &8u64.to_le_bytes());
        let counters = page.counters();
        assert_eq!(
            counters,
            Counters {
                regions_started: 8,
                regions_completed: 7,
                heartbeats: 5,
                last_team_size: 2,
                seen_generation: 4,
            }
        );
        assert_eq!(counters.progress(), 12);
    }

    #[test]
    fn no_one_can_resize_the_page_under_the_executor() {
        let page = ControlPage::create(None).unwrap();
        let file = reopen(&page);
        for size in [0, 1, PAGE_SIZE as u64 * 2] {
            let err = file.set_len(size).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EPERM), "to {size}: {err}");
        }
        let unsealed = fcntl(file.as_raw_fd(), FcntlArg::F_ADD_SEALS(SealFlag::empty()));
        assert_eq!(unsealed, Err(nix::errno::Errno::EPERM));
        // Still mapped whole: reading every field touches the page again.
        page.set_advice(2);
        assert_eq!(page.advice(), 2);
        assert_eq!(page.counters(), Counters::default());
        assert_eq!(file.metadata().unwrap().len(), PAGE_SIZE as u64);
    }

    #[test]
    fn the_page_is_private_and_leaves_no_file() {
        let page = ControlPage::create(None).unwrap();
        let meta = std::fs::metadata(page.env_value()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let target = std::fs::read_link(page.env_value()).unwrap();
        let target = target.to_string_lossy();
        assert!(target.starts_with("/memfd:"), "{target}");
        let flags = fcntl(page.fd().as_raw_fd(), FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "a job gets it only on purpose");
    }

    #[test]
    fn only_pages_of_executors_that_died_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let page = |pid: u32| {
            dir.path()
                .join(format!("cosched-{pid}-0-3-00112233aabbccdd"))
        };
        let (stale, live) = (page(dead), page(std::process::id()));
        let unrelated = dir.path().join("cosched-notes");
        for file in [&stale, &live, &unrelated] {
            std::fs::write(file, "").unwrap();
        }
        let stale_dir = dir.path().join(format!("cosched-{dead}-1"));
        std::fs::create_dir(&stale_dir).unwrap();
        assert_eq!(remove_stale_pages(dir.path()), 1);
        assert!(!stale.exists());
        assert!(live.exists() && unrelated.exists() && stale_dir.exists());
    }
}
