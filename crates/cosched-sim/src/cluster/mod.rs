//! Archive traces (SWF) replayed on a cluster of nodes: [`batch`] places jobs on whole nodes (FCFS,
//! EASY backfilling), [`nodes`] says what a cosched policy inside a node gives each job placed there,
//! [`state`] holds the nodes' jobs and each job's progress, [`replay`] advances time, and [`metrics`]
//! computes the archive's usual figures (`docs/simulation-model.md`, "Cluster replay").

pub mod batch;
pub mod interference;
pub mod metrics;
pub mod nodes;
#[cfg(test)]
mod reference;
pub mod replay;
pub mod state;
pub mod study;

pub use batch::{Admission, BatchPolicy};
pub use metrics::{summarize, BatchMetrics};
pub use nodes::{NodeSharing, PolicyFactory};
pub use replay::{replay, ClusterError, ClusterOptions, Replay};
pub use state::{Coordination, Placement};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::swf::{self, SwfJob};
    use cosched_core::topology::cluster;
    use cosched_core::Policy;

    pub(crate) fn exclusive() -> NodeSharing<'static> {
        NodeSharing {
            policy: None,
            mpl: 1,
            switch_cost: 0.0,
            interference: false,
        }
    }

    fn gang() -> Box<dyn Policy> {
        cosched_policies::create("gang").unwrap()
    }

    fn gang_sharing() -> NodeSharing<'static> {
        NodeSharing {
            policy: Some(&gang),
            mpl: 2,
            switch_cost: 0.0,
            interference: false,
        }
    }

    pub(crate) fn on_cluster(
        jobs: &[SwfJob],
        machine: &str,
        batch: BatchPolicy,
        sharing: NodeSharing,
    ) -> Result<Replay, ClusterError> {
        coordinated(jobs, machine, batch, sharing, Coordination::Coordinated)
    }

    fn coordinated(
        jobs: &[SwfJob],
        machine: &str,
        batch: BatchPolicy,
        sharing: NodeSharing,
        coordination: Coordination,
    ) -> Result<Replay, ClusterError> {
        let options = ClusterOptions {
            batch,
            sharing,
            coordination,
            classes: &[],
            admission: Admission::LeastLoaded,
        };
        replay(jobs, &cluster::parse(machine).unwrap(), &options)
    }

    pub(crate) fn starts(replay: &Replay) -> Vec<f64> {
        replay.placements.iter().map(|p| p.start).collect()
    }

    fn ends(replay: &Replay) -> Vec<f64> {
        replay.placements.iter().map(|p| p.end).collect()
    }

    /// Two one-CPU nodes. Job 1 (2 procs, 10 s) spans both; job 2 (1 proc, 4 s) and job 3 (1 proc,
    /// 6 s) come while it runs.
    const SHARED: &str = "\
1 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1  4 -1 -1 -1 1  4 -1 1 1 1 -1 -1 -1 -1 -1
3 2 -1  6 -1 -1 -1 1  6 -1 1 1 1 -1 -1 -1 -1 -1
";

    #[test]
    fn gang_inside_nodes_starts_short_jobs_beside_a_wide_one() {
        let jobs = swf::parse(SHARED, "shared.swf").unwrap().jobs;
        // Exclusive nodes: 2 and 3 wait for 1's end at 10.
        let alone = on_cluster(&jobs, "cluster:2 core:1", BatchPolicy::Easy, exclusive()).unwrap();
        assert_eq!(
            (starts(&alone), ends(&alone)),
            (vec![0.0, 10.0, 10.0], vec![10.0, 14.0, 16.0])
        );
        // Gang, MPL 2, slots coordinated. t1: 2 joins node 0; both nodes run 1 in one slot, so 1 goes
        // at min(1/2, 1) = 1/2 and 2 at 1/2 (ends at 1 + 4 / 0.5 = 9). t2: 3 joins node 1 (node 0 is
        // full); 1 still at 1/2 (9 - 0.5 = 8.5 s left at t2), 3 at 1/2 (ends at 2 + 12 = 14). t9: 2
        // ends; 1 still at 1/2 (node 1), 5 s left. t14: 3 ends; 1 alone, 2.5 s left: ends at 16.5.
        let gang =
            on_cluster(&jobs, "cluster:2 core:1", BatchPolicy::Easy, gang_sharing()).unwrap();
        assert_eq!(
            (starts(&gang), ends(&gang)),
            (vec![0.0, 1.0, 2.0], vec![16.5, 9.0, 14.0])
        );
        assert_eq!(gang.placements[1].nodes, [0]);
        assert_eq!(gang.placements[2].nodes, [1]);
    }

    #[test]
    fn a_job_on_two_nodes_runs_in_one_slot_on_both_only_when_slots_are_coordinated() {
        let jobs = swf::parse(SHARED, "shared.swf").unwrap().jobs;
        // From t2 to t9 job 1 shares node 0 with job 2 and node 1 with job 3, each node cycling two
        // slots. Coordinated, 1 has the same slot on both nodes (2 and 3 share the other): rate 1/2.
        // Uncoordinated, both of its halves run at once a quarter of the time: rate 1/4. t2: 8.5 s
        // left; t9: 8.5 - 7/4 = 6.75; then rate 1/2 to t14 (4.25 left), then 1: ends at 18.25.
        let run = |coordination| {
            coordinated(
                &jobs,
                "cluster:2 core:1",
                BatchPolicy::Easy,
                gang_sharing(),
                coordination,
            )
            .unwrap()
        };
        assert_eq!(ends(&run(Coordination::Coordinated))[0], 16.5);
        assert_eq!(ends(&run(Coordination::Uncoordinated)), [18.25, 9.0, 14.0]);
    }

    /// Two 8-CPU nodes under EQ, MPL 2; four 4-thread jobs of 100 s: memory-bound 1, compute-bound
    /// 2 at t0, memory-bound 3, compute-bound 4 at t1.
    fn pairs(admission: Admission) -> Replay {
        let jobs = swf::parse(
            "1 0 -1 100 -1 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 0 -1 100 -1 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n\
             3 1 -1 100 -1 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n\
             4 1 -1 100 -1 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "pairs.swf",
        )
        .unwrap()
        .jobs;
        fn eq() -> Box<dyn Policy> {
            cosched_policies::create("eq").unwrap()
        }
        let options = ClusterOptions {
            batch: BatchPolicy::Easy,
            sharing: NodeSharing {
                policy: Some(&eq),
                mpl: 2,
                switch_cost: 0.0,
                interference: true,
            },
            coordination: Coordination::Coordinated,
            classes: &[1, 0, 1, 0],
            admission,
        };
        let machine = cluster::parse("cluster:2 l3:1(size=8MB) core:8").unwrap();
        replay(&jobs, &machine, &options).unwrap()
    }

    #[test]
    fn the_pairing_admission_puts_a_memory_bound_job_beside_a_compute_bound_one() {
        // t0: 1 and 2 take a node each. t1: both nodes hold one job; least loaded first (ties by
        // node number) puts 3 beside 1 (two memory-bound jobs) and 4 beside 2.
        let blind = pairs(Admission::LeastLoaded);
        assert_eq!(blind.placements[2].nodes, blind.placements[0].nodes);
        let paired = pairs(Admission::Pairing);
        assert_eq!(paired.placements[2].nodes, paired.placements[1].nodes);
        assert_eq!(paired.placements[3].nodes, paired.placements[0].nodes);
        // The memory-bound jobs end sooner beside compute-bound ones, and no job ends later.
        let last = |r: &Replay| ends(r).into_iter().fold(0.0, f64::max);
        assert!(last(&paired) < last(&blind), "{paired:?} {blind:?}");
        assert!(ends(&paired)[0] < ends(&blind)[0]);
    }

    #[test]
    fn space_sharing_packs_small_jobs_onto_one_node() {
        // One node of 4 CPUs: two 2-proc jobs. Exclusive: one after the other. EQ: side by side, each
        // on 2 CPUs at full speed.
        let jobs = swf::parse(
            "1 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 0 -1 10 -1 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "pair.swf",
        )
        .unwrap()
        .jobs;
        let alone = on_cluster(&jobs, "cluster:1 core:4", BatchPolicy::Easy, exclusive()).unwrap();
        assert_eq!(ends(&alone), [10.0, 20.0]);
        fn eq() -> Box<dyn Policy> {
            cosched_policies::create("eq").unwrap()
        }
        let sharing = NodeSharing {
            policy: Some(&eq),
            mpl: 2,
            switch_cost: 0.0,
            interference: false,
        };
        let packed = on_cluster(&jobs, "cluster:1 core:4", BatchPolicy::Easy, sharing).unwrap();
        assert_eq!(ends(&packed), [10.0, 10.0]);
    }
}
