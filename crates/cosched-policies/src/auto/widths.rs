//! Widths for the jobs present, from how each scales: the makespan bound first, mean slowdown second.
//!
//! However the jobs are ordered, the machine cannot finish them before
//! `bound = max(Σ wₖ Tₖ(wₖ) / M, maxₖ Tₖ(wₖ))`: all their CPU work at the chosen widths spread over
//! its M CPUs, and the longest of them. A job's CPU work wₖ Tₖ(wₖ) grows with its width as it scales
//! less than perfectly (Amdahl's law: the serial part is paid on every CPU), so narrow widths keep the
//! first term small; the second term asks to widen the longest job. Starting from the narrowest
//! widths, the longest job is widened while that lowers the bound (Turek, Wolf and Yu's approach to
//! moldable jobs, "Approximate algorithms for scheduling parallelizable tasks", SPAA 1992). Then jobs
//! are widened, the cheapest in added CPU work first, while the bound stays within `SLACK` of its
//! least: a job that scales perfectly adds no work by running on every CPU, and one after another at
//! full width has a lower mean slowdown than side by side on a share. A job of unknown scaling is
//! taken to scale perfectly, so that with nothing known but the times alone the jobs run as BP
//! shortest-first does, the schedule a user would reach for; its spells teach the next run more.

use super::scalability::Curve;

/// How far above its least the makespan bound may rise to widen jobs for a lower mean slowdown.
pub const SLACK: f64 = 0.01;

/// One job's choice of widths.
#[derive(Debug, Clone)]
pub struct Choice {
    /// Remaining seconds alone on `full` CPUs.
    pub remaining: f64,
    /// Its width alone.
    pub full: usize,
    /// Its scaling (linear where unknown: a job's CPU work never falls with its width).
    pub curve: Curve,
    /// The widths it may be given.
    pub narrowest: usize,
    pub widest: usize,
    /// Whether its scaling is known (an unknown one is taken to scale perfectly).
    pub known: bool,
    /// Whether it waits until its width of CPUs is free rather than start on fewer.
    pub waits_for_width: bool,
}

impl Choice {
    /// Its remaining seconds on `width` CPUs.
    pub fn time(&self, width: usize) -> f64 {
        self.remaining * self.curve.time_ratio(width, self.full)
    }

    fn work(&self, width: usize) -> f64 {
        width as f64 * self.time(width)
    }
}

/// The makespan bound of `choices` at `widths` on `machine` CPUs.
pub fn bound(choices: &[Choice], widths: &[usize], machine: usize) -> f64 {
    let work: f64 = choices.iter().zip(widths).map(|(c, &w)| c.work(w)).sum();
    let longest = (choices.iter().zip(widths))
        .map(|(c, &w)| c.time(w))
        .fold(0.0, f64::max);
    (work / machine as f64).max(longest)
}

/// Widths for `choices` on `machine` CPUs, as the module doc says.
pub fn widths(choices: &[Choice], machine: usize) -> Vec<usize> {
    let mut widths: Vec<usize> = choices.iter().map(|c| c.narrowest).collect();
    let mut current = bound(choices, &widths, machine);
    loop {
        let Some(longest) = (0..choices.len()).max_by(|&a, &b| {
            choices[a]
                .time(widths[a])
                .total_cmp(&choices[b].time(widths[b]))
        }) else {
            return widths;
        };
        // The widest width is tried too: a measured curve may gain only past a package boundary.
        let narrow = widths[longest];
        let tried = (narrow + 1..=choices[longest].widest).map(|w| {
            widths[longest] = w;
            (w, bound(choices, &widths, machine))
        });
        let best = tried.min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        match best {
            Some((w, wider)) if wider < current - 1e-9 * current => {
                widths[longest] = w;
                current = wider;
            }
            _ => {
                widths[longest] = narrow;
                break;
            }
        }
    }
    let limit = current * (1.0 + SLACK);
    loop {
        let added = |i: usize, widths: &[usize]| {
            let (c, w) = (&choices[i], widths[i]);
            (c.work(w + 1) - c.work(w)) / c.work(w).max(f64::MIN_POSITIVE)
        };
        let fits = |i: usize, widths: &[usize]| {
            let mut wider = widths.to_vec();
            wider[i] += 1;
            bound(choices, &wider, machine) <= limit
        };
        let cheapest = (0..choices.len())
            .filter(|&i| widths[i] < choices[i].widest)
            .filter(|&i| fits(i, &widths))
            .min_by(|&a, &b| added(a, &widths).total_cmp(&added(b, &widths)));
        match cheapest {
            Some(i) => widths[i] += 1,
            None => return widths,
        }
    }
}

/// When each job would finish if the jobs started in `order` (indices into `choices`), none before
/// the one ahead of it (list scheduling). A job that waits for its width starts once that many CPUs
/// are free; another starts on the CPUs free when it ends sooner there than on its width later.
pub fn finishes(choices: &[Choice], widths: &[usize], order: &[usize], machine: usize) -> Vec<f64> {
    let mut finish = vec![0.0; choices.len()];
    // (until when, CPUs) of the jobs started, and when the last one started.
    let mut running: Vec<(f64, usize)> = Vec::new();
    let mut now = 0.0;
    for &i in order {
        let width = widths[i].min(machine);
        let free_at = |cpus: usize, running: &[(f64, usize)]| {
            let mut ends: Vec<(f64, usize)> = running.to_vec();
            ends.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut free = machine - ends.iter().map(|e| e.1).sum::<usize>();
            let mut at = now;
            for (end, held) in ends {
                if free >= cpus {
                    break;
                }
                at = f64::max(at, end);
                free += held;
            }
            at
        };
        let wide = free_at(width, &running);
        let (start, cpus) = if choices[i].waits_for_width {
            (wide, width)
        } else {
            let narrow = free_at(1, &running);
            let held: usize = (running.iter()).filter(|r| r.0 > narrow).map(|r| r.1).sum();
            let cpus = (machine - held).min(width);
            if narrow + choices[i].time(cpus) < wide + choices[i].time(width) {
                (narrow, cpus)
            } else {
                (wide, width)
            }
        };
        now = start;
        running.retain(|r| r.0 > now);
        finish[i] = start + choices[i].time(cpus);
        running.push((finish[i], cpus));
    }
    finish
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(remaining: f64, serial: f64, known: bool) -> Choice {
        Choice {
            remaining,
            full: 2,
            curve: Curve::amdahl(serial),
            narrowest: 1,
            widest: 2,
            known,
            waits_for_width: false,
        }
    }

    #[test]
    fn a_long_job_left_for_last_finishes_after_the_bound() {
        // 12 s at any width, beside four jobs of 4 s on one CPU.
        let long = Choice {
            curve: Curve::amdahl(1.0),
            ..job(12.0, 0.0, true)
        };
        let mut jobs = vec![job(2.0, 0.5, true); 4];
        jobs.push(long);
        let widths = vec![1; 5];
        let limit = bound(&jobs, &widths, 2);
        let last = finishes(&jobs, &widths, &[0, 1, 2, 3, 4], 2);
        assert!(last[4] > limit, "{last:?} against {limit}");
        let first = finishes(&jobs, &widths, &[4, 0, 1, 2, 3], 2);
        assert!(first.iter().all(|&f| f <= limit + 1e-9), "{first:?}");
    }

    #[test]
    fn jobs_that_scale_perfectly_run_at_full_width() {
        let jobs = [job(10.0, 0.0, true), job(10.0, 0.0, true)];
        assert_eq!(widths(&jobs, 2), vec![2, 2]);
        assert!((bound(&jobs, &[2, 2], 2) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn jobs_that_scale_poorly_run_on_one_cpu_each() {
        let jobs = [job(10.0, 0.5, true), job(10.0, 0.5, true)];
        assert_eq!(widths(&jobs, 2), vec![1, 1]);
    }

    #[test]
    fn the_longest_job_is_widened_while_it_bounds_the_makespan() {
        // 30 s alone on two CPUs (60 s on one) beside two short jobs that scale poorly: on one CPU
        // it alone would take longer than all the work spread over the machine.
        let jobs = [
            job(30.0, 0.0, true),
            job(2.0, 0.5, true),
            job(2.0, 0.5, true),
        ];
        assert_eq!(widths(&jobs, 2), vec![2, 1, 1]);
    }

    #[test]
    fn jobs_of_unknown_scaling_run_at_full_width_as_bp_shortest_first_does() {
        let jobs = [
            job(30.0, 0.0, false),
            job(2.0, 0.0, false),
            job(2.0, 0.0, false),
        ];
        assert_eq!(widths(&jobs, 2), vec![2, 2, 2]);
    }

    #[test]
    fn a_long_job_that_scales_poorly_stays_narrow_beside_short_ones_that_scale() {
        // 12 s on one CPU, 10 s on two; two jobs of 4 s on one CPU that scale perfectly.
        let long = Choice {
            remaining: 10.0,
            curve: Curve::amdahl(2.0 / 3.0),
            ..job(0.0, 0.0, true)
        };
        let jobs = [long, job(2.0, 0.0, true), job(2.0, 0.0, true)];
        let chosen = widths(&jobs, 2);
        assert_eq!(chosen, vec![1, 2, 2]);
        assert!((bound(&jobs, &chosen, 2) - 12.0).abs() < 1e-9);
    }
}
