//! The event loop of a real run: arrivals, plans, slot switches, samples, timers and exits, in the
//! order the simulator handles them, written to the same trace.
//!
//! Each pass of the loop (`Executor::run_loop`), in this order:
//! 1. end jobs: reap those whose main process ended, kill those the source cancelled, pass on the
//!    signals it asked for (`ending`; the policy hears `Finished`);
//! 2. take a policy the source switched to;
//! 3. notice thread-count changes reported on control pages (`sampling`);
//! 4. take the jobs that arrived from the [`JobSource`] (the policy hears `Arrived`), and the tasks
//!    that joined a job (`tasks`);
//! 5. switch to the next slot when its deadline passed (`slots`);
//! 6. fire the policy's timer;
//! 7. sample every running job and re-apply affinity masks when due (`sampling`), retry enforcement
//!    the kernel reported busy, report progress;
//! 8. stop when no job is left and none will come, else check for a stall and sleep until the next
//!    deadline, exit, signal or news from the source (`clock`).
//!
//! Applying a plan goes one way: the plan is validated (`cosched_core::guard`), then enforced on the
//! running jobs ([`crate::enforce`], which registers with the watchdog whatever must be undone), then
//! newly placed jobs are launched into their enforcement (`environment`). `shutdown` ends a run.
//!
//! The loop reaches the machine only through the traits of `seams` (enforcement, job processes,
//! clock), so that `tests` drives it with fakes.

mod clock;
mod ending;
mod environment;
mod sampling;
mod seams;
mod shutdown;
mod slots;
mod source;
mod tasks;
#[cfg(test)]
mod tests;

pub use source::{Adopt, ArrivingJob, JobSource, OpenedAsUser, WorkloadReplay};

use crate::enforce::JobControl;
use crate::interrupt::Interrupts;
use crate::isolated::IsolatedTimes;
use crate::launch::InvokingUser;
use crate::measure::{instruction_counter_status, Reading, ResidentPeak};
use crate::mechanism::{Freezer, Mechanisms, Placement};
use crate::priority::Realtime;
use crate::watchdog::OnDeath;
use crate::Error;
use clock::thread_cpu_seconds;
use cosched_core::cycle;
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceWriter, TRACE_VERSION};
use cosched_core::workload::Workload;
use cosched_core::{
    check_stall, ActiveJob, Context, CpuSet, Event, JobId, JobKind, Plan, PlanError, Policy,
    TimerLoopGuard, Topology,
};
use cosched_native::control::ControlPage;
use environment::LaunchEnvironment;
use seams::{Children, Clock, Enforcement, Seams};
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;

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
}

impl RunOptions {
    pub fn new(trace: impl Into<PathBuf>, output_dir: impl Into<PathBuf>) -> RunOptions {
        let output_dir = output_dir.into();
        RunOptions {
            trace: trace.into(),
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
    /// The signal that ended its main process (the SIGKILL of a cancel included); `None` when it
    /// exited, or when how it ended is known only to another parent.
    pub signal: Option<i32>,
    pub error: Option<String>,
    /// CPU time of the job's main process and the children it waited for (from wait4).
    pub cpu_seconds: f64,
    /// `cpu_seconds` in user mode and in the kernel.
    pub user_seconds: f64,
    pub system_seconds: f64,
    /// The most memory it held, in bytes: its memory cgroup's peak where it had one, else the
    /// largest resident set of one of its processes ([`crate::measure::ResidentPeak`]).
    pub peak_memory: Option<u64>,
    /// Ended badly after the kernel killed processes of it for passing its memory limit.
    pub oom_killed: bool,
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
    if let Some(job) = workload.jobs.iter().find(|j| j.command.is_empty()) {
        return Err(Error::NoCommand {
            job: job.name.clone(),
        });
    }
    let mut replay =
        WorkloadReplay::new(workload, topology, &options.isolated, &options.output_dir);
    let run = RunSetup {
        name: workload.info.name.clone(),
        capacity: workload.jobs.len(),
        user: InvokingUser::from_sudo(),
        on_death: OnDeath::Kill,
    };
    let stats = execute(&run, topology, policy, &mut replay, options, progress)?;
    Ok(RunReport {
        trace: options.trace.clone(),
        mechanism: stats.mechanism,
        jobs: replay.into_outcomes(),
        wall_seconds: stats.wall_seconds,
        overhead_seconds: stats.overhead_seconds,
        switch_skew: stats.switch_skew,
        switch_lateness: stats.switch_lateness,
    })
}

/// What a run needs beyond its options: the name written into the trace, how many jobs may run at
/// once, whom they run as, and what becomes of them when the run ends early or cosched dies.
pub struct RunSetup {
    pub name: String,
    pub capacity: usize,
    pub user: Option<InvokingUser>,
    /// [`OnDeath::Kill`]: jobs die with the run (`cosched run`). [`OnDeath::Thaw`]: jobs outlive it,
    /// thawed, when it stops or dies (`cosched daemon`).
    pub on_death: OnDeath,
}

/// Figures about an executed run; what became of each job went to its source.
pub struct RunStats {
    pub mechanism: String,
    pub wall_seconds: f64,
    pub overhead_seconds: f64,
    pub switch_skew: Vec<f64>,
    pub switch_lateness: Vec<f64>,
}

/// Runs the jobs of `source` under `policy` until the source is exhausted and every job is done, or
/// until an error or a signal stops the run (then every job still running is stopped).
pub fn execute(
    run: &RunSetup,
    topology: &Topology,
    policy: Box<dyn Policy>,
    source: &mut dyn JobSource,
    options: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunStats, Error> {
    let mechanisms =
        Mechanisms::choose(options.placement, options.freezer).map_err(Error::Mechanism)?;
    // Held for the whole run: a loaded machine must not preempt a slot switch halfway (`priority`).
    let (_realtime, priority) = Realtime::raise();
    let mechanism = format!(
        "{}; {priority}; {}",
        mechanisms.describe(),
        instruction_counter_status()
    );
    let seams = Seams::real(mechanisms, run.capacity, run.on_death, mechanism)?;
    let mut executor = Executor::new(run, topology, policy, source, options, seams, progress)?;
    let result = executor.run_loop(&run.name);
    let note = match &result {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    match run.on_death {
        OnDeath::Kill => executor.shutdown(note.as_deref()),
        OnDeath::Thaw => executor.let_go(note.as_deref()),
    }
    result?;
    Ok(executor.stats())
}

struct Running {
    control: JobControl,
    pid: i32,
    /// Set when the executor took over a process it did not start (it cannot wait for it).
    adopted: Option<Adopt>,
    page: ControlPage,
    threads: u32,
    held_total: f64,
    held_since: f64,
    mark: Reading,
    peak: ResidentPeak,
    /// Signalled to end (a time limit): never frozen again, so that it can act on the signal.
    asked_to_end: bool,
}

impl Running {
    fn new(
        control: JobControl,
        adopted: Option<Adopt>,
        page: ControlPage,
        threads: u32,
        now: f64,
    ) -> Running {
        let pid = control.members.pid();
        Running {
            pid,
            peak: ResidentPeak::start(pid),
            control,
            adopted,
            page,
            threads,
            held_total: 0.0,
            held_since: now,
            asked_to_end: false,
            mark: Reading {
                t: now,
                ..Reading::default()
            },
        }
    }
}

enum State {
    Arrived,
    Running(Box<Running>),
}

/// A job between its arrival and its end.
struct Job {
    arriving: ArrivingJob,
    state: State,
    outcome: JobOutcome,
    /// Further attached tasks of the job beside its main process (`tasks.rs`).
    joined: Vec<Adopt>,
}

struct Executor<'a> {
    topology: &'a Topology,
    policy: Box<dyn Policy>,
    source: &'a mut dyn JobSource,
    options: &'a RunOptions,
    mechanism: String,
    jobs: BTreeMap<JobId, Job>,
    active: Vec<ActiveJob>,
    plan: Plan,
    slot: usize,
    slot_deadline: f64,
    timer: Option<f64>,
    timer_guard: TimerLoopGuard,
    next_sample: f64,
    next_reapply: f64,
    events: VecDeque<Event>,
    deciding: bool,
    trace: TraceWriter<BufWriter<File>>,
    cpu_origin: f64,
    environment: LaunchEnvironment,
    switch_skew: Vec<f64>,
    switch_lateness: Vec<f64>,
    done: usize,
    failed: usize,
    last_progress: Option<(usize, usize, usize)>,
    progress: &'a mut dyn FnMut(&Progress),
    clock: Box<dyn Clock>,
    children: Box<dyn Children>,
    interrupts: Interrupts,
    // Dropped last: its watchdog's sweep must come after the executor's own cleanup.
    enforcer: Box<dyn Enforcement>,
}

/// The wait status of an adopted job that ended: it was not our child, so how it ended is unknown.
const UNKNOWN_STATUS: libc::c_int = 0;

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

impl<'a> Executor<'a> {
    fn new(
        run: &RunSetup,
        topology: &'a Topology,
        policy: Box<dyn Policy>,
        source: &'a mut dyn JobSource,
        options: &'a RunOptions,
        seams: Seams,
        progress: &'a mut dyn FnMut(&Progress),
    ) -> Result<Executor<'a>, Error> {
        std::fs::create_dir_all(&options.output_dir).map_err(io_error(format!(
            "cannot create output directory {}",
            options.output_dir.display()
        )))?;
        if let Some(user) = &run.user {
            let _ = user.chown(&options.output_dir);
        }
        let trace_file = File::create(&options.trace).map_err(io_error(format!(
            "cannot write trace {}",
            options.trace.display()
        )))?;
        let interrupts =
            Interrupts::register().map_err(io_error("cannot install signal handlers".into()))?;
        Ok(Executor {
            topology,
            policy,
            source,
            options,
            mechanism: seams.mechanism,
            jobs: BTreeMap::new(),
            active: Vec::new(),
            plan: Plan::default(),
            slot: 0,
            slot_deadline: f64::INFINITY,
            timer: None,
            timer_guard: TimerLoopGuard::default(),
            next_sample: options.sample_interval,
            next_reapply: options.reapply_interval,
            events: VecDeque::new(),
            deciding: false,
            trace: TraceWriter::new(BufWriter::new(trace_file)),
            cpu_origin: thread_cpu_seconds(),
            environment: LaunchEnvironment {
                bench: cosched_native::bench_dir(),
                preload: cosched_native::preload_library(),
                interleave: options.interleave,
                user: run.user.clone(),
            },
            switch_skew: Vec::new(),
            switch_lateness: Vec::new(),
            done: 0,
            failed: 0,
            last_progress: None,
            progress,
            clock: seams.clock,
            children: seams.children,
            interrupts,
            enforcer: seams.enforcement,
        })
    }

    fn now(&self) -> f64 {
        self.clock.now()
    }

    fn emit(&mut self, record: Record) -> Result<(), Error> {
        self.source.observe(&record);
        let t = self.now();
        self.trace.write(t, record).map_err(io_error(format!(
            "cannot write trace {}",
            self.options.trace.display()
        )))
    }

    fn run_loop(&mut self, name: &str) -> Result<(), Error> {
        self.emit(Record::RunStart {
            version: TRACE_VERSION,
            executor: ExecutorKind::Real,
            policy: self.policy.name().to_string(),
            machine: self.topology.name.clone(),
            cpus: self.topology.num_cpus(),
            workload: name.to_string(),
            seed: None,
            mechanism: Some(self.mechanism.clone()),
            started_unix: Some(clock::unix_now() - self.now()),
        })?;
        while !self.pass()? {
            self.wait();
        }
        Ok(())
    }

    /// One pass of the loop, all but its sleep: true when the run is over.
    fn pass(&mut self) -> Result<bool, Error> {
        if let Some(signal) = self.interrupts.received() {
            return Err(Error::Interrupted(signal));
        }
        self.switch_slot_if_due()?;
        self.reap_exited()?;
        self.cancel_asked()?;
        self.signal_asked();
        self.switch_policy_if_asked()?;
        self.notice_thread_changes()?;
        self.arrive_due()?;
        self.join_tasks()?;
        self.switch_slot_if_due()?;
        self.fire_timer_if_due()?;
        self.sample_if_due()?;
        self.reapply_if_due()?;
        self.enforcer.retry_busy();
        self.report_progress(false);
        if self.jobs.is_empty() && self.source.exhausted() {
            return Ok(true);
        }
        self.check_stalled()?;
        Ok(false)
    }

    fn running(&self) -> impl Iterator<Item = (JobId, &Running)> {
        self.jobs.iter().filter_map(|(&id, job)| match &job.state {
            State::Running(r) => Some((id, r.as_ref())),
            State::Arrived => None,
        })
    }

    /// Whether some running job is placed by affinity masks alone.
    fn reapplies_any(&self) -> bool {
        self.running()
            .any(|(_, r)| self.enforcer.reapplies(&r.control))
    }

    fn running_ids(&self) -> Vec<JobId> {
        self.running().map(|(id, _)| id).collect()
    }

    /// Sleeps until the next deadline, a job's exit or an interrupt.
    fn wait(&mut self) {
        let mut deadline = self.slot_deadline.min(self.next_sample);
        if let Some(arrival) = self.source.next_arrival() {
            deadline = deadline.min(arrival);
        }
        if let Some(timer) = self.timer {
            deadline = deadline.min(timer);
        }
        if self.reapplies_any() {
            deadline = deadline.min(self.next_reapply);
        }
        // A short bound keeps a missed wake-up from hanging the run.
        deadline = deadline.min(self.now() + 1.0);
        let pids: Vec<i32> = self
            .running()
            .flat_map(|(_, r)| std::iter::once(r.pid).chain(r.control.joined.iter().copied()))
            .collect();
        let fds: Vec<_> = std::iter::once(self.interrupts.fd())
            .chain(self.source.wake_fd())
            .collect();
        // Whoever reads the trace of a long run (a daemon's) sees every record made before this sleep.
        let _ = self.trace.flush();
        self.clock.sleep_until(deadline, &pids, &fds);
    }

    fn plan_error(&self, source: PlanError) -> Error {
        Error::Plan {
            policy: self.policy.name().to_string(),
            source,
        }
    }

    fn check_stalled(&self) -> Result<(), Error> {
        let waiting = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, State::Arrived))
            .count();
        let progresses = self.running().next().is_some() || self.source.next_arrival().is_some();
        check_stall(waiting, progresses, self.timer).map_err(|e| self.plan_error(e))
    }

    fn decide(&mut self, event: Event) -> Result<(), Error> {
        if matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            self.reweight_asked();
        }
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

    /// Gives the jobs the weights the source changed, for the decision about to be made to read.
    fn reweight_asked(&mut self) {
        for (id, weight) in self.source.take_reweighted() {
            if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == id) {
                if a.spec.weight != weight {
                    Arc::make_mut(&mut a.spec).weight = weight;
                }
            }
        }
    }

    /// Hands every job to the policy the source switched to, and applies the plan it makes of them.
    fn switch_policy_if_asked(&mut self) -> Result<(), Error> {
        let Some(policy) = self.source.take_policy() else {
            return Ok(());
        };
        self.policy = policy;
        self.timer = None;
        self.timer_guard = TimerLoopGuard::default();
        let now = self.now();
        let plan = cosched_core::take_over(self.policy.as_mut(), self.topology, now, &self.active);
        match plan {
            Some(plan) => self.apply(plan),
            None => Ok(()),
        }
    }

    fn arrive_due(&mut self) -> Result<(), Error> {
        for arriving in self.source.take_arrived(self.now()) {
            let spec = arriving.spec.clone();
            let id = spec.id;
            let at = self.waiting_place(arriving.priority);
            self.active
                .insert(at, ActiveJob::new(spec.clone().into(), None, 0));
            let isolated = arriving.isolated;
            self.jobs.insert(
                id,
                Job {
                    outcome: JobOutcome::pending(&arriving),
                    arriving,
                    state: State::Arrived,
                    joined: Vec::new(),
                },
            );
            self.emit(Record::Arrival {
                job: spec,
                isolated,
            })?;
            self.decide(Event::Arrived { job: id })?;
        }
        Ok(())
    }

    /// Where a job of `priority` goes in the active jobs, which policies read as arrival order:
    /// before the first waiting job of lower priority, else last. Jobs handed over one by one as
    /// they are submitted then still start highest priority first, as Slurm starts them.
    fn waiting_place(&self, priority: i64) -> usize {
        self.active
            .iter()
            .position(|a| {
                a.started.is_none()
                    && self
                        .jobs
                        .get(&a.id())
                        .is_some_and(|j| j.arriving.priority < priority)
            })
            .unwrap_or(self.active.len())
    }

    /// Applies a plan in one direction: check it, enforce its first slot on running jobs, then launch
    /// the jobs it places for the first time.
    fn apply(&mut self, plan: Plan) -> Result<(), Error> {
        plan.validate(self.topology.cpus(), |id| self.jobs.contains_key(&id))
            .map_err(|e| self.plan_error(e))?;
        self.emit(Record::Plan { plan: plan.clone() })?;
        let placed: Vec<(JobId, &CpuSet)> = (plan.placed_jobs().into_iter())
            .filter_map(|id| Some((id, plan.first_cpus(id)?)))
            .collect();
        self.source.placed(&placed);
        let mut new = Vec::new();
        for id in plan.placed_jobs() {
            let job = &self.jobs[&id];
            match &job.state {
                State::Arrived => new.push(id),
                State::Running(r) if job.arriving.spec.kind == JobKind::Malleable => {
                    if let Some(&advised) = plan.advice.get(&id) {
                        let spec = &job.arriving.spec;
                        r.page
                            .set_advice(advised.clamp(spec.min_threads, spec.max_threads));
                    }
                }
                State::Running(_) => {}
            }
        }
        let now = self.now();
        self.timer = plan.timer;
        let running = cycle::slot_jobs(&self.plan, self.slot);
        (self.slot, self.slot_deadline) =
            cycle::going_on((&running, self.slot, self.slot_deadline), &plan, now);
        self.plan = plan;
        self.enforce_slot(false)?;
        if new.is_empty() {
            return Ok(());
        }
        for id in new {
            self.start(id)?;
            // A start takes a millisecond or more (cgroups, exec): a slot switch falling due
            // meanwhile goes first, not after every start of the plan.
            self.switch_slot_if_due()?;
        }
        // Jobs launched on CPUs of a later slot wait frozen for it.
        self.enforce_slot(false)
    }

    /// Starts job `id` on its first CPUs of the current plan.
    fn start(&mut self, id: JobId) -> Result<(), Error> {
        let plan = &self.plan;
        let first = (plan.first_cpus(id))
            .expect("placed jobs hold CPUs in some slot")
            .clone();
        let job = &self.jobs[&id];
        let threads = job.arriving.spec.threads_at_start(plan);
        let now = self.now();
        let launched = self.environment.launch(
            &job.arriving,
            &first,
            threads,
            self.enforcer.as_mut(),
            self.children.as_mut(),
            now,
        );
        match launched {
            Ok(running) => {
                let pid = running.pid;
                let job = self.jobs.get_mut(&id).expect("checked above");
                job.outcome.pid = Some(pid as u32);
                job.outcome.threads = threads;
                job.outcome.started = Some(now);
                job.outcome.error = None;
                job.state = State::Running(Box::new(running));
                if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == id) {
                    a.started = Some(now);
                    a.threads = threads;
                }
                self.emit(Record::Start {
                    job: id,
                    threads,
                    pid: Some(pid as u32),
                })?;
                for task in self.jobs[&id].joined.clone() {
                    self.enclose_joined(id, task)?;
                }
                Ok(())
            }
            Err(error) => self.end_unstarted(id, error.to_string()),
        }
    }

    fn fire_timer_if_due(&mut self) -> Result<(), Error> {
        let now = self.now();
        if !self.timer.is_some_and(|t| t <= now) {
            return Ok(());
        }
        self.timer = None;
        self.timer_guard
            .fired(now)
            .map_err(|e| self.plan_error(e))?;
        self.sample_all()?;
        self.decide(Event::Timer)
    }

    fn report_progress(&mut self, force: bool) {
        let running = self.running().count();
        let counts = (self.done, self.failed, running);
        if force || self.last_progress != Some(counts) || self.next_sample <= self.now() + 0.01 {
            self.last_progress = Some(counts);
            let progress = Progress {
                done: self.done,
                failed: self.failed,
                running,
                pending: self.jobs.len() - running + self.source.not_arrived(),
                elapsed: self.now(),
            };
            (self.progress)(&progress);
        }
    }

    fn stats(&self) -> RunStats {
        RunStats {
            mechanism: self.mechanism.clone(),
            wall_seconds: self.now(),
            overhead_seconds: thread_cpu_seconds() - self.cpu_origin,
            switch_skew: self.switch_skew.clone(),
            switch_lateness: self.switch_lateness.clone(),
        }
    }
}

/// Job `id` if it is running; a free function so that the rest of the executor stays borrowable.
fn running_mut(jobs: &mut BTreeMap<JobId, Job>, id: JobId) -> Option<&mut Running> {
    match &mut jobs.get_mut(&id)?.state {
        State::Running(r) => Some(r),
        State::Arrived => None,
    }
}

impl JobOutcome {
    /// Arrived or known, and not started yet.
    fn pending(job: &ArrivingJob) -> JobOutcome {
        JobOutcome {
            id: job.spec.id,
            name: job.spec.name.clone(),
            pid: None,
            threads: 0,
            started: None,
            finished: None,
            status: ExitStatus::Failed,
            exit_code: None,
            signal: None,
            error: Some("never started".into()),
            cpu_seconds: 0.0,
            user_seconds: 0.0,
            system_seconds: 0.0,
            peak_memory: None,
            oom_killed: false,
            stdout: job.stdout.clone(),
            stderr: job.stderr.clone(),
        }
    }
}
