//! Opening an output file a job's user named (`submit -o/-e`), in the job's process once it runs as
//! that user: a symbolic link at that path is followed only if the user or root owns it, the rule
//! of the kernel's `fs.protected_symlinks` for sticky directories, kept wherever the path lies. Otherwise
//! another user could plant a link in a shared directory and have the job truncate a file of its
//! user's through it.

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::stat::Mode;
use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The longest link target read; a longer one is refused as the kernel refuses such a path.
const TARGET_BYTES: usize = libc::PATH_MAX as usize;

/// A path split, before the job's process starts, into its directory and last component, so that
/// the child allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPath {
    dir: CString,
    name: CString,
}

/// Why the child did not open the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The OS refused.
    Os(Errno),
    /// The path is a link another user (not root) owns.
    ForeignLink,
}

impl OutputPath {
    pub fn new(path: &Path) -> io::Result<OutputPath> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        };
        match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => Ok(OutputPath {
                dir: c(dir.as_os_str().as_bytes())?,
                name: c(name.as_bytes())?,
            }),
            // `/`, `..` or a bare name: opened as given, from the working directory.
            _ => Ok(OutputPath {
                dir: c(b".")?,
                name: c(path.as_os_str().as_bytes())?,
            }),
        }
    }

    /// Opens (creates, truncates) the file as descriptor `target`, left open across exec. Runs
    /// in the job's process before exec: system calls only, on a buffer of the stack.
    pub fn open_onto(&self, target: RawFd) -> Result<(), Refused> {
        let dir = nix::fcntl::open(
            self.dir.as_c_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(Refused::Os)?;
        // SAFETY: `open` just returned this descriptor, and nothing else owns it.
        let dir = unsafe { OwnedFd::from_raw_fd(dir) };
        let at = Some(std::os::fd::AsRawFd::as_raw_fd(&dir));
        // Non-blocking, or a FIFO without a reader would hold the executor, which waits for the
        // exec; the job itself writes blocking, as to any file.
        let write = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_CLOEXEC
            | OFlag::O_NONBLOCK;
        let mode = Mode::from_bits_truncate(0o644);
        let fd = match nix::fcntl::openat(at, self.name.as_c_str(), write | OFlag::O_NOFOLLOW, mode)
        {
            // A link gives ELOOP, or EACCES where another user's link lies in a sticky
            // world-writable directory (the kernel refuses O_CREAT there).
            Err(errno @ (Errno::ELOOP | Errno::EACCES)) => {
                self.through_own_link(at, write, mode, errno)?
            }
            opened => opened.map_err(Refused::Os)?,
        };
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        nix::fcntl::fcntl(raw, FcntlArg::F_SETFL(OFlag::empty())).map_err(Refused::Os)?;
        nix::unistd::dup2(raw, target).map_err(Refused::Os)?;
        Ok(())
    }

    /// Opens what the link at the path names, if the user or root owns that link. The link is
    /// held open while its owner is checked and its target read, so that no link swapped in
    /// meanwhile is read instead. `refused`: the error of the open that did not follow it, which
    /// stands if the path is no link.
    fn through_own_link(
        &self,
        at: Option<RawFd>,
        write: OFlag,
        mode: Mode,
        refused: Errno,
    ) -> Result<RawFd, Refused> {
        let link = nix::fcntl::openat(
            at,
            self.name.as_c_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| Refused::Os(refused))?;
        // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
        let link = unsafe { OwnedFd::from_raw_fd(link) };
        let raw = std::os::fd::AsRawFd::as_raw_fd(&link);
        let stat = nix::sys::stat::fstat(raw).map_err(Refused::Os)?;
        if stat.st_mode & libc::S_IFMT != libc::S_IFLNK {
            return Err(Refused::Os(refused));
        }
        // Root's links are trusted as root is (`/dev/stdout` is one).
        if stat.st_uid != nix::unistd::getuid().as_raw() && stat.st_uid != 0 {
            return Err(Refused::ForeignLink);
        }
        let mut target = [0u8; TARGET_BYTES + 1];
        // SAFETY: readlinkat writes at most `TARGET_BYTES` bytes into `target`, which is one byte
        // longer, so the target stays NUL-terminated; nix's readlinkat allocates, which a child
        // before exec must not.
        let read = unsafe {
            libc::readlinkat(raw, c"".as_ptr(), target.as_mut_ptr().cast(), TARGET_BYTES)
        };
        let read = usize::try_from(read).map_err(|_| Refused::Os(Errno::last()))?;
        if read == TARGET_BYTES {
            return Err(Refused::Os(Errno::ENAMETOOLONG));
        }
        let target = std::ffi::CStr::from_bytes_until_nul(&target)
            .map_err(|_| Refused::Os(Errno::EINVAL))?;
        nix::fcntl::openat(at, target, write, mode).map_err(Refused::Os)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// Opens `path` as a child would onto a scratch descriptor and writes `text` through it.
    fn write_through(path: &Path, text: &str) -> Result<(), Refused> {
        let mut scratch = std::fs::File::open("/dev/null").unwrap();
        let target = std::os::fd::AsRawFd::as_raw_fd(&scratch);
        OutputPath::new(path).unwrap().open_onto(target)?;
        std::io::Write::write_all(&mut scratch, text.as_bytes()).unwrap();
        Ok(())
    }

    #[test]
    fn a_file_is_created_and_a_link_of_ones_own_followed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        write_through(&out, "one").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "one");
        symlink("out", dir.path().join("relative")).unwrap();
        write_through(&dir.path().join("relative"), "two").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "two");
    }

    #[test]
    fn a_fifo_without_a_reader_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(write_through(&fifo, ""), Err(Refused::Os(Errno::ENXIO)));
    }

    #[test]
    fn a_link_another_user_owns_is_not_followed() {
        if !nix::unistd::getuid().is_root() {
            eprintln!("SKIPPED: needs root to give a link to another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let planted = dir.path().join("planted");
        symlink(&victim, &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65533), None).unwrap();
        assert_eq!(write_through(&planted, "x"), Err(Refused::ForeignLink));
        // In a sticky world-writable directory, where the kernel refuses O_CREAT on it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(write_through(&planted, "x"), Err(Refused::ForeignLink));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }
}
