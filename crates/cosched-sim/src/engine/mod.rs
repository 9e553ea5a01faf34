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
//! - `job`: a job's state, and once it started, its progress;
//! - `plan`: applying the policy's plan changes (starts, thread advice, timers, slot ends);
//! - `progress`: settling a job's progress at its rate and moving its finish in the calendar;
//! - `sampling`: the samples a running job reports, shared with the reference engine;
//! - `rates`: each job's rate under the plan, re-evaluating only the slots that changed;
//! - `groups`: within a slot, only the groups of runners (by machine region) that changed;
//! - `isolated`: the isolated time of a job (slowdown's denominator) and its cache;
//! - `active`: the active jobs as the policy sees them; waiting jobs beyond the policy's
//!   [`queue_window`](cosched_core::Policy::queue_window) wait hidden in arrival order, and the policy
//!   hears of each (`Arrived`) when it comes into view;
//! - `closed`: closed experiments (jobs restarted until each has its runs).
//!
//! With a machine memory ([`SimOptions::memory`]), an arrived job whose memory request does not
//! fit beside those of the jobs the policy holds waits unseen, as the daemon holds it pending for
//! `memory` ([`cosched_core::memory::admits`], the daemon's rule); later jobs that fit go ahead.

mod active;
mod calendar;
mod closed;
mod groups;
mod isolated;
mod job;
mod plan;
mod progress;
mod rates;
#[cfg(test)]
mod reference;
mod sampling;

pub use isolated::isolated_time;
pub(crate) use isolated::IsolatedTimes;

use crate::model::Effects;
use crate::model::{MachineModel, Mode, ModelParams, Scratch};
use crate::profile::Profile;
use crate::sink::TraceSink;
use active::ActiveList;
use calendar::{Calendar, Due};
use closed::{ClosedRuns, Next};
use cosched_core::memory::{admits, Size};
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceLine, TRACE_VERSION};
use cosched_core::{check_stall, PlanError, Policy, TimerLoopGuard, Topology};
use cosched_core::{ActiveJob, Context, Event, JobId, JobSpec, Plan};
use job::Standing;
pub(crate) use job::{JobState, Phase};
use rates::{Figures, RateBook};
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// A job as the simulator needs it: what the policy sees plus how it performs.
#[derive(Debug, Clone)]
pub struct SimJob {
    /// Shared with the policy's view of the job while it is active.
    pub spec: Arc<JobSpec>,
    pub profile: Arc<Profile>,
    /// Bytes of memory it asks for (a workload's `mem`).
    pub mem: Option<u64>,
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
    /// Bytes of the machine's memory for jobs: the memory requests of the jobs the policy holds
    /// add up to at most this. `None`: no limit.
    pub memory: Option<u64>,
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
    #[error("job {job} asks for {asked} of memory, more than the machine's {memory} for jobs; give the machine more (--memory) or the job less (mem)")]
    MemoryAboveMachine {
        job: String,
        asked: Size,
        memory: Size,
    },
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
/// memory bandwidth (or the bandwidth effect is off), since a NUMA node then couples nobody; and
/// by package on a machine that names no cache when no job has a footprint either.
fn machine_model(topology: &Topology, jobs: &[SimJob], options: &SimOptions) -> MachineModel {
    let machine = MachineModel::new(topology, &options.params);
    let bandwidth_bound =
        options.effects.bandwidth && jobs.iter().any(|j| j.profile.bandwidth_gbs > 0.0);
    let cache_bound = options.effects.llc && jobs.iter().any(|j| j.profile.footprint.is_some());
    match (bandwidth_bound, cache_bound) {
        (true, _) => machine,
        (false, true) => machine.uncouple_memory(topology),
        (false, false) => machine.uncouple_cache(topology),
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
    /// Arrived jobs whose memory does not fit yet, oldest first; hidden from the policy.
    memory_waiting: VecDeque<usize>,
    /// The memory requests of the jobs admitted and not finished, added up.
    memory_in_use: u64,
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
            if let Some(memory) = options.memory {
                if !admits(memory, 0, job.mem) {
                    return Err(SimError::MemoryAboveMachine {
                        job: job.spec.name.clone(),
                        asked: Size(job.mem.unwrap_or(0)),
                        memory: Size(memory),
                    });
                }
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
            memory_waiting: VecDeque::new(),
            memory_in_use: 0,
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
                && self.memory_waiting.is_empty()
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
        self.states[i].phase = Phase::Waiting;
        self.emit(Record::Arrival {
            job: spec,
            isolated: Some(isolated),
        })?;
        if !self.fits(i) {
            self.memory_waiting.push_back(i);
            return Ok(());
        }
        self.admit(i)
    }

    /// Whether job `i`'s memory request fits beside those of the jobs admitted.
    fn fits(&self, i: usize) -> bool {
        let memory = self.options.memory.unwrap_or(u64::MAX);
        admits(memory, self.memory_in_use, self.jobs[i].mem)
    }

    /// Counts job `i`'s memory in use and shows it to the policy, or hides it behind the jobs its
    /// queue window has no room for yet.
    fn admit(&mut self, i: usize) -> Result<(), SimError> {
        // The policy's list is in admission order: a job that waited for memory comes after those
        // that went ahead.
        self.states[i].order = self.next_order;
        self.next_order += 1;
        if self.options.memory.is_some() {
            self.memory_in_use += self.jobs[i].mem.unwrap_or(0);
        }
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

    /// Admits the jobs waiting for memory that fit now, oldest first.
    fn admit_waiting(&mut self) -> Result<(), SimError> {
        let mut still = VecDeque::new();
        while let Some(i) = self.memory_waiting.pop_front() {
            match self.fits(i) {
                true => self.admit(i)?,
                false => still.push_back(i),
            }
        }
        self.memory_waiting = still;
        Ok(())
    }

    fn finish(&mut self, i: usize) -> Result<(), SimError> {
        self.settle(i);
        if self.options.memory.is_some() {
            self.memory_in_use -= self.jobs[i].mem.unwrap_or(0);
        }
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
        self.admit_waiting()?;
        let Some(closed) = &mut self.closed else {
            return Ok(());
        };
        match closed.finished(i, self.now, &self.jobs) {
            Next::Stop(done) => self.stop_all(&done.to_string()),
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
        let hidden: Vec<JobId> = (self.hidden.drain(..))
            .chain(self.memory_waiting.drain(..))
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
            let id = self.jobs[i].spec.id;
            let advice_seen = run.pending.is_none();
            samples.extend(
                run.sampling
                    .close(id, now, run.remaining, run.threads, advice_seen),
            );
        }
        for sample in samples {
            self.emit(Record::Sample(sample.clone()))?;
            self.decide(Event::Sample(sample))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
