//! A time window of a long real run (a daemon's): the jobs that arrived in it, with their records,
//! placed by the Unix time of the trace's `t = 0` (`run_start`'s `started_unix`).

use cosched_core::trace::{Record, TraceLine};
use cosched_core::JobId;
use std::collections::BTreeSet;

/// The part of `lines` about jobs that arrived between Unix times `from` and `to`, its times counted
/// from `from` (or from the start of the run, if later): `None` when the trace cannot be placed in
/// time (a simulation, or a trace older than `started_unix`) or no job arrived in the window.
///
/// Plans keep only those jobs; the plan in force when the window opens is kept, moved to its start.
pub fn window(lines: &[TraceLine], from: f64, to: f64) -> Option<Vec<TraceLine>> {
    let started = lines.iter().find_map(|l| match &l.record {
        Record::RunStart { started_unix, .. } => *started_unix,
        _ => None,
    })?;
    let (from, to) = (from - started, to - started);
    let kept: BTreeSet<JobId> = lines
        .iter()
        .filter_map(|l| match &l.record {
            Record::Arrival { job, .. } if (from..=to).contains(&l.t) => Some(job.id),
            _ => None,
        })
        .collect();
    if kept.is_empty() {
        return None;
    }
    let origin = from.max(0.0);
    let mut out = Vec::new();
    let mut plan_at_opening = None;
    for line in lines {
        let job = match &line.record {
            Record::Arrival { job, .. } => Some(job.id),
            Record::Start { job, .. }
            | Record::Threads { job, .. }
            | Record::Finish { job, .. } => Some(*job),
            Record::Sample(sample) => Some(sample.job),
            _ => None,
        };
        if job.is_some_and(|id| !kept.contains(&id)) {
            continue;
        }
        let mut line = line.clone();
        if let Record::Plan { plan } = &mut line.record {
            for slot in &mut plan.slots {
                slot.assignments.retain(|a| kept.contains(&a.job));
            }
            plan.pinned.retain(|a| kept.contains(&a.job));
            plan.advice.retain(|id, _| kept.contains(id));
            if line.t < origin {
                plan_at_opening = Some(line);
                continue;
            }
        }
        if let Some(mut plan) = plan_at_opening.take() {
            plan.t = 0.0;
            out.push(plan);
        }
        line.t = (line.t - origin).max(0.0);
        if let Record::Arrival { job, .. } = &mut line.record {
            job.arrival = line.t;
        }
        out.push(line);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::trace::ExecutorKind;
    use cosched_core::{Assignment, JobSpec, Plan};

    fn line(t: f64, record: Record) -> TraceLine {
        TraceLine { t, record }
    }

    fn arrival(t: f64, id: u32) -> TraceLine {
        let job = JobSpec {
            owner: None,
            id: JobId(id),
            name: format!("j{id}"),
            arrival: t,
            kind: Default::default(),
            min_threads: 1,
            max_threads: 1,
            coschedule: true,
            weight: 1.0,
            hints: Default::default(),
        };
        line(
            t,
            Record::Arrival {
                job,
                isolated: None,
            },
        )
    }

    #[test]
    fn keeps_the_jobs_that_arrived_in_the_window_and_counts_time_from_its_start() {
        let both = Plan::space_sharing(
            [0, 1]
                .map(|id| Assignment {
                    job: JobId(id),
                    cpus: "0".parse().unwrap(),
                })
                .to_vec(),
        );
        let lines = vec![
            line(
                0.0,
                Record::RunStart {
                    version: 2,
                    executor: ExecutorKind::Real,
                    policy: "eq".into(),
                    machine: "m".into(),
                    cpus: 2,
                    workload: "daemon".into(),
                    seed: None,
                    mechanism: None,
                    started_unix: Some(1000.0),
                },
            ),
            arrival(10.0, 0),
            line(20.0, Record::Plan { plan: both }),
            arrival(100.0, 1),
            line(
                150.0,
                Record::Finish {
                    job: JobId(1),
                    status: cosched_core::trace::ExitStatus::Ok,
                    exit_code: Some(0),
                    error: None,
                },
            ),
        ];
        let kept = window(&lines, 1050.0, 1200.0).unwrap();
        let times: Vec<f64> = kept.iter().map(|l| l.t).collect();
        assert_eq!(times, [0.0, 0.0, 50.0, 100.0]);
        let Record::Plan { plan } = &kept[1].record else {
            panic!("{:?}", kept[1])
        };
        assert_eq!(plan.slots[0].assignments.len(), 1, "job 0 left the plan");
        assert!(window(&lines, 1200.0, 1300.0).is_none());
        assert!(window(&lines[1..], 0.0, 2000.0).is_none(), "no run_start");
    }
}
