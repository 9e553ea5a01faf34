//! Where the executor's jobs come from. The loop asks its source for the jobs that have arrived and
//! tells it what became of each; a workload file replayed against the clock ([`WorkloadReplay`]) is one
//! source, live submissions to a daemon are another.

use super::JobOutcome;
use crate::isolated::IsolatedTimes;
use crate::launch::InvokingUser;
use cosched_core::trace::Record;
use cosched_core::workload::Workload;
use cosched_core::{CpuSet, JobId, JobSpec, Policy, Topology};
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

/// A job handed to the executor: what the policy sees and how to start it.
#[derive(Debug, Clone)]
pub struct ArrivingJob {
    /// Its id must be new to the run.
    pub spec: JobSpec,
    pub command: Vec<String>,
    /// Set on top of the executor's own environment.
    pub env: BTreeMap<String, String>,
    /// What `{workload_dir}` expands to.
    pub workload_dir: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Seconds the job takes alone on the machine, if measured.
    pub isolated: Option<f64>,
    /// Working directory; the executor's own when `None`.
    pub cwd: Option<PathBuf>,
    /// Whom the job runs as, when not as the run's user.
    pub user: Option<InvokingUser>,
    /// Start from `env` alone instead of the executor's environment plus `env`.
    pub clear_env: bool,
    /// The file mode creation mask it starts with (its submitter's); the executor's when `None`.
    pub umask: Option<u32>,
    /// An already running process group to take under control instead of starting `command`.
    pub adopt: Option<Adopt>,
    /// Which of `stdout` and `stderr` the job's user named: those the job's own process opens once
    /// it runs as the user, never the executor.
    pub opened_as_user: OpenedAsUser,
    /// Bytes its processes may hold together (`cosched submit --mem`), in a memory cgroup.
    pub memory_limit: Option<u64>,
    /// Bytes any file it writes may grow to (RLIMIT_FSIZE): what is left of its user's share of a
    /// log directory the executor opens its output in. `None`: no limit.
    pub file_size_limit: Option<u64>,
    /// Where it goes among the jobs waiting to start (Slurm's priority less its nice): the policy
    /// is shown it ahead of every waiting job of lower priority, as if it had arrived before them,
    /// so that a first-come-first-served policy starts it first. 0 for a workload's jobs.
    pub priority: i64,
}

/// Which output files of a job its user named (`cosched submit -o/-e`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenedAsUser {
    pub stdout: bool,
    pub stderr: bool,
}

/// A process the executor did not start, named by pid and start time so that a reused pid is never
/// mistaken for it: the group leader of a job an earlier daemon started, or a process attached to the
/// daemon (`cosched attach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopt {
    pub pid: i32,
    pub start_ticks: u64,
    /// Attached: the job is the process and its descendants, not its process group (which may hold
    /// others' processes).
    pub attached: bool,
    /// Leave it in the cgroups it is in (a batch system's, say): placed by affinity, frozen by signals.
    pub in_place: bool,
}

impl Adopt {
    /// Whether the process still runs: the same pid with the same start time, not a zombie.
    pub fn is_alive(self) -> bool {
        crate::procfs::stat(self.pid)
            .is_ok_and(|s| s.start_ticks == self.start_ticks && s.state != 'Z')
    }
}

/// A live supply of jobs for the executor's loop.
pub trait JobSource {
    /// Jobs that have arrived by `now` (seconds since the run began), in arrival order.
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob>;
    /// When the next job already known to the source arrives.
    fn next_arrival(&self) -> Option<f64>;
    /// Jobs known to the source that have not arrived yet.
    fn not_arrived(&self) -> usize;
    /// True once no job will ever come again: the run ends when the last one is done.
    fn exhausted(&self) -> bool;
    /// A job is done (finished, failed to start, cancelled, or stopped with the run).
    fn finished(&mut self, outcome: JobOutcome);
    /// A descriptor that becomes readable when the source has news (arrivals, cancellations).
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// Running processes that joined a job already handed over, as further tasks of it (the other
    /// tasks of its Slurm step).
    fn take_joined(&mut self) -> Vec<(JobId, Adopt)> {
        Vec::new()
    }
    /// Jobs to stop now: arrived ones are dropped, running ones killed.
    fn take_cancelled(&mut self) -> Vec<JobId> {
        Vec::new()
    }
    /// Signals to send now to running jobs' processes (a time limit's SIGTERM). A frozen job gets
    /// its signal when it is next thawed.
    fn take_signals(&mut self) -> Vec<(JobId, nix::sys::signal::Signal)> {
        Vec::new()
    }
    /// New weights of jobs already handed over (a daemon sharing the machine among users changes a
    /// job's weight as its user's other jobs come and go). Asked before each arrival or end is
    /// decided, which is when a user's jobs change.
    fn take_reweighted(&mut self) -> Vec<(JobId, f64)> {
        Vec::new()
    }
    /// A policy to take over from the running one, with every job it holds (`cosched policy P`).
    fn take_policy(&mut self) -> Option<Box<dyn Policy>> {
        None
    }
    /// Every trace record of the run, as it is written.
    fn observe(&mut self, _record: &Record) {}
    /// A plan was applied: each job it places, with the CPUs it gets first
    /// ([`cosched_core::Plan::first_cpus`]), in the order of their ids.
    fn placed(&mut self, _placed: &[(JobId, &CpuSet)]) {}
    /// The slot in force holds: `frozen` are the running jobs it leaves frozen (suspended between
    /// their slots).
    fn slot_enforced(&mut self, _frozen: &[JobId]) {}
    /// The loop moved to the next slot `lateness` seconds after that slot's deadline.
    fn slot_switched(&mut self, _lateness: f64) {}
}

/// A workload file's jobs, each arriving at its `arrival` time after the start of the run.
pub struct WorkloadReplay {
    /// Not arrived yet, latest first (popped from the end).
    coming: Vec<ArrivingJob>,
    /// Every job's outcome, in the workload's order; "never started" until told otherwise.
    outcomes: Vec<JobOutcome>,
}

impl WorkloadReplay {
    pub fn new(
        workload: &Workload,
        topology: &Topology,
        isolated_times: &IsolatedTimes,
        output_dir: &std::path::Path,
    ) -> WorkloadReplay {
        // `Workload::load("w.toml")` leaves an empty directory: the current one.
        let workload_dir =
            std::path::absolute(workload.dir.join(".")).unwrap_or_else(|_| workload.dir.clone());
        let specs = workload.specs(topology.num_cpus());
        let mut coming: Vec<ArrivingJob> = workload
            .jobs
            .iter()
            .zip(specs)
            .map(|(entry, mut spec)| {
                let isolated = isolated_times.lookup(topology, entry);
                // The run history: a past run of the same command alone here, or the scaling its past
                // runs show, estimates its run time better than a declared one, which was measured elsewhere or guessed (`auto` then
                // prefers the least remaining work).
                let width = spec.max_threads.clamp(1, topology.num_cpus() as u32);
                spec.hints.runtime = (isolated_times.runtime_estimate(topology, entry, width))
                    .or(spec.hints.runtime);
                // How it scales: measured on one CPU, else fitted from its past runs.
                spec.hints.one_cpu_runtime = isolated_times
                    .one_cpu_seconds(topology, entry)
                    .or(spec.hints.one_cpu_runtime);
                // Its times alone at the widths its past runs measured, which `auto` trusts
                // over a curve.
                (spec.hints).take_measured_times_alone(
                    isolated_times.times_alone(topology, &entry.command),
                );
                if let Some(known) = isolated_times.behaviour(topology, &entry.command) {
                    known.apply(&mut spec);
                }
                ArrivingJob {
                    spec,
                    command: entry.command.clone(),
                    env: entry.env.clone(),
                    workload_dir: workload_dir.clone(),
                    stdout: output_dir.join(format!("{}.stdout", entry.name)),
                    stderr: output_dir.join(format!("{}.stderr", entry.name)),
                    isolated,
                    cwd: None,
                    user: None,
                    clear_env: false,
                    umask: None,
                    adopt: None,
                    opened_as_user: OpenedAsUser::default(),
                    memory_limit: entry.mem,
                    file_size_limit: None,
                    priority: 0,
                }
            })
            .collect();
        let outcomes = coming.iter().map(JobOutcome::pending).collect();
        // A stable sort keeps jobs arriving together in the file's order; reversed, they pop in it.
        coming.sort_by(|a, b| a.spec.arrival.total_cmp(&b.spec.arrival));
        coming.reverse();
        WorkloadReplay { coming, outcomes }
    }

    /// Every job's outcome, in the workload's order.
    pub fn into_outcomes(self) -> Vec<JobOutcome> {
        self.outcomes
    }
}

impl JobSource for WorkloadReplay {
    fn take_arrived(&mut self, now: f64) -> Vec<ArrivingJob> {
        let mut arrived = Vec::new();
        while self.coming.last().is_some_and(|j| j.spec.arrival <= now) {
            arrived.extend(self.coming.pop());
        }
        arrived
    }

    fn next_arrival(&self) -> Option<f64> {
        self.coming.last().map(|j| j.spec.arrival)
    }

    fn not_arrived(&self) -> usize {
        self.coming.len()
    }

    fn exhausted(&self) -> bool {
        self.coming.is_empty()
    }

    fn finished(&mut self, outcome: JobOutcome) {
        let i = outcome.id.0 as usize;
        self.outcomes[i] = outcome;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolated::{Calibrated, IsolatedTime};
    use cosched_core::topology::presets;
    use std::path::Path;

    #[test]
    fn a_run_time_measured_here_replaces_a_declared_one() {
        let topology = presets::machine("package:1 core:2").unwrap();
        let workload = Workload::parse(
            "[workload]\nname = \"w\"\n\
             [[job]]\nname = \"measured\"\ncommand = [\"x\"]\nhints = { runtime = 1.0 }\n\
             [[job]]\nname = \"declared\"\ncommand = [\"y\"]\nhints = { runtime = 2.0 }\n\
             [[job]]\nname = \"unknown\"\ncommand = [\"z\"]\n",
            "test",
        )
        .unwrap();
        let times = IsolatedTimes {
            entries: vec![IsolatedTime {
                machine: topology.name.clone(),
                cpus: topology.num_cpus(),
                job: "measured".into(),
                command: vec!["x".into()],
                threads: 2,
                seconds: 5.0,
            }],
            ..IsolatedTimes::default()
        };
        let mut replay = WorkloadReplay::new(&workload, &topology, &times, Path::new("out"));
        let runtimes: Vec<Option<f64>> = (replay.take_arrived(0.0).iter())
            .map(|j| j.spec.hints.runtime)
            .collect();
        assert_eq!(runtimes, vec![Some(5.0), Some(2.0), None]);
    }

    #[test]
    fn a_program_arrives_with_its_times_alone_from_past_runs_of_its_command() {
        let topology = presets::machine("package:1 core:2").unwrap();
        let workload = Workload::parse(
            "[workload]\nname = \"w\"\n\
             [[job]]\nname = \"known\"\ncommand = [\"x\"]\n\
             [[job]]\nname = \"new\"\ncommand = [\"y\"]\n",
            "test",
        )
        .unwrap();
        let alone = |threads: u32, seconds: f64| {
            Calibrated::Time(IsolatedTime {
                machine: topology.name.clone(),
                cpus: topology.num_cpus(),
                job: "known".into(),
                command: vec!["x".into()],
                threads,
                seconds,
            })
        };
        let mut times = IsolatedTimes::default();
        times.record(vec![alone(2, 5.0)]);
        times.record_one_cpu(vec![alone(1, 9.0)]);
        let mut replay = WorkloadReplay::new(&workload, &topology, &times, Path::new("out"));
        let hints: Vec<Vec<(u32, f64)>> = (replay.take_arrived(0.0).into_iter())
            .map(|j| j.spec.hints.times_alone)
            .collect();
        let rounded: Vec<Vec<(u32, f64)>> = (hints.iter())
            .map(|points| {
                points
                    .iter()
                    .map(|&(k, t)| (k, (t * 1e6).round() / 1e6))
                    .collect()
            })
            .collect();
        assert_eq!(rounded, vec![vec![(1, 9.0), (2, 5.0)], vec![]]);
    }
}
