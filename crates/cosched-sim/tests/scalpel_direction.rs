//! Scalpel's direction (Scalpel §VI-B) on the scenarios' task sets, and the §VI-C brute-force check:
//! 8 tasks on the paper's 2 × 4-core node, every distinct 4 + 4 split of the tasks over the two L3s (35),
//! each simulated with the tasks pinned one per core; where does Scalpel's Algorithm 1 grouping rank?
//! (The paper: 10th of its 70 ordered combinations, 1.8% behind the best.) Run with `--nocapture` to see
//! the figures. What does not reproduce (LLC misses against FIFO, their levels) is explained in
//! docs/policies.md.

use cosched_core::topology::presets;
use cosched_core::{Assignment, Context, CpuSet, Event, JobId, Plan, Policy};
use cosched_policies::scalpel::grouping::group;
use cosched_sim::{jobs, simulate_into, OutcomeSink, SimOptions};
use std::path::Path;

fn task_set(tasks: usize) -> Vec<cosched_sim::SimJob> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../scenarios/workloads/scalpel-tasks-{tasks}.toml"
    ));
    let (_, jobs) = jobs::load(&path, 8).unwrap();
    assert_eq!(jobs.len(), tasks);
    jobs
}

/// Fig. 4 and Table III: with more tasks than cores, Scalpel finishes the set before Linux FIFO and RR
/// as the paper ran them (tasks bound to cores in turn, §VI-A), and misses the L3 less often than RR,
/// whose time slices put more tasks' data in each L3 at once. Against FIFO the misses tie (within a
/// fraction of a point either way); docs/policies.md explains why.
#[test]
fn scalpel_finishes_before_fifo_and_rr_and_misses_less_than_rr_when_tasks_outnumber_cores() {
    let machine = presets::preset("scalpel-xeon-e5620").unwrap();
    for tasks in [11, 15, 16, 23] {
        let jobs = task_set(tasks);
        let run = |policy: &str| {
            let mut policy = cosched_policies::create(policy).unwrap();
            let mut sink = OutcomeSink::default();
            let options = SimOptions::default();
            let stats =
                simulate_into(&machine, &jobs, policy.as_mut(), &options, &mut sink).unwrap();
            (stats.sim_time, stats.llc_miss_rate.unwrap())
        };
        let (scalpel, scalpel_miss) = run("scalpel");
        let (fifo, fifo_miss) = run("fifo");
        let (rr, rr_miss) = run("rr");
        eprintln!(
            "{tasks} tasks: scalpel {scalpel:.1} s, miss {scalpel_miss:.4}; fifo {fifo:.1} s, miss {fifo_miss:.4}; rr {rr:.1} s, miss {rr_miss:.4}"
        );
        assert!(
            scalpel < fifo && scalpel < rr,
            "{tasks} tasks: scalpel {scalpel:.1} s, fifo {fifo:.1} s, rr {rr:.1} s"
        );
        assert!(
            scalpel_miss < rr_miss,
            "{tasks} tasks: scalpel misses {scalpel_miss:.4}, rr {rr_miss:.4}"
        );
    }
}

/// Pins the tasks of `first` to the first L3 domain's cores and the others to the second's.
struct FixedSplit {
    first: Vec<JobId>,
    others: Vec<JobId>,
    domains: Vec<Vec<u32>>,
}

impl Policy for FixedSplit {
    fn name(&self) -> &str {
        "fixed-split"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if !matches!(event, Event::Arrived { .. }) || ctx.jobs.len() < 8 {
            return None;
        }
        let pin = |ids: &[JobId], cores: &[u32]| {
            ids.iter()
                .zip(cores)
                .map(|(&job, &cpu)| Assignment {
                    job,
                    cpus: CpuSet::from_iter([cpu]),
                })
                .collect::<Vec<_>>()
        };
        let mut assignments = pin(&self.first, &self.domains[0]);
        assignments.extend(pin(&self.others, &self.domains[1]));
        Some(Plan::space_sharing(assignments))
    }
}

#[test]
fn scalpel_grouping_against_all_35_splits_of_8_tasks() {
    let machine = presets::preset("scalpel-xeon-e5620").unwrap();
    let tasks = task_set(8);
    let domains: Vec<Vec<u32>> = machine
        .llc_domains()
        .iter()
        .map(|d| d.iter().collect())
        .collect();
    let ids: Vec<JobId> = tasks.iter().map(|t| t.spec.id).collect();

    // (makespan, mean miss rate, tasks on the first L3); the first task's L3 is "first" (35 splits).
    let mut splits = Vec::new();
    for mask in 0u32..256 {
        if mask.count_ones() != 4 || mask & 1 == 0 {
            continue;
        }
        let (first, others): (Vec<usize>, Vec<usize>) = (0..8).partition(|i| mask & (1 << i) != 0);
        let mut policy = FixedSplit {
            first: first.iter().map(|&i| ids[i]).collect(),
            others: others.iter().map(|&i| ids[i]).collect(),
            domains: domains.clone(),
        };
        let stats = simulate_into(
            &machine,
            &tasks,
            &mut policy,
            &SimOptions::default(),
            &mut OutcomeSink::default(),
        )
        .unwrap();
        splits.push((stats.sim_time, stats.llc_miss_rate.unwrap_or(0.0), first));
    }
    assert_eq!(splits.len(), 35);

    let footprints: Vec<(usize, f64)> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (i, t.spec.hints.footprint_mb.unwrap()))
        .collect();
    let groups = group(&footprints, 2, 4);
    let scalpel_first: Vec<usize> = {
        let mut g = groups.into_iter().find(|g| g.contains(&0)).unwrap();
        g.sort_unstable();
        g
    };
    splits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let rank = splits
        .iter()
        .position(|s| s.2 == scalpel_first)
        .expect("Scalpel's grouping is one of the 35 splits");
    for (i, (makespan, miss, first)) in splits.iter().enumerate() {
        let mark = if i == rank { "  <- scalpel" } else { "" };
        eprintln!(
            "{:2} {makespan:8.2} s  miss {miss:.4}  {first:?}{mark}",
            i + 1
        );
    }
    let (best, scalpel) = (splits[0].0, splits[rank].0);
    // Equal makespans tie: the rank counts only the splits strictly faster.
    let faster = splits
        .iter()
        .filter(|s| s.0 < scalpel * (1.0 - 1e-9))
        .count();
    let ties = splits
        .iter()
        .filter(|s| (s.0 - scalpel).abs() <= scalpel * 1e-9)
        .count();
    eprintln!(
        "scalpel's grouping ranks {} of 35 by makespan (tied with {} splits), {:.2}% behind the best",
        faster + 1,
        ties - 1,
        100.0 * (scalpel / best - 1.0)
    );

    // Co-running footprints matter: the split decides the makespan by more than the model's noise...
    let worst = splits[34].0;
    assert!(
        worst / best > 1.005,
        "all 35 splits within 0.5%: grouping has no effect to measure"
    );
    // ...and Scalpel's grouping is no further from the best than the paper found (1.8%, §VI-C).
    assert!(
        scalpel / best < 1.018,
        "Scalpel's grouping is {:.2}% behind the best split",
        100.0 * (scalpel / best - 1.0)
    );
}
