//! Footprint curves: how much distinct data a job touches in a window of its accesses (Scalpel §III-A,
//! after Xiang et al.'s higher-order theory of locality, its ref. [50]). The LLC model composes the
//! curves of co-runners to find when they fill a shared cache, and reads each one's miss ratio off the
//! slope of its curve there (`model::llc_misses`). Windows and footprints are in MB of accesses and MB
//! of data.

/// A job's footprint curve fp(w).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Footprint {
    /// A job that reuses `mb` of data, its accesses spread over all of it: fp(w) = S(1 − e^(−w/S)).
    /// Alone on a cache of C < S it misses 1 − C/S of its accesses; it never misses once S fits.
    WorkingSet { mb: f64 },
    /// A task that keeps touching new data as a power of the window, fp(w) = e·(w/e)^β in elements of e
    /// MB: the power law of cache misses (miss ratio ∝ C^(−(1−β)/β), Hartstein et al. 2006) in
    /// footprint form. Scalpel's PolyBench tasks run on data sets larger than the L3, so they miss
    /// alone too.
    PowerLaw { exponent: f64, element_mb: f64 },
}

impl Footprint {
    /// The power law through fp(1 element) = 1 element and `footprint` elements in a window of `window`
    /// accesses (one point of the curve, as Scalpel's Table II gives it).
    pub fn power_law_through(footprint: f64, window: f64, element_bytes: f64) -> Footprint {
        Footprint::PowerLaw {
            exponent: (footprint.ln() / window.ln()).clamp(0.0, 1.0),
            element_mb: element_bytes / (1024.0 * 1024.0),
        }
    }

    /// Distinct data touched in `window` MB of accesses, MB.
    pub fn mb(&self, window: f64) -> f64 {
        match *self {
            Footprint::WorkingSet { mb } => mb * -(-window / mb).exp_m1(),
            Footprint::PowerLaw {
                exponent,
                element_mb,
            } => element_mb * (window / element_mb).max(1.0).powf(exponent),
        }
    }

    /// Fraction of accesses that touch data not touched in the last `window` MB of accesses: the
    /// curve's slope, which is the miss ratio of a cache that this window fills.
    pub fn miss_ratio(&self, window: f64) -> f64 {
        match *self {
            Footprint::WorkingSet { mb } => (-window / mb).exp(),
            Footprint::PowerLaw {
                exponent,
                element_mb,
            } => exponent * (window / element_mb).max(1.0).powf(exponent - 1.0),
        }
    }

    /// Miss ratio of the job alone in a cache of `capacity` MB: its curve's slope where it fills the
    /// cache, 0 when all its data fits (`fill_window` for one sharer, in closed form).
    pub fn miss_ratio_alone(&self, capacity: f64) -> f64 {
        match *self {
            Footprint::WorkingSet { mb } => (1.0 - capacity / mb).max(0.0),
            // Filled at w/e = (capacity/e)^(1/β), where the slope β(w/e)^(β−1) is this.
            Footprint::PowerLaw {
                exponent,
                element_mb,
            } => exponent * (capacity / element_mb).max(1.0).powf(1.0 - 1.0 / exponent),
        }
    }

    /// All the data the job ever touches, MB (unbounded for a power law).
    fn data_mb(&self) -> f64 {
        match *self {
            Footprint::WorkingSet { mb } => mb,
            Footprint::PowerLaw { .. } => f64::INFINITY,
        }
    }
}

/// The window (MB of accesses) at which `sharers`, each a curve and its access rate relative to the
/// window, fill `capacity` MB: the w with Σ fp(rate·w) = capacity. None when all their data fits.
pub fn fill_window(sharers: &[(Footprint, f64)], capacity: f64) -> Option<f64> {
    if sharers.iter().map(|(f, _)| f.data_mb()).sum::<f64>() <= capacity {
        return None;
    }
    // No curve grows faster than its window, so the cache is not full before capacity / Σ rate.
    let total_rate: f64 = sharers.iter().map(|(_, rate)| rate).sum();
    let (mut low, mut high) = (capacity / total_rate, f64::INFINITY);
    let mut window = low;
    // Newton on ln fp = ln capacity against ln w, where a power law is a straight line and a working
    // set bends below its tangent: a few steps from the lower bound. The bracket [low, high] catches a
    // step that leaves it (then bisect on a log scale); the cap only guards against a stall.
    for _ in 0..100 {
        let (filled, slope) = sharers
            .iter()
            .fold((0.0, 0.0), |(filled, slope), (f, rate)| {
                let w = rate * window;
                (filled + f.mb(w), slope + w * f.miss_ratio(w))
            });
        if filled < capacity {
            // Curves that have flattened out (a power law of exponent 0) never fill it.
            if slope <= 0.0 {
                return None;
            }
            low = window;
        } else {
            high = window;
        }
        let newton = window * (capacity / filled).powf(filled / slope);
        let next = if newton > low && newton < high {
            newton
        } else if high.is_finite() {
            low.sqrt() * high.sqrt()
        } else {
            2.0 * low
        };
        if (next - window).abs() <= window * 1e-12 || high <= low * (1.0 + 1e-12) {
            return Some(next);
        }
        window = next;
    }
    Some(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ELEMENT: f64 = 4.0 / (1024.0 * 1024.0);

    #[test]
    fn a_working_set_alone_misses_the_part_that_does_not_fit() {
        let job = Footprint::WorkingSet { mb: 16.0 };
        let w = fill_window(&[(job, 1.0)], 12.0).unwrap();
        assert!((job.miss_ratio(w) - (1.0 - 12.0 / 16.0)).abs() < 1e-9);
        assert_eq!(fill_window(&[(job, 1.0), (job, 3.0)], 32.0), None);
    }

    #[test]
    fn alone_the_closed_form_agrees_with_the_fill_window() {
        let curves = [
            Footprint::WorkingSet { mb: 16.0 },
            Footprint::WorkingSet { mb: 8.0 },
            Footprint::power_law_through(423_390.47, 786_432.0, 4.0),
            Footprint::power_law_through(2757.30, 786_432.0, 4.0),
        ];
        for curve in curves {
            let by_window = fill_window(&[(curve, 1.0)], 12.0).map_or(0.0, |w| curve.miss_ratio(w));
            let closed = curve.miss_ratio_alone(12.0);
            assert!(
                (closed - by_window).abs() < 1e-9,
                "{curve:?}: {closed} vs {by_window}"
            );
        }
    }

    #[test]
    fn a_power_law_passes_through_its_table_point() {
        let task = Footprint::power_law_through(530_390.13, 786_432.0, 4.0);
        assert!((task.mb(786_432.0 * ELEMENT) - 530_390.13 * ELEMENT).abs() < 1e-9);
        assert!((task.mb(ELEMENT) - ELEMENT).abs() < 1e-15);
        // A tiny footprint reuses its data: it almost never misses in a 12 MB cache.
        let apop = Footprint::power_law_through(2757.30, 786_432.0, 4.0);
        let w = fill_window(&[(apop, 1.0)], 12.0).unwrap();
        assert!(apop.miss_ratio(w) < 1e-3, "{}", apop.miss_ratio(w));
    }

    #[test]
    fn co_runners_raise_each_others_misses() {
        let task = Footprint::power_law_through(315_584.22, 786_432.0, 4.0);
        let big = Footprint::power_law_through(530_390.13, 786_432.0, 4.0);
        // `task` comes first among the sharers; its window is its own accesses.
        let miss = |sharers: &[(Footprint, f64)]| {
            task.miss_ratio(sharers[0].1 * fill_window(sharers, 12.0).unwrap())
        };
        let alone = miss(&[(task, 1.0)]);
        let with_one = miss(&[(task, 1.0), (big, 1.0)]);
        let with_three = miss(&[(task, 1.0), (big, 1.0), (big, 1.0), (big, 1.0)]);
        assert!(
            alone < with_one && with_one < with_three,
            "{alone} {with_one} {with_three}"
        );
        // Only relative access rates matter: three tasks time-sharing one CPU (a third of the accesses
        // each) miss as much as three on CPUs of their own.
        let time_shared = miss(&[(task, 1.0 / 3.0), (big, 1.0 / 3.0), (big, 1.0 / 3.0)]);
        let side_by_side = miss(&[(task, 1.0), (big, 1.0), (big, 1.0)]);
        assert!((time_shared - side_by_side).abs() < 1e-9);
        // The window found fills the cache.
        let sharers = [(task, 1.0), (big, 0.5)];
        let w = fill_window(&sharers, 12.0).unwrap();
        assert!((task.mb(w) + big.mb(0.5 * w) - 12.0).abs() < 1e-9);
    }

    #[test]
    fn mixed_curves_fill_the_cache_and_flat_ones_never_do() {
        let reuse = Footprint::WorkingSet { mb: 9.0 };
        let stream = Footprint::power_law_through(530_390.13, 786_432.0, 4.0);
        let sharers = [(reuse, 2.0), (stream, 0.25)];
        let w = fill_window(&sharers, 12.0).unwrap();
        assert!((reuse.mb(2.0 * w) + stream.mb(0.25 * w) - 12.0).abs() < 1e-9);
        // One element, whatever the window: a power law of exponent 0 never fills 12 MB.
        let flat = Footprint::power_law_through(1.0, 786_432.0, 4.0);
        assert_eq!(fill_window(&[(flat, 1.0), (flat, 1.0)], 12.0), None);
    }
}
