//! TACO's steady state under a long queue: every admitted job on one level, every partition of it with
//! the same number of jobs. A finished job's place then goes to the next job in the queue and nothing
//! else moves, so the decision costs one lane instead of a plan for every admitted job.
//!
//! The shortcut gives exactly the plan a full decision would: the level keeps its job count, no level
//! has odd jobs to promote (§2.2), the newcomer has not started and so has no grace period (§2.3), and
//! the full deal would put it, as the newest job, last in the one lane with room.

use cosched_core::plan_change::SlotAssignment;
use cosched_core::{CpuSet, JobId, PlanChange};
use std::collections::HashMap;

/// The lanes of the one level in use, as the last plan left them.
#[derive(Debug, Clone)]
pub struct Steady {
    pub level: usize,
    /// The weight every job has; a newcomer with another would change the slot lengths.
    pub weight: f64,
    /// Each partition and its jobs in slot order, which is their arrival order.
    lanes: Vec<(CpuSet, Vec<JobId>)>,
    lane_of: HashMap<JobId, usize>,
}

impl Steady {
    /// The steady state `lanes` describe (their jobs in arrival order, as dealt), if they fill every
    /// lane equally.
    pub fn of(level: usize, weight: f64, lanes: Vec<(CpuSet, Vec<JobId>)>) -> Option<Steady> {
        let per_lane = lanes.first()?.1.len();
        if per_lane == 0 || lanes.iter().any(|(_, jobs)| jobs.len() != per_lane) {
            return None;
        }
        let lane_of = lanes
            .iter()
            .enumerate()
            .flat_map(|(i, (_, jobs))| jobs.iter().map(move |&job| (job, i)))
            .collect();
        Some(Steady {
            level,
            weight,
            lanes,
            lane_of,
        })
    }

    pub fn holds(&self, job: JobId) -> bool {
        self.lane_of.contains_key(&job)
    }

    pub fn job_count(&self) -> usize {
        self.lane_of.len()
    }

    /// Replaces `finished` by `newcomer`, who joins the end of its lane while the jobs behind
    /// `finished` move up one slot. Returns the newcomer's partition and the change of slots; `None` if
    /// `finished` held no place here.
    pub fn hand_over(&mut self, finished: JobId, newcomer: JobId) -> Option<(CpuSet, PlanChange)> {
        let lane = self.lane_of.remove(&finished)?;
        let (cpus, jobs) = &mut self.lanes[lane];
        let from = jobs
            .iter()
            .position(|&j| j == finished)
            .expect("a held job is in its lane");
        let removed = (from..jobs.len()).map(|s| (s, jobs[s])).collect();
        jobs.remove(from);
        jobs.push(newcomer);
        self.lane_of.insert(newcomer, lane);
        let placed = (from..jobs.len())
            .map(|s| SlotAssignment {
                slot: s,
                job: jobs[s],
                cpus: cpus.clone(),
            })
            .collect();
        let change = PlanChange {
            slots: jobs.len(),
            removed,
            placed,
            ..PlanChange::default()
        };
        Some((cpus.clone(), change))
    }
}
