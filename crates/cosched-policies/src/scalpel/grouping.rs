//! Scalpel's task grouping (Algorithm 1, §IV-B–C): tasks are split into groups of at most C (cores per
//! LLC) whose summed footprints (eq. 4) are about equal, with as many full groups as possible.
//!
//! The basic procedure, for a sorted list of G·C tasks (descending footprint): each round gives the G
//! largest remaining tasks to groups 1…G, then the G smallest remaining to groups 1…G starting from the
//! very smallest, and re-sorts the groups by summed footprint, descending; rounds repeat until no task
//! is left. Fewer tasks than cores are padded with empty tasks of footprint 0; more than P·C tasks are
//! split at the k point (k = ⌊T/(P·C)⌋·P·C): the T − k largest form P padded groups, the k smallest
//! form k/C full groups. With P = 2, C = 4 (the paper's node) 13 tasks become groups of 4, 4, 3, 2
//! (§IV-C).

/// Groups of items (descending summed footprint within each call of the basic procedure).
/// `tasks` pairs each item with its footprint; `processors` is P, `cores` is C.
pub fn group<T: Copy>(tasks: &[(T, f64)], processors: usize, cores: usize) -> Vec<Vec<T>> {
    let (p, c) = (processors.max(1), cores.max(1));
    let mut sorted: Vec<(Option<T>, f64)> = tasks.iter().map(|&(t, fp)| (Some(t), fp)).collect();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
    let t = sorted.len();
    let groups = if t <= p {
        sorted.into_iter().map(|task| vec![task]).collect()
    } else if t <= p * c {
        sorted.resize(p * c, (None, 0.0));
        grouping_procedure(sorted, p)
    } else {
        let k = t / (p * c) * (p * c);
        let mut largest = sorted;
        let smallest = largest.split_off(t - k);
        let mut groups = Vec::new();
        if !largest.is_empty() {
            largest.resize(p * c, (None, 0.0));
            groups.extend(grouping_procedure(largest, p));
        }
        groups.extend(grouping_procedure(smallest, k / c));
        groups
    };
    groups
        .into_iter()
        .map(|g| {
            g.into_iter()
                .filter_map(|(task, _)| task)
                .collect::<Vec<T>>()
        })
        .filter(|g| !g.is_empty())
        .collect()
}

type Slot<T> = (Option<T>, f64);

/// The basic procedure on `sorted` (descending footprint) into `g` groups.
fn grouping_procedure<T: Copy>(sorted: Vec<Slot<T>>, g: usize) -> Vec<Vec<Slot<T>>> {
    let mut remaining: std::collections::VecDeque<Slot<T>> = sorted.into();
    let mut groups: Vec<Vec<Slot<T>>> = vec![Vec::new(); g];
    while !remaining.is_empty() {
        for group in groups.iter_mut() {
            match remaining.pop_front() {
                Some(task) => group.push(task),
                None => break,
            }
        }
        for group in groups.iter_mut() {
            match remaining.pop_back() {
                Some(task) => group.push(task),
                None => break,
            }
        }
        groups.sort_by(|a, b| locality(b).total_cmp(&locality(a)));
    }
    groups
}

/// Summed footprint of a group (eq. 4).
fn locality<T>(group: &[Slot<T>]) -> f64 {
    group.iter().map(|(_, fp)| fp).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasks 0..t with footprints t, t−1, …, 1 (task 0 largest).
    fn tasks(t: usize) -> Vec<(usize, f64)> {
        (0..t).map(|i| (i, (t - i) as f64)).collect()
    }

    fn sizes(groups: &[Vec<usize>]) -> Vec<usize> {
        let mut s: Vec<usize> = groups.iter().map(Vec::len).collect();
        s.sort_unstable_by(|a, b| b.cmp(a));
        s
    }

    fn assert_partition(groups: &[Vec<usize>], t: usize) {
        let mut all: Vec<usize> = groups.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..t).collect::<Vec<_>>());
    }

    #[test]
    fn fewer_tasks_than_processors_run_alone() {
        let groups = group(&tasks(2), 4, 4);
        assert_eq!(groups, vec![vec![0], vec![1]]);
    }

    #[test]
    fn up_to_one_task_per_core_gives_one_group_per_processor() {
        // T = 6 on 2 × 4: 2 empty tasks pad to 8; each group gets one large and one small task first.
        let groups = group(&tasks(6), 2, 4);
        assert_partition(&groups, 6);
        assert_eq!(sizes(&groups), vec![3, 3]);
        assert!(groups.iter().all(|g| g.len() <= 4));
        let loc = |g: &Vec<usize>| g.iter().map(|&i| 6 - i).sum::<usize>();
        assert_eq!(loc(&groups[0]) + loc(&groups[1]), 21);
        assert!(loc(&groups[0]).abs_diff(loc(&groups[1])) <= 3);
        assert!(groups.iter().all(|g| !(g.contains(&0) && g.contains(&1))));
    }

    #[test]
    fn one_task_per_core_pairs_large_with_small() {
        // The basic case of §IV-B: T = P·C = 8, G = 2; round one pairs task 1 with task T.
        let groups = group(&tasks(8), 2, 4);
        assert_partition(&groups, 8);
        assert_eq!(sizes(&groups), vec![4, 4]);
        let first = groups.iter().find(|g| g.contains(&0)).unwrap();
        assert!(first.contains(&7), "{groups:?}");
        assert!(!first.contains(&1));
    }

    #[test]
    fn more_tasks_than_cores_split_at_the_k_point() {
        // §IV-C: 13 tasks on the 2 × 4 node give groups of 4, 4, 3 and 2; the 8 smallest form the two
        // full groups, the 5 largest the two partial ones.
        let groups = group(&tasks(13), 2, 4);
        assert_partition(&groups, 13);
        assert_eq!(sizes(&groups), vec![4, 4, 3, 2]);
        for g in groups.iter().filter(|g| g.len() == 4) {
            assert!(g.iter().all(|&i| i >= 5), "{groups:?}");
        }
        // T a multiple of P·C: only full groups.
        let groups = group(&tasks(16), 2, 4);
        assert_eq!(sizes(&groups), vec![4, 4, 4, 4]);
        assert_partition(&groups, 16);
    }

    #[test]
    fn groups_balance_footprint_better_than_arrival_order() {
        // 8 of the PolyBench footprints of Table II (thousands of elements).
        let fp = [513.0, 423.0, 418.0, 300.0, 299.0, 253.0, 42.0, 3.0];
        let tasks: Vec<(usize, f64)> = fp.iter().copied().enumerate().collect();
        let groups = group(&tasks, 2, 4);
        let loc = |g: &Vec<usize>| g.iter().map(|&i| fp[i]).sum::<f64>();
        let gap = (loc(&groups[0]) - loc(&groups[1])).abs();
        let naive = (fp[..4].iter().sum::<f64>() - fp[4..].iter().sum::<f64>()).abs();
        assert!(gap < naive / 4.0, "gap {gap} vs naive {naive}");
    }
}
