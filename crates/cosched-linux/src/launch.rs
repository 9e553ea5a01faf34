//! Starting one job's main process: command expansion, environment, output files, and everything that
//! must hold before its first instruction (its cgroups, CPU mask, memory policy, and, under sudo, the
//! invoking user's identity).

use crate::affinity::Mask;
use cosched_core::CpuSet;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::RawFd;
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
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
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
    // SAFETY: getpwuid_r writes into the buffers we own; getgrouplist into `groups`, sized by `count`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buffer = vec![0 as libc::c_char; 16 * 1024];
        let mut found = std::ptr::null_mut();
        libc::getpwuid_r(uid, &mut pwd, buffer.as_mut_ptr(), buffer.len(), &mut found);
        if found.is_null() {
            return vec![gid];
        }
        let mut groups = vec![0 as libc::gid_t; 256];
        let mut count = groups.len() as libc::c_int;
        if libc::getgrouplist(pwd.pw_name, gid, groups.as_mut_ptr(), &mut count) < 0 {
            return vec![gid];
        }
        groups.truncate(count.max(0) as usize);
        groups
    }
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
    fn split(self) -> io::Result<(Stdio, Option<CString>)> {
        match self {
            Output::File(file) => Ok((file.into(), None)),
            Output::AsUser(path) => {
                let path = CString::new(path.as_os_str().as_bytes())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                Ok((Stdio::null(), Some(path)))
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
}

/// Starts the job in a new process group whose id is its pid. Errors carry the OS error of the step
/// that failed (the exec of a missing program gives "No such file or directory").
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
    let named_output = stdout_path.is_some() || stderr_path.is_some();
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
    if let Some(cwd) = &launch.cwd {
        command.current_dir(cwd);
    }
    for (key, value) in launch.env {
        command.env(key, launch.placeholders.expand(value));
    }
    for (key, value) in launch.executor_env {
        command.env(key, value);
    }
    let join: Vec<CString> = launch
        .join
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mask = launch.mask;
    let interleave = launch.interleave.map(node_mask);
    let user = launch.user;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system calls on
    // data prepared above.
    unsafe {
        command.pre_exec(move || {
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            for procs in &join {
                write_zero(procs)?;
            }
            if let Some(mask) = &mask {
                mask.apply_to(0)?;
            }
            if let Some(nodes) = &interleave {
                // Best effort: a kernel without NUMA support refuses, and the job runs anyway.
                libc::syscall(
                    libc::SYS_set_mempolicy,
                    3, // MPOL_INTERLEAVE
                    nodes.as_ptr(),
                    (nodes.len() * 64 + 1) as libc::c_ulong,
                );
            }
            if let Some(user) = &user {
                check(libc::setgroups(user.groups.len(), user.groups.as_ptr()))?;
                check(libc::setgid(user.gid))?;
                check(libc::setuid(user.uid))?;
            }
            open_as_user(stdout_path.as_deref(), stderr_path.as_deref())
        });
    }
    command.spawn().map_err(|e| {
        let what = match named_output {
            true => " or open the output files named for it",
            false => "",
        };
        io::Error::new(e.kind(), format!("cannot start {program}{what}: {e}"))
    })
}

/// In the child, once it is the job's user: opens the output files the user named onto standard
/// output and error (one file for both when they name the same path, as Slurm's `-o` alone does).
fn open_as_user(stdout: Option<&CStr>, stderr: Option<&CStr>) -> io::Result<()> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o644);
    let onto = |path: &CStr, target: RawFd| -> nix::Result<()> {
        let fd = nix::fcntl::open(path, flags, mode)?;
        // dup2 leaves the copy open across exec; the original closes with it.
        nix::unistd::dup2(fd, target)?;
        nix::unistd::close(fd)
    };
    if let Some(path) = stdout {
        onto(path, libc::STDOUT_FILENO)?;
    }
    match stderr {
        Some(path) if Some(path) == stdout => {
            nix::unistd::dup2(libc::STDOUT_FILENO, libc::STDERR_FILENO)?;
        }
        Some(path) => onto(path, libc::STDERR_FILENO)?,
        None => {}
    }
    Ok(())
}

/// Writing "0" to `cgroup.procs` moves the writing process into that cgroup.
fn write_zero(path: &CString) -> io::Result<()> {
    // SAFETY: path is NUL-terminated; open/write/close are async-signal-safe.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written == 1 {
            Ok(())
        } else {
            Err(error)
        }
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
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

    #[test]
    fn a_missing_program_fails_with_the_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = || File::create(dir.path().join("out")).unwrap();
        let err = spawn(Launch {
            command: &["/nonexistent/program".to_string()],
            env: &BTreeMap::new(),
            placeholders: &Placeholders {
                threads: 1,
                bench: "/".into(),
                workload_dir: "/".into(),
            },
            executor_env: Vec::new(),
            stdout: Output::File(file()),
            stderr: Output::File(file()),
            join: Vec::new(),
            mask: None,
            interleave: None,
            user: None,
            cwd: None,
            clear_env: false,
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("/nonexistent/program"), "{err}");
    }
}
