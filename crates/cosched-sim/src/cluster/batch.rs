//! FCFS and EASY backfilling over identical processors.
//!
//! EASY is Lifka's scheduler ("The ANL/IBM SP scheduling system", JSSPP 1995), as Mu'alem & Feitelson
//! describe it (IEEE TPDS 12(6), 2001): the first queued job gets a reservation at the earliest time
//! enough processors free up, judged from the running jobs' estimated ends; a later job may start now
//! if it fits now and either ends (by its estimate) before that reservation or uses only processors
//! the reservation leaves over.

use crate::swf::SwfJob;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPolicy {
    /// Strict first-come first-served: no job passes the queue's head.
    Fcfs,
    /// EASY backfilling: only the queue's head holds a reservation.
    Easy,
}

impl std::str::FromStr for BatchPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fcfs" => Ok(Self::Fcfs),
            "easy" => Ok(Self::Easy),
            _ => Err(format!("unknown batch policy `{s}`; choose fcfs or easy")),
        }
    }
}

/// Where and when a job ran: the job's index in the input, its start and end.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub job: usize,
    pub start: f64,
    pub end: f64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BatchError {
    #[error(
        "job {id} needs {procs} processors but the machine has {machine}; give the machine's size \
(the trace header's MaxProcs) or drop the job"
    )]
    TooWide { id: u64, procs: u32, machine: u32 },
}

struct Running {
    job: usize,
    end: f64,
    estimated_end: f64,
}

/// Places every job on a machine of `machine_procs` processors; placements in the jobs' order.
/// Jobs are queued in submit order (file order among equal submit times). At one instant, finishes
/// come before arrivals, and one scheduling pass follows.
pub fn schedule(
    jobs: &[SwfJob],
    machine_procs: u32,
    policy: BatchPolicy,
) -> Result<Vec<Placement>, BatchError> {
    if let Some(job) = jobs.iter().find(|j| j.procs > machine_procs) {
        return Err(BatchError::TooWide {
            id: job.id,
            procs: job.procs,
            machine: machine_procs,
        });
    }
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|&a, &b| jobs[a].submit.total_cmp(&jobs[b].submit));
    let mut placements = vec![None; jobs.len()];
    let mut state = State {
        jobs,
        free: machine_procs,
        running: Vec::new(),
        queue: VecDeque::new(),
    };
    let mut next_arrival = 0;
    loop {
        let next_finish = state.running.iter().map(|r| r.end).min_by(f64::total_cmp);
        let arrival = arrivals.get(next_arrival).map(|&j| jobs[j].submit);
        let now = match (next_finish, arrival) {
            (Some(f), Some(a)) => f.min(a),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        state.finish_until(now);
        while next_arrival < arrivals.len() && jobs[arrivals[next_arrival]].submit <= now {
            state.queue.push_back(arrivals[next_arrival]);
            next_arrival += 1;
        }
        for job in state.pass(now, policy) {
            placements[job] = Some(Placement {
                job,
                start: now,
                end: now + jobs[job].run,
            });
        }
    }
    Ok(placements
        .into_iter()
        .map(|p| p.expect("every job starts once the machine empties"))
        .collect())
}

struct State<'a> {
    jobs: &'a [SwfJob],
    free: u32,
    running: Vec<Running>,
    queue: VecDeque<usize>,
}

impl State<'_> {
    fn finish_until(&mut self, now: f64) {
        let jobs = self.jobs;
        let mut freed = 0;
        self.running.retain(|r| {
            let done = r.end <= now;
            if done {
                freed += jobs[r.job].procs;
            }
            !done
        });
        self.free += freed;
    }

    fn start(&mut self, job: usize, now: f64) {
        let spec = &self.jobs[job];
        self.free -= spec.procs;
        self.running.push(Running {
            job,
            end: now + spec.run,
            estimated_end: now + spec.estimate,
        });
    }

    /// Starts what the policy allows at `now`; returns the started jobs.
    fn pass(&mut self, now: f64, policy: BatchPolicy) -> Vec<usize> {
        let mut started = Vec::new();
        while let Some(&head) = self.queue.front() {
            if self.jobs[head].procs > self.free {
                break;
            }
            self.queue.pop_front();
            self.start(head, now);
            started.push(head);
        }
        if policy == BatchPolicy::Easy && !self.queue.is_empty() {
            self.backfill(now, &mut started);
        }
        started
    }

    fn backfill(&mut self, now: f64, started: &mut Vec<usize>) {
        let (shadow, mut extra) = self.reservation(now);
        let mut waiting = VecDeque::with_capacity(self.queue.len());
        waiting.push_back(self.queue.pop_front().expect("backfill needs a queue head"));
        while let Some(job) = self.queue.pop_front() {
            let spec = &self.jobs[job];
            let ends_in_time = now + spec.estimate <= shadow;
            if spec.procs <= self.free && (ends_in_time || spec.procs <= extra) {
                if !ends_in_time {
                    extra -= spec.procs;
                }
                self.start(job, now);
                started.push(job);
            } else {
                waiting.push_back(job);
            }
        }
        self.queue = waiting;
    }

    /// The head's reservation: the earliest estimated time enough processors are free (the shadow
    /// time), and the processors free then beyond the head's need. A job past its estimate is
    /// taken to end now.
    fn reservation(&self, now: f64) -> (f64, u32) {
        let need = self.jobs[self.queue[0]].procs;
        let mut ends: Vec<(f64, u32)> = self
            .running
            .iter()
            .map(|r| (r.estimated_end.max(now), self.jobs[r.job].procs))
            .collect();
        ends.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut available = self.free;
        for (end, procs) in ends {
            available += procs;
            if available >= need {
                return (end, available - need);
            }
        }
        unreachable!("a job no wider than the machine fits once every running job ends")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swf;

    /// Seven jobs on 4 processors (fields: number, submit, wait, run, allocated, cpu, memory,
    /// requested processors, requested time, ...).
    const TRACE: &str = "\
; MaxProcs: 4
1  0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
2  1 -1  5 -1 -1 -1 4  5 -1 1 1 1 -1 -1 -1 -1 -1
3  2 -1  3 -1 -1 -1 1  3 -1 1 1 1 -1 -1 -1 -1 -1
4  3 -1 20 -1 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1
5  4 -1  4 -1 -1 -1 1  5 -1 1 1 1 -1 -1 -1 -1 -1
6  5 -1  2 -1 -1 -1 3  2 -1 1 1 1 -1 -1 -1 -1 -1
7 16 -1 30 -1 -1 -1 1 30 -1 1 1 1 -1 -1 -1 -1 -1
";

    fn starts(policy: BatchPolicy) -> Vec<f64> {
        let trace = swf::parse(TRACE, "hand.swf").unwrap();
        let placements = schedule(&trace.jobs, trace.machine_procs().unwrap(), policy).unwrap();
        placements.iter().map(|p| p.start).collect()
    }

    #[test]
    fn fcfs_never_passes_the_head() {
        // t0: 1 starts (2 free). 2 (4 procs) waits from t1, and 3..6 behind it.
        // t10: 1 ends, 2 starts (0 free). t15: 2 ends; 3, 4, 5 start (0 free); 6 (3) waits.
        // t16: 7 queues behind 6. t18, t19: 3 and 5 end (2 free). t35: 4 ends; 6 and 7 start.
        assert_eq!(
            starts(BatchPolicy::Fcfs),
            [0.0, 10.0, 15.0, 15.0, 15.0, 35.0, 35.0]
        );
    }

    #[test]
    fn easy_backfills_only_what_leaves_the_heads_reservation_alone() {
        // t0: 1 starts (2 free). t1: 2 (4) waits; reservation at 10 (1's end), 0 extra.
        // t2: 3 (1 proc, est. 3) ends by 5 <= 10: backfilled (1 free).
        // t3: 4 (2) does not fit now. t4: 5 (1, est. 5) ends by 9 <= 10: backfilled (0 free).
        // t5: 3 ends (1 free); 6 (3) arrives, does not fit. t8: 5 ends (2 free); 4 would end at 28
        //     > 10 and the reservation has no extra processor: it waits.
        // t10: 1 ends, 2 starts. t15: 2 ends, 4 starts (2 free); 6 (3) is the head, reservation at
        //      35 with 1 extra processor.
        // t16: 7 (1 proc, est. 30) ends at 46 > 35 but fits in the extra processor: starts.
        // t35: 4 ends, 3 free: 6 starts on its reservation.
        assert_eq!(
            starts(BatchPolicy::Easy),
            [0.0, 10.0, 2.0, 15.0, 4.0, 35.0, 16.0]
        );
    }

    #[test]
    fn a_job_wider_than_the_machine_is_refused() {
        let trace = swf::parse(TRACE, "hand.swf").unwrap();
        let err = schedule(&trace.jobs, 3, BatchPolicy::Easy).unwrap_err();
        assert_eq!(
            err,
            BatchError::TooWide {
                id: 2,
                procs: 4,
                machine: 3
            }
        );
        assert!(err.to_string().contains("MaxProcs"));
    }
}
