//! Probes: a short spell at another width for a job whose scaling is unknown, as CaSAS runs a new
//! application briefly on several core counts (Tanimoto et al., IPSJ, §3.2), so that the run's trace
//! shows the job at two widths and the next run knows how it scales (`cosched_core::scaling`).
//!
//! A job placed on its full width w ≥ 2 (where a calibration already measured it) that has held no
//! other width runs its first `PROBE_SHARE` of its expected time there on w / 2 CPUs instead, where
//! that spell lasts at least `MIN_PROBE`; the CPUs it leaves go to the other jobs. A moldable job
//! keeps the threads it starts with, so only jobs that follow advice are probed. On half its CPUs a
//! job is at most twice as slow (its speedup never falls with width), so the probe costs it at most
//! half the spell: `PROBE_SHARE` / 2 of its expected time. A job that already held two widths, or
//! whose scaling is known, is never probed.

use cosched_core::{Context, JobId};
use rustc_hash::FxHashMap as HashMap;

/// Share of a job's expected time at its width that its probe lasts.
pub const PROBE_SHARE: f64 = 0.05;

/// The shortest probe: two sampling intervals, so that one lies wholly inside the spell after the
/// job's threads follow its new width.
pub const MIN_PROBE: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Held only this width so far.
    Held(usize),
    /// On `width` CPUs until `until`.
    Probing { until: f64, width: usize },
    /// Probed, or seen at two widths, or its scaling is known.
    Done,
}

/// Each job's probe.
#[derive(Debug, Default)]
pub struct Probes {
    jobs: HashMap<JobId, State>,
}

impl Probes {
    /// The CPUs `job` runs on now, given `width` by the plan: fewer while its probe lasts. `unknown`:
    /// its scaling is unknown and it follows advice; `expected`: its remaining seconds at `width`.
    pub fn width(
        &mut self,
        now: f64,
        job: JobId,
        width: usize,
        unknown: bool,
        expected: f64,
    ) -> usize {
        let state = self.jobs.entry(job).or_insert(State::Held(width));
        match *state {
            State::Probing { until, width } if now < until => return width,
            State::Probing { .. } | State::Done => *state = State::Done,
            State::Held(held) if held != width || !unknown => *state = State::Done,
            State::Held(_) => {
                let spell = PROBE_SHARE * expected;
                if width >= 2 && spell >= MIN_PROBE {
                    let probe = width / 2;
                    *state = State::Probing {
                        until: now + spell,
                        width: probe,
                    };
                    return probe;
                }
            }
        }
        width
    }

    /// When the next probe ends.
    pub fn timer(&self) -> Option<f64> {
        (self.jobs.values())
            .filter_map(|s| match s {
                State::Probing { until, .. } => Some(*until),
                _ => None,
            })
            .reduce(f64::min)
    }

    /// Forgets jobs that left.
    pub fn retain(&mut self, ctx: &Context) {
        self.jobs.retain(|id, _| ctx.job(*id).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_job_of_unknown_scaling_spends_a_twentieth_of_its_time_on_half_its_cpus() {
        let mut probes = Probes::default();
        assert_eq!(probes.width(0.0, JobId(0), 8, true, 100.0), 4);
        assert_eq!(probes.timer(), Some(5.0));
        assert_eq!(probes.width(4.0, JobId(0), 8, true, 96.0), 4);
        assert_eq!(probes.width(5.0, JobId(0), 8, true, 95.0), 8);
        assert_eq!(probes.timer(), None);
        assert_eq!(probes.width(6.0, JobId(0), 8, true, 94.0), 8, "probed once");
    }

    #[test]
    fn no_probe_where_it_would_be_shorter_than_two_seconds_or_is_not_needed() {
        let mut probes = Probes::default();
        // Too short: 5% of 30 s.
        assert_eq!(probes.width(0.0, JobId(0), 2, true, 30.0), 2);
        // Known scaling.
        assert_eq!(probes.width(0.0, JobId(1), 2, false, 100.0), 2);
        // Already ran on one CPU, now on two: two widths seen.
        assert_eq!(probes.width(0.0, JobId(2), 1, true, 200.0), 1);
        assert_eq!(probes.width(1.0, JobId(2), 2, true, 100.0), 2);
        assert_eq!(probes.timer(), None);
    }
}
