//! Users, not jobs, share the machine, as Slurm's fair share has it: CPUs (or time) go to the users
//! with active jobs in proportion to their shares ([`Owner::share`]), then to each user's jobs in
//! proportion to their weights. A user with twelve jobs thus gets what a user with one gets. Jobs
//! without an owner are one user among the others (a single-user workload has no owners at all).

use cosched_core::{ActiveJob, JobSpec, Owner};
use std::collections::{HashMap, HashSet, VecDeque};

/// A job's owner as the split sees it: `None` stands for the ownerless jobs together.
fn user_of(job: &JobSpec) -> Option<u32> {
    job.owner.map(|o| o.user)
}

fn share_of(job: &JobSpec) -> f64 {
    job.owner.map_or(1.0, |o: Owner| o.share)
}

/// Whether `jobs` belong to two users or more: only then does the user level change anything.
pub(crate) fn several_users<'a>(mut jobs: impl Iterator<Item = &'a JobSpec>) -> bool {
    let Some(first) = jobs.next() else {
        return false;
    };
    let user = user_of(first);
    jobs.any(|j| user_of(j) != user)
}

/// The users of `jobs` in the order of their first job, each with the indices of their jobs.
fn by_user(jobs: &[&JobSpec]) -> Vec<(f64, Vec<usize>)> {
    let mut users: Vec<(Option<u32>, f64, Vec<usize>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let user = user_of(job);
        match users.iter_mut().find(|(u, _, _)| *u == user) {
            Some((_, _, members)) => members.push(i),
            None => users.push((user, share_of(job), vec![i])),
        }
    }
    users.into_iter().map(|(_, s, m)| (s, m)).collect()
}

/// Splits `cpus` among `jobs`, none above its cap in `caps`: first among their users by share, then
/// among each user's jobs by weight. Needs `jobs.len() <= cpus` and every cap ≥ 1; then every job
/// gets at least one CPU. One user's jobs of equal weight get equal counts, the extra CPUs going to
/// the jobs of the lowest caps.
pub(crate) fn split_cpus(cpus: usize, jobs: &[&JobSpec], caps: &[usize]) -> Vec<usize> {
    split_by_user(cpus, jobs, caps, |members, user_cpus| {
        let mine: Vec<&JobSpec> = members.iter().map(|&i| jobs[i]).collect();
        let my_caps: Vec<usize> = members.iter().map(|&i| caps[i]).collect();
        among_jobs(user_cpus, &mine, &my_caps)
    })
}

/// Splits `total` among the users of `jobs` by share, no user above the sum of their jobs' `caps`
/// nor below one per job, and each user's part among their jobs by `divide` (the indices of the
/// user's jobs and their part, answering a count per job). One user gets all of `total`.
pub(crate) fn split_by_user(
    total: usize,
    jobs: &[&JobSpec],
    caps: &[usize],
    mut divide: impl FnMut(&[usize], usize) -> Vec<usize>,
) -> Vec<usize> {
    let users = by_user(jobs);
    if users.len() == 1 {
        return divide(&users[0].1, total);
    }
    let per_user = proportional(
        total,
        &users
            .iter()
            .map(|(share, members)| Portion {
                weight: *share,
                min: members.len(),
                cap: members.iter().map(|&i| caps[i].max(1)).sum(),
            })
            .collect::<Vec<_>>(),
    );
    let mut split = vec![0; jobs.len()];
    for ((_, members), part) in users.iter().zip(per_user) {
        for (&i, n) in members.iter().zip(divide(members, part)) {
            split[i] = n;
        }
    }
    split
}

/// One user's `cpus` among their `jobs` by weight.
fn among_jobs(cpus: usize, jobs: &[&JobSpec], caps: &[usize]) -> Vec<usize> {
    proportional(
        cpus,
        &jobs
            .iter()
            .zip(caps)
            .map(|(job, &cap)| Portion {
                weight: job.weight,
                min: 1,
                cap: cap.max(1),
            })
            .collect::<Vec<_>>(),
    )
}

/// What one receiver of [`proportional`] may get.
struct Portion {
    weight: f64,
    min: usize,
    cap: usize,
}

/// Splits `total` in proportion to the weights, each part within its `min..=cap`, what capped parts
/// leave going to the others. Parts are settled in the order in which their caps bind (cap ÷ weight,
/// ascending), each taking its proportional part of what is left, rounded up, while leaving the
/// later ones their minimums. Needs the minimums to add up to at most `total`.
fn proportional(total: usize, parts: &[Portion]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| {
        (parts[a].cap as f64 / parts[a].weight).total_cmp(&(parts[b].cap as f64 / parts[b].weight))
    });
    // Weights and minimums of the parts from each position of `order` on.
    let mut weight_left = vec![0.0; order.len() + 1];
    let mut min_left = vec![0; order.len() + 1];
    for (k, &i) in order.iter().enumerate().rev() {
        weight_left[k] = weight_left[k + 1] + parts[i].weight;
        min_left[k] = min_left[k + 1] + parts[i].min;
    }
    let mut split = vec![0; parts.len()];
    let mut remaining = total;
    for (k, &i) in order.iter().enumerate() {
        let part = &parts[i];
        let fair = (remaining as f64 * part.weight / weight_left[k]).ceil() as usize;
        let most = remaining.saturating_sub(min_left[k + 1]);
        split[i] = fair.min(part.cap).min(most).max(part.min);
        remaining -= split[i].min(remaining);
    }
    split
}

/// Each job's weight with its user's share folded in, where `jobs` belong to several users: the
/// user's share divided among their jobs in proportion to their weights, so that a user's time does
/// not grow with the number of jobs they run. With one user, the jobs' own weights. Folding twice
/// changes nothing: a user's folded weights add up to their share.
pub(crate) fn fair_weights(jobs: &[&JobSpec]) -> Vec<f64> {
    let users = by_user(jobs);
    if users.len() == 1 {
        return jobs.iter().map(|j| j.weight).collect();
    }
    let mut weights = vec![0.0; jobs.len()];
    for (share, members) in users {
        let total: f64 = members.iter().map(|&i| jobs[i].weight).sum();
        for i in members {
            weights[i] = share * jobs[i].weight / total;
        }
    }
    weights
}

/// The order in which to offer `jobs` not yet `placed` a place, as a fair-share queue orders them:
/// each next job is the oldest of the user who holds the fewest places for their share, counting the
/// places given before it. A user with many jobs then cannot take every place ahead of a user with
/// one. One user's jobs keep their order.
pub(crate) fn fair_order(jobs: &[&JobSpec], placed: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut users: Vec<(f64, usize, VecDeque<usize>)> = by_user(jobs)
        .into_iter()
        .map(|(share, members)| {
            let held = members.iter().filter(|&&i| placed(i)).count();
            let waiting = members.into_iter().filter(|&i| !placed(i)).collect();
            (share, held, waiting)
        })
        .collect();
    let mut order = Vec::new();
    while let Some(next) = users
        .iter_mut()
        .filter(|(_, _, waiting)| !waiting.is_empty())
        .min_by(|a, b| {
            (a.1 as f64 / a.0)
                .total_cmp(&(b.1 as f64 / b.0))
                .then(a.2[0].cmp(&b.2[0]))
        })
    {
        next.1 += 1;
        order.extend(next.2.pop_front());
    }
    order
}

/// Which of `jobs` get one of `places` places (at least one place each, a job using at most its cap
/// in `caps`), in [`fair_order`]: each user as many of their oldest jobs as the places their share
/// gives them (at most their jobs' caps together, what they cannot use going to the others). A user
/// with one job among others with many thus keeps room for that job to widen. One user: their
/// first `places` jobs.
pub(crate) fn given_places(places: usize, jobs: &[&JobSpec], caps: &[usize]) -> Vec<usize> {
    let users = by_user(jobs);
    if users.len() == 1 || users.len() >= places {
        let order = match users.len() {
            1 => (0..jobs.len()).collect(),
            _ => fair_order(jobs, |_| false),
        };
        return order.into_iter().take(places).collect();
    }
    let quotas = proportional(
        places,
        &users
            .iter()
            .map(|(share, members)| Portion {
                weight: *share,
                min: 1,
                cap: members.iter().map(|&i| caps[i].max(1)).sum(),
            })
            .collect::<Vec<_>>(),
    );
    let mut given = vec![false; jobs.len()];
    for ((_, members), quota) in users.iter().zip(quotas) {
        members.iter().take(quota).for_each(|&i| given[i] = true);
    }
    fair_order(jobs, |_| false)
        .into_iter()
        .filter(|&i| given[i])
        .collect()
}

/// Slot lengths for rows of the given weights (each row's largest): `slice` per unit of weight. Where
/// the weights carry `several` users' shares ([`fair_weights`]), they shrink as a user's jobs
/// multiply, a hundred jobs weighing a hundredth each, so they are scaled to make the shortest slot
/// last `slice`: a slot much shorter than a cache refill would do no work.
pub(crate) fn slot_lengths(slice: f64, row_weights: &[f64], several: bool) -> Vec<f64> {
    let unit = match several {
        true => row_weights
            .iter()
            .copied()
            .filter(|&w| w > 0.0)
            .fold(f64::INFINITY, f64::min),
        false => 1.0,
    };
    row_weights
        .iter()
        .map(|&w| slice * if w > 0.0 { w / unit } else { 1.0 })
        .collect()
}

/// `order` (indices into `jobs`, most deserving first) interleaved by user: each user's jobs keep
/// their order, and the next is always the first of the user who got the least so far for their
/// share, counting each job's `size` (its CPUs). A user's flood ahead of another user's jobs thus
/// takes turns with them instead of going first.
pub(crate) fn interleave(jobs: &[&JobSpec], order: &[usize], sizes: &[f64]) -> Vec<usize> {
    let ordered: Vec<&JobSpec> = order.iter().map(|&i| jobs[i]).collect();
    // Each user's share, what they got so far, and their jobs to come (indices into `jobs`).
    let mut users: Vec<(f64, f64, VecDeque<usize>)> = by_user(&ordered)
        .into_iter()
        .map(|(share, members)| (share, 0.0, members.into_iter().map(|k| order[k]).collect()))
        .collect();
    let mut interleaved = Vec::with_capacity(order.len());
    while let Some(next) = (users.iter_mut())
        .filter(|u| !u.2.is_empty())
        .min_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)))
    {
        let i = next.2.pop_front().expect("not empty");
        next.1 += sizes[i];
        interleaved.push(i);
    }
    interleaved
}

/// Turns each user has had where one job at a time gets the turn (BP's next job, CaSAS's next
/// probe): the job given it often ends before the next turn, so holdings cannot tell whose turn it
/// is. Only users with jobs keep their count.
#[derive(Debug, Default)]
pub(crate) struct Turns(HashMap<Option<u32>, usize>);

impl Turns {
    /// Of `candidates` (indices into `jobs`, the first preferred among equals), the one of the user
    /// with the fewest turns for their share, whose turn it now counts; `jobs` are every active job.
    pub(crate) fn next(
        &mut self,
        jobs: &[&JobSpec],
        candidates: impl IntoIterator<Item = usize>,
    ) -> Option<usize> {
        let active: HashSet<Option<u32>> = jobs.iter().map(|j| user_of(j)).collect();
        self.0.retain(|user, _| active.contains(user));
        let turns = |i: usize| {
            let had = self.0.get(&user_of(jobs[i])).copied().unwrap_or(0);
            had as f64 / share_of(jobs[i])
        };
        let next = (candidates.into_iter()).min_by(|&a, &b| turns(a).total_cmp(&turns(b)))?;
        *self.0.entry(user_of(jobs[next])).or_default() += 1;
        Some(next)
    }
}

/// The jobs that may hold CPUs, at most `limit`: the started ones (never displaced), then waiting
/// ones, in arrival order for one user and in [`fair_order`] for several.
pub(crate) fn admitted(jobs: &[ActiveJob], limit: usize) -> Vec<&ActiveJob> {
    let started = jobs.iter().filter(|j| j.started.is_some());
    if !several_users(jobs.iter().map(|j| &*j.spec)) {
        let waiting = jobs.iter().filter(|j| j.started.is_none());
        return started.chain(waiting).take(limit).collect();
    }
    let specs: Vec<&JobSpec> = jobs.iter().map(|j| &*j.spec).collect();
    let waiting = fair_order(&specs, |i| jobs[i].started.is_some()).into_iter();
    started
        .chain(waiting.map(|i| &jobs[i]))
        .take(limit)
        .collect()
}

/// Who holds a place for `job`, as the split sees it: its user (`None` for the ownerless jobs
/// together) and that user's share.
pub(crate) fn holder(job: &JobSpec) -> (Option<u32>, f64) {
    (user_of(job), share_of(job))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::test_util::job;

    /// EQ's split before users: `cpus` equally among jobs, none above its cap, giving what capped
    /// jobs leave to the others.
    /// Needs `caps.len() <= cpus` and every cap ≥ 1; then every job gets at least one CPU.
    fn equipartition(cpus: usize, caps: &[usize]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..caps.len()).collect();
        order.sort_by_key(|&i| caps[i]);
        let mut shares = vec![0; caps.len()];
        let mut remaining = cpus;
        for (done, &i) in order.iter().enumerate() {
            let left = caps.len() - done;
            shares[i] = caps[i].max(1).min(remaining.div_ceil(left));
            remaining -= shares[i];
        }
        shares
    }

    fn specs(owners: &[(u32, f64, f64)]) -> Vec<JobSpec> {
        owners
            .iter()
            .enumerate()
            .map(|(i, &(user, share, weight))| {
                job(i as u32).owner(user, share).weight(weight).spec()
            })
            .collect()
    }

    fn refs(jobs: &[JobSpec]) -> Vec<&JobSpec> {
        jobs.iter().collect()
    }

    #[test]
    fn one_users_equal_jobs_split_as_equipartition_does() {
        for (cpus, caps) in [
            (24, vec![24, 24, 24]),
            (24, vec![2, 24, 24]),
            (10, vec![24, 24, 24]),
            (11, vec![24, 24, 5]),
            (3, vec![5, 5, 5]),
            (7, vec![1, 3, 7, 2]),
        ] {
            let jobs: Vec<JobSpec> = (0..caps.len() as u32).map(|i| job(i).spec()).collect();
            assert_eq!(
                split_cpus(cpus, &refs(&jobs), &caps),
                equipartition(cpus, &caps),
                "{cpus} CPUs, caps {caps:?}"
            );
        }
    }

    #[test]
    fn a_user_with_one_job_gets_what_a_user_with_seven_gets() {
        let mut owners = vec![(1, 1.0, 1.0)];
        owners.extend([(2, 1.0, 1.0); 7]);
        let jobs = specs(&owners);
        let split = split_cpus(16, &refs(&jobs), &[16; 8]);
        assert_eq!(split[0], 8);
        assert_eq!(split[1..].iter().sum::<usize>(), 8);
        assert!(split[1..].iter().all(|&n| n >= 1));
    }

    #[test]
    fn shares_weigh_users_and_weights_weigh_a_users_jobs() {
        // User 1 has share 3, user 2 share 1; user 1's second job weighs twice its first.
        let jobs = specs(&[(1, 3.0, 1.0), (1, 3.0, 2.0), (2, 1.0, 1.0)]);
        assert_eq!(split_cpus(24, &refs(&jobs), &[24; 3]), vec![6, 12, 6]);
    }

    #[test]
    fn what_a_capped_user_leaves_goes_to_the_others() {
        let jobs = specs(&[(1, 1.0, 1.0), (2, 1.0, 1.0), (2, 1.0, 1.0)]);
        assert_eq!(split_cpus(16, &refs(&jobs), &[2, 16, 16]), vec![2, 7, 7]);
    }

    #[test]
    fn every_job_gets_a_cpu_however_small_its_users_share() {
        let jobs = specs(&[(1, 100.0, 1.0), (2, 1.0, 1.0), (2, 1.0, 1.0), (2, 1.0, 1.0)]);
        let split = split_cpus(4, &refs(&jobs), &[4; 4]);
        assert_eq!(split, vec![1, 1, 1, 1]);
        let split = split_cpus(8, &refs(&jobs), &[8; 4]);
        assert_eq!(split.iter().sum::<usize>(), 8);
        assert!(split[1..].iter().all(|&n| n == 1), "{split:?}");
    }

    #[test]
    fn fair_weights_fold_once() {
        let jobs = specs(&[(0, 1.0, 1.0), (7, 1.0, 1.0), (7, 1.0, 3.0)]);
        let folded = fair_weights(&refs(&jobs));
        assert_eq!(folded, vec![1.0, 0.25, 0.75]);
        let mut again = jobs.clone();
        for (job, w) in again.iter_mut().zip(&folded) {
            job.weight = *w;
        }
        assert_eq!(fair_weights(&refs(&again)), folded);
        let alone = specs(&[(7, 1.0, 1.0), (7, 1.0, 3.0)]);
        assert_eq!(fair_weights(&refs(&alone)), vec![1.0, 3.0]);
    }

    #[test]
    fn a_waiting_job_of_a_user_without_cpus_goes_before_older_ones() {
        let jobs: Vec<ActiveJob> = [(0, 1, true), (1, 1, true), (2, 1, false), (3, 2, false)]
            .into_iter()
            .map(|(id, user, started)| {
                let job = job(id).owner(user, 1.0);
                match started {
                    true => job.running(0.0, 1),
                    false => job.waiting(),
                }
            })
            .collect();
        let ids = |limit| -> Vec<u32> { admitted(&jobs, limit).iter().map(|j| j.id().0).collect() };
        assert_eq!(ids(3), [0, 1, 3]);
        assert_eq!(ids(9), [0, 1, 3, 2]);
    }

    #[test]
    fn a_users_lone_job_keeps_room_to_widen_beside_another_users_flood() {
        let mut owners = vec![(1, 1.0, 1.0); 9];
        owners.push((2, 1.0, 1.0));
        let jobs = specs(&owners);
        // Of 4 places, user 2 has a share of 2 for their one job: user 1 gets 2 jobs in, not 3.
        assert_eq!(given_places(4, &refs(&jobs), &[4; 10]), vec![0, 9, 1]);
        // A job that cannot widen leaves the place it cannot use to the other user.
        let mut caps = [4; 10];
        caps[9] = 1;
        assert_eq!(given_places(4, &refs(&jobs), &caps), vec![0, 9, 1, 2]);
        // One user: the oldest first.
        assert_eq!(
            given_places(4, &refs(&jobs[..9]), &[4; 9]),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn several_users_slots_are_never_shorter_than_the_slice() {
        // A user's 16 rows of a sixteenth each beside another user's row of weight 1.
        let mut weights = vec![1.0 / 16.0; 16];
        weights.push(1.0);
        let lengths = slot_lengths(0.1, &weights, true);
        assert!(lengths[..16].iter().all(|&l| (l - 0.1).abs() < 1e-12));
        assert!((lengths[16] - 1.6).abs() < 1e-12);
        // One user's weights are their own: a half-weight row gets half a slice.
        assert_eq!(slot_lengths(0.1, &[0.5, 1.0], false), vec![0.05, 0.1]);
    }

    #[test]
    fn a_users_flood_ahead_takes_turns_with_another_users_jobs() {
        let jobs = specs(&[
            (1, 1.0, 1.0),
            (1, 1.0, 1.0),
            (1, 1.0, 1.0),
            (2, 1.0, 1.0),
            (2, 1.0, 1.0),
        ]);
        // User 1's jobs first by the policy's order; user 2's first job is twice as wide.
        let order = [2, 0, 1, 4, 3];
        let sizes = [1.0, 1.0, 1.0, 1.0, 2.0];
        assert_eq!(
            interleave(&refs(&jobs), &order, &sizes),
            vec![2, 4, 0, 1, 3]
        );
    }

    #[test]
    fn the_user_holding_fewest_places_goes_next() {
        let jobs = specs(&[(1, 1.0, 1.0), (1, 1.0, 1.0), (1, 1.0, 1.0), (2, 1.0, 1.0)]);
        assert_eq!(fair_order(&refs(&jobs), |_| false), vec![0, 3, 1, 2]);
        // User 1 holds two places: user 2's job goes first.
        assert_eq!(fair_order(&refs(&jobs), |i| i < 2), vec![3, 2]);
        // A share of 2 takes two places per turn of a share of 1.
        let jobs = specs(&[
            (1, 2.0, 1.0),
            (1, 2.0, 1.0),
            (1, 2.0, 1.0),
            (2, 1.0, 1.0),
            (2, 1.0, 1.0),
        ]);
        assert_eq!(fair_order(&refs(&jobs), |_| false), vec![0, 3, 1, 2, 4]);
    }
}
