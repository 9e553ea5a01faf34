//! A deliberately simple FCFS and EASY on exclusive nodes, written from the textbook (Mu'alem &
//! Feitelson, IEEE TPDS 12(6), 2001) and quadratic, that [`super::batch`] must agree with start for
//! start.

use super::batch::BatchPolicy;
use super::replay::shape;
use crate::swf::SwfJob;

/// Each job's start when `jobs` run on `nodes` exclusive nodes of `cpus` CPUs.
pub(crate) fn starts(jobs: &[SwfJob], nodes: u32, cpus: u32, policy: BatchPolicy) -> Vec<f64> {
    let width: Vec<u32> = jobs.iter().map(|j| shape(j.procs, cpus).0).collect();
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|&a, &b| jobs[a].submit.total_cmp(&jobs[b].submit));
    let mut start = vec![f64::NAN; jobs.len()];
    let mut queue: Vec<usize> = Vec::new();
    let mut running: Vec<usize> = Vec::new();
    let mut next = 0;
    loop {
        let ends = running.iter().map(|&j| start[j] + jobs[j].run);
        let arrival = arrivals.get(next).map(|&j| jobs[j].submit);
        let Some(now) = ends.chain(arrival).min_by(f64::total_cmp) else {
            break;
        };
        running.retain(|&j| start[j] + jobs[j].run > now);
        while next < arrivals.len() && jobs[arrivals[next]].submit <= now {
            queue.push(arrivals[next]);
            next += 1;
        }
        let mut free = nodes - running.iter().map(|&j| width[j]).sum::<u32>();
        while !queue.is_empty() && width[queue[0]] <= free {
            let job = queue.remove(0);
            free -= width[job];
            start[job] = now;
            running.push(job);
        }
        if policy == BatchPolicy::Fcfs || queue.is_empty() {
            continue;
        }
        // A job that ran past its estimate is expected to end now.
        let estimated_end = |j: usize| (start[j] + jobs[j].estimate).max(now);
        let mut by_end = running.clone();
        by_end.sort_by(|&a, &b| estimated_end(a).total_cmp(&estimated_end(b)));
        let mut shadow = now;
        let mut available = free;
        for &j in &by_end {
            if available >= width[queue[0]] {
                break;
            }
            available += width[j];
            shadow = estimated_end(j);
        }
        let ending_by_shadow: u32 = by_end
            .iter()
            .filter(|&&j| estimated_end(j) <= shadow)
            .map(|&j| width[j])
            .sum();
        let mut extra = free + ending_by_shadow - width[queue[0]];
        let mut i = 1;
        while i < queue.len() {
            let job = queue[i];
            let before_shadow = now + jobs[job].estimate <= shadow;
            if width[job] <= free && (before_shadow || width[job] <= extra) {
                if !before_shadow {
                    extra -= width[job];
                }
                free -= width[job];
                start[job] = now;
                running.push(job);
                queue.remove(i);
            } else {
                i += 1;
            }
        }
    }
    start
}
