//! `auto`: per job, space sharing or coscheduling, and its width, from what is known or observed about
//! it. This goes beyond the five papers: it combines their mechanisms, choosing by what it checks.
//!
//! 1. **Fixed jobs** — rigid, moldable (started at their full width), or malleable jobs that do not
//!    follow advice (shown as rigid by `advice_check`) — are coscheduled at the threads they really run: gang rows of aligned
//!    partitions their threads fit (Ousterhout matrix, as `gang`), inside the smallest partition
//!    that holds the widest of them.
//! 2. **Elastic jobs** (malleable jobs that follow advice) share the rest of
//!    the machine side by side (as `eq`): on most workloads a job runs more efficiently on fewer
//!    CPUs, and space sharing costs no slot switches. Their widths minimise the summed normalised
//!    turnaround time by the scalability their CPU time shows (`scalability.rs`; equal shares until a
//!    job is seen to have a serial part). They are present in every slot, so they never stop. With no
//!    fixed job, at most `SIDE_BY_SIDE` run at once and later ones wait in arrival order (fair-share
//!    order across users). When no CPU is left beside the fixed jobs, or more elastic jobs than CPUs
//!    are waiting, they take turns in rows of their own instead of waiting (time sharing, as `gang`
//!    and `taco`). Least remaining first (below) is interleaved by user where there are several.
//! 3. **Known remaining work.** When every job has an estimated run time (`hints.runtime`, declared or
//!    from the run history), widths come from each job's scaling (`widths.rs`): those that minimise
//!    the makespan bound max(total CPU work / CPUs, longest job), then wider ones while the bound
//!    stays within 1% (a job of unknown scaling taken to scale perfectly). At those widths the jobs
//!    with the least remaining work run first (shortest remaining processing time, which minimises
//!    mean response time), except that a job that would end after the bound in that order starts
//!    first, longest first, where a list schedule shows that ends the set sooner. That schedule is
//!    kept only where its list schedule is no worse than BP shortest-first's (every job at its full
//!    width, least remaining first) on both makespan and summed stretch; else that one runs
//!    (`order.rs`). No job gets more CPUs than it uses well (each
//!    added CPU gains half a CPU, by its measured, calibrated or learnt scaling; with times alone
//!    measured at several widths, the bound decides). A job of unknown scaling at its full width
//!    spends a short spell on half its CPUs once (`probe.rs`), so that the next run knows.
//!    Aging: a job that has waited `AGING_FACTOR` (3) × its estimate goes before every job that
//!    has not, oldest first.
//!    So a job waits behind shorter newcomers for at most 3 × its estimate; after that only the
//!    urgent jobs older than itself run before it, and its slowdown is at most
//!    3 + (their remaining work) / its estimate, where estimates are right. A job that outlives its
//!    estimate by half again (`OVERRUN_TOLERANCE`) is assumed to need as long again as it has run, so
//!    a wrong estimate costs a doubling search, not starvation.
//! 4. **Bags of single-threaded tasks with known run times**: each task is dealt to a CPU once, longest
//!    first onto the CPU with the least work left (LPT), and each CPU runs its own tasks least remaining
//!    first with the same aging: the makespan is LPT's, the mean slowdown close to shortest-first.

mod order;
mod probe;
mod remaining;
mod scalability;
mod widths;

use crate::eq::grow_in_place;
use cosched_core::{
    ActiveJob, Assignment, Context, CpuSet, Event, JobId, JobKind, JobSpec, Plan, Policy, Slot,
    SyncKind,
};
use probe::Probes;
use remaining::Service;
use rustc_hash::FxHashMap as HashMap;
use scalability::{Curve, Scalability};
use widths::Choice;

/// Slot length of coscheduled rows, seconds (`gang`'s and TACO's §3.3 slice).
const SLICE: f64 = crate::taco::DEFAULT_SLICE;

#[derive(Debug, Default)]
pub struct Auto {
    held: HashMap<JobId, CpuSet>,
    /// Single-threaded jobs with known run times: the CPU each was dealt to (LPT).
    dealt: HashMap<JobId, u32>,
    service: Service,
    scalability: Scalability,
    probes: Probes,
    plan: Option<Plan>,
}

/// At most this many elastic jobs share the machine side by side when nothing is known about their
/// run times; later ones wait in arrival order (docs/policies.md, `auto`: sharing among every job
/// present slows every running job at each arrival, a batch loses the efficiency of narrower widths).
const SIDE_BY_SIDE: usize = 6;

/// How long after a job starts on CPUs of its own its scaling is read (one sampling interval).
const MEASURE_AFTER: f64 = 1.0;

impl Policy for Auto {
    fn name(&self) -> &str {
        "auto"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if let Event::Sample(sample) = event {
            self.scalability
                .observe(ctx.now, sample, self.plan.as_ref());
            return None;
        }
        if let Event::ThreadsChanged { job, .. } = event {
            self.scalability.changed(ctx.now, *job);
        }
        let scalability = &self.scalability;
        self.service
            .credit(ctx, self.plan.as_ref(), |job, cpus, full| {
                scalability.speed(job, cpus, full)
            });
        self.scalability.retain(ctx);
        self.probes.retain(ctx);
        let known = !ctx.jobs.is_empty()
            && ctx
                .jobs
                .iter()
                .all(|j| j.spec.hints.runtime.is_some_and(|r| r > 0.0));
        let tasks = ctx.jobs.iter().all(|j| j.spec.max_threads <= 1);
        let plan = if known && tasks {
            // Every arrival due now reaches the policy before a timer due now: dealing waits for it,
            // so that LPT sees the whole bag and not each task alone as it comes.
            let gathering = matches!(event, Event::Arrived { .. });
            let mut plan = self.dealt_tasks(ctx, !gathering);
            if gathering {
                plan.timer = Some(ctx.now);
            }
            plan
        } else if known {
            // As for a bag of tasks: widths and order are chosen for the whole set of jobs arriving
            // together, not for each as it comes (a moldable job started alone would keep every CPU).
            if matches!(event, Event::Arrived { .. }) {
                let mut plan =
                    (self.plan.clone()).unwrap_or_else(|| Plan::space_sharing(Vec::new()));
                plan.timer = Some(ctx.now);
                plan
            } else {
                self.least_remaining_first(ctx)
            }
        } else {
            self.shared(ctx)
        };
        for job in ctx.jobs {
            let held = |plan: &Plan| plan.cpus_in_slot(0, job.id()).cloned();
            if Some(held(&plan)) != self.plan.as_ref().map(held) {
                self.scalability.changed(ctx.now, job.id());
            }
        }
        self.plan = Some(plan.clone());
        Some(plan)
    }
}

/// Whether a job waits until the CPUs planned for it are free rather than start on fewer: a fixed
/// job whose threads wait for each other (spinning stalls when they time-share CPUs, blocking switches
/// context at every barrier), and a moldable one, which keeps the threads it starts with.
fn needs_its_width(job: &ActiveJob) -> bool {
    match job.fixed_threads() {
        Some(_) => job.spec.hints.sync != SyncKind::None,
        None => job.spec.kind == JobKind::Moldable,
    }
}

/// How wide a job runs alone: its fixed threads or its maximum, at most the machine.
fn full_width(job: &ActiveJob, machine: usize) -> usize {
    (job.fixed_threads().unwrap_or(job.spec.max_threads) as usize).clamp(1, machine)
}

impl Auto {
    /// Known remaining work: widths from each job's scaling (`widths.rs`: the least makespan bound,
    /// then the widest widths within `widths::SLACK` of it), then least remaining first with aging at
    /// those widths, except that the job that bounds the makespan starts at once. A job that spins
    /// when crowded waits for its width; an elastic one starts on what is free and widens later.
    /// CPUs left over widen the elastic jobs, first in order first.
    fn least_remaining_first(&mut self, ctx: &Context) -> Plan {
        let machine = ctx.topology.num_cpus();
        let ranked: Vec<(&ActiveJob, (bool, f64), Choice)> = ctx
            .jobs
            .iter()
            .map(|job| {
                let runtime = job.spec.hints.runtime.unwrap_or(0.0);
                let remaining = self.service.remaining(job.id(), runtime);
                let key = remaining::priority(ctx.now, job.spec.arrival, runtime, remaining);
                (job, key, self.choice(job, machine, remaining))
            })
            .collect();
        let choices: Vec<Choice> = ranked.iter().map(|r| r.2.clone()).collect();
        let keys: Vec<(bool, f64)> = ranked.iter().map(|r| r.1).collect();
        let order::Schedule {
            widths,
            mut order,
            why,
        } = order::schedule(&choices, &keys, machine);
        let specs: Vec<&JobSpec> = ranked.iter().map(|r| &*r.0.spec).collect();
        if crate::users::several_users(specs.iter().copied()) {
            let sizes: Vec<f64> = widths.iter().map(|&w| w as f64).collect();
            order = crate::users::interleave(&specs, &order, &sizes);
        }
        let order: Vec<Ranked> = (order.into_iter())
            .map(|i| Ranked {
                job: ranked[i].0,
                width: widths[i],
                widest: choices[i].widest,
                choice: &choices[i],
            })
            .collect();
        let (mut wanted, mut free) = placed_in_order(&order, machine);
        // CPUs nobody was given widen the jobs placed, first in order first: elastic ones up to
        // their full width, a moldable one that has not started up to what it uses well (it keeps
        // the threads it starts with).
        let mut widest: HashMap<JobId, usize> = order
            .iter()
            .map(|r| {
                let starting = r.job.spec.kind == JobKind::Moldable && r.job.started.is_none();
                let widest = if starting {
                    r.widest
                } else {
                    full_width(r.job, machine)
                };
                (r.job.id(), widest)
            })
            .collect();
        widen(&mut wanted, &widest, &mut free);
        // A job of unknown scaling that follows advice, placed at its full width (where a
        // calibration already measured it, so that its run alone would teach nothing), spends a
        // short spell on half its CPUs (`probe.rs`); the CPUs it leaves widen the others. One placed
        // narrower runs at two widths anyway as the others end.
        let choices_by_job: HashMap<JobId, &Choice> =
            order.iter().map(|r| (r.job.id(), r.choice)).collect();
        for (job, take) in &mut wanted {
            let choice = choices_by_job[&job.id()];
            let unknown = !choice.known
                && *take >= choice.full
                && job.fixed_threads().is_none()
                && !needs_its_width(job);
            let probe = (self.probes).width(ctx.now, job.id(), *take, unknown, choice.time(*take));
            if probe < *take {
                free += *take - probe;
                *take = probe;
                widest.insert(job.id(), probe);
            }
        }
        widen(&mut wanted, &widest, &mut free);
        let wanted: Vec<(JobId, usize)> = wanted.iter().map(|(j, n)| (j.id(), *n)).collect();
        let plan_cpus: HashMap<JobId, usize> = wanted.iter().copied().collect();
        let mut plan = self.space_shared(ctx, ctx.topology.cpus(), &wanted);
        // A moldable job starts with one thread per CPU it is given.
        for (id, threads) in &mut plan.advice {
            let job = ctx.job(*id).expect("planned jobs are present");
            if job.spec.kind == JobKind::Moldable && job.started.is_none() {
                *threads = plan_cpus[id] as u32;
            }
        }
        plan.timer = [self.urgency_timer(ctx), self.probes.timer()]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        plan.why = Some(why.to_string());
        plan
    }

    /// The widths a job with `remaining` seconds (alone at its full width) may be given: a job that
    /// cannot change its threads keeps them; others any width up to what they use well (each added
    /// CPU gains `scalability::EFFICIENT_GAIN`), by their measured or learnt serial fraction.
    fn choice(&self, job: &ActiveJob, machine: usize, remaining: f64) -> Choice {
        let full = full_width(job, machine);
        if job.fixed_threads().is_some() {
            return Choice {
                remaining,
                full,
                curve: Curve::amdahl(0.0),
                narrowest: full,
                widest: full,
                known: false,
                waits_for_width: needs_its_width(job),
            };
        }
        let curve = self.scalability.curve(job, full);
        Choice {
            remaining,
            full,
            narrowest: 1,
            widest: (curve.as_ref()).map_or(full, |c| scalability::efficient_width(c, full)),
            known: curve.is_some(),
            curve: curve.unwrap_or(Curve::amdahl(0.0)),
            waits_for_width: needs_its_width(job),
        }
    }

    /// Single-threaded jobs with known run times: each is dealt to a CPU once, longest first onto the
    /// CPU with the least work left (LPT, so the makespan is LPT's), and every CPU runs its jobs least
    /// remaining work first with aging (which only reorders a CPU's own work, so the makespan stays).
    /// Tasks not dealt yet wait unless `deal_new`.
    fn dealt_tasks(&mut self, ctx: &Context, deal_new: bool) -> Plan {
        self.dealt.retain(|id, _| ctx.job(*id).is_some());
        let remaining = |job: &ActiveJob| {
            self.service
                .remaining(job.id(), job.spec.hints.runtime.unwrap_or(0.0))
        };
        let mut load: HashMap<u32, f64> = ctx.topology.cpus().iter().map(|c| (c, 0.0)).collect();
        for job in ctx.jobs {
            if let Some(cpu) = self.dealt.get(&job.id()) {
                *load.entry(*cpu).or_default() += remaining(job);
            }
        }
        let mut new: Vec<&ActiveJob> = ctx
            .jobs
            .iter()
            .filter(|j| deal_new && !self.dealt.contains_key(&j.id()))
            .collect();
        new.sort_by(|a, b| remaining(b).total_cmp(&remaining(a)));
        for job in new {
            let (&cpu, _) = load
                .iter()
                .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
                .expect("a machine has CPUs");
            *load.get_mut(&cpu).expect("listed") += remaining(job);
            self.dealt.insert(job.id(), cpu);
        }
        let mut first: HashMap<u32, (&ActiveJob, (bool, f64))> = HashMap::default();
        for job in ctx.jobs {
            let Some(&cpu) = self.dealt.get(&job.id()) else {
                continue;
            };
            let runtime = job.spec.hints.runtime.unwrap_or(0.0);
            let key = remaining::priority(ctx.now, job.spec.arrival, runtime, remaining(job));
            if first.get(&cpu).is_none_or(|(_, best)| key < *best) {
                first.insert(cpu, (job, key));
            }
        }
        let mut assignments: Vec<Assignment> = first
            .iter()
            .map(|(&cpu, (job, _))| Assignment {
                job: job.id(),
                cpus: CpuSet::from_range(cpu..cpu + 1),
            })
            .collect();
        assignments.sort_by_key(|a| a.job);
        let mut plan = Plan::space_sharing(assignments);
        plan.advice = ctx
            .jobs
            .iter()
            .filter(|j| self.dealt.contains_key(&j.id()))
            .map(|j| (j.id(), 1))
            .collect();
        plan.timer = self.urgency_timer(ctx);
        plan
    }

    /// When the next job turns urgent.
    fn urgency_timer(&self, ctx: &Context) -> Option<f64> {
        ctx.jobs
            .iter()
            .filter_map(|j| {
                let at = remaining::urgent_at(j.spec.arrival, j.spec.hints.runtime?);
                (at > ctx.now).then_some(at)
            })
            .reduce(f64::min)
    }

    /// Nothing known: fixed jobs coscheduled at their threads, elastic jobs space-shared beside them.
    fn shared(&mut self, ctx: &Context) -> Plan {
        let machine = ctx.topology.cpus();
        // A moldable job keeps the threads it starts with: started at its full width, coscheduled,
        // it never ends on a sliver of the machine once the others are gone.
        let (fixed, elastic): (Vec<&ActiveJob>, Vec<&ActiveJob>) = ctx
            .jobs
            .iter()
            .partition(|j| j.fixed_threads().is_some() || j.spec.kind == JobKind::Moldable);
        let admitted = admitted(&elastic);
        if fixed.is_empty() && admitted.len() <= machine.len() {
            let wanted = self.scaled_wanted(&admitted, machine.len());
            let mut plan = self.space_shared(ctx, machine, &wanted);
            plan.timer = self.measure_timer(ctx, &plan);
            return plan;
        }
        let region = fixed_region(ctx, &fixed);
        let beside = machine.difference(&region);
        let mut rows = gang_rows(ctx, &fixed, &region);
        let mut always = Vec::new();
        if !elastic.is_empty() && elastic.len() <= beside.len() {
            let wanted = self.scaled_wanted(&elastic, beside.len());
            let mut placed: Vec<Assignment> = grow_in_place(&beside, &mut self.held, &wanted)
                .into_iter()
                .map(|(job, cpus)| Assignment { job, cpus })
                .collect();
            placed.sort_by_key(|a| a.job);
            always = placed;
        } else {
            // No room beside the fixed jobs: the elastic ones fill their rows' idle CPUs, then rows
            // of their own, and take turns instead of waiting.
            fill_rows(ctx, &mut rows, &elastic, &mut self.held);
        }
        if rows.is_empty() {
            rows.push(Vec::new());
        }
        // Users' shares folded in only where there are several: the weights of one user's jobs
        // are their own.
        let several = crate::users::several_users(ctx.jobs.iter().map(|j| &*j.spec));
        let folded: HashMap<JobId, f64> = match several {
            true => {
                let specs: Vec<&JobSpec> = ctx.jobs.iter().map(|j| &*j.spec).collect();
                specs
                    .iter()
                    .map(|j| j.id)
                    .zip(crate::users::fair_weights(&specs))
                    .collect()
            }
            false => HashMap::default(),
        };
        let row_weights: Vec<f64> = (rows.iter())
            .map(|row| {
                row.iter()
                    .filter_map(|a| ctx.job(a.job))
                    .map(|j| folded.get(&j.id()).copied().unwrap_or(j.spec.weight))
                    .fold(0.0, f64::max)
            })
            .collect();
        let lengths = crate::users::slot_lengths(SLICE, &row_weights, several);
        let mut plan = Plan::default();
        let mut held = HashMap::default();
        for (mut row, length) in rows.into_iter().zip(lengths) {
            row.extend(always.iter().cloned());
            for a in &row {
                held.entry(a.job).or_insert_with(|| a.cpus.clone());
            }
            plan.slots.push(Slot {
                length,
                assignments: row,
            });
        }
        plan.advice = ctx
            .jobs
            .iter()
            .filter_map(|job| {
                let cpus = held.get(&job.id())?;
                let threads = job
                    .fixed_threads()
                    .unwrap_or(job.spec.threads_for(cpus.len()));
                Some((job.id(), threads))
            })
            .collect();
        self.held = held;
        plan
    }

    /// Widths of `cpus` CPUs for elastic jobs: equal shares until some job is measured to scale
    /// poorly, then by measured scalability (`scalability.rs`).
    fn scaled_wanted(&self, jobs: &[&ActiveJob], cpus: usize) -> Vec<(JobId, usize)> {
        let caps: Vec<(JobId, usize)> = jobs
            .iter()
            .map(|j| (j.id(), (j.spec.max_threads as usize).clamp(1, cpus)))
            .collect();
        if !self.scalability.any_serial(jobs.iter().map(|j| j.id())) {
            return equal_wanted(jobs, cpus);
        }
        let widths = self.scalability.widths(&caps, cpus);
        caps.iter().map(|(id, _)| *id).zip(widths).collect()
    }

    /// A wake-up one sampling interval after the plan, while a job running on two or more CPUs of its
    /// own has not had its scaling read.
    fn measure_timer(&self, ctx: &Context, plan: &Plan) -> Option<f64> {
        let unmeasured = plan.slots.len() == 1
            && plan.slots[0]
                .assignments
                .iter()
                .any(|a| a.cpus.len() >= 2 && self.scalability.unknown(a.job));
        unmeasured.then_some(ctx.now + MEASURE_AFTER)
    }

    /// One slot in which each `(job, count)` gets `count` CPUs of `region`, moving as little as possible.
    fn space_shared(&mut self, ctx: &Context, region: &CpuSet, wanted: &[(JobId, usize)]) -> Plan {
        let held = grow_in_place(region, &mut self.held, wanted);
        let mut assignments: Vec<Assignment> = held
            .iter()
            .map(|(&job, cpus)| Assignment {
                job,
                cpus: cpus.clone(),
            })
            .collect();
        assignments.sort_by_key(|a| a.job);
        let mut plan = Plan::space_sharing(assignments);
        plan.advice = wanted
            .iter()
            .filter_map(|&(id, count)| {
                let job = ctx.job(id)?;
                Some((
                    id,
                    job.fixed_threads().unwrap_or(job.spec.threads_for(count)),
                ))
            })
            .collect();
        self.held = held;
        plan
    }
}

/// A job with known remaining work, in the order `least_remaining_first` places them.
struct Ranked<'a> {
    job: &'a ActiveJob,
    /// CPUs it is given.
    width: usize,
    /// CPUs it can use well.
    widest: usize,
    choice: &'a Choice,
}

/// The CPUs each job gets in `order` on a machine of `machine` CPUs, and the CPUs left: a job that
/// waits for its width gets it or nothing, an elastic one what is spare, and every started job
/// keeps what it cannot give back without stopping.
fn placed_in_order<'a>(
    order: &[Ranked<'a>],
    machine: usize,
) -> (Vec<(&'a ActiveJob, usize)>, usize) {
    let mut free = machine;
    let mut wanted: Vec<(&'a ActiveJob, usize)> = Vec::new();
    // A started job that can run on one CPU keeps at least one: it is never stopped for others.
    // One that waits for its width is frozen while shorter jobs run, as least remaining first has
    // it, unless it is a moldable job started narrower than the machine: it cannot widen later,
    // so its work deferred would run narrow at the end beside idle CPUs, raising the makespan.
    let keeps = |r: &Ranked| match r.job.started {
        None => 0,
        Some(_) if !needs_its_width(r.job) => 1,
        Some(_) if r.job.spec.kind == JobKind::Moldable => {
            let width = r.job.fixed_threads().map_or(machine, |t| t as usize);
            if width < machine {
                width
            } else {
                0
            }
        }
        Some(_) => 0,
    };
    let mut kept: usize = order.iter().map(keeps).sum();
    for ranked @ &Ranked { job, width, .. } in order {
        kept -= keeps(ranked);
        let spare = free.saturating_sub(kept);
        let take = if needs_its_width(job) {
            if width > spare {
                continue;
            }
            width
        } else {
            width.min(spare).max(keeps(ranked).min(free))
        };
        if take > 0 {
            wanted.push((job, take));
            free -= take;
        }
    }
    (wanted, free)
}

/// CPUs nobody was given, handed to the jobs in `wanted` in turn, each up to its `widest`.
fn widen(wanted: &mut [(&ActiveJob, usize)], widest: &HashMap<JobId, usize>, free: &mut usize) {
    for (job, take) in wanted {
        let more = widest[&job.id()].saturating_sub(*take).min(*free);
        *take += more;
        *free -= more;
    }
}

/// The elastic jobs that run side by side when nothing is known: every started one (a job is never
/// stopped), then the oldest waiting ones (in fair-share order where several users wait), up to
/// `SIDE_BY_SIDE`.
fn admitted<'a>(elastic: &[&'a ActiveJob]) -> Vec<&'a ActiveJob> {
    let mut order = elastic.to_vec();
    order.sort_by(|a, b| {
        (b.started.is_some().cmp(&a.started.is_some()))
            .then(a.spec.arrival.total_cmp(&b.spec.arrival))
    });
    let started = order.iter().filter(|j| j.started.is_some()).count();
    let specs: Vec<&JobSpec> = order.iter().map(|j| &*j.spec).collect();
    if crate::users::several_users(specs.iter().copied()) {
        let waiting = crate::users::fair_order(&specs, |i| order[i].started.is_some());
        order = (order[..started].iter().copied())
            .chain(waiting.into_iter().map(|i| order[i]))
            .collect();
    }
    order.truncate(started.max(SIDE_BY_SIDE));
    order
}

/// Fair shares of `cpus` CPUs among `jobs` (equal among one user's jobs of equal weight,
/// `crate::users`), none above its maximum.
fn equal_wanted(jobs: &[&ActiveJob], cpus: usize) -> Vec<(JobId, usize)> {
    let caps: Vec<usize> = jobs.iter().map(|j| j.spec.max_threads as usize).collect();
    let specs: Vec<&JobSpec> = jobs.iter().map(|j| &*j.spec).collect();
    jobs.iter()
        .map(|j| j.id())
        .zip(crate::users::split_cpus(cpus, &specs, &caps))
        .collect()
}

/// The smallest aligned partition size at least `threads` wide.
fn fit(ctx: &Context, threads: usize) -> usize {
    ctx.topology
        .partition_sizes()
        .into_iter()
        .filter(|&s| s >= threads)
        .min()
        .unwrap_or(ctx.topology.num_cpus())
}

/// Where fixed jobs are coscheduled: a partition that holds the widest of them, as large as their
/// share of the jobs warrants, so that elastic jobs keep the rest.
fn fixed_region(ctx: &Context, fixed: &[&ActiveJob]) -> CpuSet {
    let machine = ctx.topology.num_cpus();
    let Some(widest) = fixed.iter().map(|j| full_width(j, machine)).max() else {
        return CpuSet::new();
    };
    let share = (machine * fixed.len()).div_ceil(ctx.jobs.len().max(1));
    let size = ctx
        .topology
        .partition_sizes()
        .into_iter()
        .filter(|&s| s >= widest && s <= share.max(widest))
        .max()
        .unwrap_or_else(|| fit(ctx, widest));
    ctx.topology.partitions(size)[0].clone()
}

/// Ousterhout rows for fixed jobs inside `region`: each gets an aligned partition its threads fit, in
/// the first row where one is free.
fn gang_rows(ctx: &Context, fixed: &[&ActiveJob], region: &CpuSet) -> Vec<Vec<Assignment>> {
    let machine = ctx.topology.num_cpus();
    let mut rows: Vec<Vec<Assignment>> = Vec::new();
    for job in fixed {
        let partitions: Vec<CpuSet> = ctx
            .topology
            .partitions(fit(ctx, full_width(job, machine)))
            .into_iter()
            .filter(|p| p.is_subset(region))
            .collect();
        let spot = rows.iter().enumerate().find_map(|(r, row)| {
            partitions
                .iter()
                .find(|p| row.iter().all(|a| a.cpus.is_disjoint(p)))
                .map(|p| (r, p.clone()))
        });
        let (row, cpus) = spot.unwrap_or_else(|| {
            rows.push(Vec::new());
            (rows.len() - 1, partitions[0].clone())
        });
        rows[row].push(Assignment {
            job: job.id(),
            cpus,
        });
    }
    rows
}

/// Places elastic jobs into the idle CPUs of `rows` (one job per idle CPU, in arrival order), then
/// into new rows of the whole machine; each row's idle CPUs are split equally among its elastic jobs.
fn fill_rows(
    ctx: &Context,
    rows: &mut Vec<Vec<Assignment>>,
    elastic: &[&ActiveJob],
    held: &mut HashMap<JobId, CpuSet>,
) {
    let machine = ctx.topology.cpus();
    let mut members: Vec<Vec<&ActiveJob>> = vec![Vec::new(); rows.len()];
    let idle = |row: &Vec<Assignment>| {
        row.iter()
            .fold(machine.clone(), |free, a| free.difference(&a.cpus))
    };
    let mut waiting = elastic.iter();
    for (row, joined) in rows.iter().zip(&mut members) {
        let room = idle(row).len();
        joined.extend(waiting.by_ref().take(room));
    }
    let rest: Vec<&ActiveJob> = waiting.copied().collect();
    for chunk in rest.chunks(machine.len()) {
        rows.push(Vec::new());
        members.push(chunk.to_vec());
    }
    for (row, joined) in rows.iter_mut().zip(&members) {
        if joined.is_empty() {
            continue;
        }
        let free = idle(row);
        let wanted = equal_wanted(joined, free.len());
        let mut placed: Vec<Assignment> = grow_in_place(&free, held, &wanted)
            .into_iter()
            .map(|(job, cpus)| Assignment { job, cpus })
            .collect();
        placed.sort_by_key(|a| a.job);
        row.extend(placed);
    }
}

#[cfg(test)]
mod tests;
