//! Starting a program without copying the daemon: `clone(CLONE_VM | CLONE_VFORK)` on a small stack of
//! its own, as glibc's `posix_spawn` does, then the caller's steps and `execve`.
//!
//! Why not `fork`: std's `Command` with a `pre_exec` closure forks, and a fork copies the page tables
//! of the whole daemon (about 100 MiB resident with 100,000 jobs of history) from the executor's
//! thread, write-protecting every page; until the child execs, and for each page once after, every
//! write of the daemon's takes a copy-on-write fault (16,384 for 64 MiB written after one start;
//! the launch tests check that a start costs almost none). `copy_page_range` led a `perf record`
//! of `cosched bench daemon --attack` (3.2% of all samples on a busy 2-CPU machine, none with this
//! module), and submissions that arrived meanwhile waited on the memory map.
//! Why not `posix_spawn`: it cannot join cgroups, set the mask, limits, memory policy and user, open
//! the outputs as that user, or close descriptors as a job needs.
//!
//! The child shares the daemon's memory and runs on the parent thread's thread-local area while that
//! thread waits in `clone`, and other threads of the daemon go on meanwhile. So the child only makes
//! system calls on data prepared in the parent: it never allocates, locks, panics or unwinds, and it
//! changes its credentials with raw system calls, never glibc's wrappers, which would broadcast the
//! change to every thread of the daemon. The one thread-local value it touches is `errno`, the
//! waiting thread's, which the parent does not read across the call.

use nix::errno::Errno;
use std::cell::Cell;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicI32, Ordering};

/// Where a program without a `/` is looked for when the environment has no `PATH`: execvp's
/// default, which the job got before.
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// The child's stack. Most of it is never touched, so never backed by memory; the steps' deepest
/// frame holds a link target of `PATH_MAX` bytes, and debug builds use large frames.
const STACK_BYTES: usize = 256 * 1024;

/// What the child executes, prepared in the parent so that the child allocates nothing.
pub struct Program {
    /// Paths to try in turn, from `PATH` as execvp searches it.
    candidates: Vec<CString>,
    /// What `argv_pointers` and `envp_pointers` point to.
    _strings: [Vec<CString>; 2],
    argv_pointers: Vec<*const libc::c_char>,
    envp_pointers: Vec<*const libc::c_char>,
    /// `/bin/sh`, the candidate, then the arguments: how execvp runs a file the kernel does not
    /// know how to execute. The child writes the candidate into the second slot.
    script_argv: Vec<Cell<*const libc::c_char>>,
}

impl Program {
    /// `args[0]` is the program; `env` the whole environment it gets, whose `PATH` it is looked up
    /// on.
    pub fn new(args: &[String], env: Vec<(OsString, OsString)>) -> io::Result<Program> {
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
        let argv: Vec<CString> = (args.iter())
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let path = (env.iter())
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| DEFAULT_PATH.into());
        let program = args.first().map_or("", String::as_str);
        let candidates = candidates(program, &path).map_err(invalid)?;
        let envp: Vec<CString> = (env.into_iter())
            .map(|(k, v)| {
                let mut entry = k.into_vec();
                entry.push(b'=');
                entry.extend(v.into_vec());
                CString::new(entry)
            })
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let pointers = |strings: &[CString]| {
            let mut pointers: Vec<_> = strings.iter().map(|s| s.as_ptr()).collect();
            pointers.push(std::ptr::null());
            pointers
        };
        let argv_pointers = pointers(&argv);
        let envp_pointers = pointers(&envp);
        let script_argv = [c"/bin/sh".as_ptr(), std::ptr::null()]
            .into_iter()
            .chain(argv_pointers.iter().skip(1).copied())
            .map(Cell::new)
            .collect();
        Ok(Program {
            candidates,
            _strings: [argv, envp],
            argv_pointers,
            envp_pointers,
            script_argv,
        })
    }
}

/// The paths execvp would try for `program`: itself if it names a directory, else each element
/// of `path` in turn, an empty one meaning the working directory.
fn candidates(program: &str, path: &OsStr) -> Result<Vec<CString>, std::ffi::NulError> {
    if program.is_empty() {
        return Ok(Vec::new());
    }
    if program.contains('/') {
        return Ok(vec![CString::new(program)?]);
    }
    (path.as_bytes().split(|&b| b == b':'))
        .map(|dir| match dir {
            [] => CString::new(program),
            dir => {
                let mut full = dir.to_vec();
                if !dir.ends_with(b"/") {
                    full.push(b'/');
                }
                full.extend_from_slice(program.as_bytes());
                CString::new(full)
            }
        })
        .collect()
}

/// Why no program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The parent could not make a child (no memory for its stack, too many processes).
    Clone(Errno),
    /// The caller's steps failed: the step's number and the OS error. The child has been reaped.
    Step(u8, Errno),
    /// The standard descriptors, the process group or the exec failed. The child has been reaped.
    Start(Errno),
}

/// A started program: it has exec'd. Its parent reaps it (`wait4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spawned {
    pid: libc::pid_t,
}

impl Spawned {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    #[cfg(test)]
    pub fn wait(&self) -> io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let mut status = 0;
        loop {
            // SAFETY: waitpid writes only into `status`.
            match unsafe { libc::waitpid(self.pid, &mut status, 0) } {
                -1 if Errno::last() == Errno::EINTR => continue,
                -1 => return Err(io::Error::last_os_error()),
                _ => return Ok(std::process::ExitStatus::from_raw(status)),
            }
        }
    }
}

/// What the child reads from the parent's frame, and where it leaves why it failed.
struct Shared<'a, F> {
    program: &'a Program,
    stdio: [RawFd; 3],
    steps: F,
    report: Report,
}

/// Why the child failed, written by the child into the parent's memory, read once it is gone.
#[derive(Default)]
struct Report {
    /// 0 while nothing failed; else the step (`START` for the start itself).
    step: AtomicI32,
    errno: AtomicI32,
}

impl Report {
    fn fail(&self, step: i32, errno: Errno) -> ! {
        self.errno.store(errno as i32, Ordering::Release);
        self.step.store(step, Ordering::Release);
        // SAFETY: ends this child alone (it is its own thread group), running no exit handlers.
        unsafe { libc::_exit(127) }
    }
}

/// Not a caller's step: the standard descriptors, the process group, or the exec.
const START: i32 = 256;

/// Starts `program` in a new process that leads its own process group, with `stdio` as its
/// descriptors 0, 1 and 2, every signal at its default action and none blocked, after `steps` ran
/// in it. Returns once the program runs or the child has failed and been reaped.
///
/// `steps` runs in the child, which shares the caller's memory: it may only make system calls on
/// data prepared before (see the module's documentation), and reports a failure as its step's
/// number and the OS error.
pub fn spawn<F>(program: &Program, stdio: [RawFd; 3], steps: F) -> Result<Spawned, Failure>
where
    F: FnMut() -> Result<(), (u8, Errno)>,
{
    let stack = Stack::new().map_err(Failure::Clone)?;
    let mut shared = Shared {
        program,
        stdio,
        steps,
        report: Report::default(),
    };
    let blocked = BlockAll::new();
    // SAFETY: CLONE_VFORK keeps this thread in clone until the child has exec'd or exited, so
    // `shared` and the stack it runs on outlive the child's use of them; the child touches only
    // `shared` and its own stack (see `child`). Without CLONE_FILES or CLONE_SIGHAND, the
    // descriptors and signal actions it changes are its own copies.
    let pid = unsafe {
        libc::clone(
            child::<F>,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut shared as *mut Shared<F>).cast(),
        )
    };
    let cloned = Errno::result(pid);
    drop(blocked);
    drop(stack);
    let pid = cloned.map_err(Failure::Clone)?;
    let errno = Errno::from_raw(shared.report.errno.load(Ordering::Acquire));
    let failure = match shared.report.step.load(Ordering::Acquire) {
        0 => return Ok(Spawned { pid }),
        START => Failure::Start(errno),
        step => Failure::Step(step as u8, errno),
    };
    // The child has exited (it failed before exec): reaped here, as the caller never learns its pid.
    let mut status = 0;
    // SAFETY: waitpid writes only into `status`.
    while unsafe { libc::waitpid(pid, &mut status, 0) } == -1 && Errno::last() == Errno::EINTR {}
    Err(failure)
}

/// The child's stack: an anonymous mapping with a guard page at its low end, so that an overflow
/// faults instead of writing over the daemon's memory.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new() -> Result<Stack, Errno> {
        let guard = page_size();
        let len = STACK_BYTES + guard;
        // SAFETY: a fresh private anonymous mapping, which nothing else refers to.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let stack = Stack { base, len };
        // SAFETY: the first page of the mapping just made; nothing uses it yet.
        Errno::result(unsafe { libc::mprotect(base, guard, libc::PROT_NONE) })?;
        Ok(stack)
    }

    /// Where the stack starts: its high end, as stacks grow down on Linux's targets.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, which the child's first push moves below.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; the child that used it has exec'd or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Every signal blocked in the calling thread while it lives, as posix_spawn does: the child
/// starts with them blocked, so no handler of the daemon's runs on the child's stack before the
/// child has reset them all. Raw system calls: glibc's wrappers leave its own two signals out.
struct BlockAll {
    previous: u64,
}

/// The kernel's signal set as rt_sigprocmask takes it: one bit per signal, 64 signals.
const SIGSET_BYTES: libc::c_long = 8;
const SIGNALS: libc::c_int = 64;

impl BlockAll {
    fn new() -> BlockAll {
        let all: u64 = !0;
        let mut previous: u64 = 0;
        // SAFETY: rt_sigprocmask reads one kernel signal set from `all` and writes one to
        // `previous`; it only changes this thread's mask. It cannot fail with these arguments.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &all as *const u64,
                &mut previous as *mut u64,
                SIGSET_BYTES,
            )
        };
        BlockAll { previous }
    }
}

impl Drop for BlockAll {
    fn drop(&mut self) {
        set_mask(self.previous);
    }
}

fn set_mask(mask: u64) {
    // SAFETY: as in `BlockAll::new`.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            SIGSET_BYTES,
        )
    };
}

/// The child: system calls only, then exec or `_exit`.
extern "C" fn child<F>(arg: *mut libc::c_void) -> libc::c_int
where
    F: FnMut() -> Result<(), (u8, Errno)>,
{
    // SAFETY: `spawn` passed its `Shared<F>`, alive until this child execs or exits, and untouched
    // by the parent meanwhile.
    let Shared {
        program,
        stdio,
        steps,
        report,
    } = unsafe { &mut *arg.cast::<Shared<F>>() };
    default_signal_actions();
    set_mask(0);
    for (target, &fd) in stdio.iter().enumerate() {
        if let Err(errno) = onto(fd, target as RawFd) {
            report.fail(START, errno);
        }
    }
    // SAFETY: setpgid only changes this process's group.
    if let Err(errno) = Errno::result(unsafe { libc::setpgid(0, 0) }) {
        report.fail(START, errno);
    }
    if let Err((step, errno)) = steps() {
        report.fail(i32::from(step), errno);
    }
    report.fail(START, exec(program))
}

/// `fd` as descriptor `target`, open across exec.
fn onto(fd: RawFd, target: RawFd) -> Result<(), Errno> {
    if fd == target {
        // SAFETY: clears the close-on-exec flag of one of this process's descriptors.
        return Errno::result(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }).map(drop);
    }
    // SAFETY: dup2 only changes this process's descriptor table (a copy of the daemon's).
    Errno::result(unsafe { libc::dup2(fd, target) }).map(drop)
}

/// Every signal the daemon handles back to its default action in the child (the child has its own
/// copy of the actions). Ignored ones stay ignored, as across exec, but SIGPIPE, which every Rust
/// program ignores and std's `Command` gave back to the jobs it started. glibc keeps its two
/// internal signals to itself and refuses them, which leaves them to exec, which resets them.
fn default_signal_actions() {
    for signal in 1..=SIGNALS {
        // SAFETY: sigaction reads and writes one action in this process's own table; a zeroed
        // `sigaction` is a valid value to be overwritten.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
                continue;
            }
            let ignored = action.sa_sigaction == libc::SIG_IGN && signal != libc::SIGPIPE;
            if action.sa_sigaction == libc::SIG_DFL || ignored {
                continue;
            }
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
    }
}

/// Tries each candidate with execvp's rules: on to the next where the file is not there, noting a
/// refusal and going on, and stopping at any other error. Returns only on failure: the refusal if
/// there was one, else the last error.
fn exec(program: &Program) -> Errno {
    let mut refused = false;
    let mut last = Errno::ENOENT;
    for candidate in &program.candidates {
        // SAFETY: every pointer array ends with a null pointer, and the strings they point to live
        // in `program`, which outlives the call.
        unsafe {
            libc::execve(
                candidate.as_ptr(),
                program.argv_pointers.as_ptr(),
                program.envp_pointers.as_ptr(),
            )
        };
        last = Errno::last();
        if last == Errno::ENOEXEC {
            last = exec_script(program, candidate);
        }
        match last {
            Errno::EACCES => refused = true,
            Errno::ENOENT | Errno::ESTALE | Errno::ENOTDIR | Errno::ENODEV | Errno::ETIMEDOUT => {}
            _ => return last,
        }
    }
    match refused {
        true => Errno::EACCES,
        false => last,
    }
}

/// A file without a known format runs as a shell script, as execvp runs it.
fn exec_script(program: &Program, candidate: &CString) -> Errno {
    if let Some(slot) = program.script_argv.get(1) {
        slot.set(candidate.as_ptr());
    }
    // SAFETY: as in `exec`: `script_argv` ends with the null pointer that ends `argv_pointers`,
    // and a `Cell` of a pointer is laid out as the pointer.
    unsafe {
        libc::execve(
            c"/bin/sh".as_ptr(),
            program.script_argv.as_ptr().cast(),
            program.envp_pointers.as_ptr(),
        )
    };
    Errno::last()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(program: &str, path: &str) -> Vec<String> {
        let found = candidates(program, OsStr::new(path)).unwrap();
        found
            .into_iter()
            .map(|c| c.into_string().unwrap())
            .collect()
    }

    #[test]
    fn a_program_is_looked_for_on_each_path_element_in_turn() {
        assert_eq!(
            paths("ls", "/usr/local/bin:/bin/::rel"),
            ["/usr/local/bin/ls", "/bin/ls", "ls", "rel/ls"]
        );
        assert_eq!(paths("./x", "/bin"), ["./x"]);
        assert_eq!(paths("/bin/ls", "/usr/bin"), ["/bin/ls"]);
        assert!(paths("", "/bin").is_empty());
    }

    #[test]
    fn without_path_in_the_environment_execvps_default_is_searched() {
        let program = Program::new(&["sh".to_string()], Vec::new()).unwrap();
        let found: Vec<_> = program.candidates.iter().map(|c| c.to_bytes()).collect();
        assert_eq!(found, [&b"/bin/sh"[..], b"/usr/bin/sh"]);
    }
}
