//! The event loop of a real run: arrivals, plans, slot switches, samples, timers and exits, in the
//! order the simulator handles them, written to the same trace.

use crate::calibrate::IsolatedTimes;
use crate::enforce::{process_groups, Enforcer, JobControl};
use crate::interrupt::Interrupts;
use crate::launch::{self, InvokingUser, Launch, Placeholders};
use crate::measure::{instruction_counter_status, Reading};
use crate::mechanism::{Freezer, Mechanisms, Placement};
use crate::priority::Realtime;
use crate::watchdog::Watchdog;
use crate::{cgroup::Cgroup, Error};
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceWriter, TRACE_VERSION};
use cosched_core::workload::Workload;
use cosched_core::{
    ActiveJob, Context, CpuSet, Event, JobId, JobKind, JobSpec, Plan, Policy, Sample, Topology,
};
use cosched_native::control::{ControlPage, CONTROL_ENV};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::BufWriter;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// How to run a workload for real.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Trace file to write (JSON Lines).
    pub trace: PathBuf,
    /// Directory for each job's `<name>.stdout` and `<name>.stderr`.
    pub output_dir: PathBuf,
    /// Placement mechanism; `None` picks the first available.
    pub placement: Option<Placement>,
    /// Freezer; `None` picks the first available.
    pub freezer: Option<Freezer>,
    /// Seconds between two samples of every running job (into the trace and to the policy).
    pub sample_interval: f64,
    /// Seconds between two passes re-applying affinity masks (affinity placement only).
    pub reapply_interval: f64,
    /// Interleave each job's memory over the NUMA nodes of its first partition.
    pub interleave: bool,
    /// Isolated times from `cosched calibrate`, written into the `arrival` records.
    pub isolated: IsolatedTimes,
    /// Directory for the jobs' control pages (`/dev/shm` when it exists).
    pub control_dir: PathBuf,
}

impl RunOptions {
    pub fn new(trace: impl Into<PathBuf>, output_dir: impl Into<PathBuf>) -> RunOptions {
        let output_dir = output_dir.into();
        let shm = Path::new("/dev/shm");
        RunOptions {
            trace: trace.into(),
            control_dir: if shm.is_dir() {
                shm.to_path_buf()
            } else {
                output_dir.clone()
            },
            output_dir,
            placement: None,
            freezer: None,
            sample_interval: 1.0,
            reapply_interval: 1.0,
            interleave: false,
            isolated: IsolatedTimes::default(),
        }
    }
}

/// Counts for a progress display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub failed: usize,
    pub running: usize,
    /// Arrived or yet to arrive, not started.
    pub pending: usize,
    pub elapsed: f64,
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOutcome {
    pub id: JobId,
    pub name: String,
    pub pid: Option<u32>,
    /// Thread count it was started with (0 if it never started).
    pub threads: u32,
    pub started: Option<f64>,
    pub finished: Option<f64>,
    pub status: ExitStatus,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// CPU time of the job's main process and the children it waited for (from wait4).
    pub cpu_seconds: f64,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// The result of a real run; the trace has the details.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub trace: PathBuf,
    /// `placement=… freezer=…`, as in the trace's `run_start`.
    pub mechanism: String,
    pub jobs: Vec<JobOutcome>,
    pub wall_seconds: f64,
    /// CPU seconds the executor thread used.
    pub overhead_seconds: f64,
    /// For every slot switch that thawed jobs: seconds from the first thaw to the last one done.
    pub switch_skew: Vec<f64>,
    /// For every slot switch: seconds between its deadline and the moment it began.
    pub switch_lateness: Vec<f64>,
}

/// Runs `workload` on this machine under `policy` and writes the trace; see the crate documentation.
pub fn run(
    workload: &Workload,
    topology: &Topology,
    policy: Box<dyn Policy>,
    options: &RunOptions,
) -> Result<RunReport, Error> {
    run_observed(workload, topology, policy, options, &mut |_| {})
}

/// [`run`], calling `progress` whenever the counts change and at least every sample interval.
pub fn run_observed(
    workload: &Workload,
    topology: &Topology,
    policy: Box<dyn Policy>,
    options: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunReport, Error> {
    let mechanisms =
        Mechanisms::choose(options.placement, options.freezer).map_err(Error::Mechanism)?;
    let mut executor = Executor::new(workload, topology, policy, options, mechanisms, progress)?;
    let result = executor.run_loop();
    let note = match &result {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    executor.shutdown(note.as_deref());
    result?;
    Ok(executor.report())
}

struct Running {
    control: JobControl,
    pid: i32,
    page: ControlPage,
    threads: u32,
    held_total: f64,
    held_since: f64,
    mark: Reading,
}

enum State {
    Waiting,
    Arrived,
    Running(Box<Running>),
    Done,
}

struct Executor<'a> {
    workload: &'a Workload,
    topology: &'a Topology,
    policy: Box<dyn Policy>,
    options: &'a RunOptions,
    enforcer: Enforcer,
    mechanism: String,
    specs: Vec<JobSpec>,
    states: Vec<State>,
    outcomes: Vec<JobOutcome>,
    active: Vec<ActiveJob>,
    arrivals: Vec<usize>,
    next_arrival: usize,
    plan: Plan,
    slot: usize,
    slot_deadline: f64,
    timer: Option<f64>,
    timers_in_a_row: (f64, u32),
    next_sample: f64,
    next_reapply: f64,
    events: VecDeque<Event>,
    deciding: bool,
    busy_cgroups: Vec<(usize, Cgroup)>,
    trace: TraceWriter<BufWriter<File>>,
    origin: f64,
    cpu_origin: f64,
    user: Option<InvokingUser>,
    bench: PathBuf,
    preload: PathBuf,
    switch_skew: Vec<f64>,
    switch_lateness: Vec<f64>,
    last_progress: Option<(usize, usize, usize)>,
    progress: &'a mut dyn FnMut(&Progress),
    timerfd: OwnedFd,
    interrupts: Interrupts,
    _realtime: Realtime,
    // Dropped last: its sweep must come after the executor's own cleanup.
    watchdog: Watchdog,
}

/// A policy asking for this many timers within one millisecond is looping, not deciding.
const MAX_TIMERS_PER_MS: u32 = 1000;
/// How long jobs get to exit after SIGTERM when a run stops early.
const TERMINATE_GRACE: f64 = 0.5;
/// How long killed jobs get to leave their cgroups at the end.
const REMOVAL_GRACE: f64 = 1.0;

fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

impl<'a> Executor<'a> {
    fn new(
        workload: &'a Workload,
        topology: &'a Topology,
        policy: Box<dyn Policy>,
        options: &'a RunOptions,
        mechanisms: Mechanisms,
        progress: &'a mut dyn FnMut(&Progress),
    ) -> Result<Executor<'a>, Error> {
        let specs = workload.specs(topology.num_cpus());
        if let Some(job) = workload.jobs.iter().find(|j| j.command.is_empty()) {
            return Err(Error::Workload(format!(
                "job {:?} has no `command`, so it can only be simulated; add a command or use --sim",
                job.name
            )));
        }
        let user = InvokingUser::from_sudo();
        std::fs::create_dir_all(&options.output_dir).map_err(io_error(format!(
            "cannot create output directory {}",
            options.output_dir.display()
        )))?;
        if let Some(user) = &user {
            let _ = user.chown(&options.output_dir);
        }
        let trace_file = File::create(&options.trace).map_err(io_error(format!(
            "cannot write trace {}",
            options.trace.display()
        )))?;
        // SAFETY: plain system call; the descriptor is owned below.
        let timerfd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if timerfd < 0 {
            return Err(io_error("cannot create a timerfd".into())(
                std::io::Error::last_os_error(),
            ));
        }
        let timerfd = unsafe { OwnedFd::from_raw_fd(timerfd) };
        let watchdog = Watchdog::start(specs.len())
            .map_err(io_error("cannot start the watchdog process".into()))?;
        let interrupts =
            Interrupts::register().map_err(io_error("cannot install signal handlers".into()))?;
        let mut arrivals: Vec<usize> = (0..specs.len()).collect();
        arrivals.sort_by(|&a, &b| specs[a].arrival.total_cmp(&specs[b].arrival));
        let outcomes = workload
            .jobs
            .iter()
            .zip(&specs)
            .map(|(entry, spec)| JobOutcome {
                id: spec.id,
                name: entry.name.clone(),
                pid: None,
                threads: 0,
                started: None,
                finished: None,
                status: ExitStatus::Failed,
                exit_code: None,
                error: Some("never started".into()),
                cpu_seconds: 0.0,
                stdout: options.output_dir.join(format!("{}.stdout", entry.name)),
                stderr: options.output_dir.join(format!("{}.stderr", entry.name)),
            })
            .collect();
        let (realtime, priority) = Realtime::raise();
        let mechanism = format!(
            "{}; {priority}; {}",
            mechanisms.describe(),
            instruction_counter_status()
        );
        let origin = monotonic();
        Ok(Executor {
            workload,
            topology,
            policy,
            options,
            enforcer: Enforcer::new(mechanisms),
            mechanism,
            states: specs.iter().map(|_| State::Waiting).collect(),
            specs,
            outcomes,
            active: Vec::new(),
            arrivals,
            next_arrival: 0,
            plan: Plan::default(),
            slot: 0,
            slot_deadline: f64::INFINITY,
            timer: None,
            timers_in_a_row: (0.0, 0),
            next_sample: options.sample_interval,
            next_reapply: options.reapply_interval,
            events: VecDeque::new(),
            deciding: false,
            busy_cgroups: Vec::new(),
            trace: TraceWriter::new(BufWriter::new(trace_file)),
            origin,
            cpu_origin: thread_cpu_seconds(),
            user,
            bench: cosched_native::bench_dir(),
            preload: cosched_native::preload_library(),
            switch_skew: Vec::new(),
            switch_lateness: Vec::new(),
            last_progress: None,
            progress,
            timerfd,
            interrupts,
            _realtime: realtime,
            watchdog,
        })
    }

    fn now(&self) -> f64 {
        monotonic() - self.origin
    }

    fn emit(&mut self, record: Record) -> Result<(), Error> {
        let t = self.now();
        self.trace.write(t, record).map_err(io_error(format!(
            "cannot write trace {}",
            self.options.trace.display()
        )))
    }

    fn run_loop(&mut self) -> Result<(), Error> {
        self.emit(Record::RunStart {
            version: TRACE_VERSION,
            executor: ExecutorKind::Real,
            policy: self.policy.name().to_string(),
            machine: self.topology.name.clone(),
            cpus: self.topology.num_cpus(),
            workload: self.workload.info.name.clone(),
            seed: None,
            mechanism: Some(self.mechanism.clone()),
        })?;
        loop {
            if let Some(signal) = self.interrupts.received() {
                return Err(Error::Interrupted(signal));
            }
            self.reap_exited()?;
            self.notice_thread_changes()?;
            self.arrive_due()?;
            self.switch_slot_if_due()?;
            self.fire_timer_if_due()?;
            self.sample_if_due()?;
            self.reapply_if_due()?;
            self.retry_busy_cgroups();
            self.report_progress(false);
            if self.states.iter().all(|s| matches!(s, State::Done)) {
                return Ok(());
            }
            self.check_stalled()?;
            self.wait()?;
        }
    }

    fn running(&self) -> impl Iterator<Item = (usize, &Running)> {
        self.states.iter().enumerate().filter_map(|(i, s)| match s {
            State::Running(r) => Some((i, r.as_ref())),
            _ => None,
        })
    }

    fn running_indices(&self) -> Vec<usize> {
        self.running().map(|(i, _)| i).collect()
    }

    /// Sleeps until the next deadline (absolute timerfd), a job's exit or an interrupt.
    fn wait(&mut self) -> Result<(), Error> {
        let mut deadline = self.slot_deadline.min(self.next_sample);
        if let Some(&i) = self.arrivals.get(self.next_arrival) {
            deadline = deadline.min(self.specs[i].arrival);
        }
        if let Some(timer) = self.timer {
            deadline = deadline.min(timer);
        }
        if self.enforcer.uses_affinity() {
            deadline = deadline.min(self.next_reapply);
        }
        // Exits are noticed through pidfds; a short bound keeps a missed wake-up from hanging the run.
        deadline = deadline.min(self.now() + 1.0);
        let at = (self.origin + deadline).max(1e-9);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: at.trunc() as libc::time_t,
                tv_nsec: ((at.fract() * 1e9) as libc::c_long).clamp(0, 999_999_999),
            },
        };
        // SAFETY: valid descriptor and itimerspec.
        unsafe {
            libc::timerfd_settime(
                self.timerfd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        let mut fds = vec![
            libc::pollfd {
                fd: self.timerfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.interrupts.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let pidfds: Vec<OwnedFd> = self
            .running()
            .filter_map(|(_, r)| pidfd_open(r.pid))
            .collect();
        fds.extend(pidfds.iter().map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: fds is a valid array of pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        let mut expirations = 0u64;
        // SAFETY: reading the 8-byte expiration count of a non-blocking timerfd.
        unsafe {
            libc::read(
                self.timerfd.as_raw_fd(),
                (&mut expirations as *mut u64).cast(),
                8,
            );
        }
        Ok(())
    }

    fn check_stalled(&self) -> Result<(), Error> {
        let waiting = self
            .states
            .iter()
            .filter(|s| matches!(s, State::Arrived))
            .count();
        let idle = self.running().next().is_none()
            && self.next_arrival == self.arrivals.len()
            && self.timer.is_none();
        if idle && waiting > 0 {
            return Err(Error::Stalled {
                policy: self.policy.name().to_string(),
                waiting,
            });
        }
        Ok(())
    }

    fn decide(&mut self, event: Event) -> Result<(), Error> {
        self.events.push_back(event);
        if self.deciding {
            return Ok(());
        }
        self.deciding = true;
        while let Some(event) = self.events.pop_front() {
            let now = self.now();
            let ctx = Context {
                topology: self.topology,
                now,
                jobs: &self.active,
            };
            if let Some(plan) = self.policy.decide(&ctx, &event) {
                self.apply(plan)?;
            }
        }
        self.deciding = false;
        Ok(())
    }

    fn arrive_due(&mut self) -> Result<(), Error> {
        while let Some(&i) = self.arrivals.get(self.next_arrival) {
            if self.specs[i].arrival > self.now() {
                break;
            }
            self.next_arrival += 1;
            self.states[i] = State::Arrived;
            let spec = self.specs[i].clone();
            self.active.push(ActiveJob {
                spec: spec.clone(),
                started: None,
                threads: 0,
            });
            let isolated = self
                .options
                .isolated
                .lookup(self.topology, &self.workload.jobs[i]);
            self.emit(Record::Arrival {
                job: spec.clone(),
                isolated,
            })?;
            self.decide(Event::Arrived { job: spec.id })?;
        }
        Ok(())
    }

    fn plan_error(&self, message: String) -> Error {
        Error::Plan {
            policy: self.policy.name().to_string(),
            message,
        }
    }

    fn apply(&mut self, plan: Plan) -> Result<(), Error> {
        let machine = self.topology.cpus().clone();
        for a in plan
            .slots
            .iter()
            .flat_map(|s| &s.assignments)
            .chain(&plan.pinned)
        {
            let live = self.specs.get(a.job.0 as usize).is_some_and(|_| {
                matches!(
                    self.states[a.job.0 as usize],
                    State::Arrived | State::Running(_)
                )
            });
            if !live {
                return Err(self.plan_error(format!(
                    "placed job {} which is not active (not arrived yet, finished or unknown)",
                    a.job
                )));
            }
            if !a.cpus.is_subset(&machine) || a.cpus.is_empty() {
                return Err(self.plan_error(format!(
                    "gave job {} CPUs {:?}; the machine has {machine}",
                    a.job,
                    a.cpus.to_string()
                )));
            }
        }
        self.emit(Record::Plan { plan: plan.clone() })?;
        for id in plan.placed_jobs() {
            let i = id.0 as usize;
            let advice = plan.advice.get(&id).copied();
            match &self.states[i] {
                State::Arrived => self.start(i, &plan, advice)?,
                State::Running(r) if self.specs[i].kind == JobKind::Malleable => {
                    if let Some(advised) = advice {
                        let spec = &self.specs[i];
                        r.page
                            .set_advice(advised.clamp(spec.min_threads, spec.max_threads));
                    }
                }
                _ => {}
            }
        }
        let now = self.now();
        self.timer = plan.timer;
        self.slot = 0;
        self.slot_deadline = match plan.slots.as_slice() {
            [first, _, ..] => now + first.length.max(0.0),
            _ => f64::INFINITY,
        };
        self.plan = plan;
        self.enforce_slot(false)
    }

    /// Starts job `i` on its first CPUs of the plan.
    fn start(&mut self, i: usize, plan: &Plan, advice: Option<u32>) -> Result<(), Error> {
        let spec = self.specs[i].clone();
        let cpus_of = |slot| plan.cpus_in_slot(slot, spec.id).cloned();
        let first = (0..plan.slots.len().max(1))
            .find_map(cpus_of)
            .expect("placed jobs hold CPUs in some slot");
        let widest = (0..plan.slots.len().max(1))
            .filter_map(cpus_of)
            .map(|c| c.len())
            .max()
            .unwrap_or(first.len());
        let threads = match spec.kind {
            JobKind::Rigid => spec.max_threads,
            JobKind::Moldable | JobKind::Malleable => advice
                .map(|a| a.clamp(spec.min_threads, spec.max_threads))
                .unwrap_or_else(|| spec.threads_for(widest)),
        };
        match self.launch(i, &first, threads) {
            Ok(running) => {
                let pid = running.pid;
                self.outcomes[i].pid = Some(pid as u32);
                self.outcomes[i].threads = threads;
                self.outcomes[i].started = Some(self.now());
                self.outcomes[i].error = None;
                self.states[i] = State::Running(Box::new(running));
                let now = self.now();
                if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == spec.id) {
                    a.started = Some(now);
                    a.threads = threads;
                }
                self.emit(Record::Start {
                    job: spec.id,
                    threads,
                    pid: Some(pid as u32),
                })
            }
            Err(error) => {
                self.watchdog.clear_control_page(i);
                self.outcomes[i].error = Some(error.clone());
                self.outcomes[i].finished = Some(self.now());
                self.states[i] = State::Done;
                self.active.retain(|a| a.spec.id != spec.id);
                self.emit(Record::Finish {
                    job: spec.id,
                    status: ExitStatus::Failed,
                    exit_code: None,
                    error: Some(error),
                })?;
                self.report_progress(true);
                self.decide(Event::Finished { job: spec.id })
            }
        }
    }

    /// Creates the job's control page and cgroups and starts its process; errors are the job's, not
    /// the run's (they become a failed `finish`).
    fn launch(&mut self, i: usize, cpus: &CpuSet, threads: u32) -> Result<Running, String> {
        let entry = &self.workload.jobs[i];
        let spec = &self.specs[i];
        let page_path = self
            .options
            .control_dir
            .join(format!("{}-{i}", self.enforcer.tag()));
        let page = ControlPage::create(&page_path).map_err(|e| e.to_string())?;
        self.watchdog
            .set_control_page(i, &page_path)
            .map_err(|e| e.to_string())?;
        page.set_advice(threads);
        let open = |path: &Path| {
            File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
        };
        let stdout = open(&self.outcomes[i].stdout)?;
        let stderr = open(&self.outcomes[i].stderr)?;
        if let Some(user) = &self.user {
            for path in [
                &self.outcomes[i].stdout,
                &self.outcomes[i].stderr,
                &page_path,
            ] {
                let _ = user.chown(path);
            }
        }
        // A malleable job's OpenMP runtime must leave room for the advice to grow again
        // (docs/control-page.md), so it is told its maximum and the page caps each region.
        let omp_threads = match spec.kind {
            JobKind::Malleable => spec.max_threads,
            _ => threads,
        };
        let mut env: Vec<(String, OsString)> = vec![
            ("OMP_NUM_THREADS".into(), omp_threads.to_string().into()),
            (CONTROL_ENV.into(), page_path.clone().into_os_string()),
        ];
        // Every job gets the preload library: it caps a malleable job's regions at the advice, and
        // gives every cooperating program (heartbeats, OpenMP regions) a progress counter. Other jobs'
        // advice stays at their start thread count, so the cap never bites them.
        let mut preload = self.preload.clone().into_os_string();
        if !self.preload.is_file() {
            preload.clear();
        }
        if let Some(theirs) = entry
            .env
            .get("LD_PRELOAD")
            .cloned()
            .or_else(|| std::env::var("LD_PRELOAD").ok())
        {
            preload.push(" ");
            preload.push(theirs);
        }
        if !preload.is_empty() {
            env.push(("LD_PRELOAD".into(), preload));
        }
        let prepared = self
            .enforcer
            .prepare(i, cpus, &self.watchdog)
            .map_err(|e| e.to_string())?;
        let placeholders = Placeholders {
            threads: omp_threads,
            bench: self.bench.clone(),
            // `Workload::load("w.toml")` leaves an empty directory: the current one.
            workload_dir: std::path::absolute(self.workload.dir.join("."))
                .unwrap_or_else(|_| self.workload.dir.clone()),
        };
        let interleave = self
            .options
            .interleave
            .then(|| crate::cgroup::numa_nodes_of(cpus))
            .filter(|nodes| nodes.len() > 1);
        let spawned = launch::spawn(Launch {
            command: &entry.command,
            env: &entry.env,
            placeholders: &placeholders,
            executor_env: env,
            stdout,
            stderr,
            join: prepared.join,
            mask: prepared.mask,
            interleave,
            user: self.user.clone(),
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let busy = self
                    .enforcer
                    .remove_now(&prepared.cgroups, i, &self.watchdog);
                self.busy_cgroups.extend(busy.into_iter().map(|c| (i, c)));
                return Err(e.to_string());
            }
        };
        let pid = child.id() as i32;
        self.watchdog.set_process_group(i, pid);
        let now = self.now();
        Ok(Running {
            control: JobControl {
                index: i,
                pgid: pid,
                cgroups: prepared.cgroups,
                cpus: cpus.clone(),
                frozen: false,
            },
            pid,
            page,
            threads,
            held_total: 0.0,
            held_since: now,
            mark: Reading {
                t: now,
                ..Reading::default()
            },
        })
    }

    /// Makes the current slot hold: freeze the jobs leaving it, move jobs whose CPUs change, then thaw
    /// the jobs entering it. Jobs opted out of coscheduling and pinned jobs are never frozen.
    fn enforce_slot(&mut self, switching: bool) -> Result<(), Error> {
        let now = self.now();
        let mut freeze = Vec::new();
        let mut place = Vec::new();
        for i in self.running_indices() {
            let id = self.specs[i].id;
            let never_frozen =
                !self.specs[i].coschedule || self.plan.pinned.iter().any(|a| a.job == id);
            match self.plan.cpus_in_slot(self.slot, id) {
                Some(cpus) => place.push((i, cpus.clone())),
                None if !never_frozen => freeze.push(i),
                None => {}
            }
        }
        for &i in &freeze {
            self.account_held(i, now);
            let State::Running(r) = &mut self.states[i] else {
                continue;
            };
            self.enforcer
                .set_frozen(&mut r.control, true)
                .map_err(|source| Error::Enforce {
                    job: JobId(i as u32),
                    source,
                })?;
        }
        for (i, cpus) in &place {
            self.account_held(*i, now);
            let State::Running(r) = &mut self.states[*i] else {
                continue;
            };
            self.enforcer
                .place(&mut r.control, cpus)
                .map_err(|source| Error::Enforce {
                    job: JobId(*i as u32),
                    source,
                })?;
        }
        let first_thaw = monotonic();
        let mut thawed = 0;
        for (i, _) in &place {
            let State::Running(r) = &mut self.states[*i] else {
                continue;
            };
            if r.control.frozen {
                thawed += 1;
                self.enforcer
                    .set_frozen(&mut r.control, false)
                    .map_err(|source| Error::Enforce {
                        job: JobId(*i as u32),
                        source,
                    })?;
            }
        }
        if switching && thawed > 0 {
            self.switch_skew.push(monotonic() - first_thaw);
        }
        Ok(())
    }

    /// Adds the CPUs job `i` held since the last change to its running total.
    fn account_held(&mut self, i: usize, now: f64) {
        if let State::Running(r) = &mut self.states[i] {
            let held = if r.control.frozen {
                0
            } else {
                r.control.cpus.len()
            };
            r.held_total += held as f64 * (now - r.held_since);
            r.held_since = now;
        }
    }

    fn switch_slot_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if now < self.slot_deadline {
            return Ok(());
        }
        self.switch_lateness.push(now - self.slot_deadline);
        let slots = &self.plan.slots;
        self.slot = (self.slot + 1) % slots.len();
        let length = slots[self.slot].length.max(0.0);
        // Deadlines follow each other exactly, so late switches do not make the cycle drift; after a
        // long stall the cycle restarts from now.
        self.slot_deadline = if self.slot_deadline + length > now {
            self.slot_deadline + length
        } else {
            now + length
        };
        self.enforce_slot(true)
    }

    fn fire_timer_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if !self.timer.is_some_and(|t| t <= now) {
            return Ok(());
        }
        self.timer = None;
        let (window, count) = self.timers_in_a_row;
        self.timers_in_a_row = if now - window < 1e-3 {
            (window, count + 1)
        } else {
            (now, 1)
        };
        if self.timers_in_a_row.1 > MAX_TIMERS_PER_MS {
            return Err(self.plan_error("keeps asking for timers without letting time pass".into()));
        }
        self.sample_all()?;
        self.decide(Event::Timer)
    }

    fn sample_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if now < self.next_sample {
            return Ok(());
        }
        self.next_sample = now + self.options.sample_interval.max(0.01);
        self.sample_all()
    }

    /// One sample per running job since its previous one, into the trace and to the policy.
    fn sample_all(&mut self) -> Result<(), Error> {
        let groups = if self.enforcer.uses_affinity() {
            process_groups()
        } else {
            Default::default()
        };
        let mut samples = Vec::new();
        for i in self.running_indices() {
            let now = self.now();
            self.account_held(i, now);
            let State::Running(r) = &mut self.states[i] else {
                continue;
            };
            let stats: Vec<_> = self
                .enforcer
                .members(&r.control, &groups)
                .into_iter()
                .filter_map(|pid| crate::procfs::stat(pid).ok())
                .collect();
            let cpu_seconds = stats.iter().map(|s| s.cpu_seconds()).sum::<f64>();
            let counters = r.page.counters();
            let reading = Reading {
                t: now,
                // Processes that exited take their CPU time with them; never report negative use.
                cpu_seconds: cpu_seconds.max(r.mark.cpu_seconds),
                progress: counters.progress(),
                regions_started: counters.regions_started,
                held: r.held_total,
            };
            if let Some(sample) = r.mark.sample_until(&reading, JobId(i as u32)) {
                r.mark = reading;
                samples.push(Sample {
                    os_threads: Some(stats.iter().map(|s| s.num_threads).sum()),
                    team_size: (counters.last_team_size > 0).then_some(counters.last_team_size),
                    advice_seen: Some(counters.seen_generation == r.page.generation()),
                    ..sample
                });
            }
        }
        for sample in samples {
            self.emit(Record::Sample(sample.clone()))?;
            self.decide(Event::Sample(sample))?;
        }
        Ok(())
    }

    fn reapply_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if !self.enforcer.uses_affinity() || now < self.next_reapply {
            return Ok(());
        }
        self.next_reapply = now + self.options.reapply_interval.max(0.01);
        let groups = process_groups();
        for (i, r) in self.running() {
            self.enforcer
                .reapply(&r.control, &groups)
                .map_err(|source| Error::Enforce {
                    job: JobId(i as u32),
                    source,
                })?;
        }
        Ok(())
    }

    /// A malleable job's region applied the latest advice with a new team size.
    fn notice_thread_changes(&mut self) -> Result<(), Error> {
        let mut changed = Vec::new();
        for (i, r) in self.running() {
            let counters = r.page.counters();
            if counters.seen_generation == r.page.generation()
                && counters.last_team_size != 0
                && counters.last_team_size != r.threads
            {
                changed.push((i, counters.last_team_size));
            }
        }
        for (i, threads) in changed {
            let id = self.specs[i].id;
            if let State::Running(r) = &mut self.states[i] {
                r.threads = threads;
            }
            if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == id) {
                a.threads = threads;
            }
            self.emit(Record::Threads { job: id, threads })?;
            self.decide(Event::ThreadsChanged { job: id, threads })?;
        }
        Ok(())
    }

    fn reap_exited(&mut self) -> Result<(), Error> {
        for i in self.running_indices() {
            let State::Running(r) = &self.states[i] else {
                continue;
            };
            let Some((status, cpu)) = try_wait(r.pid) else {
                continue;
            };
            self.finish(i, status, cpu)?;
        }
        Ok(())
    }

    /// Records the end of job `i`, whose main process ended with wait status `status`.
    fn finish(&mut self, i: usize, status: libc::c_int, cpu_seconds: f64) -> Result<(), Error> {
        let now = self.now();
        self.account_held(i, now);
        let State::Running(mut r) = std::mem::replace(&mut self.states[i], State::Done) else {
            return Ok(());
        };
        let busy = self.enforcer.release(&mut r.control, &self.watchdog);
        self.busy_cgroups.extend(busy.into_iter().map(|c| (i, c)));
        self.watchdog.clear_control_page(i);
        let id = JobId(i as u32);
        let final_reading = Reading {
            t: now,
            cpu_seconds: cpu_seconds.max(r.mark.cpu_seconds),
            progress: r.page.counters().progress(),
            regions_started: r.page.counters().regions_started,
            held: r.held_total,
        };
        if let Some(sample) = r.mark.sample_until(&final_reading, id) {
            self.emit(Record::Sample(sample))?;
        }
        let (status, exit_code, error) = describe_wait_status(status);
        let outcome = &mut self.outcomes[i];
        outcome.finished = Some(now);
        outcome.status = status.clone();
        outcome.exit_code = exit_code;
        outcome.error = error.clone();
        outcome.cpu_seconds = cpu_seconds;
        self.active.retain(|a| a.spec.id != id);
        self.emit(Record::Finish {
            job: id,
            status,
            exit_code,
            error,
        })?;
        self.report_progress(true);
        self.decide(Event::Finished { job: id })
    }

    fn retry_busy_cgroups(&mut self) {
        if self.busy_cgroups.is_empty() {
            return;
        }
        let busy = std::mem::take(&mut self.busy_cgroups);
        for (i, cgroup) in busy {
            let left = self
                .enforcer
                .remove_now(std::slice::from_ref(&cgroup), i, &self.watchdog);
            self.busy_cgroups.extend(left.into_iter().map(|c| (i, c)));
        }
    }

    fn report_progress(&mut self, force: bool) {
        let mut counts = (0, 0, 0);
        for (state, outcome) in self.states.iter().zip(&self.outcomes) {
            match state {
                State::Done if outcome.status == ExitStatus::Ok => counts.0 += 1,
                State::Done => counts.1 += 1,
                State::Running(_) => counts.2 += 1,
                _ => {}
            }
        }
        if force || self.last_progress != Some(counts) || self.next_sample <= self.now() + 0.01 {
            self.last_progress = Some(counts);
            let progress = Progress {
                done: counts.0,
                failed: counts.1,
                running: counts.2,
                pending: self.states.len() - counts.0 - counts.1 - counts.2,
                elapsed: self.now(),
            };
            (self.progress)(&progress);
        }
    }

    /// Ends every job still running (SIGTERM, then SIGKILL after a grace period), removes every cgroup,
    /// and writes the trace's last line. Runs after success, failure and interruption alike.
    fn shutdown(&mut self, note: Option<&str>) {
        let running = self.running_indices();
        for &i in &running {
            if let State::Running(r) = &mut self.states[i] {
                let _ = self.enforcer.set_frozen(&mut r.control, false);
                // SAFETY: signals to the job's own process group.
                unsafe { libc::kill(-r.control.pgid, libc::SIGTERM) };
            }
        }
        let deadline = monotonic() + TERMINATE_GRACE;
        let mut left = running;
        while !left.is_empty() {
            left.retain(|&i| match &self.states[i] {
                State::Running(r) => match try_wait(r.pid) {
                    Some((status, cpu)) => {
                        let _ = self.finish_stopped(i, status, cpu, note);
                        false
                    }
                    None => true,
                },
                _ => false,
            });
            if monotonic() > deadline {
                for &i in &left {
                    if let State::Running(r) = &self.states[i] {
                        unsafe { libc::kill(-r.control.pgid, libc::SIGKILL) };
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let deadline = monotonic() + REMOVAL_GRACE;
        while !self.busy_cgroups.is_empty() && monotonic() < deadline {
            self.retry_busy_cgroups();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let overhead = thread_cpu_seconds() - self.cpu_origin;
        let _ = self.emit(Record::RunEnd {
            overhead_seconds: Some(overhead),
            note: note.map(str::to_string),
        });
        let _ = self.trace.flush();
    }

    /// Records a job ended by [`Executor::shutdown`].
    fn finish_stopped(
        &mut self,
        i: usize,
        status: libc::c_int,
        cpu: f64,
        note: Option<&str>,
    ) -> Result<(), Error> {
        self.deciding = true; // the run is over: no more plans
        self.finish(i, status, cpu)?;
        if let Some(note) = note {
            self.outcomes[i].error = Some(format!("stopped: {note}"));
        }
        Ok(())
    }

    fn report(&self) -> RunReport {
        RunReport {
            trace: self.options.trace.clone(),
            mechanism: self.mechanism.clone(),
            jobs: self.outcomes.clone(),
            wall_seconds: self.now(),
            overhead_seconds: thread_cpu_seconds() - self.cpu_origin,
            switch_skew: self.switch_skew.clone(),
            switch_lateness: self.switch_lateness.clone(),
        }
    }
}

impl Drop for Executor<'_> {
    /// After a panic the normal shutdown did not run: thaw, kill and remove what is left.
    fn drop(&mut self) {
        for state in &mut self.states {
            if let State::Running(r) = state {
                let busy = self.enforcer.release(&mut r.control, &self.watchdog);
                self.busy_cgroups
                    .extend(busy.into_iter().map(|c| (r.control.index, c)));
            }
        }
        let deadline = monotonic() + REMOVAL_GRACE;
        while !self.busy_cgroups.is_empty() && monotonic() < deadline {
            self.retry_busy_cgroups();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain system call; a returned descriptor is owned.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Reaps `pid` if it has ended: its wait status and the CPU seconds of it and its waited-for children.
fn try_wait(pid: i32) -> Option<(libc::c_int, f64)> {
    let mut status = 0;
    // SAFETY: wait4 writes into status and usage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    if reaped != pid {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some((status, tv(usage.ru_utime) + tv(usage.ru_stime)))
}

fn describe_wait_status(status: libc::c_int) -> (ExitStatus, Option<i32>, Option<String>) {
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => (ExitStatus::Ok, Some(0), None),
            code => (ExitStatus::Failed, Some(code), None),
        }
    } else {
        let signal = libc::WTERMSIG(status);
        // SAFETY: strsignal returns a static string for any number.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(signal)) };
        (
            ExitStatus::Failed,
            None,
            Some(format!(
                "killed by signal {signal} ({})",
                name.to_string_lossy()
            )),
        )
    }
}
