//! The simple engine the fast one is tested against (design.md §6, reference-versus-fast model tests):
//! at every event it walks every running job, re-evaluates every slot and writes whole plans.

use super::closed::{ClosedRuns, Next};
use super::isolated::isolated;
use super::job::{mark_started, switch_on_advice, Switch};
use super::plan::going_on_at;
use super::sampling::SampleWindow;
use super::{SimError, SimJob, SimOptions, SimStats};
use crate::model::{slot_rates, MachineModel, Mode, Runner, Scratch};
use crate::sink::TraceSink;
use cosched_core::cycle::slot_jobs;
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceLine, TRACE_VERSION};
use cosched_core::{check_stall, PlanError, TimerLoopGuard, Topology};
use cosched_core::{ActiveJob, Context, CpuSet, Event, JobId, JobKind, Plan, Policy};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The whole run's trace, from the simple engine.
pub(super) fn simulate_reference(
    topology: &Topology,
    jobs: &[SimJob],
    policy: &mut dyn Policy,
    options: &SimOptions,
) -> Result<Vec<TraceLine>, SimError> {
    let mut lines = Vec::new();
    let mut engine = Engine::new(topology, jobs, policy, options, &mut lines)?;
    engine.run()?;
    Ok(lines)
}

struct JobState {
    remaining: f64,
    arrived: bool,
    started: bool,
    finished: bool,
    threads: u32,
    /// Thread count a malleable job switches to, and when.
    pending: Option<(f64, u32)>,
    home: CpuSet,
    /// Current cycle-average figures.
    rate: f64,
    cpu_share: f64,
    held: f64,
    llc_miss: f64,
    /// Exact mode: no progress before this time (cache refill after a slot switch).
    stall_until: f64,
    sampling: SampleWindow,
}

impl JobState {
    fn new(work: f64) -> JobState {
        JobState {
            remaining: work,
            arrived: false,
            started: false,
            finished: false,
            threads: 0,
            pending: None,
            home: CpuSet::new(),
            rate: 0.0,
            cpu_share: 0.0,
            held: 0.0,
            llc_miss: 0.0,
            stall_until: 0.0,
            sampling: SampleWindow::open(0.0, work),
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
    index: HashMap<JobId, usize>,
    isolated_cache: HashMap<(usize, JobKind, u32, u32), f64>,
    states: Vec<JobState>,
    closed: Option<ClosedRuns>,
    /// Jobs in arrival order, for the policy.
    active: Vec<ActiveJob>,
    /// Started, unfinished jobs.
    running: Vec<usize>,
    arrivals: Vec<usize>,
    next_arrival: usize,
    plan: Plan,
    timer: Option<f64>,
    timer_guard: TimerLoopGuard,
    /// Exact mode: current slot and when it ends.
    slot: usize,
    slot_end: f64,
    now: f64,
    dirty: bool,
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
    ) -> Result<Self, SimError> {
        let mut index = HashMap::with_capacity(jobs.len());
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
            .map(|job| JobState::new(job.profile.work))
            .collect();
        let machine = MachineModel::new(topology, &options.params);
        let mut engine = Engine {
            topology,
            jobs: Cow::Borrowed(jobs),
            policy,
            options,
            sink,
            machine,
            scratch: Scratch::default(),
            index,
            isolated_cache: HashMap::new(),
            states,
            closed: options
                .min_runs
                .map(|runs| ClosedRuns::new(runs.get(), jobs)),
            active: Vec::new(),
            running: Vec::new(),
            arrivals,
            next_arrival: 0,
            plan: Plan::default(),
            timer: None,
            timer_guard: TimerLoopGuard::default(),
            slot: 0,
            slot_end: f64::INFINITY,
            now: 0.0,
            dirty: false,
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
        loop {
            if self.dirty {
                self.recompute_rates();
            }
            if self.active.is_empty() && self.next_arrival == self.arrivals.len() {
                self.stats.sim_time = self.now;
                return Ok(());
            }
            let t = self.next_time();
            if !t.is_finite() {
                check_stall(self.active.len(), false, None).map_err(|e| self.plan_error(e))?;
            }
            if t > self.now {
                self.advance(t);
            }
            self.handle_due()?;
        }
    }

    /// The earliest coming event time (finish, thread change, arrival, slot end, timer).
    fn next_time(&self) -> f64 {
        let mut t = f64::INFINITY;
        for &i in &self.running {
            let s = &self.states[i];
            if s.rate > 0.0 {
                t = t.min(s.stall_until.max(self.now) + s.remaining / s.rate);
            }
            if let Some((due, _)) = s.pending {
                t = t.min(due);
            }
        }
        if let Some(&i) = self.arrivals.get(self.next_arrival) {
            t = t.min(self.jobs[i].spec.arrival);
        }
        if let Some(timer) = self.timer {
            t = t.min(timer.max(self.now));
        }
        if self.options.mode == Mode::Exact && self.plan.slots.len() > 1 && !self.running.is_empty()
        {
            t = t.min(self.slot_end);
        }
        t.max(self.now)
    }

    /// Integrates progress from `now` to `t` at the current rates.
    fn advance(&mut self, t: f64) {
        let dt = t - self.now;
        for &i in &self.running {
            let s = &mut self.states[i];
            let productive = (t - s.stall_until.max(self.now)).clamp(0.0, dt);
            s.remaining -= s.rate * productive;
            s.sampling.cpu_seconds += s.cpu_share * dt;
            s.sampling.held_seconds += s.held * dt;
            if self.jobs[i].profile.footprint.is_some() {
                self.llc_misses += s.llc_miss * s.cpu_share * dt;
                self.llc_accesses += s.cpu_share * dt;
            }
        }
        self.now = t;
    }

    /// Handles every event due at `now`, one at a time, re-planning after each.
    fn handle_due(&mut self) -> Result<(), SimError> {
        let now = self.now;
        let finishing: Vec<usize> = self
            .running
            .iter()
            .copied()
            .filter(|&i| {
                let s = &self.states[i];
                s.remaining <= super::calendar::done_below(self.jobs[i].profile.work)
                    || (s.rate > 0.0
                        && s.stall_until.max(now) + s.remaining / s.rate
                            <= now * (1.0 + super::calendar::FINISH_TOLERANCE))
            })
            .collect();
        for i in finishing {
            // A closed experiment may have stopped the other runs finishing now.
            if !self.states[i].finished {
                self.finish(i)?;
            }
        }
        let due: Vec<(usize, u32)> = self
            .running
            .iter()
            .filter_map(|&i| match self.states[i].pending {
                Some((t, threads)) if t <= now => Some((i, threads)),
                _ => None,
            })
            .collect();
        // All of this instant's thread changes take effect before the policy hears of the first.
        let mut events = Vec::with_capacity(due.len());
        for (i, threads) in due {
            events.push(self.change_threads(i, threads)?);
        }
        for event in events {
            self.decide(event)?;
        }
        while let Some(&i) = self.arrivals.get(self.next_arrival) {
            if self.jobs[i].spec.arrival > now {
                break;
            }
            self.next_arrival += 1;
            self.arrive(i)?;
        }
        if self.options.mode == Mode::Exact && self.slot_end <= now && self.plan.slots.len() > 1 {
            self.next_slot();
        }
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
            self.timer_guard
                .fired(now)
                .map_err(|e| self.plan_error(e))?;
            self.deliver_samples()?;
            self.decide(Event::Timer)?;
        }
        Ok(())
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
            jobs: &self.active,
        };
        if let Some(plan) = self.policy.decide(&ctx, &event) {
            self.apply(plan)?;
        }
        Ok(())
    }

    fn arrive(&mut self, i: usize) -> Result<(), SimError> {
        let job = &self.jobs[i];
        // Jobs of one profile and shape share their isolated time; generated workloads repeat them a lot.
        let key = (
            Arc::as_ptr(&job.profile) as usize,
            job.spec.kind,
            job.spec.min_threads,
            job.spec.max_threads,
        );
        let isolated = match self.isolated_cache.get(&key) {
            Some(&t) => t,
            None => {
                let t = isolated(
                    &self.machine,
                    self.topology,
                    job,
                    self.options,
                    &mut self.scratch,
                );
                self.isolated_cache.insert(key, t);
                t
            }
        };
        let spec = job.spec.clone();
        self.states[i].arrived = true;
        self.active.push(ActiveJob::new(spec.clone(), None, 0));
        let id = spec.id;
        self.emit(Record::Arrival {
            job: cosched_core::JobSpec::clone(&spec),
            isolated: Some(isolated),
        })?;
        self.decide(Event::Arrived { job: id })
    }

    fn finish(&mut self, i: usize) -> Result<(), SimError> {
        let id = self.jobs[i].spec.id;
        let s = &mut self.states[i];
        s.finished = true;
        s.remaining = 0.0;
        s.pending = None;
        self.running.retain(|&j| j != i);
        self.active.retain(|a| a.spec.id != id);
        self.dirty = true;
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
            Next::Stop(done) => self.stop_all(&done.to_string()),
            Next::Again(job) => {
                let j = self.jobs.len();
                self.index.insert(job.spec.id, j);
                self.states.push(JobState::new(job.profile.work));
                self.jobs.to_mut().push(job);
                self.arrive(j)
            }
        }
    }

    /// Closed experiments: every workload job has its runs; the runs still going stop.
    fn stop_all(&mut self, reason: &str) -> Result<(), SimError> {
        for job in std::mem::take(&mut self.active) {
            let j = self.index[&job.spec.id];
            self.states[j].finished = true;
            self.emit(Record::Finish {
                job: job.spec.id,
                status: ExitStatus::Failed,
                exit_code: None,
                error: Some(reason.to_string()),
            })?;
        }
        self.running.clear();
        self.next_arrival = self.arrivals.len();
        self.timer = None;
        self.plan = Plan::default();
        Ok(())
    }

    fn change_threads(&mut self, i: usize, threads: u32) -> Result<Event, SimError> {
        let id = self.jobs[i].spec.id;
        self.states[i].threads = threads;
        self.states[i].pending = None;
        if let Some(a) = self.active.iter_mut().find(|a| a.spec.id == id) {
            a.threads = threads;
        }
        self.dirty = true;
        self.emit(Record::Threads { job: id, threads })?;
        Ok(Event::ThreadsChanged { job: id, threads })
    }

    fn deliver_samples(&mut self) -> Result<(), SimError> {
        let now = self.now;
        let mut samples = Vec::new();
        for &i in &self.running {
            let s = &mut self.states[i];
            let id = self.jobs[i].spec.id;
            let advice_seen = s.pending.is_none();
            samples.extend(
                s.sampling
                    .close(id, now, s.remaining, s.threads, advice_seen),
            );
        }
        for sample in samples {
            self.emit(Record::Sample(sample.clone()))?;
            self.decide(Event::Sample(sample))?;
        }
        Ok(())
    }

    fn apply(&mut self, plan: Plan) -> Result<(), SimError> {
        plan.validate(self.topology.cpus(), |job| {
            self.index
                .get(&job)
                .is_some_and(|&i| self.states[i].arrived && !self.states[i].finished)
        })
        .map_err(|e| self.plan_error(e))?;
        self.sink.record(TraceLine {
            t: self.now,
            record: Record::Plan { plan: plan.clone() },
        })?;
        let mut starts = Vec::new();
        for id in plan.placed_jobs() {
            let i = self.index[&id];
            let job = &self.jobs[i];
            let advice = plan.advice.get(&id).copied();
            let s = &mut self.states[i];
            if !s.started {
                let threads = job.spec.threads_at_start(&plan);
                s.started = true;
                s.threads = threads;
                s.sampling = SampleWindow::open(self.now, s.remaining);
                s.home = plan
                    .slots
                    .iter()
                    .flat_map(|slot| &slot.assignments)
                    .chain(&plan.pinned)
                    .find(|a| a.job == id)
                    .map(|a| self.machine.numa_nodes(&a.cpus))
                    .unwrap_or_default();
                self.running.push(i);
                starts.push((id, threads));
            } else if job.spec.kind == JobKind::Malleable {
                if let Some(advised) = advice {
                    let effects = &self.options.effects;
                    match switch_on_advice(job, s.threads, s.pending, advised, self.now, effects) {
                        Switch::Unchanged => {}
                        Switch::CalledOff => s.pending = None,
                        Switch::At(due, threads) => s.pending = Some((due, threads)),
                    }
                }
            }
        }
        for (id, threads) in starts {
            let active = self.active.iter_mut().find(|a| a.spec.id == id);
            let record = mark_started(active, id, threads, self.now);
            self.emit(record)?;
        }
        self.timer = plan.timer;
        let running = (self.options.mode == Mode::Exact).then(|| slot_jobs(&self.plan, self.slot));
        (self.slot, self.slot_end) =
            going_on_at(running, (self.slot, self.slot_end), &plan, self.now);
        self.plan = plan;
        self.dirty = true;
        Ok(())
    }

    fn next_slot(&mut self) {
        let n = self.plan.slots.len();
        let previous = self.slot;
        self.slot = (self.slot + 1) % n;
        self.slot_end = self.now + self.plan.slots[self.slot].length;
        if self.options.effects.switch_cost {
            let before: HashSet<JobId> = self.plan.slots[previous]
                .assignments
                .iter()
                .map(|a| a.job)
                .collect();
            let entering: Vec<JobId> = self.plan.slots[self.slot]
                .assignments
                .iter()
                .map(|a| a.job)
                .filter(|id| !before.contains(id))
                .collect();
            for id in entering {
                let i = self.index[&id];
                let cost = self.switch_cost(i);
                self.states[i].stall_until = self.now + cost;
            }
        }
        self.dirty = true;
    }

    fn switch_cost(&self, i: usize) -> f64 {
        super::rates::switch_cost(&self.machine, &self.jobs[i], self.options)
    }

    fn recompute_rates(&mut self) {
        self.dirty = false;
        for &i in &self.running {
            let s = &mut self.states[i];
            s.rate = 0.0;
            s.cpu_share = 0.0;
            s.held = 0.0;
            s.llc_miss = 0.0;
        }
        let slots = self.plan.slots.len();
        let cycle = self.plan.cycle_length();
        let weights: Vec<(usize, f64)> = match (self.options.mode, slots) {
            (_, 0) => vec![(usize::MAX, 1.0)],
            (Mode::Exact, _) => vec![(self.slot, 1.0)],
            (Mode::Fluid, _) if cycle > 0.0 => (0..slots)
                .map(|s| (s, self.plan.slots[s].length / cycle))
                .collect(),
            (Mode::Fluid, _) => vec![(0, 1.0)],
        };
        for (slot, weight) in weights {
            let assignments = self.plan.pinned.iter().chain(
                self.plan
                    .slots
                    .get(slot)
                    .into_iter()
                    .flat_map(|s| &s.assignments),
            );
            let mut members = Vec::new();
            let mut runners = Vec::new();
            for a in assignments {
                let i = self.index[&a.job];
                let s = &self.states[i];
                if !s.started || s.finished || a.cpus.is_empty() {
                    continue;
                }
                members.push((i, a.cpus.len()));
                runners.push(Runner::new(
                    &a.cpus,
                    s.threads.max(1),
                    &self.jobs[i].profile,
                    &s.home,
                ));
            }
            let rates = slot_rates(
                &self.machine,
                &runners,
                &self.options.effects,
                &self.options.params,
                &mut self.scratch,
            );
            for ((i, held), rate) in members.into_iter().zip(rates) {
                let s = &mut self.states[i];
                s.rate += weight * rate.rate;
                s.cpu_share += weight * rate.cpu_share;
                s.held += weight * held as f64;
                s.llc_miss += weight * rate.llc_miss;
            }
        }
        if self.options.mode == Mode::Fluid && slots > 1 && self.options.effects.switch_cost {
            self.apply_fluid_switch_costs();
        }
    }

    /// Fluid mode: a job that enters the cycle `m` times per cycle loses `m` switch costs of its running
    /// time per cycle.
    fn apply_fluid_switch_costs(&mut self) {
        let slots = &self.plan.slots;
        let members: Vec<HashSet<JobId>> = slots
            .iter()
            .map(|slot| slot.assignments.iter().map(|a| a.job).collect())
            .collect();
        let mut entries: HashMap<JobId, (u32, f64)> = HashMap::new();
        for (s, slot) in slots.iter().enumerate() {
            let previous = &members[(s + slots.len() - 1) % slots.len()];
            for a in &slot.assignments {
                let entry = entries.entry(a.job).or_insert((0, 0.0));
                entry.1 += slot.length;
                if !previous.contains(&a.job) {
                    entry.0 += 1;
                }
            }
        }
        for (id, (count, running)) in entries {
            if count == 0 || running <= 0.0 {
                continue;
            }
            let i = self.index[&id];
            let lost = f64::from(count) * self.switch_cost(i);
            self.states[i].rate *= (1.0 - lost / running).max(0.0);
        }
    }
}
