//! Users, not jobs, share the simulated machine: a user's one job gets the CPUs another user's seven
//! get together, and every policy runs one user's flood beside another user's job to the end.

use cosched_core::metrics::summarize;
use cosched_core::topology::synthetic;
use cosched_core::trace::TraceLine;
use cosched_core::workload::Workload;
use cosched_core::JobId;
use cosched_sim::{profile, simulate, SimError, SimJob, SimOptions};
use std::sync::Arc;

/// Perfectly scaling jobs of 80 CPU-seconds: one of user 0 after seven of user 65534 (or, with
/// `owned` false, the same eight jobs without owners).
fn workload(owned: bool) -> Workload {
    let owner = |user: u32| match owned {
        true => format!("owner = {{ user = {user} }}\n"),
        false => String::new(),
    };
    let mut text = String::from("[workload]\nname = \"two-users\"\n");
    for i in 0..8 {
        let user = if i < 7 { 65534 } else { 0 };
        text += &format!(
            "[[job]]\nname = \"j{i}\"\nprofile = \"amdahl(serial=0, runtime=80)\"\n{}",
            owner(user)
        );
    }
    Workload::parse(&text, "two-users.toml").unwrap()
}

#[test]
fn a_users_one_job_gets_half_the_machine_beside_another_users_seven() {
    for policy in ["eq", "ta", "taco", "taco-basic", "taco-local"] {
        // Half of 16 CPUs: 80 / 8 seconds. Without owners, one eighth: 80 / 2.
        let owned = response(policy, &workload(true), 7);
        let alone = response(policy, &workload(false), 7);
        assert!(
            (owned - 10.0).abs() < 0.5,
            "{policy}: {owned} s with owners"
        );
        assert!(
            (alone - 40.0).abs() < 2.0,
            "{policy}: {alone} s without owners"
        );
    }
}

/// Machine-wide rigid jobs: four of 160 CPU-seconds of user 65534 at 0 s, then one of 16 CPU-seconds
/// of user 0 at 1 s (or, with `owned` false, the same five without owners).
fn late_user(owned: bool) -> Workload {
    let mut text = String::from("[workload]\nname = \"late-user\"\n");
    let jobs = [(65534, 0, 160); 4].into_iter().chain([(0, 1, 16)]);
    for (i, (user, arrival, runtime)) in jobs.enumerate() {
        text += &format!(
            "[[job]]\nname = \"j{i}\"\narrival = {arrival}\nkind = \"rigid\"\nmin_threads = 16\n\
             profile = \"amdahl(serial=0, runtime={runtime})\"\n"
        );
        if owned {
            text += &format!("owner = {{ user = {user} }}\n");
        }
    }
    Workload::parse(&text, "late-user.toml").unwrap()
}

/// The response time of job `id` of `workload` on 16 CPUs under `policy`.
fn response(policy: &str, workload: &Workload, id: u32) -> f64 {
    let trace = simulate_on_16_cpus(policy, workload).unwrap();
    (summarize(&trace).jobs.iter())
        .find(|j| j.id == JobId(id))
        .and_then(|j| j.response)
        .unwrap()
}

/// `workload` simulated on 16 CPUs (two packages of eight, an LLC each) under `policy`.
fn simulate_on_16_cpus(policy: &str, workload: &Workload) -> Result<Vec<TraceLine>, SimError> {
    let topo = synthetic::parse("package:2 l3:1 core:8").unwrap();
    let jobs: Vec<SimJob> = (workload.jobs.iter().enumerate())
        .map(|(i, entry)| SimJob {
            spec: Arc::new(entry.spec(JobId(i as u32), topo.num_cpus())),
            profile: Arc::new(profile::parse(entry.profile.as_deref().unwrap()).unwrap()),
            mem: entry.mem,
        })
        .collect();
    let mut policy = cosched_policies::create(policy).unwrap();
    simulate(&topo, &jobs, policy.as_mut(), &SimOptions::default())
}

/// A hundred malleable jobs of 20 CPU-seconds of user 1000 arriving a hundredth of a second apart,
/// and one of user 2000 (job 100) half way through them; with `owned` false, no owners.
fn flood(owned: bool) -> Workload {
    let mut text = String::from("[workload]\nname = \"flood\"\n");
    let jobs = (0..100)
        .map(|i| (1000, f64::from(i) / 100.0))
        .chain([(2000, 0.5)]);
    for (i, (user, arrival)) in jobs.enumerate() {
        text += &format!(
            "[[job]]\nname = \"j{i}\"\narrival = {arrival}\n\
             profile = \"amdahl(serial=0.05, runtime=20)\"\n"
        );
        if owned {
            text += &format!("owner = {{ user = {user} }}\n");
        }
    }
    Workload::parse(&text, "flood.toml").unwrap()
}

#[test]
fn every_policy_runs_a_flood_beside_another_users_job_to_the_end() {
    for policy in cosched_policies::names() {
        let trace = simulate_on_16_cpus(policy, &flood(true));
        let summary = summarize(&trace.unwrap_or_else(|e| panic!("{policy}: {e}")));
        let ended = summary.jobs.iter().filter(|j| j.response.is_some()).count();
        assert_eq!(ended, 101, "{policy}");
    }
}

#[test]
fn gang_takes_a_row_back_for_a_late_users_lone_job() {
    // User 65534's four 10 s jobs fill both rows. Without owners the late 1 s job waits for all four
    // (about 40 s); with owners it takes back a row and runs in every other slot (about 2 s).
    let owned = response("gang:mpl=2", &late_user(true), 4);
    let alone = response("gang:mpl=2", &late_user(false), 4);
    assert!(owned < 3.0, "{owned} s with owners");
    assert!(alone > 35.0, "{alone} s without owners");
}

/// Job 100's response time under each policy, with owners against without: 3.4-40 s against 73-155 s.
#[test]
fn another_users_job_is_not_held_back_behind_a_flood() {
    for policy in [
        "eq",
        "ta",
        "taco",
        "taco-basic",
        "taco-local",
        "gang",
        "auto",
        "casas",
        "bp",
        "fifo",
        "fifo-global",
        "lpt",
        "di",
    ] {
        let owned = response(policy, &flood(true), 100);
        let alone = response(policy, &flood(false), 100);
        // EQ, TA and the task bags never stop a started job: the other user's job waits for the
        // flood's first to end (about 20 s); the others let it in at once. (Scalpel's dispatch
        // starts it at the first core freed even without owners.)
        assert!(
            owned < 0.6 * alone,
            "{policy}: {owned} s with owners, {alone} s without"
        );
    }
}
