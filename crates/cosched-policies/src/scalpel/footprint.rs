//! Average footprint of an address trace (Scalpel eq. 2–3), in linear time.
//!
//! The footprint of a window is the number of distinct data it touches; the average footprint fp(l) is
//! its mean over all n − l + 1 windows of length l (eq. 2). Enumerating the windows costs O(n·l); the
//! all-window formula of Xiang et al. ("All-window profiling and composable models of cache sharing",
//! PPoPP'11, Scalpel's ref. [50]) gets it from one pass over the trace: every window of length l touches
//! all m data except, for each datum, the windows that fall entirely before its first access, entirely
//! after its last access, or entirely inside one of its reuse intervals:
//!
//! fp(l) = m − [ Σ_i (f_i − l)⁺ + Σ_i (r_i − l)⁺ + Σ_reuse (t − l)⁺ ] / (n − l + 1)
//!
//! with f_i the 1-based time of the first access to datum i, r_i = n + 1 − (time of its last access), and
//! t − 1 the number of accesses strictly between two consecutive accesses to the same datum.

use std::collections::HashMap;
use std::hash::Hash;

/// fp(l) of `trace` (eq. 2), or `None` when the window is empty or longer than the trace.
pub fn average_footprint<T: Hash + Eq>(trace: &[T], window: usize) -> Option<f64> {
    let n = trace.len();
    if window == 0 || window > n {
        return None;
    }
    let excess = |gap: usize| gap.saturating_sub(window) as f64;
    let mut last: HashMap<&T, usize> = HashMap::new();
    let mut outside = 0.0;
    for (i, datum) in trace.iter().enumerate() {
        let time = i + 1;
        match last.insert(datum, time) {
            Some(previous) => outside += excess(time - previous),
            None => outside += excess(time),
        }
    }
    for &time in last.values() {
        outside += excess(n + 1 - time);
    }
    Some(last.len() as f64 - outside / (n - window + 1) as f64)
}

/// The window length of eq. 3: the LLC's capacity per core, in data elements.
pub fn llc_window(llc_bytes: u64, element_bytes: u64, cores_per_llc: u64) -> usize {
    (llc_bytes / (element_bytes.max(1) * cores_per_llc.max(1))) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Eq. 2 taken literally: every window, counted.
    fn by_enumeration(trace: &[u8], window: usize) -> f64 {
        let windows = trace.windows(window);
        let count = windows.len() as f64;
        trace
            .windows(window)
            .map(|w| {
                let mut seen: Vec<u8> = w.to_vec();
                seen.sort_unstable();
                seen.dedup();
                seen.len() as f64
            })
            .sum::<f64>()
            / count
    }

    #[test]
    fn the_papers_example() {
        // Scalpel §IV-A: "baab" has windows "ba", "aa", "ab" of footprints 2, 1, 2.
        let fp = average_footprint(b"baab", 2).unwrap();
        assert!((fp - 5.0 / 3.0).abs() < 1e-12, "{fp}");
        assert_eq!(average_footprint(b"baab", 1), Some(1.0));
        assert_eq!(average_footprint(b"baab", 4), Some(2.0));
        assert_eq!(average_footprint(b"baab", 5), None);
        assert_eq!(average_footprint(b"baab", 0), None);
    }

    #[test]
    fn window_is_the_llc_share_of_one_core_in_elements() {
        // Xeon E5620: 12 MB L3 shared by 4 cores, doubles.
        assert_eq!(llc_window(12 << 20, 8, 4), 393_216);
    }

    proptest! {
        #[test]
        fn formula_matches_enumeration(trace in prop::collection::vec(0u8..6, 1..60), w in 1usize..60) {
            prop_assume!(w <= trace.len());
            let fast = average_footprint(&trace, w).unwrap();
            prop_assert!((fast - by_enumeration(&trace, w)).abs() < 1e-9);
        }
    }
}
