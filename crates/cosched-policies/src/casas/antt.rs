//! CaSAS's allocation (§3.3): from the rates a probe measured, each job's NTT curve over the domain
//! counts, and the domain counts that minimise their sum (ANTT): exact by dynamic programming while
//! n·D² stays below [`EXACT_WORK_LIMIT`], else greedy, one domain at a time to the job whose NTT drops
//! most.

/// Largest n·D² solved exactly.
pub const EXACT_WORK_LIMIT: usize = 1 << 22;

/// Rates for every count 1..=domains, linear between the measured counts.
pub(super) fn interpolate(counts: &[usize], measured: &[f64], domains: usize) -> Vec<f64> {
    (1..=domains)
        .map(|k| {
            let upper = counts
                .iter()
                .position(|&c| c >= k)
                .unwrap_or(counts.len() - 1);
            if counts[upper] == k || upper == 0 {
                return measured[upper];
            }
            let (k0, k1) = (counts[upper - 1] as f64, counts[upper] as f64);
            let (r0, r1) = (measured[upper - 1], measured[upper]);
            r0 + (r1 - r0) * (k as f64 - k0) / (k1 - k0)
        })
        .collect()
}

/// NTT on k = 1..=D domains: best rate over rate on k (eq. 1 with the steady rates of §3.2), kept to
/// nine decimals. The same speed measured twice can differ in its last bits (the sum of a run's progress
/// depends on where its intervals were cut), and the allocation must not turn on that: one job whose
/// rate on two domains is its rate on one, less 1e-15, would otherwise be held to one domain.
pub(super) fn ntt_curve(rates: &[f64]) -> Vec<f64> {
    let best = rates.iter().copied().fold(0.0, f64::max);
    rates
        .iter()
        .map(|&r| {
            if r > 0.0 {
                (best / r * 1e9).round() / 1e9
            } else {
                1e9
            }
        })
        .collect()
}

/// Domain counts (each ≥ 1, sum ≤ `domains`) minimising the summed NTT; `ntt[i][k - 1]` is job i's NTT
/// on k domains. `None` when there are more jobs than domains.
pub(super) fn best_allocation(ntt: &[Vec<f64>], domains: usize) -> Option<Vec<usize>> {
    if ntt.len() > domains {
        return None;
    }
    if ntt.len() * domains * domains <= EXACT_WORK_LIMIT {
        Some(exact_allocation(ntt, domains))
    } else {
        Some(greedy_allocation(ntt, domains))
    }
}

/// Dynamic programming: cost[i][d] = least NTT sum of the first i jobs on at most d domains.
fn exact_allocation(ntt: &[Vec<f64>], domains: usize) -> Vec<usize> {
    let n = ntt.len();
    let mut cost = vec![vec![f64::INFINITY; domains + 1]; n + 1];
    let mut choice = vec![vec![0usize; domains + 1]; n + 1];
    cost[0].fill(0.0);
    for i in 1..=n {
        for d in i..=domains {
            // Largest count first, so that among equal costs the job gets more domains.
            for k in (1..=d - (i - 1)).rev() {
                let c = cost[i - 1][d - k] + ntt[i - 1][k - 1];
                if c < cost[i][d] {
                    cost[i][d] = c;
                    choice[i][d] = k;
                }
            }
        }
    }
    let mut counts = vec![0; n];
    let mut d = domains;
    for i in (1..=n).rev() {
        counts[i - 1] = choice[i][d];
        d -= choice[i][d];
    }
    counts
}

/// One domain each, then one more at a time to the job whose NTT drops most, while any drops.
fn greedy_allocation(ntt: &[Vec<f64>], domains: usize) -> Vec<usize> {
    let mut counts = vec![1; ntt.len()];
    for _ in ntt.len()..domains {
        let gain = |i: usize| {
            let k = counts[i];
            if k >= domains {
                return f64::NEG_INFINITY;
            }
            ntt[i][k - 1] - ntt[i][k]
        };
        match (0..ntt.len()).max_by(|&a, &b| gain(a).total_cmp(&gain(b))) {
            Some(i) if gain(i) > 0.0 => counts[i] += 1,
            _ => break,
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn objective(ntt: &[Vec<f64>], counts: &[usize]) -> f64 {
        ntt.iter().zip(counts).map(|(c, &k)| c[k - 1]).sum()
    }

    /// Every allocation with each count ≥ 1 and sum ≤ domains, by enumeration.
    fn brute_force(ntt: &[Vec<f64>], domains: usize) -> f64 {
        fn go(ntt: &[Vec<f64>], left: usize) -> f64 {
            match ntt.split_first() {
                None => 0.0,
                Some((first, rest)) => (1..=left.saturating_sub(rest.len()))
                    .map(|k| first[k - 1] + go(rest, left - k))
                    .fold(f64::INFINITY, f64::min),
            }
        }
        go(ntt, domains)
    }

    fn curves() -> impl Strategy<Value = (Vec<Vec<f64>>, usize)> {
        (1usize..=8).prop_flat_map(|domains| {
            let rates = prop::collection::vec(0.1f64..10.0, domains);
            (
                prop::collection::vec(rates, 1..=4.min(domains)),
                Just(domains),
            )
        })
    }

    #[test]
    fn a_rate_that_differs_only_in_its_last_bits_counts_as_the_same_rate() {
        // Measured on 8 CPUs by one engine and on 4 by the other: the same speed, summed differently.
        let even = ntt_curve(&[3.433333333333337, 3.433333333333337]);
        let noisy = ntt_curve(&[3.433333333333337, 3.433333333333323]);
        assert_eq!(noisy, even);
        assert_eq!(best_allocation(&[noisy], 2), best_allocation(&[even], 2));
    }

    proptest! {
        #[test]
        fn allocation_is_the_exact_antt_optimum_on_small_cases((rates, domains) in curves()) {
            let ntt: Vec<Vec<f64>> = rates.iter().map(|r| ntt_curve(r)).collect();
            let counts = best_allocation(&ntt, domains).unwrap();
            prop_assert!(counts.iter().all(|&k| k >= 1));
            prop_assert!(counts.iter().sum::<usize>() <= domains);
            prop_assert!((objective(&ntt, &counts) - brute_force(&ntt, domains)).abs() < 1e-9);
        }

        #[test]
        fn greedy_is_exact_when_rates_grow_concavely(serial in prop::collection::vec(0.0f64..1.0, 1..=4), domains in 4usize..=8) {
            // Amdahl rates: NTT convex in the domain count, so marginal gains only shrink.
            let ntt: Vec<Vec<f64>> = serial
                .iter()
                .map(|s| ntt_curve(&(1..=domains).map(|k| 1.0 / (s + (1.0 - s) / k as f64)).collect::<Vec<_>>()))
                .collect();
            prop_assume!(ntt.len() <= domains);
            let greedy = objective(&ntt, &greedy_allocation(&ntt, domains));
            prop_assert!((greedy - brute_force(&ntt, domains)).abs() < 1e-9);
        }
    }

    /// The heuristic's gap to the optimum on small cases (`--nocapture` prints it): measured Amdahl-like
    /// curves with ±10% noise (what probing delivers), and arbitrary curves (the worst case).
    #[test]
    fn greedy_gap_on_small_non_convex_cases() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for noisy_amdahl in [true, false] {
            let (mut worst, mut total, mut optimal, cases) = (0.0f64, 0.0, 0, 2000);
            for _ in 0..cases {
                let domains = rng.gen_range(2..=8);
                let n = rng.gen_range(1..=4.min(domains));
                let ntt: Vec<Vec<f64>> = (0..n)
                    .map(|_| {
                        let serial: f64 = rng.gen_range(0.0..0.5);
                        let rates: Vec<f64> = (1..=domains)
                            .map(|k| {
                                if noisy_amdahl {
                                    rng.gen_range(0.9..1.1) / (serial + (1.0 - serial) / k as f64)
                                } else {
                                    rng.gen_range(0.1..10.0)
                                }
                            })
                            .collect();
                        ntt_curve(&rates)
                    })
                    .collect();
                let exact = brute_force(&ntt, domains);
                let greedy = objective(&ntt, &greedy_allocation(&ntt, domains));
                assert!(greedy >= exact - 1e-9);
                let gap = greedy / exact - 1.0;
                worst = worst.max(gap);
                total += gap;
                optimal += usize::from(gap < 1e-9);
            }
            let mean = total / cases as f64;
            println!(
                "greedy vs exact, {} curves, {cases} cases of ≤4 jobs on ≤8 domains: optimal in {optimal}, mean gap {:.2}%, worst {:.1}%",
                if noisy_amdahl { "noisy Amdahl" } else { "arbitrary" },
                100.0 * mean,
                100.0 * worst
            );
            if noisy_amdahl {
                assert!(mean < 0.02, "greedy should stay close on realistic curves");
            }
        }
    }
}
