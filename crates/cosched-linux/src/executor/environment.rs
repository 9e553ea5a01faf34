//! The launch environment of one job: its control page, output files, environment variables and
//! placeholders, then its enforcement prepared (cgroups, mask) and its process started in it.

use super::seams::{Children, Enforcement};
use super::source::ArrivingJob;
use super::Running;
use crate::enforce::Members;
use crate::launch::{self, InvokingUser, Launch, Output, Placeholders};
use cosched_core::{CpuSet, JobKind};
use cosched_native::control::{ControlPage, CONTROL_ENV};
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a job could not be started; the job fails with it, the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot create its control page: {0}")]
    ControlPage(io::Error),
    #[error("cannot prepare its CPUs and cgroups: {0}")]
    Enforcement(io::Error),
    #[error("cannot adopt process {pid}: {source}")]
    Adopt { pid: i32, source: io::Error },
    #[error("cannot create {}: {source}", path.display())]
    Output { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Spawn(io::Error),
}

/// What every job of a run shares.
pub struct LaunchEnvironment {
    pub bench: PathBuf,
    pub preload: PathBuf,
    pub interleave: bool,
    pub user: Option<InvokingUser>,
}

impl LaunchEnvironment {
    /// Creates the job's control page and output files, prepares its enforcement on `cpus` and starts
    /// its process with `threads`. Errors are the job's, not the run's (they become a failed `finish`),
    /// and leave nothing behind.
    pub fn launch(
        &self,
        job: &ArrivingJob,
        cpus: &CpuSet,
        threads: u32,
        enforcer: &mut dyn Enforcement,
        children: &mut dyn Children,
        now: f64,
    ) -> Result<Running, LaunchError> {
        let spec = &job.spec;
        let user = job.user.as_ref().or(self.user.as_ref());
        let page =
            ControlPage::create(user.map(|u| (u.uid, u.gid))).map_err(LaunchError::ControlPage)?;
        page.set_advice(threads);
        if let Some(adopt) = job.adopt {
            let members = match adopt.attached {
                // Its processes are touched only while they are wholly its owner's.
                true => Members::Tree(
                    adopt.pid,
                    user.map_or(nix::unistd::geteuid().as_raw(), |u| u.uid),
                ),
                false => Members::Group(adopt.pid),
            };
            let mut prepared = enforcer
                .prepare(cpus, adopt.in_place, job.memory_limit)
                .map_err(LaunchError::Enforcement)?;
            // Left in a batch system's cgroups, it must also stay on the CPUs they allow it.
            let allocation = adopt
                .in_place
                .then(|| crate::cgroup::cpuset_of(adopt.pid))
                .flatten();
            if let Some(Err(source)) = allocation.map(|a| prepared.confine(a)) {
                enforcer.abandon(prepared);
                return Err(LaunchError::Adopt {
                    pid: adopt.pid,
                    source,
                });
            }
            // Checked again as it is enclosed: the pid may have been reused since the request.
            let enclosed = match adopt.is_alive() {
                true => enforcer.enclose(&prepared, members),
                false => Err(io::Error::other("it has ended")),
            };
            if let Err(source) = enclosed {
                enforcer.abandon(prepared);
                return Err(LaunchError::Adopt {
                    pid: adopt.pid,
                    source,
                });
            }
            let control = enforcer.started(prepared, members);
            return Ok(Running::new(control, Some(adopt), page, threads, now));
        }
        let output = |path: &Path, as_user: bool| -> Result<Output, LaunchError> {
            match as_user {
                true => Ok(Output::AsUser(path.to_path_buf())),
                false => create_output(path, user).map(Output::File),
            }
        };
        let stdout = output(&job.stdout, job.opened_as_user.stdout)?;
        let stderr = output(&job.stderr, job.opened_as_user.stderr)?;
        // A malleable job's OpenMP runtime must leave room for the advice to grow again
        // (docs/control-page.md), so it is told its maximum and the page caps each region.
        let omp_threads = match spec.kind {
            JobKind::Malleable => spec.max_threads,
            _ => threads,
        };
        let mut env: Vec<(String, OsString)> = vec![
            ("OMP_NUM_THREADS".into(), omp_threads.to_string().into()),
            (CONTROL_ENV.into(), page.env_value()),
        ];
        env.extend(self.preload_for(job).map(|p| ("LD_PRELOAD".into(), p)));
        env.extend(launch::placement_env(spec.id.0, cpus));
        let mut prepared = enforcer
            .prepare(cpus, false, job.memory_limit)
            .map_err(LaunchError::Enforcement)?;
        let placeholders = Placeholders {
            threads: omp_threads,
            bench: self.bench.clone(),
            workload_dir: job.workload_dir.clone(),
        };
        let interleave = self
            .interleave
            .then(|| crate::cgroup::numa_nodes_of(cpus))
            .filter(|nodes| nodes.len() > 1);
        let spawned = children.spawn(Launch {
            command: &job.command,
            env: &job.env,
            placeholders: &placeholders,
            executor_env: env,
            stdout,
            stderr,
            join: std::mem::take(&mut prepared.join),
            mask: prepared.mask.take(),
            interleave,
            user: job.user.clone().or_else(|| self.user.clone()),
            cwd: job.cwd.clone(),
            clear_env: job.clear_env,
            inherit: Some(page.fd().as_raw_fd()),
            umask: job.umask.map(Mode::from_bits_truncate),
            file_size_limit: job.file_size_limit,
        });
        let pid = match spawned {
            Ok(pid) => pid,
            Err(e) => {
                enforcer.abandon(prepared);
                return Err(LaunchError::Spawn(e));
            }
        };
        let control = enforcer.started(prepared, Members::Group(pid));
        Ok(Running::new(control, None, page, threads, now))
    }

    /// Every job gets the preload library: it caps a malleable job's regions at the advice, and gives
    /// every cooperating program (heartbeats, OpenMP regions) a progress counter. Other jobs' advice
    /// stays at their start thread count, so the cap never bites them. A preload of their own follows:
    /// the submitted one, or, for a job that starts from cosched's environment, cosched's.
    fn preload_for(&self, job: &ArrivingJob) -> Option<OsString> {
        let mut preload = self.preload.clone().into_os_string();
        if !self.preload.is_file() {
            preload.clear();
        }
        let inherited = || match job.clear_env {
            true => None,
            false => std::env::var_os("LD_PRELOAD"),
        };
        let theirs = job.env.get("LD_PRELOAD").map(OsString::from);
        if let Some(theirs) = theirs.or_else(inherited) {
            preload.push(" ");
            preload.push(theirs);
        }
        (!preload.is_empty()).then_some(preload)
    }
}

/// A job's output file, made afresh and given to the job's user by its descriptor: whatever is at
/// `path` is removed first, and a link or file someone puts there meanwhile is never opened.
fn create_output(path: &Path, user: Option<&InvokingUser>) -> Result<File, LaunchError> {
    let failed = |source: io::Error| LaunchError::Output {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(failed(e)),
        _ => {}
    }
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(failed)?;
    if let Some(user) = user {
        std::os::unix::fs::fchown(&file, Some(user.uid), Some(user.gid)).map_err(failed)?;
    }
    Ok(file)
}
