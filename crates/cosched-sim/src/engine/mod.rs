//! The discrete-event engine: an event calendar of finishes, thread changes, arrivals, slot ends and
//! timers; the policy decides on each event; each job's progress is integrated lazily, at the rate the
//! model gives it, and brought up to date only when its rate changes or someone looks at it. Under a
//! fluid cycle of slots, rates are per cycle and progress runs in cycle time (`calendar`), so a new
//! cycle length reaches every job without touching any.
//!
//! Work per event is proportional to what the event changes (the slots whose runners changed, the plan
//! the policy returned), not to the number of jobs waiting. The trace streams to the sink as it happens,
//! with plans written as changes (`plan_change` records); nothing is kept for a finished job.
//!
//! - `calendar`: the priority queue of coming events;
//! - `rates`: each job's rate under the plan, re-evaluating only the slots that changed;
//! - `groups`: within a slot, only the groups of runners (by machine region) that changed;
//! - `isolated`: the isolated time of a job (slowdown's denominator) and its cache;
//! - `active`: the active jobs as the policy sees them; waiting jobs beyond the policy's
//!   [`queue_window`](cosched_core::Policy::queue_window) wait hidden in arrival order, and the policy
//!   hears of each (`Arrived`) when it comes into view;
//! - `closed`: closed experiments (jobs restarted until each has its runs).

mod active;
mod calendar;
mod closed;
mod groups;
mod isolated;
mod rates;
#[cfg(test)]
mod reference;

pub use isolated::isolated_time;
pub(crate) use isolated::IsolatedTimes;

use crate::model::Effects;
use crate::model::{MachineModel, Mode, ModelParams, Scratch};
use crate::profile::Profile;
use crate::sink::TraceSink;
use active::ActiveList;
use calendar::{Calendar, Due};
use closed::{ClosedRuns, Next};
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceLine, TRACE_VERSION};
use cosched_core::{check_stall, PlanError, Policy, RateSource, Sample, TimerLoopGuard, Topology};
use cosched_core::{ActiveJob, Context, CpuSet, Event, JobId, JobKind, JobSpec, Plan, PlanChange};
use rates::{cycle_length, switch_cost, Figures, Inputs, RateBook};
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// A job as the simulator needs it: what the policy sees plus how it performs.
#[derive(Debug, Clone)]
pub struct SimJob {
    /// Shared with the policy's view of the job while it is active.
    pub spec: Arc<JobSpec>,
    pub profile: Arc<Profile>,
}

/// How to simulate, and what to write in the trace's `run_start` record.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    pub mode: Mode,
    pub effects: Effects,
    pub params: ModelParams,
    /// Workload name for the trace.
    pub workload: String,
    /// Seed the workload was generated with, if any.
    pub seed: Option<u64>,
    /// A closed experiment (CaSAS §4.1, after Snavely & Tullsen's SMT job scheduling): every job is
    /// started again as soon as it finishes, as a new job, until each has completed this many runs;
    /// runs still going then are stopped (`failed`, with the reason), so that every counted run saw the
    /// same mix. `None`: every job runs once.
    pub min_runs: Option<std::num::NonZeroU32>,
}

impl SimOptions {
    /// The model's switches in one line, for the trace's `mechanism` field.
    pub fn describe(&self) -> String {
        let e = &self.effects;
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "model {:?} speedup={:?} reconfig={} sync={} serial_phase={} llc={} bandwidth={} numa={} switch={}",
            self.mode,
            e.speedup,
            on(e.reconfig_delay),
            on(e.sync),
            on(e.serial_phase),
            on(e.llc),
            on(e.bandwidth),
            on(e.numa),
            on(e.switch_cost)
        )
        .to_lowercase()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("policy {policy:?} at t={t:.3}: {source}")]
    Plan {
        policy: String,
        t: f64,
        source: PlanError,
    },
    #[error("two jobs share the id {0}; job ids must be unique")]
    DuplicateId(JobId),
    #[error("cannot write the trace: {0}")]
    Io(#[from] std::io::Error),
}

/// Figures about one simulation run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimStats {
    /// Events delivered to the policy.
    pub events: u64,
    /// Simulated time at the end of the run, seconds.
    pub sim_time: f64,
    pub wall_seconds: f64,
    /// LLC miss ratio of all accesses of the jobs with a footprint (None when no job has one): each
    /// job's miss ratio weighted by its CPU time.
    pub llc_miss_rate: Option<f64>,
}

/// Simulates `jobs` under `policy` on `topology` and returns the whole trace (plans whole, as
/// [`cosched_core::trace::read_trace`] gives them).
pub fn simulate(
    topology: &Topology,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    options: &SimOptions,
) -> Result<Vec<TraceLine>, SimError> {
    let mut lines = Vec::new();
    simulate_into(topology, jobs, policy, options, &mut lines)?;
    Ok(lines)
}

/// Simulates and hands every trace line to `sink` as it happens (stream large runs to a file).
pub fn simulate_into(
    topology: &Topology,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    options: &SimOptions,
    sink: &mut dyn TraceSink,
) -> Result<SimStats, SimError> {
    let isolated = IsolatedTimes::default();
    simulate_sharing(topology, jobs, policy, options, sink, &isolated)
}

/// [`simulate_into`], with the isolated times of earlier runs of the same machine and model.
pub(crate) fn simulate_sharing(
    topology: &Topology,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    options: &SimOptions,
    sink: &mut dyn TraceSink,
    isolated: &IsolatedTimes,
) -> Result<SimStats, SimError> {
    let wall = Instant::now();
    let mut engine = Engine::new(topology, jobs, policy, options, sink, isolated)?;
    engine.run()?;
    let mut stats = engine.stats.clone();
    stats.wall_seconds = wall.elapsed().as_secs_f64();
    stats.llc_miss_rate =
        (engine.llc_accesses > 0.0).then(|| engine.llc_misses / engine.llc_accesses);
    let note = match stats.llc_miss_rate {
        Some(miss) => format!("{}; llc_miss_rate={miss:.4}", options.describe()),
        None => options.describe(),
    };
    engine.emit(Record::RunEnd {
        overhead_seconds: Some(stats.wall_seconds),
        note: Some(note),
    })?;
    Ok(stats)
}

/// The model of `topology` for a run of `jobs`: its regions by LLC alone when none of them demands
/// memory bandwidth (or the bandwidth effect is off), since a NUMA node then couples nobody.
fn machine_model(topology: &Topology, jobs: &[SimJob], options: &SimOptions) -> MachineModel {
    let machine = MachineModel::new(topology, &options.params);
    let bandwidth_bound =
        options.effects.bandwidth && jobs.iter().any(|j| j.profile.bandwidth_gbs > 0.0);
    if bandwidth_bound {
        machine
    } else {
        machine.uncouple_memory(topology)
    }
}

/// Where a job is in its life.
pub(crate) enum Phase {
    /// Not arrived yet.
    Pending,
    /// Arrived, never placed.
    Waiting,
    Running(Box<Run>),
    Finished,
}

pub(crate) struct JobState {
    phase: Phase,
    /// Arrival sequence number: the job's key among the active jobs.
    order: u64,
}

impl JobState {
    pub(crate) fn running(&self) -> Option<&Run> {
        match &self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    /// Whether it runs, read without its run.
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running(_))
    }

    fn running_mut(&mut self) -> Option<&mut Run> {
        match &mut self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }
}

/// A started job's progress. `remaining` is exact at `since`; from there it falls by `figures.rate`
/// per cycle (after `stall_until`) until the rate changes. Figures are per cycle of the plan's fluid
/// cycle of slots, per second otherwise ([`calendar::CycleClock`]).
pub(crate) struct Run {
    /// Start sequence number: simultaneous events of running jobs are handled in start order.
    started: u64,
    pub threads: u32,
    /// NUMA nodes holding the job's memory (where it first ran).
    pub home: CpuSet,
    figures: Figures,
    remaining: f64,
    /// Remaining work under which the job counts as done ([`calendar::done_below`]).
    done_below: f64,
    /// Whether its profile has a cache footprint, for the LLC's miss counts. (With `done_below`, read
    /// on every move of the job's rate, for thousands of jobs at once, without reaching its profile.)
    has_footprint: bool,
    /// Cycle time and squared-cycle time of the last settlement.
    since: f64,
    since_squared: f64,
    /// Exact mode: no progress before this cycle time (cache refill after a slot switch); exact mode
    /// has no fluid cycle, so its cycle time runs with time.
    stall_until: f64,
    /// Thread count a malleable job switches to, and when.
    pending: Option<(f64, u32)>,
    /// Versions of the job's finish and thread-change entries in the calendar.
    finish_version: u32,
    threads_version: u32,
    sample_t: f64,
    sample_remaining: f64,
    cpu_seconds: f64,
    held_seconds: f64,
}

/// The versions a calendar entry must carry to be current: what it was computed from has not moved
/// on.
struct Standing<'s> {
    states: &'s [JobState],
    slot_version: u32,
    timer_version: u32,
}

impl Standing<'_> {
    fn holds(&self, due: &Due) -> bool {
        match *due {
            Due::Finish { job, version } => self.states[job]
                .running()
                .is_some_and(|run| run.finish_version == version),
            Due::Threads { job, version } => self.states[job]
                .running()
                .is_some_and(|run| run.threads_version == version && run.pending.is_some()),
            Due::Arrival => true,
            Due::SlotEnd { version } => version == self.slot_version,
            Due::Timer { version } => version == self.timer_version,
        }
    }
}

struct Engine<'a> {
    topology: &'a Topology,
    /// The workload's jobs, then (closed experiments) the later runs.
    jobs: Cow<'a, [SimJob]>,
    policy: &'a mut dyn Policy,
    options: &'a SimOptions,
    sink: &'a mut dyn TraceSink,
    machine: MachineModel,
    scratch: Scratch,
    /// The figures `book` last found changed, a list kept for its room.
    changed_figures: Vec<(usize, Figures)>,
    /// The finishes a refresh of rates moved, before they go into the calendar.
    moved_finishes: Vec<(f64, Due, u64)>,
    index: HashMap<JobId, usize>,
    isolated: &'a IsolatedTimes,
    states: Vec<JobState>,
    closed: Option<ClosedRuns>,
    next_order: u64,
    active: ActiveList,
    /// Arrived jobs the policy does not see yet (beyond its queue window), oldest first.
    hidden: VecDeque<usize>,
    /// Shown jobs that have not started.
    shown_waiting: usize,
    /// Started jobs in start order; finished ones are dropped lazily.
    running: Vec<usize>,
    running_count: usize,
    starts: u64,
    arrivals: Vec<usize>,
    next_arrival: usize,
    calendar: Calendar,
    plan: Plan,
    /// Jobs finished since the last plan change: still placed after the next one, they are an error.
    finished_since_plan: Vec<JobId>,
    book: RateBook,
    rates_stale: bool,
    timer: Option<f64>,
    timer_version: u32,
    timer_guard: TimerLoopGuard,
    /// Exact mode: current slot, when it ends, and the version of its calendar entry.
    slot: usize,
    slot_end: f64,
    slot_version: u32,
    now: f64,
    stats: SimStats,
    /// Integrals over the run of miss ratio × CPU share and of CPU share (accesses, in CPU-seconds).
    llc_misses: f64,
    llc_accesses: f64,
}

impl<'a> Engine<'a> {
    fn new(
        topology: &'a Topology,
        jobs: &'a [SimJob],
        policy: &'a mut dyn Policy,
        options: &'a SimOptions,
        sink: &'a mut dyn TraceSink,
        isolated: &'a IsolatedTimes,
    ) -> Result<Self, SimError> {
        let mut index = HashMap::with_capacity_and_hasher(jobs.len(), Default::default());
        for (i, job) in jobs.iter().enumerate() {
            if index.insert(job.spec.id, i).is_some() {
                return Err(SimError::DuplicateId(job.spec.id));
            }
        }
        let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
        arrivals.sort_by(|&a, &b| {
            jobs[a]
                .spec
                .arrival
                .total_cmp(&jobs[b].spec.arrival)
                .then(jobs[a].spec.id.cmp(&jobs[b].spec.id))
        });
        let states = jobs
            .iter()
            .map(|_| JobState {
                phase: Phase::Pending,
                order: 0,
            })
            .collect();
        let mut engine = Engine {
            topology,
            jobs: Cow::Borrowed(jobs),
            policy,
            options,
            sink,
            machine: machine_model(topology, jobs, options),
            scratch: Scratch::default(),
            changed_figures: Vec::new(),
            moved_finishes: Vec::new(),
            index,
            isolated,
            states,
            closed: options
                .min_runs
                .map(|runs| ClosedRuns::new(runs.get(), jobs)),
            next_order: 0,
            active: ActiveList::default(),
            hidden: VecDeque::new(),
            shown_waiting: 0,
            running: Vec::new(),
            running_count: 0,
            starts: 0,
            arrivals,
            next_arrival: 0,
            calendar: Calendar::default(),
            plan: Plan::default(),
            finished_since_plan: Vec::new(),
            book: RateBook::default(),
            rates_stale: false,
            timer: None,
            timer_version: 0,
            timer_guard: TimerLoopGuard::default(),
            slot: 0,
            slot_end: f64::INFINITY,
            slot_version: 0,
            now: 0.0,
            stats: SimStats::default(),
            llc_misses: 0.0,
            llc_accesses: 0.0,
        };
        let policy_name = engine.policy.name().to_string();
        engine.emit(Record::RunStart {
            version: TRACE_VERSION,
            executor: ExecutorKind::Sim,
            policy: policy_name,
            machine: topology.name.clone(),
            cpus: topology.num_cpus(),
            workload: options.workload.clone(),
            seed: options.seed,
            mechanism: Some(options.describe()),
            started_unix: None,
        })?;
        Ok(engine)
    }

    fn emit(&mut self, record: Record) -> Result<(), SimError> {
        self.sink.record(TraceLine {
            t: self.now,
            record,
        })?;
        Ok(())
    }

    fn run(&mut self) -> Result<(), SimError> {
        self.schedule_next_arrival();
        loop {
            self.refresh_rates();
            if self.active.is_empty()
                && self.hidden.is_empty()
                && self.next_arrival == self.arrivals.len()
            {
                self.stats.sim_time = self.now;
                return Ok(());
            }
            // At most a finish and a thread change per running job, plus an arrival, a slot end and a
            // timer.
            let live = 2 * self.running_count + 3;
            let (calendar, standing) = self.calendar_and_standing();
            let current = |_: f64, due: &Due| standing.holds(due);
            calendar.compact(live, current);
            let next = calendar.pop(current);
            let Some((t, due)) = next else {
                check_stall(self.active.len(), false, None).map_err(|e| self.plan_error(e))?;
                unreachable!("jobs are active, so check_stall reports the stall");
            };
            self.now = self.now.max(t);
            self.handle(due)?;
        }
    }

    /// The calendar, and what tells its current entries from outdated ones.
    fn calendar_and_standing(&mut self) -> (&mut Calendar, Standing<'_>) {
        let standing = Standing {
            states: &self.states,
            slot_version: self.slot_version,
            timer_version: self.timer_version,
        };
        (&mut self.calendar, standing)
    }

    fn handle(&mut self, due: Due) -> Result<(), SimError> {
        self.handle_event(due)?;
        self.show_hidden()
    }

    fn handle_event(&mut self, due: Due) -> Result<(), SimError> {
        match due {
            Due::Finish { job, .. } => self.finish(job),
            Due::Threads { job, .. } => self.change_threads_due(job),
            Due::Arrival => {
                let i = self.arrivals[self.next_arrival];
                self.next_arrival += 1;
                self.schedule_next_arrival();
                self.arrive(i)
            }
            Due::SlotEnd { .. } => {
                if self.running_count > 0 {
                    self.next_slot();
                }
                Ok(())
            }
            Due::Timer { .. } => self.timer_fired(),
        }
    }

    fn schedule_next_arrival(&mut self) {
        if let Some(&i) = self.arrivals.get(self.next_arrival) {
            let t = self.jobs[i].spec.arrival.max(self.now);
            self.calendar.schedule(t, Due::Arrival);
        }
    }

    fn timer_fired(&mut self) -> Result<(), SimError> {
        self.timer = None;
        self.timer_guard
            .fired(self.now)
            .map_err(|e| self.plan_error(e))?;
        self.deliver_samples()?;
        self.decide(Event::Timer)
    }

    fn plan_error(&self, source: PlanError) -> SimError {
        SimError::Plan {
            policy: self.policy.name().to_string(),
            t: self.now,
            source,
        }
    }

    fn decide(&mut self, event: Event) -> Result<(), SimError> {
        self.stats.events += 1;
        let ctx = Context {
            topology: self.topology,
            now: self.now,
            jobs: self.active.as_slice(),
        };
        if let Some(change) = self.policy.decide_change(&ctx, &event, &self.plan) {
            self.apply(change)?;
        }
        Ok(())
    }

    fn arrive(&mut self, i: usize) -> Result<(), SimError> {
        let job = &self.jobs[i];
        let isolated = self.isolated.get(
            &self.machine,
            self.topology,
            job,
            self.options,
            &mut self.scratch,
        );
        let spec = JobSpec::clone(&job.spec);
        let order = self.next_order;
        self.next_order += 1;
        self.states[i] = JobState {
            phase: Phase::Waiting,
            order,
        };
        self.emit(Record::Arrival {
            job: spec,
            isolated: Some(isolated),
        })?;
        if self.hidden.is_empty() && self.window_has_room() {
            self.show(i)
        } else {
            self.hidden.push_back(i);
            Ok(())
        }
    }

    /// Whether the policy's queue window has room for one more waiting job.
    fn window_has_room(&self) -> bool {
        self.policy
            .queue_window(self.topology)
            .is_none_or(|window| self.shown_waiting < window.max(1))
    }

    /// Shows waiting job `i` to the policy, as arrived now.
    fn show(&mut self, i: usize) -> Result<(), SimError> {
        let spec = self.jobs[i].spec.clone();
        let id = spec.id;
        self.active
            .push(ActiveJob::new(spec, None, 0), self.states[i].order);
        self.shown_waiting += 1;
        self.decide(Event::Arrived { job: id })
    }

    /// Shows hidden jobs, oldest first, while the policy's window has room.
    fn show_hidden(&mut self) -> Result<(), SimError> {
        while !self.hidden.is_empty() && self.window_has_room() {
            let i = self.hidden.pop_front().expect("not empty");
            self.show(i)?;
        }
        Ok(())
    }

    fn finish(&mut self, i: usize) -> Result<(), SimError> {
        self.settle(i);
        let id = self.jobs[i].spec.id;
        self.states[i].phase = Phase::Finished;
        self.running_count -= 1;
        self.active.remove(self.states[i].order);
        self.finished_since_plan.push(id);
        self.job_changed(id);
        self.emit(Record::Finish {
            job: id,
            status: ExitStatus::Ok,
            exit_code: None,
            error: None,
        })?;
        self.decide(Event::Finished { job: id })?;
        let Some(closed) = &mut self.closed else {
            return Ok(());
        };
        match closed.finished(i, self.now, &self.jobs) {
            Next::Stop(reason) => self.stop_all(&reason),
            Next::Again(job) => {
                let j = self.jobs.len();
                self.index.insert(job.spec.id, j);
                self.states.push(JobState {
                    phase: Phase::Pending,
                    order: 0,
                });
                self.jobs.to_mut().push(job);
                self.arrive(j)
            }
        }
    }

    /// Ends a closed experiment: the runs still going are stopped as failed, with `reason`.
    fn stop_all(&mut self, reason: &str) -> Result<(), SimError> {
        let shown = self.active.take_all().into_iter().map(|job| job.spec.id);
        let hidden: Vec<JobId> = self
            .hidden
            .drain(..)
            .map(|i| self.jobs[i].spec.id)
            .collect();
        for id in shown.chain(hidden).collect::<Vec<_>>() {
            let i = self.index[&id];
            self.settle(i);
            self.states[i].phase = Phase::Finished;
            self.emit(Record::Finish {
                job: id,
                status: ExitStatus::Failed,
                exit_code: None,
                error: Some(reason.to_string()),
            })?;
        }
        self.running.clear();
        self.running_count = 0;
        self.shown_waiting = 0;
        self.next_arrival = self.arrivals.len();
        self.timer = None;
        self.plan = Plan::default();
        self.calendar.clear();
        Ok(())
    }

    /// Job `i`'s thread change is due, and so may be others' at this instant: all of them take effect
    /// before the policy hears of the first, as an executor polling the jobs would see them together.
    fn change_threads_due(&mut self, i: usize) -> Result<(), SimError> {
        let mut changed = vec![i];
        let now = self.now;
        let simultaneous = |t: f64, due: &Due| t == now && matches!(due, Due::Threads { .. });
        let (calendar, standing) = self.calendar_and_standing();
        while let Some(Due::Threads { job, .. }) =
            calendar.pop_if(|_, due| standing.holds(due), simultaneous)
        {
            changed.push(job);
        }
        let mut events = Vec::with_capacity(changed.len());
        for i in changed {
            self.settle(i);
            let id = self.jobs[i].spec.id;
            let order = self.states[i].order;
            let Some(run) = self.states[i].running_mut() else {
                continue;
            };
            let threads = run.pending.take().map_or(0, |(_, threads)| threads);
            run.threads = threads;
            if let Some(a) = self.active.get_mut(order) {
                a.threads = threads;
            }
            self.job_changed(id);
            self.emit(Record::Threads { job: id, threads })?;
            events.push(Event::ThreadsChanged { job: id, threads });
        }
        for event in events {
            self.decide(event)?;
        }
        Ok(())
    }

    /// A job's runners changed (started, finished, new thread count): its slots need new rates.
    fn job_changed(&mut self, id: JobId) {
        let pinned = self.plan.pinned.iter().any(|a| a.job == id);
        self.book.job_changed(self.index[&id], pinned);
        self.rates_stale = true;
    }

    fn deliver_samples(&mut self) -> Result<(), SimError> {
        let states = &self.states;
        self.running.retain(|&i| states[i].running().is_some());
        let now = self.now;
        let mut samples = Vec::new();
        for k in 0..self.running.len() {
            let i = self.running[k];
            self.settle(i);
            let Some(run) = self.states[i].running_mut() else {
                continue;
            };
            let interval = now - run.sample_t;
            if interval <= 0.0 {
                continue;
            }
            // Simulated jobs run exactly their thread count and apply advice after their delay.
            samples.push(Sample {
                os_threads: Some(run.threads),
                team_size: Some(run.threads),
                advice_seen: Some(run.pending.is_none()),
                ..Sample::new(
                    self.jobs[i].spec.id,
                    (run.sample_remaining - run.remaining) / interval,
                    RateSource::Model,
                    (run.held_seconds / interval).round() as u32,
                    run.cpu_seconds,
                    interval,
                )
            });
            run.sample_t = now;
            run.sample_remaining = run.remaining;
            run.cpu_seconds = 0.0;
            run.held_seconds = 0.0;
        }
        for sample in samples {
            self.emit(Record::Sample(sample.clone()))?;
            self.decide(Event::Sample(sample))?;
        }
        Ok(())
    }

    fn apply(&mut self, change: PlanChange) -> Result<(), SimError> {
        let states = &self.states;
        let index = &self.index;
        let is_active = |job| {
            index
                .get(&job)
                .is_some_and(|&i| matches!(states[i].phase, Phase::Waiting | Phase::Running(_)))
        };
        change
            .validate(self.topology.cpus(), is_active)
            .map_err(|e| self.plan_error(e))?;
        let mut plan = std::mem::take(&mut self.plan);
        change.apply(&mut plan);
        self.book.change(&change, &plan, &self.index);
        // The rest of the plan was valid when placed; of it, only a job that finished since can have
        // become inactive.
        for id in std::mem::take(&mut self.finished_since_plan) {
            let pinned = plan.pinned.iter().any(|a| a.job == id);
            if pinned || self.book.slots_of(self.index[&id]).next().is_some() {
                self.plan = plan;
                return Err(self.plan_error(PlanError::InactiveJob { job: id }));
            }
        }
        self.rates_stale = true;
        // Jobs whose place or advice changed: the only ones that can start or get new thread advice.
        let touched: BTreeSet<JobId> = change.jobs().chain(change.advice.keys().copied()).collect();
        self.emit(Record::PlanChange(change))?;
        let mut starts = Vec::new();
        for id in touched {
            let i = self.index[&id];
            let pinned = plan.pinned.iter().find(|a| a.job == id);
            let mut slots = self.book.slots_of(i).peekable();
            if pinned.is_none() && slots.peek().is_none() {
                continue;
            }
            let job = &self.jobs[i];
            let advice = plan.advice.get(&id).copied();
            match &mut self.states[i].phase {
                Phase::Waiting => {
                    let mut first = None;
                    let mut widest = 0;
                    for s in slots {
                        let assignments = &plan.slots[s].assignments;
                        let here = assignments.iter().find(|a| a.job == id);
                        let here = here.expect("the job is in this slot");
                        let cpus = pinned.map_or(&here.cpus, |pin| &pin.cpus);
                        widest = widest.max(cpus.len());
                        first = first.or(Some(here));
                    }
                    if let Some(pin) = pinned {
                        widest = widest.max(pin.cpus.len());
                    }
                    let threads = match job.spec.kind {
                        JobKind::Rigid => job.spec.max_threads,
                        JobKind::Moldable | JobKind::Malleable => advice
                            .map(|a| a.clamp(job.spec.min_threads, job.spec.max_threads))
                            .unwrap_or_else(|| job.spec.threads_for(widest)),
                    };
                    let home = first
                        .or(pinned)
                        .map(|a| self.machine.numa_nodes(&a.cpus))
                        .unwrap_or_default();
                    self.starts += 1;
                    self.states[i].phase = Phase::Running(Box::new(Run {
                        started: self.starts,
                        threads,
                        home,
                        figures: Figures::default(),
                        remaining: job.profile.work,
                        done_below: calendar::done_below(job.profile.work),
                        has_footprint: job.profile.footprint.is_some(),
                        since: self.calendar.clock().cycles_at(self.now),
                        since_squared: self.calendar.clock().squared_cycles_at(self.now),
                        stall_until: 0.0,
                        pending: None,
                        finish_version: 0,
                        threads_version: 0,
                        sample_t: self.now,
                        sample_remaining: job.profile.work,
                        cpu_seconds: 0.0,
                        held_seconds: 0.0,
                    }));
                    self.running.push(i);
                    self.running_count += 1;
                    self.shown_waiting -= 1;
                    self.book.job_changed(i, pinned.is_some());
                    starts.push((i, threads));
                }
                Phase::Running(run) if job.spec.kind == JobKind::Malleable => {
                    let Some(advised) = advice else {
                        continue;
                    };
                    let advised = advised.clamp(job.spec.min_threads, job.spec.max_threads);
                    if advised == run.threads {
                        run.pending = None;
                    } else if run.pending.map(|(_, t)| t) != Some(advised) {
                        let delay = if self.options.effects.reconfig_delay {
                            job.profile.reconfig_delay
                        } else {
                            0.0
                        };
                        let due = self.now + delay;
                        run.pending = Some((due, advised));
                        run.threads_version += 1;
                        let version = run.threads_version;
                        let rank = run.started;
                        self.calendar
                            .schedule_ranked(due, Due::Threads { job: i, version }, rank);
                    }
                }
                _ => {}
            }
        }
        for (i, threads) in starts {
            let id = self.jobs[i].spec.id;
            if let Some(a) = self.active.get_mut(self.states[i].order) {
                a.started = Some(self.now);
                a.threads = threads;
            }
            self.emit(Record::Start {
                job: id,
                threads,
                pid: None,
            })?;
        }
        self.timer = plan.timer;
        self.timer_version += 1;
        if let Some(t) = plan.timer {
            let version = self.timer_version;
            self.calendar
                .schedule(t.max(self.now), Due::Timer { version });
        }
        self.slot = 0;
        self.slot_end = self.now + plan.slots.first().map_or(f64::INFINITY, |s| s.length);
        self.slot_version += 1;
        if self.options.mode == Mode::Exact && plan.slots.len() > 1 {
            let version = self.slot_version;
            self.calendar
                .schedule(self.slot_end, Due::SlotEnd { version });
        }
        self.plan = plan;
        Ok(())
    }

    /// Exact mode: the next slot of the cycle begins; jobs entering it stall while they refill caches.
    fn next_slot(&mut self) {
        let n = self.plan.slots.len();
        let previous = self.slot;
        self.slot = (self.slot + 1) % n;
        self.slot_end = self.now + self.plan.slots[self.slot].length;
        self.slot_version += 1;
        let version = self.slot_version;
        self.calendar
            .schedule(self.slot_end, Due::SlotEnd { version });
        if self.options.effects.switch_cost {
            let before: HashSet<JobId> = self.plan.slots[previous]
                .assignments
                .iter()
                .map(|a| a.job)
                .collect();
            let entering: Vec<usize> = self.plan.slots[self.slot]
                .assignments
                .iter()
                .filter(|a| !before.contains(&a.job))
                .map(|a| self.index[&a.job])
                .collect();
            for i in entering {
                self.settle(i);
                let cost = switch_cost(&self.machine, &self.jobs[i], self.options);
                let now = self.calendar.clock().cycles_at(self.now);
                if let Some(run) = self.states[i].running_mut() {
                    run.stall_until = now + cost;
                }
                self.reschedule_finish(i);
            }
        }
        self.rates_stale = true;
    }

    /// Brings job `i`'s progress and counters up to now at its current figures.
    fn settle(&mut self, i: usize) {
        let clock = *self.calendar.clock();
        let Some(run) = self.states[i].running_mut() else {
            return;
        };
        let now = clock.cycles_at(self.now);
        let passed = now - run.since;
        if passed <= 0.0 {
            return;
        }
        let productive = (now - run.stall_until.max(run.since)).clamp(0.0, passed);
        let f = run.figures;
        run.remaining -= f.rate * productive;
        run.cpu_seconds += f.cpu_share * passed;
        run.held_seconds += f.held * passed;
        let squared = clock.squared_cycles_at(self.now);
        if run.has_footprint {
            // Per second, the miss ratio and the CPU share are each a per-cycle figure over the cycle.
            self.llc_misses += f.llc_miss * f.cpu_share * (squared - run.since_squared);
            self.llc_accesses += f.cpu_share * passed;
        }
        run.since = now;
        run.since_squared = squared;
    }

    /// Puts job `i`'s finish in the calendar at its current rate (outdating the previous entry).
    fn reschedule_finish(&mut self, i: usize) {
        if let Some((at, due, rank)) = self.next_finish(i) {
            self.calendar.schedule_finish(at, due, rank);
        }
    }

    /// Job `i`'s finish at its current rate, as a calendar entry (cycle time, due, rank) that
    /// outdates its previous one; `None` if it makes no progress.
    fn next_finish(&mut self, i: usize) -> Option<(f64, Due, u64)> {
        let now = self.calendar.clock().cycles_at(self.now);
        let run = self.states[i].running_mut()?;
        run.finish_version += 1;
        let due = Due::Finish {
            job: i,
            version: run.finish_version,
        };
        let rate = run.figures.rate;
        let at = if run.remaining <= run.done_below {
            now
        } else if rate > 0.0 {
            run.stall_until.max(now) + run.remaining / rate
        } else {
            return None;
        };
        Some((at, due, run.started))
    }

    /// New figures for the jobs whose slots changed; their progress is settled first and their finish
    /// moved. Jobs that left the plan stop.
    fn refresh_rates(&mut self) {
        if !self.rates_stale {
            return;
        }
        self.rates_stale = false;
        let inputs = Inputs {
            plan: &self.plan,
            jobs: &self.jobs,
            states: &self.states,
            index: &self.index,
            machine: &self.machine,
            options: self.options,
            current_slot: self.slot,
        };
        let cycle = cycle_length(&self.plan, self.options.mode);
        if cycle != self.calendar.clock().cycle() {
            self.calendar.set_cycle(self.now, cycle);
        }
        let mut changed = std::mem::take(&mut self.changed_figures);
        self.book.figures(&inputs, &mut self.scratch, &mut changed);
        // The finishes go into the calendar after every job's run is updated: a new shortest turn
        // moves thousands, and apart from the queue's work, their runs (each behind a pointer) are
        // fetched from memory side by side.
        let mut finishes = std::mem::take(&mut self.moved_finishes);
        for &(i, f) in &changed {
            finishes.extend(self.set_figures(i, f));
        }
        for (at, due, rank) in finishes.drain(..) {
            self.calendar.schedule_finish(at, due, rank);
        }
        self.moved_finishes = finishes;
        self.changed_figures = changed;
    }

    /// Settles job `i` and gives it `figures`; returns its finish's new calendar entry if its rate
    /// moved.
    fn set_figures(&mut self, i: usize, figures: Figures) -> Option<(f64, Due, u64)> {
        let old = self.states[i].running().map(|run| run.figures)?;
        if old == figures {
            return None;
        }
        self.settle(i);
        if let Some(run) = self.states[i].running_mut() {
            run.figures = figures;
        }
        (old.rate != figures.rate)
            .then(|| self.next_finish(i))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::reference::simulate_reference;
    use super::*;
    use cosched_core::topology::synthetic;
    use cosched_core::JobHints;
    use proptest::prelude::*;

    const PROFILES: [&str; 7] = [
        "nas/lu.A",
        "nas/cg.B",
        "nas/is.C",
        "amdahl(serial=0.1, runtime=3)",
        "amdahl(serial=0, runtime=2, sync=spin, sync_interval=0.001)",
        "polybench/adi",
        // Memory-bound: its node's bandwidth couples the jobs of both LLCs of the test machine.
        "amdahl(serial=0.05, runtime=4, bandwidth=3)",
    ];

    #[test]
    fn a_shared_memory_node_couples_llcs_only_when_a_job_demands_bandwidth() {
        let topology = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
        let options = SimOptions::default();
        let regions = |profile: &str| {
            let jobs = [sim_job(0, profile, 0.0, JobKind::Rigid, 1)];
            machine_model(&topology, &jobs, &options).regions
        };
        assert_eq!(regions("amdahl(serial=0.05, runtime=4)"), 2);
        assert_eq!(regions("amdahl(serial=0.05, runtime=4, bandwidth=3)"), 1);
    }

    fn finishes(trace: &[TraceLine]) -> Vec<(JobId, f64)> {
        let mut out: Vec<(JobId, f64)> = trace
            .iter()
            .filter_map(|l| match l.record {
                Record::Finish { job, .. } => Some((job, l.t)),
                _ => None,
            })
            .collect();
        out.sort_by_key(|(job, _)| *job);
        out
    }

    /// Job `id` of `profile`, with one to `threads` threads, its sync hint the profile's.
    fn sim_job(id: u32, profile: &str, arrival: f64, kind: JobKind, threads: u32) -> SimJob {
        let profile = crate::profile::parse(profile).unwrap();
        SimJob {
            spec: JobSpec {
                id: JobId(id),
                name: format!("j{id}"),
                arrival,
                kind,
                min_threads: 1,
                max_threads: threads,
                coschedule: true,
                weight: 1.0,
                hints: JobHints {
                    sync: profile.sync,
                    ..JobHints::default()
                },
            }
            .into(),
            profile: Arc::new(profile),
        }
    }

    fn arb_jobs() -> impl Strategy<Value = Vec<SimJob>> {
        prop::collection::vec(
            (0usize..PROFILES.len(), 0.0f64..6.0, 0u8..3, 1u32..9),
            1..13,
        )
        .prop_map(|raw| {
            raw.into_iter()
                .enumerate()
                .map(|(id, (profile, arrival, kind, threads))| {
                    let kind =
                        [JobKind::Rigid, JobKind::Moldable, JobKind::Malleable][kind as usize];
                    sim_job(id as u32, PROFILES[profile], arrival, kind, threads)
                })
                .collect()
        })
    }

    /// A policy shown every waiting job: its queue window is left at the default.
    struct ShowAll(Box<dyn Policy>);

    impl Policy for ShowAll {
        fn name(&self) -> &str {
            self.0.name()
        }

        fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
            self.0.decide(ctx, event)
        }
    }

    /// A policy that notes, whenever it hears of a thread change, when, and every active job's
    /// thread count.
    struct WatchThreads {
        inner: Box<dyn Policy>,
        seen: Vec<(f64, JobId, Vec<u32>)>,
    }

    impl Policy for WatchThreads {
        fn name(&self) -> &str {
            self.inner.name()
        }

        fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
            if let Event::ThreadsChanged { job, .. } = event {
                let threads = ctx.jobs.iter().map(|j| j.threads).collect();
                self.seen.push((ctx.now, *job, threads));
            }
            self.inner.decide(ctx, event)
        }
    }

    #[test]
    fn thread_changes_due_at_one_instant_take_effect_before_the_policy_hears_of_any() {
        // Two alike malleable jobs share 6 CPUs, 3 each; a third arrives at t = 1 and EQ advises
        // both down to 2 at once, so both adapt after the same delay.
        let profile = "amdahl(serial=0.05, runtime=20, reconfig_delay=0.05)";
        let jobs: Vec<SimJob> = [0.0, 0.0, 1.0]
            .into_iter()
            .enumerate()
            .map(|(id, arrival)| sim_job(id as u32, profile, arrival, JobKind::Malleable, 6))
            .collect();
        let mut policy = WatchThreads {
            inner: cosched_policies::create("eq").unwrap(),
            seen: Vec::new(),
        };
        let machine = synthetic::parse("core:6").unwrap();
        simulate(&machine, &jobs, &mut policy, &SimOptions::default()).unwrap();
        let (_, job, threads) = policy
            .seen
            .iter()
            .find(|(t, ..)| *t > 1.0)
            .expect("the first two jobs adapt to the third");
        assert_eq!(threads[..2], [2, 2], "heard of {job:?} first");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Hiding the jobs beyond a policy's queue window changes no finish: on a machine of two CPUs,
        /// where most jobs wait, every job finishes when it does with the whole queue shown.
        #[test]
        fn hiding_the_queue_beyond_the_window_changes_no_finish(
            jobs in arb_jobs(),
            policy in prop::sample::select(vec!["bp", "eq", "ta", "taco:mpl=1", "gang:mpl=2"]),
        ) {
            let machine = synthetic::parse("core:2").unwrap();
            let options = SimOptions::default();
            let windowed = simulate(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options).unwrap();
            let shown = simulate(&machine, &jobs, &mut ShowAll(cosched_policies::create(policy).unwrap()), &options).unwrap();
            let (windowed, shown) = (finishes(&windowed), finishes(&shown));
            prop_assert_eq!(windowed.len(), jobs.len());
            prop_assert_eq!(windowed.len(), shown.len());
            for ((job, a), (other, b)) in windowed.iter().zip(&shown) {
                prop_assert_eq!(job, other);
                prop_assert!((a - b).abs() <= 1e-9 * b.max(1.0), "job {:?}: {} vs {}", job, a, b);
            }
        }

        /// The calendar engine finishes every job when the simple engine does, under every kind of
        /// policy (space sharing, gang slots, timers and samples, thread advice) and both modes.
        #[test]
        fn the_calendar_engine_agrees_with_the_simple_one(
            jobs in arb_jobs(),
            policy in prop::sample::select(vec!["ue", "bp", "eq", "ta", "taco", "gang", "casas"]),
            exact in any::<bool>(),
        ) {
            let machine = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
            let options = SimOptions {
                mode: if exact { Mode::Exact } else { Mode::Fluid },
                ..SimOptions::default()
            };
            let fast = simulate(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options);
            let simple = simulate_reference(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options);
            let (fast, simple) = match (fast, simple) {
                (Ok(fast), Ok(simple)) => (fast, simple),
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a.to_string(), b.to_string());
                    return Ok(());
                }
                (a, b) => panic!("one engine failed: fast {:?}, simple {:?}", a.err(), b.err()),
            };
            let (fast, simple) = (finishes(&fast), finishes(&simple));
            prop_assert_eq!(fast.len(), simple.len());
            for ((job, a), (other, b)) in fast.iter().zip(&simple) {
                prop_assert_eq!(job, other);
                prop_assert!((a - b).abs() <= 1e-6 * b.max(1.0), "job {:?}: {} vs {}", job, a, b);
            }
        }
    }
}
