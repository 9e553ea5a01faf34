//! Gang scheduling with an Ousterhout matrix: rows are time slots, columns CPUs. Each job takes an
//! aligned partition wide enough for its threads (usually the whole row) in the first row that has one
//! free; rows run round robin, one slot each, and every job's threads run together or not at all.
//! This is Peter et al.'s user-space gang scheduler (§3.1). Frachtenberg & Etsion's wrapper
//! (§3.2.1: per slot one parallel program, or all the sequential ones, SIGSTOP for the rest)
//! is the setting `sequential=shared`: single-threaded jobs then share one extra slot on every CPU,
//! time-shared by the OS, instead of being packed into rows.
//!
//! Peter et al. §3.5 (GangHi) give the more important application a longer slot instead of a higher
//! OS priority: a row's slot lasts `slice` × the largest weight among its jobs.
//!
//! When jobs leave, a job moves to an earlier row only where its own CPUs are free there, so repacking
//! never migrates anyone; emptied rows disappear.
//!
//! The matrix has at most `mpl` rows (the multiprogramming level of gang schedulers, which bounds how
//! many jobs share the machine): a job that fits in no row when all are taken waits, and the jobs behind
//! it wait too, first come first served.
//!
//! Users, not jobs, share the machine (`crate::users`): jobs are offered rows in fair-share order (the
//! next is the oldest job of the user holding the fewest places for their share), so that a user with
//! many jobs cannot take every row ahead of a user with one, a user whose job waits for a row holds
//! back only their own later jobs, and slot lengths follow the jobs' weights with their users' shares
//! folded in (over the jobs in rows: waiting jobs do not thin their user's time).
//!
//! Rows are taken back: where every row is taken and a waiting job of user U fits in no gap, it
//! takes a place from the user V holding the most places (jobs in rows) for their share, as long as
//! V, before each job taken out, holds more places per share than U would after:
//! h_V / s_V > (h_U + 1) / s_U. U's job gets the partition of its width that frees by taking out the fewest of V's
//! jobs, and among those the one whose jobs were placed most recently. A started job taken out is
//! in no slot, so it is frozen (its memory kept) and waits in fair order for a row again; V's later
//! jobs wait behind it. A job opted out of coscheduling is never frozen, so it is never taken out.
//! The rule is strict, so no place goes back and forth: users holding as many places as their
//! shares allow keep them, and the job taken out cannot take its place back on the next decision.
//! With one user nothing is taken back.

use crate::partitions::Partitions;
use crate::settings::{self, Setting, SettingError};
use crate::users;
use cosched_core::{
    ActiveJob, Assignment, Context, CpuSet, Event, JobId, JobSpec, Plan, Policy, Slot, Topology,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Default slot length, seconds: TACO §3.3's slice (see `taco::DEFAULT_SLICE`); Peter et al. note gang
/// slices are long (≥ 100 ms, Peter et al. §2) next to Linux's 15 ms.
pub const DEFAULT_SLICE: f64 = crate::taco::DEFAULT_SLICE;

/// Default multiprogramming level: more rows than the papers' experiments use (Frachtenberg & Etsion's
/// BSP surface reaches 11 slots), few enough that an overloaded machine does not slice every job thin.
pub const DEFAULT_MPL: usize = 16;

/// The settings `Gang::with_settings` takes, with their defaults.
pub(crate) fn setting_list() -> Vec<Setting> {
    vec![
        Setting {
            key: "slice",
            values: "SECONDS",
            default: DEFAULT_SLICE.to_string(),
            example: "0.015",
            about: "length of a row's time slot, times the job's weight",
        },
        Setting {
            key: "sequential",
            values: "packed|shared",
            default: "packed".to_string(),
            example: "shared",
            about: "shared: single-threaded stressors share one slot",
        },
        Setting {
            key: "mpl",
            values: "ROWS",
            default: DEFAULT_MPL.to_string(),
            example: "4",
            about: "most rows of the Ousterhout matrix; later jobs wait",
        },
    ]
}

#[derive(Debug)]
pub struct Gang {
    name: String,
    slice: f64,
    /// Single-threaded jobs share one slot of their own (Frachtenberg & Etsion's wrapper).
    shared_sequential_slot: bool,
    /// Most rows the matrix may have.
    mpl: usize,
    rows: Vec<Vec<Assignment>>,
    /// When each job in `rows` got its place (a count of placements): a user gives back their newest.
    placed_at: HashMap<JobId, u64>,
    placements: u64,
    partitions: Partitions,
    /// Whether the jobs of the last decision had owners (`users`).
    owned: bool,
}

impl Gang {
    pub fn new(name: impl Into<String>, slice: f64) -> Gang {
        Gang {
            name: name.into(),
            slice,
            shared_sequential_slot: false,
            mpl: DEFAULT_MPL,
            rows: Vec::new(),
            placed_at: HashMap::default(),
            placements: 0,
            partitions: Partitions::default(),
            owned: false,
        }
    }

    /// `slice=SECONDS`, `sequential=packed|shared` and `mpl=ROWS` settings after `gang:`; `name` is the
    /// full policy string.
    pub fn with_settings(name: &str, settings: &str) -> Result<Gang, SettingError> {
        let mut slice = DEFAULT_SLICE;
        let mut shared_sequential_slot = false;
        let mut mpl = DEFAULT_MPL;
        for setting in settings.split(':').filter(|s| !s.is_empty()) {
            match setting.split_once('=') {
                Some(("slice", value)) => slice = settings::seconds("slice", value)?,
                Some(("sequential", "packed")) => shared_sequential_slot = false,
                Some(("sequential", "shared")) => shared_sequential_slot = true,
                Some(("mpl", value)) => {
                    mpl = value
                        .parse::<usize>()
                        .ok()
                        .filter(|&rows| rows > 0)
                        .ok_or_else(|| SettingError::Rows(value.to_string()))?
                }
                _ => return Err(settings::unknown("gang", setting, &setting_list())),
            }
        }
        Ok(Gang {
            shared_sequential_slot,
            mpl,
            ..Gang::new(name, slice)
        })
    }
}

impl Default for Gang {
    fn default() -> Gang {
        Gang::new("gang", DEFAULT_SLICE)
    }
}

impl Policy for Gang {
    fn name(&self) -> &str {
        &self.name
    }

    /// With every row taken only the oldest waiting job can get in (into a gap); otherwise each waiting
    /// job may get a row.
    fn queue_window(&self, topology: &Topology) -> Option<usize> {
        // Jobs of several users wait first come first served per user: each user's oldest may
        // get in, wherever it is in the queue.
        if self.owned {
            return None;
        }
        Some(if self.rows.len() >= self.mpl {
            1
        } else {
            self.mpl * topology.num_cpus()
        })
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. } | Event::Finished { .. }) {
            return None;
        }
        let active: HashMap<JobId, &ActiveJob> = ctx.jobs.iter().map(|j| (j.id(), j)).collect();
        for row in &mut self.rows {
            row.retain(|a| active.contains_key(&a.job));
        }
        self.placed_at.retain(|job, _| active.contains_key(job));
        self.repack();
        let mut placed: HashSet<JobId> = self.rows.iter().flatten().map(|a| a.job).collect();
        let sizes = self.partitions.sizes(ctx.topology);
        let shared = self.shared_sequential_slot;
        let sequential = |job: &ActiveJob| shared && job.spec.max_threads <= 1;
        let mut shared_slot = Vec::new();
        let specs: Vec<&JobSpec> = ctx.jobs.iter().map(|j| &*j.spec).collect();
        let several = users::several_users(specs.iter().copied());
        self.owned = specs.iter().any(|j| j.owner.is_some());
        // Users whose oldest unplaced job found no row: their later jobs wait behind it.
        let mut blocked: HashSet<Option<u32>> = HashSet::default();
        let in_rows = |i: usize| placed.contains(&specs[i].id);
        // One user's jobs in arrival order: the fair-share order without its cost.
        let order = match several {
            true => users::fair_order(&specs, in_rows),
            false => (0..specs.len()).filter(|&i| !in_rows(i)).collect(),
        };
        for i in order {
            let job = &ctx.jobs[i];
            let user = job.spec.owner.map(|o| o.user);
            if blocked.contains(&user) {
                continue;
            }
            if sequential(job) {
                shared_slot.push(Assignment {
                    job: job.id(),
                    cpus: ctx.topology.cpus().clone(),
                });
                continue;
            }
            let width = job.fixed_threads().unwrap_or(job.spec.max_threads) as usize;
            let size = sizes
                .iter()
                .copied()
                .find(|&s| s >= width)
                .unwrap_or(ctx.topology.num_cpus());
            let partitions = self.partitions.of_size(ctx.topology, size);
            let spot = self.rows.iter().enumerate().find_map(|(r, row)| {
                partitions
                    .iter()
                    .find(|p| row.iter().all(|a| a.cpus.is_disjoint(p)))
                    .map(|p| (r, p.clone()))
            });
            let (row, cpus) = match spot {
                Some(spot) => spot,
                None if self.rows.len() < self.mpl => {
                    self.rows.push(Vec::new());
                    (self.rows.len() - 1, partitions[0].clone())
                }
                // One user's jobs waiting for a row leave the others' jobs their turn.
                None if several => match self.take_back(&active, &job.spec, &partitions) {
                    Some(TakenBack { row, cpus, giver }) => {
                        // The giver's jobs wait behind the one taken out, which is older.
                        blocked.insert(giver);
                        (row, cpus)
                    }
                    None => {
                        blocked.insert(user);
                        continue;
                    }
                },
                None => break,
            };
            placed.insert(job.id());
            self.placed_at.insert(job.id(), self.placements);
            self.placements += 1;
            self.rows[row].push(Assignment {
                job: job.id(),
                cpus,
            });
        }
        Some(self.plan(&active, several, shared_slot))
    }
}

impl Gang {
    /// The rows as slots, each as long as `slice` × the largest weight in it (users' shares folded
    /// in where there are several), and after them the slot the sequential jobs share, if any.
    fn plan(
        &self,
        active: &HashMap<JobId, &ActiveJob>,
        several: bool,
        shared_slot: Vec<Assignment>,
    ) -> Plan {
        // Users' shares folded in only where there are several: one user's weights are their own. Over
        // the jobs in rows: a user's waiting jobs get no slot, so they take nothing of its share.
        let folded: HashMap<JobId, f64> = match several {
            true => {
                let in_rows: Vec<&JobSpec> = (self.rows.iter().flatten())
                    .map(|a| &*active[&a.job].spec)
                    .collect();
                (in_rows.iter().map(|j| j.id))
                    .zip(users::fair_weights(&in_rows))
                    .collect()
            }
            false => HashMap::default(),
        };
        let row_weights: Vec<f64> = (self.rows.iter())
            .map(|row| {
                row.iter()
                    .map(|a| {
                        folded
                            .get(&a.job)
                            .copied()
                            .unwrap_or(active[&a.job].spec.weight)
                    })
                    .fold(0.0, f64::max)
            })
            .collect();
        let lengths = users::slot_lengths(self.slice, &row_weights, several);
        let mut plan = Plan::default();
        for (row, length) in self.rows.iter().zip(lengths) {
            plan.slots.push(Slot {
                length,
                assignments: row.clone(),
            });
            for a in row {
                let job = active[&a.job];
                plan.advice
                    .insert(a.job, job.spec.threads_for(a.cpus.len()));
            }
        }
        if !shared_slot.is_empty() {
            for a in &shared_slot {
                plan.advice.insert(a.job, 1);
            }
            plan.slots.push(Slot {
                length: self.slice,
                assignments: shared_slot,
            });
        }
        plan
    }
}

/// A place taken back for a waiting job: its row and CPUs, and the user who gave it up.
struct TakenBack {
    row: usize,
    cpus: CpuSet,
    giver: Option<u32>,
}

/// One way to make room for a waiting job: the jobs of one user in a partition of one row.
struct Room {
    /// The giver's places per share.
    giver_holds: f64,
    jobs: usize,
    /// When the oldest of those jobs was placed.
    oldest: u64,
    row: usize,
    partition: usize,
    giver: Option<u32>,
}

impl Room {
    /// Whether `self` is the better room: from the user holding the most per share, taking out the
    /// fewest jobs, the most recently placed.
    fn better_than(&self, other: &Room) -> bool {
        self.giver_holds
            .total_cmp(&other.giver_holds)
            .then(other.jobs.cmp(&self.jobs))
            .then(self.oldest.cmp(&other.oldest))
            .is_gt()
    }
}

impl Gang {
    /// Makes room for `claimant`, which fits in no row with every row taken, in one of `partitions`
    /// (those of its width) by taking out jobs of another user, all of them one user's and none opted
    /// out of coscheduling, while that user still holds more places per share than the claimant's user
    /// would after it, before each job taken out. Places are jobs in rows. `None` where no partition can
    /// be cleared fairly.
    fn take_back(
        &mut self,
        active: &HashMap<JobId, &ActiveJob>,
        claimant: &JobSpec,
        partitions: &[CpuSet],
    ) -> Option<TakenBack> {
        let holder = |job: JobId| users::holder(&active[&job].spec);
        let mut held: Vec<(Option<u32>, f64, usize)> = Vec::new();
        for a in self.rows.iter().flatten() {
            let (user, share) = holder(a.job);
            match held.iter_mut().find(|(u, ..)| *u == user) {
                Some((_, _, places)) => *places += 1,
                None => held.push((user, share, 1)),
            }
        }
        let (user, share) = users::holder(claimant);
        let mine = held.iter().find(|(u, ..)| *u == user).map_or(0, |h| h.2);
        let claimant_after = (mine + 1) as f64 / share;
        let mut best: Option<Room> = None;
        for (r, row) in self.rows.iter().enumerate() {
            for (p, partition) in partitions.iter().enumerate() {
                let mut giver = None;
                let mut jobs = 0;
                let mut oldest = u64::MAX;
                let mut one_giver = true;
                for a in row.iter().filter(|a| !a.cpus.is_disjoint(partition)) {
                    let (u, _) = holder(a.job);
                    // A job opted out of coscheduling is never frozen: out of its row, it runs on.
                    let stays = !active[&a.job].spec.coschedule;
                    if stays || u == user || giver.is_some_and(|g| g != u) {
                        one_giver = false;
                        break;
                    }
                    giver = Some(u);
                    jobs += 1;
                    oldest = oldest.min(self.placed_at[&a.job]);
                }
                let (Some(giver), true) = (giver, one_giver) else {
                    continue;
                };
                let &(_, giver_share, places) = held.iter().find(|(u, ..)| *u == giver)?;
                // Before the last job taken out, the giver still holds more than the claimant would.
                if (places + 1 - jobs) as f64 / giver_share <= claimant_after {
                    continue;
                }
                let room = Room {
                    giver_holds: places as f64 / giver_share,
                    jobs,
                    oldest,
                    row: r,
                    partition: p,
                    giver,
                };
                if best.as_ref().is_none_or(|b| room.better_than(b)) {
                    best = Some(room);
                }
            }
        }
        let room = best?;
        let cpus = partitions[room.partition].clone();
        let placed_at = &mut self.placed_at;
        self.rows[room.row].retain(|a| {
            let stays = a.cpus.is_disjoint(&cpus);
            if !stays {
                placed_at.remove(&a.job);
            }
            stays
        });
        Some(TakenBack {
            row: room.row,
            cpus,
            giver: room.giver,
        })
    }

    /// Moves jobs to earlier rows where their CPUs are free, then drops empty rows.
    fn repack(&mut self) {
        for later in (1..self.rows.len()).rev() {
            let mut stay = Vec::new();
            for a in std::mem::take(&mut self.rows[later]) {
                let fits = |row: &Vec<Assignment>| row.iter().all(|b| b.cpus.is_disjoint(&a.cpus));
                match self.rows[..later].iter().position(fits) {
                    Some(earlier) => self.rows[earlier].push(a),
                    None => stay.push(a),
                }
            }
            self.rows[later] = stay;
        }
        self.rows.retain(|row| !row.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::waiting;
    use cosched_core::topology::presets;
    use cosched_core::{ActiveJob, JobId, JobKind};

    fn job(id: u32, threads: u32) -> ActiveJob {
        let mut job = waiting(id, JobKind::Rigid, threads, threads);
        job.threads = threads;
        job
    }

    fn decide(gang: &mut Gang, jobs: &[ActiveJob], event: Event) -> Plan {
        let topo = presets::preset("gang-opteron8380").unwrap();
        let ctx = Context {
            topology: &topo,
            now: 0.0,
            jobs,
        };
        gang.decide(&ctx, &event).unwrap()
    }

    #[test]
    fn wide_jobs_get_rows_and_narrow_jobs_are_packed() {
        // Frachtenberg's BSP setup on 16 CPUs: two programs of P-1 = 15 threads and 20 stressors.
        let mut jobs = vec![job(0, 15), job(1, 15)];
        jobs.extend((2..22).map(|id| job(id, 1)));
        let mut gang = Gang::default();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(21) });
        assert_eq!(
            plan.slots.len(),
            4,
            "2 parallel rows + 20 stressors in rows of 16"
        );
        assert_eq!(plan.slots[0].assignments.len(), 1);
        assert_eq!(plan.slots[0].assignments[0].cpus.len(), 16);
        assert_eq!(plan.slots[2].assignments.len(), 16);
        for slot in &plan.slots {
            for (i, a) in slot.assignments.iter().enumerate() {
                for b in &slot.assignments[i + 1..] {
                    assert!(a.cpus.is_disjoint(&b.cpus));
                }
            }
        }
    }

    #[test]
    fn the_wrapper_setting_gives_all_sequential_jobs_one_slot_on_every_cpu() {
        // Frachtenberg & Etsion §3.2.1: per slot one parallel program, or all the stressors.
        let mut jobs = vec![job(0, 15), job(1, 15)];
        jobs.extend((2..22).map(|id| job(id, 1)));
        let mut gang = Gang::with_settings("gang:sequential=shared", "sequential=shared").unwrap();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(21) });
        assert_eq!(plan.slots.len(), 3, "two parallel rows + one stressor slot");
        let stressors = &plan.slots[2].assignments;
        assert_eq!(stressors.len(), 20);
        assert!(stressors.iter().all(|a| a.cpus.len() == 16));
        assert!(plan.slots[..2]
            .iter()
            .all(|s| s.assignments.len() == 1 && s.assignments[0].job.0 < 2));
        assert_eq!(plan.advice[&JobId(5)], 1);
    }

    #[test]
    fn departures_repack_rows_without_moving_cpus() {
        let mut jobs = vec![job(0, 8), job(1, 16), job(2, 8)];
        let mut gang = Gang::default();
        decide(&mut gang, &jobs, Event::Arrived { job: JobId(2) });
        assert_eq!(gang.rows.len(), 2);
        let before = gang
            .rows
            .iter()
            .flatten()
            .find(|a| a.job == JobId(2))
            .unwrap()
            .cpus
            .clone();
        jobs.remove(1);
        let plan = decide(&mut gang, &jobs, Event::Finished { job: JobId(1) });
        assert_eq!(plan.slots.len(), 1);
        assert_eq!(plan.cpus_in_slot(0, JobId(2)), Some(&before));
        assert_eq!(
            plan.slots[0].assignments.len(),
            2,
            "job 2 joined job 0's row"
        );
    }

    #[test]
    fn beyond_the_multiprogramming_level_jobs_wait_in_arrival_order() {
        // Both rows of 16 CPUs are taken: job 2 needs a third row and waits, and job 3 waits behind it.
        let jobs = vec![job(0, 16), job(1, 16), job(2, 16), job(3, 1)];
        let mut gang = Gang::with_settings("gang:mpl=2", "mpl=2").unwrap();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(3) });
        assert_eq!(plan.slots.len(), 2);
        let placed = plan.placed_jobs();
        assert!(placed.contains(&JobId(1)) && !placed.contains(&JobId(2)));
        assert!(!placed.contains(&JobId(3)), "job 3 does not overtake job 2");
        let topo = presets::preset("gang-opteron8380").unwrap();
        assert_eq!(gang.queue_window(&topo), Some(1));
        let rest = vec![jobs[1].clone(), jobs[2].clone(), jobs[3].clone()];
        let plan = decide(&mut gang, &rest, Event::Finished { job: JobId(0) });
        assert!(plan.placed_jobs().contains(&JobId(2)));
    }

    #[test]
    fn heavier_jobs_get_longer_slots() {
        let mut jobs = vec![job(0, 16), job(1, 16)];
        std::sync::Arc::make_mut(&mut jobs[1].spec).weight = 3.0;
        let plan = decide(
            &mut Gang::default(),
            &jobs,
            Event::Arrived { job: JobId(1) },
        );
        assert!((plan.share(JobId(1)) - 0.75).abs() < 1e-9);
    }

    /// Machine-wide rigid job `id` of `user`, arriving at `id` seconds.
    fn owned(id: u32, user: u32) -> ActiveJob {
        member(id, user, 1.0, 16)
    }

    /// Rigid job `id` of `threads` threads of `user` with `share`, arriving at `id` seconds.
    fn member(id: u32, user: u32, share: f64, threads: u32) -> ActiveJob {
        cosched_core::test_util::job(id)
            .arrival(f64::from(id))
            .kind(JobKind::Rigid)
            .threads(threads, threads)
            .owner(user, share)
            .waiting()
    }

    /// `jobs` as the executor holds them after `plan`: those placed have started.
    fn start_placed(jobs: &mut [ActiveJob], plan: &Plan) {
        let placed = plan.placed_jobs();
        for job in jobs.iter_mut().filter(|j| placed.contains(&j.id())) {
            job.started.get_or_insert(0.0);
        }
    }

    fn users_by_row(plan: &Plan, jobs: &[ActiveJob]) -> Vec<u32> {
        plan.slots
            .iter()
            .map(|slot| {
                let job = slot.assignments[0].job;
                jobs.iter()
                    .find(|j| j.id() == job)
                    .unwrap()
                    .spec
                    .owner
                    .unwrap()
                    .user
            })
            .collect()
    }

    #[test]
    fn rows_go_to_users_in_turn() {
        // User 1 submitted four jobs before user 2's two: of three rows, user 2 gets one.
        let mut jobs: Vec<ActiveJob> = (0..4).map(|id| owned(id, 1)).collect();
        jobs.extend((4..6).map(|id| owned(id, 2)));
        let mut gang = Gang::with_settings("gang:mpl=3", "mpl=3").unwrap();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(5) });
        assert_eq!(users_by_row(&plan, &jobs), [1, 2, 1]);
    }

    #[test]
    fn freed_rows_go_to_the_user_holding_fewest_then_to_the_oldest_job() {
        let mut gang = Gang::with_settings("gang:mpl=3", "mpl=3").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..4).map(|id| owned(id, 1)).collect();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(3) });
        assert_eq!(users_by_row(&plan, &jobs), [1, 1, 1]);
        start_placed(&mut jobs, &plan);
        jobs.extend((4..6).map(|id| owned(id, 2)));
        let topo = presets::preset("gang-opteron8380").unwrap();
        assert_eq!(
            gang.queue_window(&topo),
            None,
            "every user's oldest is seen"
        );
        // User 2 takes one row back (job 2's), not two: user 1 would then hold fewer.
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(5) });
        assert_eq!(users_by_row(&plan, &jobs), [1, 1, 2]);
        start_placed(&mut jobs, &plan);
        // User 2's job ends: the row goes to user 2, who holds none, ahead of user 1's older jobs.
        jobs.retain(|j| j.id() != JobId(4));
        let plan = decide(&mut gang, &jobs, Event::Finished { job: JobId(4) });
        assert!(plan.placed_jobs().contains(&JobId(5)));
        start_placed(&mut jobs, &plan);
        // User 1's job ends: both users hold one row, and user 1's job taken out is the oldest.
        jobs.remove(0);
        let plan = decide(&mut gang, &jobs, Event::Finished { job: JobId(0) });
        let placed = plan.placed_jobs();
        assert!(placed.contains(&JobId(2)));
        assert!(!placed.contains(&JobId(3)) && placed.contains(&JobId(5)));
    }

    #[test]
    fn a_user_holding_every_row_gives_the_newest_back_to_a_newcomer() {
        let mut gang = Gang::with_settings("gang:mpl=2", "mpl=2").unwrap();
        let mut jobs = vec![owned(0, 1), owned(1, 1)];
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(1) });
        start_placed(&mut jobs, &plan);
        jobs.push(owned(2, 2));
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(2) });
        let placed = plan.placed_jobs();
        assert!(placed.contains(&JobId(2)), "the newcomer has a row");
        assert!(placed.contains(&JobId(0)) && !placed.contains(&JobId(1)));
        assert_eq!(users_by_row(&plan, &jobs), [1, 2]);
        // Job 1 has started and is in no slot: frozen, not ended. It does not take its row back.
        start_placed(&mut jobs, &plan);
        let again = decide(&mut gang, &jobs, Event::Arrived { job: JobId(2) });
        assert_eq!(again, plan);
        // When user 1's other job ends, job 1 gets its row again.
        jobs.remove(0);
        let plan = decide(&mut gang, &jobs, Event::Finished { job: JobId(0) });
        assert!(plan.placed_jobs().contains(&JobId(1)));
    }

    #[test]
    fn jobs_opted_out_of_coscheduling_keep_their_rows() {
        // Out of its row such a job would run on (the executor never freezes it).
        for opted_out in [vec![1], vec![0, 1]] {
            let mut gang = Gang::with_settings("gang:mpl=2", "mpl=2").unwrap();
            let mut jobs = vec![owned(0, 1), owned(1, 1)];
            for &i in &opted_out {
                std::sync::Arc::make_mut(&mut jobs[i].spec).coschedule = false;
            }
            let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(1) });
            start_placed(&mut jobs, &plan);
            jobs.push(owned(2, 2));
            let placed = decide(&mut gang, &jobs, Event::Arrived { job: JobId(2) }).placed_jobs();
            let expected = match opted_out.len() {
                1 => [JobId(1), JobId(2)].into(),
                _ => [JobId(0), JobId(1)].into(),
            };
            assert_eq!(placed, expected, "jobs {opted_out:?} opted out");
        }
    }

    #[test]
    fn a_place_is_not_taken_back_where_the_giver_would_then_hold_fewer() {
        // User 1 holds one row or two, user 2 one, of every row: user 2's second job waits. Taking a
        // row from a user holding two would only hand the unfairness over, and then back.
        for held in [1, 2] {
            let rows = held + 1;
            let settings = format!("mpl={rows}");
            let mut gang = Gang::with_settings(&format!("gang:{settings}"), &settings).unwrap();
            let mut jobs: Vec<ActiveJob> = (0..held).map(|id| owned(id, 1)).collect();
            jobs.push(owned(held, 2));
            let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(held) });
            assert_eq!(plan.slots.len(), rows as usize);
            start_placed(&mut jobs, &plan);
            jobs.push(owned(held + 1, 2));
            let after = decide(
                &mut gang,
                &jobs,
                Event::Arrived {
                    job: JobId(held + 1),
                },
            );
            assert_eq!(after, plan, "user 1 holding {held}: nothing is taken back");
        }
    }

    #[test]
    fn rows_are_taken_back_up_to_the_users_shares() {
        // User 1 (share 1) fills all four rows before user 2 (share 3) arrives; and the other way.
        for (first, then) in [(1.0, 3.0), (3.0, 1.0)] {
            let mut gang = Gang::with_settings("gang:mpl=4", "mpl=4").unwrap();
            let mut jobs: Vec<ActiveJob> = (0..5).map(|id| member(id, 1, first, 16)).collect();
            let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(4) });
            start_placed(&mut jobs, &plan);
            jobs.extend((5..10).map(|id| member(id, 2, then, 16)));
            let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(9) });
            let mut rows = users_by_row(&plan, &jobs);
            rows.sort();
            let expected = if first < then {
                [1, 2, 2, 2]
            } else {
                [1, 1, 1, 2]
            };
            assert_eq!(rows, expected, "shares {first} and {then}");
            assert!(plan.placed_jobs().contains(&JobId(0)), "the oldest stays");
            start_placed(&mut jobs, &plan);
            let again = decide(&mut gang, &jobs, Event::Arrived { job: JobId(9) });
            assert_eq!(again, plan, "shares {first} and {then}: no churn");
        }
    }

    #[test]
    fn a_wider_job_takes_out_the_newest_narrow_ones_while_fair() {
        // Sixteen one-CPU jobs of user 1 fill the only row; user 2's job needs a package of four.
        let mut gang = Gang::with_settings("gang:mpl=1", "mpl=1").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..16).map(|id| member(id, 1, 1.0, 1)).collect();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(15) });
        let cpus_of_newest = plan.cpus_in_slot(0, JobId(15)).unwrap().clone();
        jobs.push(member(16, 2, 1.0, 4));
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(16) });
        let placed = plan.placed_jobs();
        let cpus = plan.cpus_in_slot(0, JobId(16)).unwrap();
        assert_eq!(cpus.len(), 4);
        assert!(cpus_of_newest.is_subset(cpus), "the newest jobs' package");
        assert_eq!(placed.len(), 13, "four taken out for one");
        assert!((0..12).all(|id| placed.contains(&JobId(id))));

        // Four jobs of four CPUs: a machine-wide job would leave user 1 fewer places than user 2.
        let mut gang = Gang::with_settings("gang:mpl=1", "mpl=1").unwrap();
        let mut jobs: Vec<ActiveJob> = (0..4).map(|id| member(id, 1, 1.0, 4)).collect();
        let plan = decide(&mut gang, &jobs, Event::Arrived { job: JobId(3) });
        jobs.push(member(4, 2, 1.0, 16));
        let after = decide(&mut gang, &jobs, Event::Arrived { job: JobId(4) });
        assert_eq!(after, plan, "user 2 waits");
    }

    #[test]
    fn one_users_many_rows_get_the_time_of_another_users_one() {
        let mut jobs: Vec<ActiveJob> = (0..12).map(|id| owned(id, 65534)).collect();
        jobs.push(owned(12, 0));
        let plan = decide(
            &mut Gang::default(),
            &jobs,
            Event::Arrived { job: JobId(12) },
        );
        assert!(
            (plan.share(JobId(12)) - 0.5).abs() < 1e-9,
            "{}",
            plan.share(JobId(12))
        );
        assert!((plan.share(JobId(0)) - 0.5 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn settings_are_checked() {
        assert_eq!(
            Gang::with_settings("gang:slice=0.015", "slice=0.015")
                .unwrap()
                .slice,
            0.015
        );
        assert!(Gang::with_settings("gang:slice=x", "slice=x")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert!(Gang::with_settings("gang:rows=2", "rows=2")
            .unwrap_err()
            .to_string()
            .contains("valid"));
        assert!(Gang::with_settings("gang:sequential=x", "sequential=x")
            .unwrap_err()
            .to_string()
            .contains("sequential=packed|shared"));
    }
}
