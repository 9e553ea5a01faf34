//! TACO's steady state under a long queue: every admitted job on one level, every partition of it with
//! the same number of jobs. A finished job's place then goes to the next job in the queue and nothing
//! else moves, so the decision costs one lane instead of a plan for every admitted job.
//!
//! The shortcut gives exactly the plan a full decision would: the level keeps its job count, no level
//! has odd jobs to promote (§2.2), the newcomer has not started and so has no grace period (§2.3), and
//! the full deal would put it, as the newest job, last in the one lane with room.

use super::lanes::Lanes;
use cosched_core::plan_change::SlotAssignment;
use cosched_core::{CpuSet, JobId, PlanChange};
use rustc_hash::FxHashMap as HashMap;

/// The lanes of the one level in use, as the last plan left them.
#[derive(Debug, Clone)]
pub struct Steady {
    pub level: usize,
    /// The weight every job has; a newcomer with another would change the slot lengths.
    pub weight: f64,
    /// Each partition and its jobs in slot order, which is their arrival order.
    lanes: Lanes,
    lane_of: HashMap<JobId, usize>,
}

impl Steady {
    /// The steady state `lanes` describe (their jobs in arrival order, as dealt), if they fill every
    /// lane equally.
    pub fn of(level: usize, weight: f64, lanes: &Lanes) -> Option<Steady> {
        let per_lane = lanes.iter().next()?.1.len();
        if per_lane == 0 || lanes.iter().any(|(_, jobs)| jobs.len() != per_lane) {
            return None;
        }
        let lane_of = lanes
            .iter()
            .enumerate()
            .flat_map(|(i, (_, jobs))| jobs.iter().map(move |&(job, _)| (job, i)))
            .collect();
        Some(Steady {
            level,
            weight,
            lanes: lanes.clone(),
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
        let jobs = self.lanes.jobs(lane);
        let from = jobs
            .iter()
            .position(|&(j, _)| j == finished)
            .expect("a held job is in its lane");
        let removed = (from..jobs.len()).map(|s| (s, jobs[s].0)).collect();
        self.lanes.replace(lane, from, newcomer);
        self.lane_of.insert(newcomer, lane);
        let cpus = self.lanes.cpus(lane);
        let jobs = self.lanes.jobs(lane);
        let placed = (from..jobs.len())
            .map(|s| SlotAssignment {
                slot: s,
                job: jobs[s].0,
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
