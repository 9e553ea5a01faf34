use super::reference::simulate_reference;
use super::*;
use cosched_core::test_util::job;
use cosched_core::topology::synthetic;
use cosched_core::{JobHints, JobKind};
use proptest::prelude::*;

const PROFILES: [&str; 7] = [
    "nas/lu.A",
    "nas/cg.B",
    "nas/is.C",
    "amdahl(serial=0.1, runtime=3)",
    "amdahl(serial=0, runtime=2, sync=spin, sync_interval=0.001)",
    "polybench/adi",
    // Memory-bound: its node's bandwidth couples the jobs of both LLCs of the test machine.
    "amdahl(serial=0.05, runtime=4, bandwidth=3)",
];

#[test]
fn a_shared_memory_node_couples_llcs_only_when_a_job_demands_bandwidth() {
    let topology = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
    let options = SimOptions::default();
    let regions = |profile: &str| {
        let jobs = [sim_job(0, profile, 0.0, JobKind::Rigid, 1)];
        machine_model(&topology, &jobs, &options).regions
    };
    assert_eq!(regions("amdahl(serial=0.05, runtime=4)"), 2);
    assert_eq!(regions("amdahl(serial=0.05, runtime=4, bandwidth=3)"), 1);
}

#[test]
fn a_machine_naming_no_cache_is_one_region_only_for_jobs_with_a_footprint() {
    let topology = synthetic::parse("package:2 core:4").unwrap();
    let options = SimOptions::default();
    let regions = |profile: &str| {
        let jobs = [sim_job(0, profile, 0.0, JobKind::Rigid, 1)];
        machine_model(&topology, &jobs, &options).regions
    };
    assert_eq!(regions("amdahl(serial=0.05, runtime=4)"), 2);
    assert_eq!(regions("amdahl(serial=0.05, runtime=4, working_set=2)"), 1);
}

fn finishes(trace: &[TraceLine]) -> Vec<(JobId, f64)> {
    let mut out: Vec<(JobId, f64)> = trace
        .iter()
        .filter_map(|l| match l.record {
            Record::Finish { job, .. } => Some((job, l.t)),
            _ => None,
        })
        .collect();
    out.sort_by_key(|(job, _)| *job);
    out
}

/// Job `id` of `profile`, with one to `threads` threads, its sync hint the profile's.
fn sim_job(id: u32, profile: &str, arrival: f64, kind: JobKind, threads: u32) -> SimJob {
    let profile = crate::profile::parse(profile).unwrap();
    let hints = JobHints {
        sync: profile.sync,
        ..JobHints::default()
    };
    SimJob {
        spec: job(id)
            .arrival(arrival)
            .kind(kind)
            .max_threads(threads)
            .hints(hints)
            .spec()
            .into(),
        profile: Arc::new(profile),
        mem: None,
    }
}

fn arb_jobs() -> impl Strategy<Value = Vec<SimJob>> {
    prop::collection::vec(
        (0usize..PROFILES.len(), 0.0f64..6.0, 0u8..3, 1u32..9),
        1..13,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(id, (profile, arrival, kind, threads))| {
                let kind = [JobKind::Rigid, JobKind::Moldable, JobKind::Malleable][kind as usize];
                sim_job(id as u32, PROFILES[profile], arrival, kind, threads)
            })
            .collect()
    })
}

/// A policy shown every waiting job: its queue window is left at the default.
struct ShowAll(Box<dyn Policy>);

impl Policy for ShowAll {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        self.0.decide(ctx, event)
    }
}

/// A policy that notes, whenever it hears of a thread change, when, and every active job's
/// thread count.
struct WatchThreads {
    inner: Box<dyn Policy>,
    seen: Vec<(f64, JobId, Vec<u32>)>,
}

impl Policy for WatchThreads {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        if let Event::ThreadsChanged { job, .. } = event {
            let threads = ctx.jobs.iter().map(|j| j.threads).collect();
            self.seen.push((ctx.now, *job, threads));
        }
        self.inner.decide(ctx, event)
    }
}

#[test]
fn both_engines_run_a_closed_experiment_alike() {
    // Three jobs of different lengths, each to be run twice: the short ones start again while the
    // long one runs, and the runs still going stop once every job has its two.
    let machine = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
    let jobs: Vec<SimJob> = [(PROFILES[0], 4), (PROFILES[3], 2), (PROFILES[5], 8)]
        .into_iter()
        .enumerate()
        .map(|(id, (profile, threads))| {
            sim_job(id as u32, profile, 0.0, JobKind::Malleable, threads)
        })
        .collect();
    let options = SimOptions {
        min_runs: std::num::NonZeroU32::new(2),
        ..SimOptions::default()
    };
    for policy in ["eq", "gang"] {
        let mut fast_policy = cosched_policies::create(policy).unwrap();
        let fast = simulate(&machine, &jobs, fast_policy.as_mut(), &options).unwrap();
        let mut simple_policy = cosched_policies::create(policy).unwrap();
        let simple = simulate_reference(&machine, &jobs, simple_policy.as_mut(), &options).unwrap();
        let (fast, simple) = (finishes(&fast), finishes(&simple));
        assert!(fast.len() >= 6, "{policy}: {fast:?}");
        assert_eq!(fast.len(), simple.len(), "{policy}");
        for ((job, a), (other, b)) in fast.iter().zip(&simple) {
            assert_eq!(job, other, "{policy}");
            assert!(
                (a - b).abs() <= 1e-6 * b.max(1.0),
                "{policy}: job {job:?}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn thread_changes_due_at_one_instant_take_effect_before_the_policy_hears_of_any() {
    // Two alike malleable jobs share 6 CPUs, 3 each; a third arrives at t = 1 and EQ advises
    // both down to 2 at once, so both adapt after the same delay.
    let profile = "amdahl(serial=0.05, runtime=20, reconfig_delay=0.05)";
    let jobs: Vec<SimJob> = [0.0, 0.0, 1.0]
        .into_iter()
        .enumerate()
        .map(|(id, arrival)| sim_job(id as u32, profile, arrival, JobKind::Malleable, 6))
        .collect();
    let mut policy = WatchThreads {
        inner: cosched_policies::create("eq").unwrap(),
        seen: Vec::new(),
    };
    let machine = synthetic::parse("core:6").unwrap();
    simulate(&machine, &jobs, &mut policy, &SimOptions::default()).unwrap();
    let (_, job, threads) = policy
        .seen
        .iter()
        .find(|(t, ..)| *t > 1.0)
        .expect("the first two jobs adapt to the third");
    assert_eq!(threads[..2], [2, 2], "heard of {job:?} first");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Hiding the jobs beyond a policy's queue window changes no finish: on a machine of two CPUs,
    /// where most jobs wait, every job finishes when it does with the whole queue shown.
    #[test]
    fn hiding_the_queue_beyond_the_window_changes_no_finish(
        jobs in arb_jobs(),
        policy in prop::sample::select(vec!["bp", "eq", "ta", "taco:mpl=1", "gang:mpl=2"]),
    ) {
        let machine = synthetic::parse("core:2").unwrap();
        let options = SimOptions::default();
        let windowed = simulate(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options).unwrap();
        let shown = simulate(&machine, &jobs, &mut ShowAll(cosched_policies::create(policy).unwrap()), &options).unwrap();
        let (windowed, shown) = (finishes(&windowed), finishes(&shown));
        prop_assert_eq!(windowed.len(), jobs.len());
        prop_assert_eq!(windowed.len(), shown.len());
        for ((job, a), (other, b)) in windowed.iter().zip(&shown) {
            prop_assert_eq!(job, other);
            prop_assert!((a - b).abs() <= 1e-9 * b.max(1.0), "job {:?}: {} vs {}", job, a, b);
        }
    }

    /// The calendar engine finishes every job when the simple engine does, under every kind of
    /// policy (space sharing, gang slots, timers and samples, thread advice) and both modes.
    #[test]
    fn the_calendar_engine_agrees_with_the_simple_one(
        jobs in arb_jobs(),
        policy in prop::sample::select(vec!["ue", "bp", "eq", "ta", "taco", "gang", "casas"]),
        exact in any::<bool>(),
    ) {
        let machine = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
        let options = SimOptions {
            mode: if exact { Mode::Exact } else { Mode::Fluid },
            ..SimOptions::default()
        };
        let fast = simulate(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options);
        let simple = simulate_reference(&machine, &jobs, cosched_policies::create(policy).unwrap().as_mut(), &options);
        let (fast, simple) = match (fast, simple) {
            (Ok(fast), Ok(simple)) => (fast, simple),
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.to_string(), b.to_string());
                return Ok(());
            }
            (a, b) => panic!("one engine failed: fast {:?}, simple {:?}", a.err(), b.err()),
        };
        let (fast, simple) = (finishes(&fast), finishes(&simple));
        prop_assert_eq!(fast.len(), simple.len());
        for ((job, a), (other, b)) in fast.iter().zip(&simple) {
            prop_assert_eq!(job, other);
            prop_assert!((a - b).abs() <= 1e-6 * b.max(1.0), "job {:?}: {} vs {}", job, a, b);
        }
    }
}
