//! Starting one job's main process: command expansion, environment, output files, and everything that
//! must hold before its first instruction (its cgroups, CPU mask, memory policy, and, under sudo, the
//! invoking user's identity).

use crate::affinity::Mask;
use crate::output_file::{OutputPath, Refused};
use crate::vfork_exec::{self, Failure, Program, Spawned};
use cosched_core::CpuSet;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::stat::Mode;
use nix::unistd::{getgrouplist, Gid, Uid, User};
use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The values of the placeholders a workload's commands may use.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub threads: u32,
    pub bench: PathBuf,
    pub workload_dir: PathBuf,
}

impl Placeholders {
    pub fn expand(&self, arg: &str) -> String {
        arg.replace("{threads}", &self.threads.to_string())
            .replace("{bench}", &self.bench.to_string_lossy())
            .replace("{workload_dir}", &self.workload_dir.to_string_lossy())
    }
}

/// The user a job runs as when cosched runs as root through sudo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvokingUser {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
}

impl InvokingUser {
    /// `SUDO_UID`/`SUDO_GID` when running as root under sudo, else `None` (jobs run as cosched does).
    pub fn from_sudo() -> Option<InvokingUser> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let uid: libc::uid_t = std::env::var("SUDO_UID").ok()?.parse().ok()?;
        let gid: libc::gid_t = std::env::var("SUDO_GID").ok()?.parse().ok()?;
        if uid == 0 {
            return None;
        }
        Some(InvokingUser::with_groups(uid, gid))
    }

    /// The user `uid` with primary group `gid` and the supplementary groups the system gives them.
    pub fn with_groups(uid: libc::uid_t, gid: libc::gid_t) -> InvokingUser {
        InvokingUser {
            uid,
            gid,
            groups: supplementary_groups(uid, gid),
        }
    }

    /// Gives a file or directory the executor created to the invoking user.
    pub fn chown(&self, path: &Path) -> io::Result<()> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
    }
}

fn supplementary_groups(uid: libc::uid_t, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let groups = User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .and_then(|user| CString::new(user.name).ok())
        .and_then(|name| getgrouplist(&name, Gid::from_raw(gid)).ok());
    groups.map_or_else(
        || vec![gid],
        |groups| groups.iter().map(|g| g.as_raw()).collect(),
    )
}

/// The environment that tells a job where it runs: `COSCHED_JOB_ID` and `COSCHED_CPUS` (its partition at
/// start). No `OMP_PLACES`/`OMP_PROC_BIND`: cosched keeps every thread on the job's CPUs itself (cgroup
/// cpuset or affinity, set before exec and reset on every move) and new threads inherit that mask,
/// whereas an OpenMP runtime bound at launch keeps binding the threads it creates later to the launch
/// CPUs. Once the job is moved to other CPUs, that binding names CPUs outside its cpuset and libgomp
/// aborts ("Thread creation failed: Invalid argument"). A job's own binding is left as it is.
pub fn placement_env(job: u32, cpus: &CpuSet) -> Vec<(String, OsString)> {
    vec![
        ("COSCHED_JOB_ID".to_string(), job.to_string().into()),
        ("COSCHED_CPUS".to_string(), cpus.to_string().into()),
    ]
}

/// Where a job's standard output or error goes.
pub enum Output {
    /// A file the executor opened.
    File(File),
    /// A path the job's user named: opened (created, truncated) by the job's own process once it
    /// runs as that user, so that it reaches only what the user may write.
    AsUser(PathBuf),
}

impl Output {
    /// What the child starts with, and the path it is to open itself, if any.
    fn split(self) -> io::Result<(File, Option<(PathBuf, OutputPath)>)> {
        match self {
            Output::File(file) => Ok((file, None)),
            Output::AsUser(path) => {
                let split = OutputPath::new(&path)?;
                let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
                Ok((null, Some((path, split))))
            }
        }
    }
}

/// Everything needed to start one job.
pub struct Launch<'a> {
    pub command: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub placeholders: &'a Placeholders,
    /// Extra environment set by the executor (OMP_NUM_THREADS, COSCHED_CONTROL, LD_PRELOAD).
    pub executor_env: Vec<(String, OsString)>,
    pub stdout: Output,
    pub stderr: Output,
    /// `cgroup.procs` files the process joins before exec.
    pub join: Vec<PathBuf>,
    /// CPU mask set before exec (affinity placement).
    pub mask: Option<Mask>,
    /// NUMA nodes to interleave memory over, if asked.
    pub interleave: Option<CpuSet>,
    pub user: Option<InvokingUser>,
    /// Working directory; cosched's own when `None`.
    pub cwd: Option<PathBuf>,
    /// Start from an empty environment instead of cosched's own.
    pub clear_env: bool,
    /// The one descriptor beyond 0-2 the job inherits (its control page's), at the same number;
    /// every other one of cosched's is closed as the job's program starts.
    pub inherit: Option<RawFd>,
    /// The file mode creation mask the job starts with; cosched's own when `None`.
    pub umask: Option<Mode>,
    /// Bytes any file the job writes may grow to (RLIMIT_FSIZE, set before exec); past it a write
    /// fails and the job gets SIGXFSZ. `None`: cosched's own limit.
    pub file_size_limit: Option<u64>,
}

/// The steps in the child before exec that can fail, told to the parent (`vfork_exec`) so that
/// its error names the step and not just the OS error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    JoinCgroup = 1,
    SetCpus = 2,
    BecomeUser = 3,
    EnterDirectory = 4,
    OpenStdout = 5,
    OpenStderr = 6,
    Descriptors = 7,
    /// The output path is a link another user owns.
    ForeignLinkStdout = 8,
    ForeignLinkStderr = 9,
    LimitFileSize = 10,
}

impl Step {
    fn from_byte(byte: u8) -> Option<Step> {
        [
            Step::JoinCgroup,
            Step::SetCpus,
            Step::BecomeUser,
            Step::EnterDirectory,
            Step::OpenStdout,
            Step::OpenStderr,
            Step::Descriptors,
            Step::ForeignLinkStdout,
            Step::ForeignLinkStderr,
            Step::LimitFileSize,
        ]
        .into_iter()
        .find(|s| *s as u8 == byte)
    }
}

/// Starts the job in a new process group whose id is its pid, without copying the daemon's memory
/// (`vfork_exec`); the executor reaps it by its pid. Everything after dropping to the job's
/// user (entering its working directory, exec) is done with that user's rights only. Errors carry the
/// OS error of the step that failed (the exec of a missing program gives "No such file or
/// directory"; a working directory the user may not enter "Permission denied", naming it).
pub fn spawn(launch: Launch) -> io::Result<Spawned> {
    let args: Vec<String> = launch
        .command
        .iter()
        .map(|a| launch.placeholders.expand(a))
        .collect();
    let program = args
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the job has no command"))?;
    let (stdout, stdout_path) = launch.stdout.split()?;
    let (stderr, stderr_path) = launch.stderr.split()?;
    let stdin = File::open("/dev/null")?;
    let stdout_c = stdout_path.as_ref().map(|(_, c)| c.clone());
    let stderr_c = stderr_path.as_ref().map(|(_, c)| c.clone());
    // As std's Command builds it: cosched's own (unless cleared), the job's over it, the
    // executor's over both.
    let mut env: BTreeMap<OsString, OsString> = match launch.clear_env {
        true => BTreeMap::new(),
        false => std::env::vars_os().collect(),
    };
    let job_env =
        (launch.env.iter()).map(|(k, v)| (k.into(), launch.placeholders.expand(v).into()));
    env.extend(job_env);
    env.extend((launch.executor_env.into_iter()).map(|(k, v)| (k.into(), v)));
    let executable = Program::new(&args, env.into_iter().collect())?;
    let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
    let join: Vec<CString> = launch
        .join
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(invalid)?;
    // Entered in the child once it is the job's user (never by root on the user's behalf).
    let cwd = (launch.cwd.as_ref())
        .map(|dir| CString::new(dir.as_os_str().as_bytes()))
        .transpose()
        .map_err(invalid)?;
    let mask = launch.mask;
    let file_size_limit = launch.file_size_limit;
    let interleave = launch.interleave.map(node_mask);
    let identity = (launch.user.as_ref()).map(|user| (user.groups.clone(), user.gid, user.uid));
    let (inherit, umask) = (launch.inherit, launch.umask);
    let open_limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    // Runs in the child, which shares the daemon's memory: system calls only (vfork_exec.rs).
    let steps = || -> Result<(), (u8, Errno)> {
        let fail = |step: Step| move |errno: Errno| (step as u8, errno);
        for procs in &join {
            write_zero(procs).map_err(fail(Step::JoinCgroup))?;
        }
        if let Some(mask) = &mask {
            mask.apply_to(0)
                .map_err(|e| errno_of(&e))
                .map_err(fail(Step::SetCpus))?;
        }
        if let Some(bytes) = file_size_limit {
            // Before the user is taken on, so that the job cannot raise it again.
            setrlimit(Resource::RLIMIT_FSIZE, bytes, bytes).map_err(fail(Step::LimitFileSize))?;
        }
        if let Some(nodes) = &interleave {
            interleave_memory(nodes);
        }
        if let Some((groups, gid, uid)) = &identity {
            become_user(groups, *gid, *uid).map_err(fail(Step::BecomeUser))?;
        }
        // Before the output files it opens: they get the user's umask too.
        if let Some(mask) = umask {
            nix::sys::stat::umask(mask);
        }
        if let Some(dir) = &cwd {
            // SAFETY: chdir reads the NUL-terminated path `dir` holds.
            Errno::result(unsafe { libc::chdir(dir.as_ptr()) })
                .map_err(fail(Step::EnterDirectory))?;
        }
        open_outputs(stdout_c.as_ref(), stderr_c.as_ref())?;
        close_on_exec_from_3(open_limit).map_err(fail(Step::Descriptors))?;
        if let Some(fd) = inherit {
            cosched_native::control::keep_across_exec(fd)
                .map_err(|e| errno_of(&e))
                .map_err(fail(Step::Descriptors))?;
        }
        Ok(())
    };
    let stdio = [stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()];
    vfork_exec::spawn(&executable, stdio, steps).map_err(|failed| {
        let (step, errno) = match failed {
            Failure::Step(step, errno) => (Step::from_byte(step), errno),
            Failure::Clone(errno) | Failure::Start(errno) => (None, errno),
        };
        let e = io::Error::from(errno);
        let outputs = [&stdout_path, &stderr_path];
        let what = failure(
            step,
            launch.user.as_ref(),
            launch.cwd.as_deref(),
            outputs,
            program,
        );
        io::Error::new(e.kind(), format!("{what}: {e}"))
    })
}

/// The OS error an `io::Error` made from one carries; only such errors come from the child's steps.
fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// In the child: the job's groups, gid and uid, real, effective and saved. Raw system calls, which
/// change this process alone: glibc's wrappers would change every thread of the daemon's, whose
/// memory the child shares.
fn become_user(groups: &[libc::gid_t], gid: libc::gid_t, uid: libc::uid_t) -> Result<(), Errno> {
    let (gid, uid) = (libc::c_long::from(gid), libc::c_long::from(uid));
    // SAFETY: setgroups reads `groups.len()` group ids from `groups`; the others take numbers.
    unsafe {
        Errno::result(libc::syscall(
            libc::SYS_setgroups,
            groups.len() as libc::c_long,
            groups.as_ptr(),
        ))?;
        Errno::result(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        Errno::result(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    }
    Ok(())
}

/// In words, what failed at `step` in the child (`None`: the exec).
fn failure(
    step: Option<Step>,
    user: Option<&InvokingUser>,
    cwd: Option<&Path>,
    [stdout_path, stderr_path]: [&Option<(PathBuf, OutputPath)>; 2],
    program: &str,
) -> String {
    let as_user = user.map(|u| format!(" as uid {}", u.uid));
    let as_user = as_user.unwrap_or_default();
    match step {
        Some(Step::JoinCgroup) => "cannot join the job's cgroup".to_string(),
        Some(Step::SetCpus) => "cannot set the job's CPUs".to_string(),
        Some(Step::LimitFileSize) => "cannot limit the size of the job's files".to_string(),
        Some(Step::BecomeUser) => format!("cannot become the job's user{as_user}"),
        Some(Step::EnterDirectory) => format!(
            "cannot enter the working directory {}{as_user}",
            cwd.unwrap_or(Path::new("")).display()
        ),
        Some(Step::OpenStdout) => output_error(stdout_path, "standard output", &as_user),
        Some(Step::OpenStderr) => output_error(stderr_path, "standard error", &as_user),
        Some(Step::Descriptors) => "cannot close cosched's descriptors".to_string(),
        Some(Step::ForeignLinkStdout) => foreign_link(stdout_path, "standard output"),
        Some(Step::ForeignLinkStderr) => foreign_link(stderr_path, "standard error"),
        None => format!("cannot start {program}"),
    }
}

/// In the child: spreads the memory it allocates over NUMA nodes `nodes` (a bit mask), as far as
/// the kernel can; one without NUMA support refuses, and the job runs anyway.
fn interleave_memory(nodes: &[u64]) {
    // SAFETY: set_mempolicy reads `nodes.len()` words from `nodes`; no crate wraps it.
    unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            3, // MPOL_INTERLEAVE
            nodes.as_ptr(),
            (nodes.len() * 64 + 1) as libc::c_ulong,
        )
    };
}

/// In the child, once it is the job's user: opens the output files the user named onto
/// descriptors 1 and 2; one file for both when they name the same, as Slurm's `-o` alone gives.
fn open_outputs(
    stdout: Option<&OutputPath>,
    stderr: Option<&OutputPath>,
) -> Result<(), (u8, Errno)> {
    let refused = |os: Step, link: Step| {
        move |refusal| match refusal {
            Refused::Os(errno) => (os as u8, errno),
            Refused::ForeignLink => (link as u8, Errno::ELOOP),
        }
    };
    if let Some(path) = stdout {
        path.open_onto(libc::STDOUT_FILENO)
            .map_err(refused(Step::OpenStdout, Step::ForeignLinkStdout))?;
    }
    match stderr {
        Some(path) if Some(path) == stdout => {
            nix::unistd::dup2(libc::STDOUT_FILENO, libc::STDERR_FILENO)
                .map(drop)
                .map_err(|e| (Step::OpenStderr as u8, e))
        }
        Some(path) => path
            .open_onto(libc::STDERR_FILENO)
            .map_err(refused(Step::OpenStderr, Step::ForeignLinkStderr)),
        None => Ok(()),
    }
}

fn output_error(path: &Option<(PathBuf, OutputPath)>, stream: &str, as_user: &str) -> String {
    let path = path.as_ref().map_or(Path::new(""), |(p, _)| p.as_path());
    format!(
        "cannot open {} for the job's {stream}{as_user}",
        path.display()
    )
}

fn foreign_link(path: &Option<(PathBuf, OutputPath)>, stream: &str) -> String {
    let path = path.as_ref().map_or(Path::new(""), |(p, _)| p.as_path());
    format!(
        "{} is a symbolic link another user owns, not followed for the job's {stream}",
        path.display()
    )
}

/// In the child: every descriptor from 3 on, whatever opened it (another thread of the daemon,
/// the daemon's own parent), is closed when the job's program starts. Marked close-on-exec rather
/// than closed, so that the pipes that report a failed step or exec to the parent still work.
/// `limit`: the most descriptors the process may have, for kernels without `close_range`.
fn close_on_exec_from_3(limit: u64) -> Result<(), Errno> {
    // SAFETY: close_range only changes flags of this process's descriptors; no crate wraps it.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if marked == 0 {
        return Ok(());
    }
    for fd in 3..limit.min(libc::c_int::MAX as u64) as RawFd {
        match nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        ) {
            Ok(_) | Err(Errno::EBADF) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writing "0" to `cgroup.procs` moves the writing process into that cgroup.
fn write_zero(path: &CString) -> Result<(), Errno> {
    let fd = nix::fcntl::open(
        path.as_c_str(),
        OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match nix::unistd::write(&fd, b"0")? {
        1 => Ok(()),
        _ => Err(Errno::EIO),
    }
}

fn node_mask(nodes: CpuSet) -> Vec<u64> {
    let mut words = vec![0u64; nodes.iter().max().map_or(1, |n| n as usize / 64 + 1)];
    for node in nodes.iter() {
        words[node as usize / 64] |= 1 << (node % 64);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_learns_its_id_and_partition_and_is_not_bound_to_it() {
        let cpus: CpuSet = "2-3,6".parse().unwrap();
        let env = placement_env(4, &cpus);
        let value = |name: &str| {
            (env.iter())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(value("COSCHED_JOB_ID").as_deref(), Some("4"));
        assert_eq!(value("COSCHED_CPUS").as_deref(), Some("2-3,6"));
        assert_eq!(value("OMP_PLACES"), None);
        assert_eq!(value("OMP_PROC_BIND"), None);
    }

    #[test]
    fn placeholders_expand_everywhere_in_an_argument() {
        let p = Placeholders {
            threads: 4,
            bench: "/b".into(),
            workload_dir: "/w".into(),
        };
        assert_eq!(
            p.expand("{bench}/x --t={threads} {workload_dir}/in"),
            "/b/x --t=4 /w/in"
        );
    }

    fn launch<'a>(
        command: &'a [String],
        output: &Path,
        placeholders: &'a Placeholders,
    ) -> Launch<'a> {
        let file = || File::create(output).unwrap();
        Launch {
            command,
            env: Box::leak(Box::default()),
            placeholders,
            executor_env: Vec::new(),
            stdout: Output::File(file()),
            stderr: Output::File(file()),
            join: Vec::new(),
            mask: None,
            interleave: None,
            user: None,
            cwd: None,
            clear_env: false,
            inherit: None,
            umask: None,
            file_size_limit: None,
        }
    }

    #[test]
    fn a_job_cannot_write_a_file_past_its_file_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("out");
        let command = ["head", "-c", "100000", "/dev/zero"].map(String::from);
        let placeholders = placeholders();
        let mut job = launch(&command, &output, &placeholders);
        job.file_size_limit = Some(4096);
        let status = spawn(job).unwrap().wait().unwrap();
        assert!(!status.success());
        assert_eq!(std::fs::metadata(&output).unwrap().len(), 4096);
    }

    fn placeholders() -> Placeholders {
        Placeholders {
            threads: 1,
            bench: "/".into(),
            workload_dir: "/".into(),
        }
    }

    #[test]
    fn a_missing_program_fails_with_the_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let command = ["/nonexistent/program".to_string()];
        let placeholders = placeholders();
        let err = spawn(launch(&command, &dir.path().join("out"), &placeholders)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("/nonexistent/program"), "{err}");
    }

    /// Minor page faults this thread took so far.
    fn faults() -> i64 {
        // SAFETY: rusage is plain integers, valid zeroed; getrusage writes only into it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
            0
        );
        usage.ru_minflt
    }

    #[test]
    fn starting_a_job_leaves_the_daemons_memory_writable() {
        // A fork write-protects every page the daemon has, so each write after it faults.
        const PAGES: usize = 16384;
        let page = 4096;
        // SAFETY: a fresh private anonymous mapping that only this test uses, unmapped at its end;
        // small pages, so that each one write-protected costs a fault of its own.
        let memory = unsafe {
            let memory = libc::mmap(
                std::ptr::null_mut(),
                PAGES * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(memory, libc::MAP_FAILED);
            libc::madvise(memory, PAGES * page, libc::MADV_NOHUGEPAGE);
            std::slice::from_raw_parts_mut(memory.cast::<u8>(), PAGES * page)
        };
        let touch = |memory: &mut [u8], value| {
            for byte in memory.iter_mut().step_by(page) {
                // Volatile, so that the writes are made and counted.
                // SAFETY: `byte` is a valid, exclusive reference.
                unsafe { std::ptr::write_volatile(byte, value) };
            }
        };
        touch(memory, 1);
        let dir = tempfile::tempdir().unwrap();
        let command = ["true".to_string()];
        let placeholders = placeholders();
        let job = spawn(launch(&command, &dir.path().join("out"), &placeholders)).unwrap();
        assert!(job.wait().unwrap().success());
        let before = faults();
        touch(memory, 2);
        let taken = faults() - before;
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(memory.as_mut_ptr().cast(), PAGES * page) };
        assert!(
            taken < PAGES as i64 / 16,
            "{taken} faults writing {PAGES} pages"
        );
    }

    const SLEEP: [&str; 2] = ["sleep", "60"];

    /// A job that sleeps, writing nothing, into `dir`.
    fn sleeping<'a>(dir: &Path, placeholders: &'a Placeholders) -> Launch<'a> {
        let command: &'a [String] = Box::leak(Box::new(SLEEP.map(String::from)));
        launch(command, &dir.join("out"), placeholders)
    }

    /// `/proc/PID/status` of the job while its program runs, and whether it leads its own process
    /// group; the job is killed and reaped.
    fn status_while_running(job: Launch) -> (String, nix::Result<bool>) {
        let job = spawn(job).unwrap();
        // The program runs once spawn returns, so its status is the job's.
        let status = std::fs::read_to_string(format!("/proc/{}/status", job.id()));
        let pid = nix::unistd::Pid::from_raw(job.id() as i32);
        let leads = nix::unistd::getpgid(Some(pid)).map(|group| group == pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        job.wait().unwrap();
        (status.unwrap(), leads)
    }

    #[test]
    fn a_job_runs_as_its_user_and_the_daemon_keeps_its_own_identity() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root to start a job as another user");
            return;
        }
        let identity = |status: &str| -> Vec<String> {
            (status.lines())
                .filter(|l| ["Uid:", "Gid:", "Groups:"].iter().any(|k| l.starts_with(k)))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect()
        };
        let threads = || -> Vec<Vec<String>> {
            (std::fs::read_dir("/proc/self/task").unwrap())
                .filter_map(|task| {
                    std::fs::read_to_string(task.unwrap().path().join("status")).ok()
                })
                .map(|status| identity(&status))
                .collect()
        };
        let ours = identity(&std::fs::read_to_string("/proc/self/status").unwrap());
        let dir = tempfile::tempdir().unwrap();
        let placeholders = placeholders();
        let mut job = sleeping(dir.path(), &placeholders);
        job.user = Some(InvokingUser {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        });
        let (status, _) = status_while_running(job);
        assert_eq!(
            identity(&status),
            [
                "Uid: 65534 65534 65534 65534",
                "Gid: 65534 65534 65534 65534",
                "Groups: 65534"
            ]
        );
        for thread in threads() {
            assert_eq!(thread, ours);
        }
    }

    #[test]
    fn a_job_leads_its_group_with_no_signal_blocked_and_sigpipe_at_its_default() {
        let mask = |status: &str, field: &str| -> u64 {
            let line = status.lines().find_map(|l| l.strip_prefix(field)).unwrap();
            u64::from_str_radix(line.trim(), 16).unwrap()
        };
        let ours = std::fs::read_to_string("/proc/self/status").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let placeholders = placeholders();
        let (status, group) = status_while_running(sleeping(dir.path(), &placeholders));
        assert_eq!(group, Ok(true));
        assert_eq!(mask(&status, "SigBlk:"), 0);
        let sigpipe = 1 << (libc::SIGPIPE - 1);
        assert_ne!(mask(&ours, "SigIgn:") & sigpipe, 0, "Rust ignores SIGPIPE");
        assert_eq!(mask(&status, "SigIgn:"), mask(&ours, "SigIgn:") & !sigpipe);
    }

    #[test]
    fn a_program_is_looked_for_on_the_jobs_path_as_execvp_does() {
        let dir = tempfile::tempdir().unwrap();
        let (refused, found) = (dir.path().join("refused"), dir.path().join("found"));
        for (bin, mode) in [(&refused, 0o644), (&found, 0o755)] {
            std::fs::create_dir(bin).unwrap();
            // No `#!` line: a file the kernel cannot execute runs as a shell script.
            std::fs::write(bin.join("prog"), "echo \"found $0 $1\"\n").unwrap();
            std::fs::set_permissions(
                bin.join("prog"),
                std::os::unix::fs::PermissionsExt::from_mode(mode),
            )
            .unwrap();
        }
        let output = dir.path().join("out");
        let command = ["prog", "arg"].map(String::from);
        let placeholders = placeholders();
        let with_path = |path: &Path| {
            let mut job = launch(&command, &output, &placeholders);
            let path = format!("/nonexistent:{}:{}", refused.display(), path.display());
            job.env = Box::leak(Box::new(BTreeMap::from([("PATH".to_string(), path)])));
            job.clear_env = true;
            job
        };
        let job = spawn(with_path(&found)).unwrap();
        assert!(job.wait().unwrap().success());
        let said = std::fs::read_to_string(&output).unwrap();
        assert_eq!(
            said,
            format!("found {} arg\n", found.join("prog").display())
        );
        // Found nowhere but where it may not be executed.
        let err = spawn(with_path(Path::new("/nonexistent"))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert_eq!(
            err.to_string(),
            "cannot start prog: Permission denied (os error 13)"
        );
    }

    #[test]
    fn the_working_directory_is_entered_as_the_jobs_user() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root to start a job as another user");
            return;
        }
        // A readable directory inside a private one of root's: uid 65534 cannot pass through.
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("public");
        std::fs::create_dir(&inside).unwrap();
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap()
        };
        mode(dir.path(), 0o700);
        mode(&inside, 0o755);
        let command = ["true".to_string()];
        let placeholders = placeholders();
        let mut job = launch(&command, &dir.path().join("out"), &placeholders);
        job.cwd = Some(inside.clone());
        job.user = Some(InvokingUser {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        });
        let err = spawn(job).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        let expected = format!(
            "cannot enter the working directory {} as uid 65534",
            inside.display()
        );
        assert!(err.to_string().contains(&expected), "{err}");
        // Root's own job enters it.
        let mut own = launch(&command, &dir.path().join("out"), &placeholders);
        own.cwd = Some(inside);
        assert!(spawn(own).unwrap().wait().unwrap().success());
    }
}
