//! The level logic of Listing 1 (TACO §2.1): one global level for all jobs, switched only when a
//! threshold is crossed, with a hysteresis between the threshold down and the one back up.

use super::geometry::Geometry;

/// Where the jobs are partitioned now; index into [`Geometry::sizes`], 0 = coarsest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelState {
    pub level: usize,
}

impl LevelState {
    /// Follows the job count across thresholds. Going finer needs as many jobs as the finer level has
    /// partitions, plus `hysteresis` of them; going coarser happens as soon as the current level has
    /// more partitions than jobs (a unit would have nothing to do). Returns whether the level changed.
    pub fn update(&mut self, geometry: &Geometry, jobs: usize, hysteresis: f64) -> bool {
        let before = self.level;
        self.level = self.level.min(geometry.sizes.len() - 1);
        while self.level > 0 && jobs < geometry.parts[self.level].len() {
            self.level -= 1;
        }
        while self.level + 1 < geometry.sizes.len()
            && jobs >= threshold_down(geometry.parts[self.level + 1].len(), hysteresis)
        {
            self.level += 1;
        }
        self.level != before
    }
}

/// Jobs of the given weights as the thresholds count them when they belong to several users: their
/// weights over the largest, so that a user's many jobs of small turns count for what their share
/// is worth. Jobs of equal weights count one each.
pub fn weighted_count(weights: impl Iterator<Item = f64> + Clone) -> usize {
    let weights = weights.map(|w| w.max(1e-6));
    let largest = weights.clone().fold(0.0, f64::max);
    if largest == 0.0 {
        return 0;
    }
    let total: f64 = weights.sum();
    // Shares that add up to a whole number of jobs count as that many, rounding error aside.
    (total / largest + 1e-9).floor() as usize
}

/// Jobs needed before switching down to a level of `partitions` partitions.
pub fn threshold_down(partitions: usize, hysteresis: f64) -> usize {
    // Any positive hysteresis asks for at least one job more, so that a count oscillating by one
    // around the threshold cannot switch back and forth.
    let extra = (partitions as f64 * hysteresis).ceil() as usize;
    partitions + if hysteresis > 0.0 { extra.max(1) } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::topology::{presets, synthetic};
    use proptest::prelude::*;

    #[test]
    fn without_hysteresis_the_thresholds_are_the_partition_counts() {
        // TACO §4.2: 1 job system-wide, 2-3 on 12-core halves, 4-7 on packages, 8-23 on thirds... of the
        // paper's chain 24/12/6/3/1 (3-core halves of packages here), 24 or more single-threaded.
        let topo = presets::preset("taco-opteron8435").unwrap();
        let geometry = Geometry::new(&topo, None);
        let mut state = LevelState::default();
        let size_for = |state: &mut LevelState, n| {
            state.update(&geometry, n, 0.0);
            geometry.sizes[state.level]
        };
        let sizes: Vec<usize> = [1, 2, 3, 4, 7, 8, 23, 24, 40, 5, 1]
            .into_iter()
            .map(|n| size_for(&mut state, n))
            .collect();
        assert_eq!(sizes, vec![24, 12, 12, 6, 6, 3, 3, 1, 1, 6, 24]);
    }

    #[test]
    fn the_papers_example_asks_for_three_jobs_before_splitting_the_system() {
        let topo = synthetic::parse("package:2 core:2").unwrap();
        let geometry = Geometry::new(&topo, None);
        let mut state = LevelState::default();
        state.update(&geometry, 2, 0.25);
        assert_eq!(geometry.sizes[state.level], 4);
        state.update(&geometry, 3, 0.25);
        assert_eq!(geometry.sizes[state.level], 2);
        state.update(&geometry, 2, 0.25);
        assert_eq!(geometry.sizes[state.level], 2, "a processor still has work");
        state.update(&geometry, 1, 0.25);
        assert_eq!(geometry.sizes[state.level], 4);
    }

    proptest! {
        /// A job count oscillating by one around any value switches the level at most once.
        #[test]
        fn hysteresis_never_flaps(
            machine in prop::sample::select(vec!["taco-opteron8435", "gang-opteron8380", "casas-opteron6172"]),
            start in 0usize..80,
            hysteresis in 0.05f64..1.0,
            warmup in 0usize..80,
            rounds in 2usize..20,
        ) {
            let topo = presets::preset(machine).unwrap();
            let geometry = Geometry::new(&topo, None);
            let mut state = LevelState::default();
            state.update(&geometry, warmup, hysteresis);
            let mut switches = 0;
            for round in 0..rounds {
                let n = start + round % 2;
                switches += usize::from(state.update(&geometry, n, hysteresis));
                // Count the first arrival at `start` separately: reaching it from `warmup` may switch.
                if round == 0 {
                    switches = 0;
                }
            }
            prop_assert!(switches <= 1, "{} switches oscillating around {}", switches, start);
        }
    }
}
