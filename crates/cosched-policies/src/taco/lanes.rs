//! Turning jobs on partitions into a cycle of slots.
//!
//! A *lane* is one partition and the jobs coscheduled in it one after the other, each for a duration.
//! Lanes of one level run side by side; each lane's durations (plus any idle time it was given) are
//! stretched to the level's span, so that a lane idles only where told to. Slots are cut wherever any
//! lane switches jobs.

use cosched_core::{Assignment, CpuSet, JobId, Slot};
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub struct Lane {
    pub cpus: CpuSet,
    /// Jobs in their order within the lane, each with its duration (any unit; only ratios matter).
    pub jobs: Vec<(JobId, f64)>,
    /// Time the partition stays empty after its jobs, in the same unit.
    pub idle: f64,
}

impl Lane {
    pub fn new(cpus: CpuSet) -> Lane {
        Lane {
            cpus,
            jobs: Vec::new(),
            idle: 0.0,
        }
    }

    pub fn load(&self) -> f64 {
        self.jobs.iter().map(|(_, d)| d).sum::<f64>() + self.idle
    }

    pub fn idle_for(&mut self, duration: f64) {
        self.idle += duration;
    }
}

/// Slots for `lanes` side by side during `span` seconds.
pub fn side_by_side(lanes: &[Lane], span: f64) -> Vec<Slot> {
    let busy: Vec<&Lane> = lanes
        .iter()
        .filter(|l| !l.jobs.is_empty() && l.load() > 0.0)
        .collect();
    if busy.is_empty() {
        return Vec::new();
    }
    let mut cuts: Vec<f64> = vec![0.0, span];
    for lane in &busy {
        let scale = span / lane.load();
        let mut t = 0.0;
        let ends = if lane.idle > 0.0 {
            lane.jobs.len()
        } else {
            lane.jobs.len() - 1
        };
        for (_, duration) in &lane.jobs[..ends] {
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
        for (lane, (index, end)) in busy.iter().zip(cursors.iter_mut()) {
            let scale = span / lane.load();
            if *index == 0 && *end == 0.0 {
                *end = lane.jobs[0].1 * scale;
            }
            while *end < middle && *index + 1 < lane.jobs.len() {
                *index += 1;
                *end += lane.jobs[*index].1 * scale;
            }
            if *end < middle {
                continue;
            }
            assignments.push(Assignment {
                job: lane.jobs[*index].0,
                cpus: lane.cpus.clone(),
            });
        }
        slots.push(Slot {
            length: window[1] - window[0],
            assignments,
        });
    }
    slots
}

/// Deals jobs to the partitions of one level so that lane counts differ by at most one, keeping every
/// job whose previous CPUs match a partition (the same set, or one containing or inside it) there while
/// its lane has room. `jobs` are in arrival order, each with its duration; each lane takes its jobs in
/// that order, so that dealing the same jobs again changes nothing.
pub fn deal<'h>(
    partitions: &[CpuSet],
    places: &Places,
    jobs: &[(JobId, f64)],
    held: impl Fn(JobId) -> Option<&'h CpuSet>,
) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = partitions.iter().cloned().map(Lane::new).collect();
    if lanes.is_empty() {
        return lanes;
    }
    let floor = jobs.len() / lanes.len();
    // Lanes that may still take one job more than `floor`.
    let mut fuller_left = jobs.len() % lanes.len();
    let mut has_room = |count: usize| {
        let room = count < floor || (count == floor && fuller_left > 0);
        if count == floor && room {
            fuller_left -= 1;
        }
        room
    };
    // Each lane's job count and load so far, and each job's lane: flat, since a level may have a
    // thousand lanes of a job or two each.
    let mut count = vec![0usize; lanes.len()];
    let mut load = vec![0.0f64; lanes.len()];
    let mut lane_of = vec![0usize; jobs.len()];
    let mut homeless = Vec::new();
    for (k, &(job, duration)) in jobs.iter().enumerate() {
        let home = held(job).and_then(|old| places.home_lane(old, partitions));
        match home {
            Some(i) if has_room(count[i]) => {
                lane_of[k] = i;
                count[i] += 1;
                load[i] += duration;
            }
            _ => homeless.push(k),
        }
    }
    // The emptiest lane first (fewest jobs, then least load, then first): ordered by (count, load,
    // index); loads are never negative, so their bits order them.
    let mut emptiest: BTreeSet<(usize, u64, usize)> = BTreeSet::new();
    if !homeless.is_empty() {
        emptiest.extend((0..lanes.len()).map(|i| (count[i], load[i].to_bits(), i)));
    }
    for k in homeless {
        let (_, _, i) = emptiest.pop_first().expect("at least one lane");
        lane_of[k] = i;
        count[i] += 1;
        load[i] += jobs[k].1;
        emptiest.insert((count[i], load[i].to_bits(), i));
    }
    for (lane, &n) in lanes.iter_mut().zip(&count) {
        lane.jobs = Vec::with_capacity(n);
    }
    // In `jobs` order, so each lane takes its jobs in arrival order.
    for (k, &i) in lane_of.iter().enumerate() {
        lanes[i].jobs.push(jobs[k]);
    }
    lanes
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
        let lanes = [
            Lane {
                cpus: cpus(0..2),
                jobs: vec![(JobId(0), 1.0), (JobId(1), 1.0)],
                idle: 0.0,
            },
            Lane {
                cpus: cpus(2..4),
                jobs: vec![(JobId(2), 1.0), (JobId(3), 1.0), (JobId(4), 1.0)],
                idle: 0.0,
            },
        ];
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
    fn an_idle_tail_leaves_the_partition_empty() {
        let mut lane = Lane::new(cpus(0..2));
        lane.jobs.push((JobId(0), 1.0));
        lane.idle_for(1.0);
        let other = Lane {
            cpus: cpus(2..4),
            jobs: vec![(JobId(1), 2.0)],
            idle: 0.0,
        };
        let slots = side_by_side(&[lane, other], 4.0);
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[1].assignments.len(), 1);
        assert_eq!(slots[1].assignments[0].job, JobId(1));
        assert!((slots[0].length - 2.0).abs() < 1e-9);
    }

    #[test]
    fn dealing_keeps_jobs_home_and_balances_counts() {
        let parts = [cpus(0..2), cpus(2..4)];
        let mut held = HashMap::new();
        for job in 0..3 {
            held.insert(JobId(job), cpus(0..2));
        }
        held.insert(JobId(3), cpus(2..3));
        let jobs: Vec<(JobId, f64)> = (0..4).map(|j| (JobId(j), 1.0)).collect();
        let places = Places::of(&parts);
        let lanes = deal(&parts, &places, &jobs, |j| held.get(&j));
        let ids = |lane: &Lane| lane.jobs.iter().map(|(j, _)| j.0).collect::<Vec<_>>();
        assert_eq!(ids(&lanes[0]), vec![0, 1]);
        // Job 2 moved in behind job 3 but takes its turn first, as the older job.
        assert_eq!(ids(&lanes[1]), vec![2, 3]);
        let held: HashMap<JobId, CpuSet> = lanes
            .iter()
            .flat_map(|lane| lane.jobs.iter().map(|(job, _)| (*job, lane.cpus.clone())))
            .collect();
        let again = deal(&parts, &places, &jobs, |j| held.get(&j));
        assert_eq!(
            again.iter().map(ids).collect::<Vec<_>>(),
            vec![vec![0, 1], vec![2, 3]]
        );
    }
}
