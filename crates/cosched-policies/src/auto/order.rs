//! Widths and order for jobs with known remaining work. Two candidates are estimated as list
//! schedules (`widths::finishes`): the widths of the least makespan bound (`widths::widths`) in least
//! remaining first order, a job that would end after the bound started first where that ends the set
//! sooner; and every job at its full width, least remaining first: BP shortest-first, the schedule a
//! user with the times alone would run. The
//! first is kept only where the estimates show it no worse on both makespan and summed stretch
//! (within `widths::SLACK`): the bound's widths assume jobs fill the machine side by side, which
//! moldable jobs waiting for their width cannot always do (a long job left narrow then runs beside
//! idle CPUs), and narrow widths that end the set sooner make each job take longer, which users feel
//! more than the makespan.

use super::widths::{self, Choice};

/// The widths (by job) and the order (indices) the jobs are planned at, and why, for the trace.
pub struct Schedule {
    pub widths: Vec<usize>,
    pub order: Vec<usize>,
    pub why: &'static str,
}

const BOUNDED: &str = "known run times: widths of the least makespan bound, least remaining \
                       first; estimated no worse than shortest first at full width on makespan and \
                       mean slowdown";
const LATE_FIRST: &str = "known run times: widths of the least makespan bound, the job that would \
                          end after it first; estimated no worse than shortest first at full width \
                          on makespan and mean slowdown";
const SHORTEST_FIRST: &str = "known run times: least remaining first at full width, as BP \
                              shortest-first; the widths of the least makespan bound were estimated \
                              to end later or to raise the mean slowdown";

/// The schedule for `choices`, ranked by `keys` (urgent ones, `false`, first; then least remaining).
pub fn schedule(choices: &[Choice], keys: &[(bool, f64)], machine: usize) -> Schedule {
    let widths = widths::widths(choices, machine);
    let mut shortest: Vec<usize> = (0..choices.len()).collect();
    shortest.sort_by(|&a, &b| keys[a].partial_cmp(&keys[b]).expect("finite keys"));
    let order = late_first(choices, keys, &widths, &shortest, machine);
    let bounded = Schedule {
        why: if order == shortest {
            BOUNDED
        } else {
            LATE_FIRST
        },
        order,
        widths,
    };
    let widest = Schedule {
        widths: choices.iter().map(|c| c.full).collect(),
        order: shortest,
        why: SHORTEST_FIRST,
    };
    let (a, b) = (
        estimate(choices, &bounded, machine),
        estimate(choices, &widest, machine),
    );
    let within = |x: f64, y: f64| x <= y * (1.0 + widths::SLACK);
    if within(a.0, b.0) && within(a.1, b.1) {
        bounded
    } else {
        widest
    }
}

/// `order` with the jobs that would end after the makespan bound in it started first, longest first,
/// where that ends the set sooner.
fn late_first(
    choices: &[Choice],
    keys: &[(bool, f64)],
    widths: &[usize],
    order: &[usize],
    machine: usize,
) -> Vec<usize> {
    let bound = widths::bound(choices, widths, machine) * (1.0 + widths::SLACK);
    let finishes = widths::finishes(choices, widths, order, machine);
    // One whose scaling is unknown only where it ends within the bound even if it scales
    // perfectly (its time at its width is then assumed to be its full width's times its share).
    let late = |i: usize| {
        let movable = choices[i].known || choices[i].time(widths[i]) <= bound;
        keys[i].0 && finishes[i] > bound && movable
    };
    let mut promoted = order.to_vec();
    promoted.sort_by(|&a, &b| {
        let urgent = |i: usize| !keys[i].0;
        (urgent(b).cmp(&urgent(a)))
            .then(late(b).cmp(&late(a)))
            .then_with(|| match late(a) && late(b) {
                true => choices[b]
                    .time(widths[b])
                    .total_cmp(&choices[a].time(widths[a])),
                false => std::cmp::Ordering::Equal,
            })
    });
    let makespan = |order: &[usize]| {
        (widths::finishes(choices, widths, order, machine).into_iter()).fold(0.0, f64::max)
    };
    if makespan(&promoted) < makespan(order) * (1.0 - 1e-9) {
        promoted
    } else {
        order.to_vec()
    }
}

/// Estimated makespan and summed stretch (each job's finish over its remaining time alone at its
/// full width) of `schedule`.
fn estimate(choices: &[Choice], schedule: &Schedule, machine: usize) -> (f64, f64) {
    let finishes = widths::finishes(choices, &schedule.widths, &schedule.order, machine);
    let makespan = finishes.iter().copied().fold(0.0, f64::max);
    let stretch = (finishes.iter().zip(choices))
        .map(|(finish, c)| finish / c.remaining.max(f64::MIN_POSITIVE))
        .sum();
    (makespan, stretch)
}
