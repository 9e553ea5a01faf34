//! Turning jobs on partitions into a cycle of slots.
//!
//! A *lane* is one partition and the jobs coscheduled in it one after the other, each for a duration.
//! Lanes of one level run side by side; each lane's durations (plus any idle time it was given) are
//! stretched to the level's span, so that a lane idles only where told to. Slots are cut wherever any
//! lane switches jobs.

use cosched_core::{Assignment, CpuSet, JobId, Slot};
use rustc_hash::FxHashMap as HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// The lanes of one level, flat: a level may have a thousand lanes of a job or two each, and is dealt
/// again on most plans, where a list per lane would cost an allocation each.
#[derive(Debug, Clone, Default)]
pub struct Lanes {
    /// Each lane's partition: the level's own list, shared.
    cpus: Arc<[CpuSet]>,
    /// Every lane's jobs, lane after lane, each lane's in their order within it, with their durations
    /// (any unit; only ratios matter).
    jobs: Vec<(JobId, f64)>,
    /// Where each lane's jobs end in `jobs`.
    ends: Vec<usize>,
    /// The sum of each lane's durations, in its order: asked for several times per plan.
    busy: Vec<f64>,
    /// Time each partition stays empty after its jobs, in the same unit.
    idle: Vec<f64>,
}

impl Lanes {
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Lanes on the given partitions, each with its jobs in order.
    pub fn new(lanes: impl IntoIterator<Item = (CpuSet, Vec<(JobId, f64)>)>) -> Lanes {
        let mut cpus = Vec::new();
        let mut jobs = Vec::new();
        let mut ends = Vec::new();
        for (partition, its_jobs) in lanes {
            cpus.push(partition);
            jobs.extend(its_jobs);
            ends.push(jobs.len());
        }
        Lanes::of(cpus.into(), jobs, ends)
    }

    /// Lanes on `cpus` whose jobs, lane after lane, end in `jobs` where `ends` say.
    fn of(cpus: Arc<[CpuSet]>, jobs: Vec<(JobId, f64)>, ends: Vec<usize>) -> Lanes {
        let busy = (0..cpus.len())
            .map(|l| lane_busy(&jobs[lane_range(&ends, l)]))
            .collect();
        Lanes {
            idle: vec![0.0; cpus.len()],
            cpus,
            jobs,
            ends,
            busy,
        }
    }

    /// Whether these lanes are on `partitions` (the very list, shared).
    pub fn on(&self, partitions: &Arc<[CpuSet]>) -> bool {
        Arc::ptr_eq(&self.cpus, partitions)
    }

    pub fn cpus(&self, lane: usize) -> &CpuSet {
        &self.cpus[lane]
    }

    pub fn jobs(&self, lane: usize) -> &[(JobId, f64)] {
        &self.jobs[lane_range(&self.ends, lane)]
    }

    /// Each lane's partition and jobs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&CpuSet, &[(JobId, f64)])> {
        (0..self.len()).map(|lane| (&self.cpus[lane], self.jobs(lane)))
    }

    pub fn idle(&self, lane: usize) -> f64 {
        self.idle[lane]
    }

    pub fn load(&self, lane: usize) -> f64 {
        self.busy[lane] + self.idle[lane]
    }

    pub fn idle_for(&mut self, lane: usize, duration: f64) {
        self.idle[lane] += duration;
    }

    /// Takes the job at `place` out of lane `lane` and puts `newcomer` at the lane's end, the jobs
    /// behind it moving up one place.
    pub fn replace(&mut self, lane: usize, place: usize, newcomer: JobId) {
        let jobs = &mut self.jobs[lane_range(&self.ends, lane)];
        jobs[place..].rotate_left(1);
        jobs.last_mut().expect("holds the job at `place`").0 = newcomer;
        self.busy[lane] = lane_busy(self.jobs(lane));
    }

    fn count(&self, lane: usize) -> usize {
        lane_range(&self.ends, lane).len()
    }

    pub fn lane_of(&self, job: JobId) -> Option<usize> {
        let at = self.jobs.iter().position(|(j, _)| *j == job)?;
        Some(self.ends.partition_point(|&end| end <= at))
    }

    /// The lane a job without a home goes to: fewest jobs, then least load, then first.
    fn emptiest(&self) -> usize {
        (0..self.len())
            .min_by_key(|&l| (self.count(l), self.busy[l].to_bits(), l))
            .expect("at least one lane")
    }

    fn remove(&mut self, lane: usize, job: JobId) {
        let range = lane_range(&self.ends, lane);
        let at = range.start
            + self.jobs[range]
                .iter()
                .position(|(j, _)| *j == job)
                .expect("the job is in its lane");
        self.jobs.remove(at);
        self.ends[lane..].iter_mut().for_each(|end| *end -= 1);
        self.busy[lane] = lane_busy(self.jobs(lane));
    }

    /// Puts `jobs[at]` into `lane` behind the lane's jobs that arrived before it (`jobs` in arrival
    /// order).
    fn insert_arriving(&mut self, lane: usize, at: usize, jobs: &[(JobId, f64)]) {
        let range = lane_range(&self.ends, lane);
        let later: HashMap<JobId, usize> = self.jobs[range.clone()]
            .iter()
            .enumerate()
            .map(|(place, (job, _))| (*job, place))
            .collect();
        let place = jobs[at + 1..]
            .iter()
            .find_map(|(job, _)| later.get(job).copied())
            .unwrap_or(later.len());
        self.jobs.insert(range.start + place, jobs[at]);
        self.ends[lane..].iter_mut().for_each(|end| *end += 1);
        self.busy[lane] = lane_busy(self.jobs(lane));
    }
}

/// Where lane `lane`'s jobs lie in the list of every lane's jobs that end at `ends`.
fn lane_range(ends: &[usize], lane: usize) -> std::ops::Range<usize> {
    lane.checked_sub(1).map_or(0, |before| ends[before])..ends[lane]
}

fn lane_busy(jobs: &[(JobId, f64)]) -> f64 {
    jobs.iter().map(|(_, d)| d).sum()
}

/// Slots for `lanes` side by side during `span` seconds.
pub fn side_by_side(lanes: &Lanes, span: f64) -> Vec<Slot> {
    let busy: Vec<(usize, f64)> = (0..lanes.len())
        .filter(|&l| !lanes.jobs(l).is_empty())
        .map(|l| (l, lanes.load(l)))
        .filter(|&(_, load)| load > 0.0)
        .collect();
    if busy.is_empty() {
        return Vec::new();
    }
    let mut cuts: Vec<f64> = vec![0.0, span];
    // Lanes alike (the same durations and idle time) cut at the same times, and a level of a thousand
    // lanes has a few kinds of them: a lane like one of the last kinds seen adds no cut. (Cuts listed
    // twice would merge below anyway.)
    const KINDS_REMEMBERED: usize = 8;
    let mut cut_before: Vec<usize> = Vec::new();
    for &(lane, load) in &busy {
        let alike = |&other: &usize| {
            lanes.idle(other).to_bits() == lanes.idle(lane).to_bits()
                && durations_alike(lanes.jobs(other), lanes.jobs(lane))
        };
        if cut_before.iter().rev().take(KINDS_REMEMBERED).any(alike) {
            continue;
        }
        cut_before.push(lane);
        let scale = span / load;
        let jobs = lanes.jobs(lane);
        let mut t = 0.0;
        let ends = if lanes.idle(lane) > 0.0 {
            jobs.len()
        } else {
            jobs.len() - 1
        };
        for (_, duration) in &jobs[..ends] {
            t += duration * scale;
            cuts.push(t);
        }
    }
    cuts.sort_by(f64::total_cmp);
    let tolerance = span * 1e-9;
    cuts.dedup_by(|later, earlier| *later - *earlier <= tolerance);
    *cuts.last_mut().expect("holds 0 and span") = span;

    let mut cursors: Vec<(usize, f64)> = vec![(0, 0.0); busy.len()];
    let mut slots = Vec::with_capacity(cuts.len() - 1);
    for window in cuts.windows(2) {
        let middle = (window[0] + window[1]) / 2.0;
        let mut assignments = Vec::with_capacity(busy.len());
        for (&(lane, load), (index, end)) in busy.iter().zip(cursors.iter_mut()) {
            let scale = span / load;
            let jobs = lanes.jobs(lane);
            if *index == 0 && *end == 0.0 {
                *end = jobs[0].1 * scale;
            }
            while *end < middle && *index + 1 < jobs.len() {
                *index += 1;
                *end += jobs[*index].1 * scale;
            }
            if *end < middle {
                continue;
            }
            assignments.push(Assignment {
                job: jobs[*index].0,
                cpus: lanes.cpus(lane).clone(),
            });
        }
        slots.push(Slot {
            length: window[1] - window[0],
            assignments,
        });
    }
    slots
}

fn durations_alike(a: &[(JobId, f64)], b: &[(JobId, f64)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.1.to_bits() == y.1.to_bits())
}

/// Deals jobs to the partitions of one level so that lane counts differ by at most one, keeping every
/// job whose previous CPUs match a partition (the same set, or one containing or inside it) there while
/// its lane has room. `jobs` are in arrival order, each with its duration; each lane takes its jobs in
/// that order, so that dealing the same jobs again changes nothing. `held` gives a job's previous CPUs
/// and the index among `partitions` where they may be (its lane when it was last dealt from them).
pub fn deal_by_count<'h>(
    partitions: &Arc<[CpuSet]>,
    places: &Places,
    jobs: &[(JobId, f64)],
    held: impl Fn(JobId) -> Option<(&'h CpuSet, usize)>,
) -> Lanes {
    let lane_count = partitions.len();
    if lane_count == 0 {
        return Lanes::default();
    }
    let floor = jobs.len() / lane_count;
    // Lanes that may still take one job more than `floor`.
    let mut fuller_left = jobs.len() % lane_count;
    let mut has_room = |count: usize| {
        let room = count < floor || (count == floor && fuller_left > 0);
        if count == floor && room {
            fuller_left -= 1;
        }
        room
    };
    let mut dealt = Dealt::new(lane_count, jobs);
    let mut homeless = Vec::new();
    for (k, &(job, _)) in jobs.iter().enumerate() {
        let home = home(partitions, places, held(job));
        match home {
            Some(i) if has_room(dealt.count[i]) => dealt.put(k, i),
            _ => homeless.push(k),
        }
    }
    if !homeless.is_empty() {
        // The emptiest lane first (fewest jobs, then least load, then first); loads are never
        // negative, so their bits order them.
        let mut emptiest: BinaryHeap<Reverse<(usize, u64, usize)>> = (0..lane_count)
            .map(|i| Reverse((dealt.count[i], dealt.load[i].to_bits(), i)))
            .collect();
        for k in homeless {
            let Reverse((_, _, i)) = emptiest.pop().expect("at least one lane");
            dealt.put(k, i);
            emptiest.push(Reverse((dealt.count[i], dealt.load[i].to_bits(), i)));
        }
    }
    dealt.into_lanes(partitions)
}

/// Deals jobs to the partitions of one level so that lane loads (their turns' sums) even out, by
/// Graham's longest-first rule: the longest turn first, each to the least loaded lane (then the
/// one with fewest jobs, then the first). A job whose previous CPUs match a partition stays there
/// while that keeps its lane within the even load. `jobs` and `held` as for [`deal_by_count`];
/// each lane takes its jobs in arrival order.
pub fn deal_by_load<'h>(
    partitions: &Arc<[CpuSet]>,
    places: &Places,
    jobs: &[(JobId, f64)],
    held: impl Fn(JobId) -> Option<(&'h CpuSet, usize)>,
) -> Lanes {
    let lane_count = partitions.len();
    if lane_count == 0 {
        return Lanes::default();
    }
    let even = jobs.iter().map(|(_, d)| d).sum::<f64>() / lane_count as f64;
    let mut longest_first: Vec<usize> = (0..jobs.len()).collect();
    longest_first.sort_by(|&a, &b| jobs[b].1.total_cmp(&jobs[a].1).then(a.cmp(&b)));
    let mut dealt = Dealt::new(lane_count, jobs);
    for k in longest_first {
        let (job, duration) = jobs[k];
        let (count, load) = (&dealt.count, &dealt.load);
        let lane = match home(partitions, places, held(job)) {
            Some(h) if load[h] + duration <= even * (1.0 + 1e-9) => h,
            _ => (0..lane_count)
                .min_by(|&a, &b| {
                    load[a]
                        .total_cmp(&load[b])
                        .then(count[a].cmp(&count[b]))
                        .then(a.cmp(&b))
                })
                .expect("at least one lane"),
        };
        dealt.put(k, lane);
    }
    dealt.into_lanes(partitions)
}

/// A deal under way: each lane's job count and load so far, and each job's lane.
struct Dealt<'j> {
    jobs: &'j [(JobId, f64)],
    count: Vec<usize>,
    load: Vec<f64>,
    lane_of: Vec<usize>,
}

impl<'j> Dealt<'j> {
    fn new(lanes: usize, jobs: &'j [(JobId, f64)]) -> Dealt<'j> {
        Dealt {
            jobs,
            count: vec![0; lanes],
            load: vec![0.0; lanes],
            lane_of: vec![0; jobs.len()],
        }
    }

    /// Deals `jobs[k]` to `lane`.
    fn put(&mut self, k: usize, lane: usize) {
        self.lane_of[k] = lane;
        self.count[lane] += 1;
        self.load[lane] += self.jobs[k].1;
    }

    /// The lanes on `partitions`, each taking its jobs in the order of `jobs`.
    fn into_lanes(self, partitions: &Arc<[CpuSet]>) -> Lanes {
        let mut ends = self.count;
        let mut total = 0;
        for end in &mut ends {
            total += *end;
            *end = total;
        }
        // Filled from each lane's end backwards, in reverse `jobs` order, so each lane takes its
        // jobs in arrival order.
        let mut dealt = vec![(JobId(0), 0.0); self.jobs.len()];
        let mut next = ends.clone();
        for (k, &i) in self.lane_of.iter().enumerate().rev() {
            next[i] -= 1;
            dealt[next[i]] = self.jobs[k];
        }
        Lanes::of(partitions.clone(), dealt, ends)
    }
}

/// The lane among `partitions` of a job that `held` the given CPUs (with the index where they may be).
fn home(partitions: &[CpuSet], places: &Places, held: Option<(&CpuSet, usize)>) -> Option<usize> {
    held.and_then(|(old, lane)| match partitions.get(lane) {
        // Its own partition again: what `home_lane` would find, without looking.
        Some(p) if p == old => Some(lane),
        _ => places.home_lane(old, partitions),
    })
}

/// What [`deal_by_count`] gives for `jobs` when `before` was dealt for `jobs_before` and each of those is
/// held where `before` put it, found from `before` when one job came or went and the others kept
/// their turns, with the jobs that are new or moved; `None` otherwise, and the jobs must be dealt.
/// Every job that stays is home again, so only the lane counts' one-job difference has to be
/// settled:
/// - A job gone from a lane of `floor` jobs, while some lanes have one more: the deal lets only as
///   many lanes have one more as before less one, first come first served, so the fuller lane whose
///   extra job arrived last loses it, to the lane the job left (now the emptiest).
/// - A new job: it goes home if its lane has room. A lane that is full already keeps its jobs that
///   arrived first, and the one that arrived last (this job or another) goes to the emptiest lane
///   (fewest jobs, then least load, then first), as a job without a home does.
pub fn deal_again<'h>(
    before: Lanes,
    jobs_before: &[(JobId, f64)],
    jobs: &[(JobId, f64)],
    places: &Places,
    held: impl Fn(JobId) -> Option<(&'h CpuSet, usize)>,
) -> Option<(Lanes, Vec<JobId>)> {
    let lane_count = before.len();
    let (m, n) = (jobs_before.len(), jobs.len());
    let k = jobs_before
        .iter()
        .zip(jobs)
        .position(|(a, b)| a != b)
        .unwrap_or(m.min(n));
    if lane_count == 0 {
        return None;
    }
    let mut lanes = before;
    lanes.idle.iter_mut().for_each(|idle| *idle = 0.0);
    let (floor, fuller) = (m / lane_count, m % lane_count);
    if m == n + 1 && jobs_before[k + 1..] == jobs[k..] {
        let gone = jobs_before[k].0;
        let lane = lanes.lane_of(gone)?;
        let count = lanes.count(lane);
        lanes.remove(lane, gone);
        if fuller > 0 && count == floor {
            // The fuller lanes' extra jobs are their last ones; the one that arrived last moves.
            let extra: HashMap<JobId, usize> = (0..lane_count)
                .filter(|&l| lanes.count(l) == floor + 1)
                .map(|l| (lanes.jobs(l).last().expect("not empty").0, l))
                .collect();
            let (at, &(job, _)) = jobs
                .iter()
                .enumerate()
                .rev()
                .find(|(_, (job, _))| extra.contains_key(job))?;
            lanes.remove(extra[&job], job);
            lanes.insert_arriving(lane, at, jobs);
            return Some((lanes, vec![job]));
        }
        return Some((lanes, Vec::new()));
    }
    if n != m + 1 || jobs_before[k..] != jobs[k + 1..] {
        return None;
    }
    let new = jobs[k].0;
    let home = home(&lanes.cpus, places, held(new));
    // Lanes hold `floor` or one more; one more job may join a lane of `floor` (however many have
    // one more, as the count grows by one), never one of `floor + 1`.
    let lane = match home {
        Some(h) if lanes.count(h) == floor => h,
        Some(h) => {
            // Lane `h` is full: of its jobs and the new one, the one that arrived last leaves.
            let last = lanes.jobs(h).last().expect("a full lane has jobs").0;
            let last_at = jobs[k + 1..].iter().position(|(job, _)| *job == last);
            lanes.insert_arriving(h, k, jobs);
            let (leaving, at) = match last_at {
                Some(after) => (last, k + 1 + after),
                None => (new, k),
            };
            lanes.remove(h, leaving);
            let emptiest = lanes.emptiest();
            lanes.insert_arriving(emptiest, at, jobs);
            return Some((lanes, vec![new, leaving]));
        }
        None => lanes.emptiest(),
    };
    lanes.insert_arriving(lane, k, jobs);
    Some((lanes, vec![new]))
}

/// Where the partitions of one level lie: the partition holding each CPU, and the one starting at it,
/// indexed by CPU number (a table rather than a hash map: every plan looks up every job).
#[derive(Debug, Clone)]
pub struct Places {
    of_cpu: Vec<Option<usize>>,
    by_first_cpu: Vec<Option<usize>>,
}

impl Places {
    pub fn of(partitions: &[CpuSet]) -> Places {
        let mut of_cpu: Vec<Option<usize>> = Vec::new();
        let mut by_first_cpu: Vec<Option<usize>> = Vec::new();
        let slot = |table: &mut Vec<Option<usize>>, cpu: u32| {
            let cpu = cpu as usize;
            if table.len() <= cpu {
                table.resize(cpu + 1, None);
            }
            cpu
        };
        for (i, p) in partitions.iter().enumerate() {
            for cpu in p.iter() {
                let cpu = slot(&mut of_cpu, cpu);
                of_cpu[cpu].get_or_insert(i);
            }
            if let Some(first) = p.first() {
                let first = slot(&mut by_first_cpu, first);
                by_first_cpu[first] = Some(i);
            }
        }
        Places {
            of_cpu,
            by_first_cpu,
        }
    }

    /// Whether `cpus` is one of `partitions` (those this table was made of): they tile the machine, so
    /// only the one holding its first CPU can be it, where a scan compared a thousand.
    pub fn holds(&self, cpus: &CpuSet, partitions: &[CpuSet]) -> bool {
        let found = cpus
            .first()
            .and_then(|first| *self.of_cpu.get(first as usize)?)
            .is_some_and(|i| partitions[i] == *cpus);
        debug_assert_eq!(found, partitions.contains(cpus));
        found
    }

    /// The partition a job held before, or the one containing it, or the first one inside it.
    fn home_lane(&self, old: &CpuSet, partitions: &[CpuSet]) -> Option<usize> {
        let first = old.first()? as usize;
        // Partitions tile the machine, so the one holding the job's first CPU is the only candidate
        // that can equal or contain its old set; a smaller partition inside it starts at that CPU too.
        let candidate = (*self.of_cpu.get(first)?)?;
        let p = &partitions[candidate];
        if p == old || old.is_subset(p) || p.is_subset(old) {
            return Some(candidate);
        }
        self.by_first_cpu
            .get(first)
            .copied()
            .flatten()
            .filter(|&i| partitions[i].is_subset(old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cpus(range: std::ops::Range<u32>) -> CpuSet {
        CpuSet::from_range(range)
    }

    #[test]
    fn lanes_of_different_counts_share_the_span_equally_within_each_lane() {
        let lanes = Lanes::new([
            (cpus(0..2), vec![(JobId(0), 1.0), (JobId(1), 1.0)]),
            (cpus(2..4), (2..5).map(|j| (JobId(j), 1.0)).collect()),
        ]);
        let slots = side_by_side(&lanes, 6.0);
        let time = |job| -> f64 {
            slots
                .iter()
                .filter(|s| s.assignments.iter().any(|a| a.job == JobId(job)))
                .map(|s| s.length)
                .sum()
        };
        assert!((time(0) - 3.0).abs() < 1e-9 && (time(1) - 3.0).abs() < 1e-9);
        for job in 2..5 {
            assert!((time(job) - 2.0).abs() < 1e-9);
        }
        assert_eq!(slots.len(), 4);
    }

    #[test]
    fn many_lanes_of_a_few_kinds_cut_where_each_kind_switches() {
        // Twelve kinds of lanes (two to thirteen jobs), more than the kinds remembered, each kind
        // five times over, interleaved.
        let mut kinds = Vec::new();
        let mut next = 0;
        for copy in 0..5u32 {
            for count in 2..14u32 {
                let first = copy * 12 * 2 + (count - 2) * 2;
                let jobs: Vec<(JobId, f64)> = (0..count).map(|j| (JobId(next + j), 1.0)).collect();
                kinds.push((cpus(first..first + 2), jobs));
                next += count;
            }
        }
        let lanes = Lanes::new(kinds);
        let slots = side_by_side(&lanes, 1.0);
        for (lane, (_, jobs)) in lanes.iter().enumerate() {
            for &(job, _) in jobs {
                let time: f64 = slots
                    .iter()
                    .filter(|s| s.assignments.iter().any(|a| a.job == job))
                    .map(|s| s.length)
                    .sum();
                let share = 1.0 / jobs.len() as f64;
                assert!(
                    (time - share).abs() < 1e-9,
                    "lane {lane}, {job:?}: {time} for {share}"
                );
            }
        }
        // Every slot boundary is some kind's switch: the distinct fractions k/n for n in 2..14.
        let mut fractions: Vec<(u32, u32)> = (2..14u32)
            .flat_map(|n| (1..n).map(move |k| (k, n)))
            .map(|(k, n)| {
                let g = (1..=k)
                    .rev()
                    .find(|g| k % g == 0 && n % g == 0)
                    .unwrap_or(1);
                (k / g, n / g)
            })
            .collect();
        fractions.sort_unstable();
        fractions.dedup();
        assert_eq!(slots.len(), fractions.len() + 1);
    }

    #[test]
    fn an_idle_tail_leaves_the_partition_empty() {
        let mut lanes = Lanes::new([
            (cpus(0..2), vec![(JobId(0), 1.0)]),
            (cpus(2..4), vec![(JobId(1), 2.0)]),
        ]);
        lanes.idle_for(0, 1.0);
        let slots = side_by_side(&lanes, 4.0);
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[1].assignments.len(), 1);
        assert_eq!(slots[1].assignments[0].job, JobId(1));
        assert!((slots[0].length - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_replaced_job_leaves_its_lane_and_the_newcomer_queues_last_in_it() {
        let mut lanes = Lanes::new([
            (cpus(0..2), vec![(JobId(0), 1.0)]),
            (cpus(2..4), (1..4).map(|j| (JobId(j), 1.0)).collect()),
        ]);
        lanes.replace(1, 1, JobId(9));
        let ids = |lane| {
            lanes
                .jobs(lane)
                .iter()
                .map(|(j, _)| j.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(1), vec![1, 3, 9]);
        assert_eq!(ids(0), vec![0]);
    }

    #[test]
    fn dealing_keeps_jobs_home_and_balances_counts() {
        let parts: Arc<[CpuSet]> = [cpus(0..2), cpus(2..4)].into();
        let mut held = HashMap::new();
        for job in 0..3 {
            held.insert(JobId(job), cpus(0..2));
        }
        held.insert(JobId(3), cpus(2..3));
        let jobs: Vec<(JobId, f64)> = (0..4).map(|j| (JobId(j), 1.0)).collect();
        let places = Places::of(&parts);
        let lanes = deal_by_count(&parts, &places, &jobs, |j| {
            held.get(&j).map(|c| (c, usize::MAX))
        });
        let ids = |lanes: &Lanes| {
            lanes
                .iter()
                .map(|(_, jobs)| jobs.iter().map(|(j, _)| j.0).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        // Job 2 moved in behind job 3 but takes its turn first, as the older job.
        assert_eq!(ids(&lanes), vec![vec![0, 1], vec![2, 3]]);
        let held: HashMap<JobId, CpuSet> = lanes
            .iter()
            .flat_map(|(cpus, jobs)| jobs.iter().map(|(job, _)| (*job, cpus.clone())))
            .collect();
        let again = deal_by_count(&parts, &places, &jobs, |j| {
            held.get(&j).map(|c| (c, usize::MAX))
        });
        assert_eq!(ids(&again), vec![vec![0, 1], vec![2, 3]]);
    }

    proptest::proptest! {
        /// What lets a plan keep a level's lanes when its jobs are the same: whatever the jobs held
        /// before, dealing them again where the first deal put them changes nothing.
        #[test]
        fn dealing_the_dealt_jobs_again_keeps_every_lane(
            width in 1u32..5,
            lane_count in 1u32..9,
            jobs in proptest::collection::vec((1u32..4, proptest::option::of((0u32..40, 1u32..12))), 0..40),
        ) {
            let parts: Arc<[CpuSet]> =
                (0..lane_count).map(|l| cpus(l * width..(l + 1) * width)).collect();
            let places = Places::of(&parts);
            let members: Vec<(JobId, f64)> = jobs
                .iter()
                .enumerate()
                .map(|(j, &(turns, _))| (JobId(j as u32), f64::from(turns) / 4.0))
                .collect();
            let before: HashMap<JobId, CpuSet> = jobs
                .iter()
                .enumerate()
                .filter_map(|(j, &(_, old))| old.map(|(first, len)| (JobId(j as u32), cpus(first..first + len))))
                .collect();
            let first = deal_by_count(&parts, &places, &members, |j| before.get(&j).map(|c| (c, usize::MAX)));
            let held: HashMap<JobId, (CpuSet, usize)> = first
                .iter()
                .enumerate()
                .flat_map(|(lane, (cpus, jobs))| jobs.iter().map(move |(job, _)| (*job, (cpus.clone(), lane))))
                .collect();
            let again = deal_by_count(&parts, &places, &members, |j| held.get(&j).map(|(c, lane)| (c, *lane)));
            let lanes = |l: &Lanes| l.iter().map(|(_, jobs)| jobs.to_vec()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(lanes(&first), lanes(&again));
        }

        /// One job gone or new, the others held where the last deal put them: dealing again from
        /// the last lanes gives what dealing every job gives.
        #[test]
        fn dealing_again_after_one_job_came_or_went_is_dealing_anew(
            width in 1u32..4,
            lane_count in 1u32..7,
            jobs in proptest::collection::vec((1u32..4, proptest::option::of((0u32..30, 1u32..9))), 0..30),
            change in (proptest::arbitrary::any::<usize>(), proptest::arbitrary::any::<bool>(), 1u32..4, proptest::option::of((0u32..30, 1u32..9))),
        ) {
            let parts: Arc<[CpuSet]> =
                (0..lane_count).map(|l| cpus(l * width..(l + 1) * width)).collect();
            let places = Places::of(&parts);
            let turn = |turns: u32| f64::from(turns) / 4.0;
            let before: Vec<(JobId, f64)> = jobs
                .iter()
                .enumerate()
                .map(|(j, &(turns, _))| (JobId(j as u32), turn(turns)))
                .collect();
            let earlier: HashMap<JobId, (CpuSet, usize)> = jobs
                .iter()
                .enumerate()
                .filter_map(|(j, &(_, old))| {
                    old.map(|(first, len)| (JobId(j as u32), (cpus(first..first + len), usize::MAX)))
                })
                .collect();
            let first = deal_by_count(&parts, &places, &before, |j| earlier.get(&j).map(|(c, l)| (c, *l)));
            let mut held: HashMap<JobId, (CpuSet, usize)> = first
                .iter()
                .enumerate()
                .flat_map(|(lane, (cpus, jobs))| jobs.iter().map(move |(job, _)| (*job, (cpus.clone(), lane))))
                .collect();
            let (at, gone, turns, old) = change;
            let mut now = before.clone();
            if gone && !now.is_empty() {
                now.remove(at % now.len());
            } else {
                let new = JobId(jobs.len() as u32);
                now.insert(at % (now.len() + 1), (new, turn(turns)));
                if let Some((first, len)) = old {
                    held.insert(new, (cpus(first..first + len), usize::MAX));
                }
            }
            let lookup = |j| held.get(&j).map(|(c, l)| (c, *l));
            let anew = deal_by_count(&parts, &places, &now, lookup);
            let (again, moved) = deal_again(first.clone(), &before, &now, &places, lookup).expect("one job differs");
            let lanes = |l: &Lanes| l.iter().map(|(_, jobs)| jobs.to_vec()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(lanes(&anew), lanes(&again));
            proptest::prop_assert_eq!(&anew.busy, &again.busy);
            // Every job not where the first deal put it is reported as moved.
            for (lane, (_, jobs)) in again.iter().enumerate() {
                for (job, _) in jobs {
                    let stayed = held.get(job).is_some_and(|(_, l)| *l == lane);
                    proptest::prop_assert!(stayed || moved.contains(job), "{:?} moved unreported", job);
                }
            }
        }
    }
}
