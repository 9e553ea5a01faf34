//! What synchronisation costs a job whose threads are time-shared without coordination.

use super::{ModelParams, Runner};
use crate::profile::{Profile, SpinLimit, BLOCK_COST};
use cosched_core::SyncKind;

/// Progress lost to synchronisation when a job's threads are time-shared without coordination.
///
/// Each synchronisation waits for the slowest thread, which under time sharing is usually descheduled
/// (TACO §4.3 on lu.A; Peter et al. §3). A spinning waiter holds its CPU until its slice ends, half a
/// slice on average, and the straggler runs meanwhile: each synchronisation costs every thread Q/2 of
/// CPU time (never more than the straggler's wait, (L − 1)·Q), out of the fair share the job gets
/// anyway. Its synchronisations can go faster only if all its threads happen to hold a CPU at once (the
/// co-run fraction, `ModelParams::spin_corun`), which needs co-runners that leave their CPUs within a
/// slice (`corun_possible`). A blocking job only pays the block/wake-up cost (Peter et al. §2), since
/// the CPU time it leaves goes to the others and comes back to it by fair sharing; a spin-then-block
/// job (Peter et al. §3, 50 µs; libgomp's default wait) spins up to its limit first, then blocks.
///
/// What the loss depends on apart from the job's rate is fixed by its group, so it is kept as a
/// [`SyncCost`]; `corun` is asked only for an oversubscribed spinning team: it looks at every other
/// runner.
#[derive(Debug, Clone, Copy)]
pub(super) enum SyncCost {
    /// No synchronisation, or every thread has a CPU of its own.
    Free,
    /// Each synchronisation ends with the slice (`slice_end`, the fraction of time that progresses);
    /// with `corun`, the progress when all threads happen to run at once is the dedicated speed of
    /// the co-run fraction, per unit of rate.
    Spin { slice_end: f64, corun: Option<f64> },
    /// The synchronisation interval at the dedicated speed (per unit of rate), and the wait added to
    /// each: the spin before blocking, at most the straggler's.
    Block { interval: f64, wait: f64 },
}

impl SyncCost {
    pub(super) fn new(
        r: &Runner,
        share: f64,
        params: &ModelParams,
        corun: impl FnOnce() -> bool,
    ) -> SyncCost {
        let oversubscription = r.threads as f64 / share.max(1e-12);
        if r.profile.sync == SyncKind::None || oversubscription <= 1.0 + 1e-9 {
            return SyncCost::Free;
        }
        let dedicated = r.profile.speedup.traditional(r.threads as f64);
        let straggler_wait = (oversubscription - 1.0) * params.os_quantum;
        match r.profile.sync {
            SyncKind::Spin => {
                // CPU time per thread between synchronisations: the profile's interval, each thread on
                // its own CPU.
                let work = r.profile.sync_interval;
                SyncCost::Spin {
                    slice_end: work / (work + straggler_wait.min(params.os_quantum / 2.0)),
                    corun: corun().then(|| corun_fraction(oversubscription, r, params) * dedicated),
                }
            }
            // The profile's interval holds when every thread has its own CPU; at a lower rate it
            // stretches.
            SyncKind::Block => SyncCost::Block {
                interval: r.profile.sync_interval * dedicated,
                wait: spin_seconds(r.profile, params).min(straggler_wait),
            },
            SyncKind::None => SyncCost::Free,
        }
    }

    /// The factor of progress kept at `rate`.
    pub(super) fn factor(&self, rate: f64) -> f64 {
        if rate <= 0.0 {
            return 1.0;
        }
        match *self {
            SyncCost::Free => 1.0,
            SyncCost::Spin { slice_end, corun } => match corun {
                Some(corun) => slice_end.max(corun / rate),
                None => slice_end,
            },
            SyncCost::Block { interval, wait } => {
                let interval = interval / rate;
                interval / (interval + wait + BLOCK_COST)
            }
        }
    }
}

pub(super) fn spin_seconds(profile: &Profile, params: &ModelParams) -> f64 {
    match profile.spin_limit {
        SpinLimit::Seconds(s) => s,
        SpinLimit::Gomp => params.gomp_spin,
    }
}

/// Whether runner `i`'s spinning team can ever run all its threads at once: only when every other job
/// on its CPUs leaves its CPU within a slice (blocks, or spins less than a slice first); beside threads
/// that keep their CPUs (no synchronisation, spinning, or libgomp's default wait when it outlasts the
/// slice) the real traces show the team's threads taking turns (`docs/simulation-model.md`).
pub(super) fn corun_possible(runners: &[Runner], i: usize, params: &ModelParams) -> bool {
    runners.iter().enumerate().all(|(j, other)| {
        j == i
            || other.cpus.is_disjoint(runners[i].cpus)
            || (other.profile.sync == SyncKind::Block
                && spin_seconds(other.profile, params) < params.os_quantum)
    })
}

/// Fraction of the time all threads of a team run at once when each holds 1/`oversubscription` of its
/// CPU and the OS slices them without coordination; never, when two of them share a CPU.
pub(super) fn corun_fraction(oversubscription: f64, r: &Runner, params: &ModelParams) -> f64 {
    if r.threads as usize > r.width {
        return 0.0;
    }
    let exponent = 1.0 + params.spin_corun * (f64::from(r.threads) - 1.0);
    oversubscription.powf(-exponent)
}
