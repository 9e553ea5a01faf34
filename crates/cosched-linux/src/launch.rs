//! Starting one job's main process: command expansion, environment, output files, and everything that
//! must hold before its first instruction (its cgroups, CPU mask, memory policy, and, under sudo, the
//! invoking user's identity).

use crate::affinity::Mask;
use crate::output_file::{OutputPath, Refused};
use cosched_core::CpuSet;
use nix::fcntl::OFlag;
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
use nix::sys::stat::Mode;
use nix::unistd::{chdir, getgrouplist, setgid, setgroups, setuid, Gid, Uid, User};
use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    fn split(self) -> io::Result<(Stdio, Option<(PathBuf, OutputPath)>)> {
        match self {
            Output::File(file) => Ok((file.into(), None)),
            Output::AsUser(path) => {
                let split = OutputPath::new(&path)?;
                Ok((Stdio::null(), Some((path, split))))
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

/// The steps between fork and exec that can fail, told to the parent through a pipe so that its
/// error names the step and not just the OS error.
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

/// Starts the job in a new process group whose id is its pid. Everything after dropping to the job's
/// user (entering its working directory, exec) is done with that user's rights only. Errors carry the
/// OS error of the step that failed (the exec of a missing program gives "No such file or
/// directory"; a working directory the user may not enter "Permission denied", naming it).
pub fn spawn(launch: Launch) -> io::Result<Child> {
    let args: Vec<String> = launch
        .command
        .iter()
        .map(|a| launch.placeholders.expand(a))
        .collect();
    let (program, rest) = args
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the job has no command"))?;
    let (stdout, stdout_path) = launch.stdout.split()?;
    let (stderr, stderr_path) = launch.stderr.split()?;
    let stdout_c = stdout_path.as_ref().map(|(_, c)| c.clone());
    let stderr_c = stderr_path.as_ref().map(|(_, c)| c.clone());
    let mut command = Command::new(program);
    command
        .args(rest)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if launch.clear_env {
        command.env_clear();
    }
    let env = launch
        .env
        .iter()
        .map(|(k, v)| (k, launch.placeholders.expand(v)));
    command.envs(env).envs(launch.executor_env);
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
    let identity = launch.user.as_ref().map(|user| {
        let groups: Vec<Gid> = user.groups.iter().map(|&g| Gid::from_raw(g)).collect();
        (groups, Gid::from_raw(user.gid), Uid::from_raw(user.uid))
    });
    let (inherit, umask) = (launch.inherit, launch.umask);
    let open_limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    let (failed_step, report_step) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let in_child = move || -> io::Result<()> {
        let report = &report_step;
        let fail = |step: Step| {
            move |e: io::Error| {
                let _ = nix::unistd::write(report, &[step as u8]);
                e
            }
        };
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
        for procs in &join {
            write_zero(procs).map_err(fail(Step::JoinCgroup))?;
        }
        if let Some(mask) = &mask {
            mask.apply_to(0).map_err(fail(Step::SetCpus))?;
        }
        if let Some(bytes) = file_size_limit {
            // Before the user is taken on, so that the job cannot raise it again.
            setrlimit(Resource::RLIMIT_FSIZE, bytes, bytes)
                .map_err(|e| fail(Step::LimitFileSize)(e.into()))?;
        }
        if let Some(nodes) = &interleave {
            interleave_memory(nodes);
        }
        if let Some((groups, gid, uid)) = &identity {
            let become_user = || -> nix::Result<()> {
                setgroups(groups)?;
                setgid(*gid)?;
                setuid(*uid)
            };
            become_user().map_err(|e| fail(Step::BecomeUser)(e.into()))?;
        }
        // Before the output files it opens: they get the user's umask too.
        if let Some(mask) = umask {
            nix::sys::stat::umask(mask);
        }
        if let Some(dir) = &cwd {
            chdir(dir.as_c_str()).map_err(|e| fail(Step::EnterDirectory)(e.into()))?;
        }
        open_outputs(stdout_c.as_ref(), stderr_c.as_ref())
            .map_err(|(step, e)| fail(step)(e.into()))?;
        close_on_exec_from_3(open_limit).map_err(fail(Step::Descriptors))?;
        if let Some(fd) = inherit {
            cosched_native::control::keep_across_exec(fd).map_err(fail(Step::Descriptors))?;
        }
        Ok(())
    };
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system calls
    // on data prepared above; it allocates nothing.
    unsafe { command.pre_exec(in_child) };
    let spawned = command.spawn();
    // The pipe's write end goes with the closure: what the child wrote can be read to its end.
    drop(command);
    spawned.map_err(|e| {
        let mut byte = [0u8];
        let step = match nix::unistd::read(failed_step.as_raw_fd(), &mut byte) {
            Ok(1) => Step::from_byte(byte[0]),
            _ => None,
        };
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
) -> Result<(), (Step, nix::Error)> {
    let refused = |os: Step, link: Step| {
        move |refusal| match refusal {
            Refused::Os(errno) => (os, errno),
            Refused::ForeignLink => (link, nix::errno::Errno::ELOOP),
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
                .map_err(|e| (Step::OpenStderr, e))
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
fn close_on_exec_from_3(limit: u64) -> io::Result<()> {
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
            Ok(_) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writing "0" to `cgroup.procs` moves the writing process into that cgroup.
fn write_zero(path: &CString) -> io::Result<()> {
    let fd = nix::fcntl::open(
        path.as_c_str(),
        OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match nix::unistd::write(&fd, b"0")? {
        1 => Ok(()),
        _ => Err(io::Error::other("short write to cgroup.procs")),
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
