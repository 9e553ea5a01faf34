//! The executor's end of a job's control page (layout: `docs/control-page.md`, version 1).
//!
//! The executor creates the page, writes the advice and reads the progress counters the job's
//! processes write back through `libcosched-omp.so` or `cosched.h`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `CSCH` read as a little-endian u32.
pub const MAGIC: u32 = 0x4843_5343;
pub const VERSION: u32 = 1;
pub const PAGE_SIZE: usize = 4096;
/// Environment variable through which a job learns the path of its control page.
pub const CONTROL_ENV: &str = "COSCHED_CONTROL";

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

/// A mapped control page; the file is removed when the page is dropped.
#[derive(Debug)]
pub struct ControlPage {
    path: PathBuf,
    map: NonNull<libc::c_void>,
}

// SAFETY: the mapping is only accessed through atomics, from any thread.
unsafe impl Send for ControlPage {}
// SAFETY: as for Send.
unsafe impl Sync for ControlPage {}

impl ControlPage {
    /// Creates the page file at `path`, which must not exist (a link there is not followed), maps it
    /// and writes a version-1 header with no advice. The magic is written last so a job never sees
    /// a half-initialised page as valid.
    pub fn create(path: impl AsRef<Path>) -> io::Result<ControlPage> {
        ControlPage::create_owned(path.as_ref(), None)
    }

    /// [`ControlPage::create`] in `dir`, named `<prefix>-<random>` so that no other user can guess the
    /// name and be there first, and given to `owner` (uid, gid) by its descriptor: a directory
    /// everyone may write to, such as `/dev/shm`, is safe for a root executor to create pages in.
    pub fn create_unguessable(
        dir: &Path,
        prefix: &str,
        owner: Option<(u32, u32)>,
    ) -> io::Result<ControlPage> {
        let mut random = [0u8; 8];
        for _ in 0..8 {
            File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut random))
                .map_err(|e| with_path(e, "read", Path::new("/dev/urandom")))?;
            let path = dir.join(format!("{prefix}-{:016x}", u64::from_ne_bytes(random)));
            match ControlPage::create_owned(&path, owner) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                created => return created,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "cannot create a control page in {}: every name tried was taken",
                dir.display()
            ),
        ))
    }

    fn create_owned(path: &Path, owner: Option<(u32, u32)>) -> io::Result<ControlPage> {
        let path = path.to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
            .map_err(|e| with_path(e, "create control page", &path))?;
        let created = ControlPage::map_new(&file, &path);
        let owned = owner.map_or(Ok(()), |(uid, gid)| {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                .map_err(|e| with_path(e, "give away control page", &path))
        });
        match (created, owned) {
            (Ok(page), Ok(())) => Ok(page),
            // Dropping the page removes the file.
            (Ok(_), Err(e)) => Err(e),
            (Err(e), _) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    fn map_new(file: &File, path: &Path) -> io::Result<ControlPage> {
        file.set_len(PAGE_SIZE as u64)
            .map_err(|e| with_path(e, "size control page", path))?;
        let page = ControlPage {
            map: map_shared(file).map_err(|e| with_path(e, "map control page", path))?,
            path: path.to_path_buf(),
        };
        let layout = page.layout();
        layout.version.store(VERSION, Ordering::Relaxed);
        layout.magic.store(MAGIC, Ordering::Release);
        Ok(page)
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        let _ = std::fs::remove_file(&self.path);
    }
}

fn map_shared(file: &File) -> io::Result<NonNull<libc::c_void>> {
    use std::os::fd::AsRawFd;
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

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
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

    #[test]
    fn create_writes_a_header_other_processes_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        let page = ControlPage::create(&path).unwrap();
        page.set_advice(3);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), PAGE_SIZE);
        assert_eq!(&bytes[0..4], b"CSCH");
        assert_eq!(read_u32(&bytes, 4), VERSION);
        assert_eq!(read_u32(&bytes, 8), 3);
        assert_eq!(read_u32(&bytes, 12), 1);
        assert!(bytes[16..].iter().all(|&b| b == 0));
    }

    #[test]
    fn advice_changes_bump_the_generation_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let page = ControlPage::create(dir.path().join("page")).unwrap();
        assert_eq!((page.advice(), page.generation()), (0, 0));
        page.set_advice(2);
        page.set_advice(2);
        assert_eq!((page.advice(), page.generation()), (2, 1));
        page.set_advice(1);
        assert_eq!((page.advice(), page.generation()), (1, 2));
    }

    #[test]
    fn counters_written_through_the_file_are_seen() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        let page = ControlPage::create(&path).unwrap();
        let mut file = OpenOptions::new().write(true).open(&path).unwrap();
        let mut write_at = |offset: u64, bytes: &[u8]| {
            file.seek(SeekFrom::Start(offset)).unwrap();
            file.write_all(bytes).unwrap();
        };
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
    fn drop_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page");
        drop(ControlPage::create(&path).unwrap());
        assert!(!path.exists());
    }

    #[test]
    fn a_link_where_a_page_would_go_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let link = dir.path().join("page");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = ControlPage::create(&link).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn unguessable_pages_have_distinct_private_names() {
        let dir = tempfile::tempdir().unwrap();
        let a = ControlPage::create_unguessable(dir.path(), "job-1", None).unwrap();
        let b = ControlPage::create_unguessable(dir.path(), "job-1", None).unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        let random = name.strip_prefix("job-1-").unwrap();
        assert_eq!(random.len(), 16, "{name}");
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn create_in_a_missing_directory_names_the_path() {
        let err = ControlPage::create("/nonexistent-dir/page").unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/page"), "{err}");
    }
}
