use super::*;
use cosched_core::topology::presets;
use cosched_core::trace::ExitStatus;
use cosched_core::{Assignment, Plan};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A clock the test moves by hand: how long a job ran alone is what it checks.
#[derive(Clone, Default)]
struct HandClock(Arc<Mutex<Duration>>);

impl HandClock {
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }

    fn history(&self, dir: PathBuf, topology: Topology) -> ScalingHistory {
        let clock = self.clone();
        ScalingHistory::with_clock(dir, topology, Box::new(move || *clock.0.lock().unwrap()))
    }
}

fn command(name: &str) -> Vec<String> {
    vec![name.to_string(), "--iterations".into(), "100".into()]
}

/// Job `id` alone on both CPUs for `seconds` of `clock`, from its start to its successful finish.
fn run_alone(history: &mut ScalingHistory, clock: &HandClock, id: u32, seconds: f64) {
    let job = JobId(id);
    history.observe(&Record::Plan {
        plan: Plan::space_sharing(vec![Assignment {
            job,
            cpus: "0-1".parse().unwrap(),
        }]),
    });
    history.observe(&Record::Start {
        job,
        threads: 2,
        pid: None,
    });
    clock.advance(Duration::from_secs_f64(seconds));
    history.observe(&Record::Finish {
        job,
        status: ExitStatus::Ok,
        exit_code: Some(0),
        error: None,
    });
}

#[test]
fn a_users_next_job_of_the_same_command_arrives_with_its_time_alone_and_no_one_elses_does() {
    let topology = presets::machine("package:1 core:2").unwrap();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("scaling");
    let clock = HandClock::default();
    let mut history = clock.history(dir.clone(), topology.clone());
    assert_eq!(history.times_alone(1000, &command("a")), vec![]);
    history.follow(JobId(1), 1000, &command("a"));
    run_alone(&mut history, &clock, 1, 0.05);
    // Adopted after a restart: its run is not followed.
    run_alone(&mut history, &clock, 2, 0.05);

    // A later daemon reads what this one saved.
    let mut later = ScalingHistory::new(dir.clone(), topology);
    let known = later.times_alone(1000, &command("a"));
    let [(2, seconds)] = known.as_slice() else {
        panic!("its run alone on both CPUs, got {known:?}");
    };
    assert!((seconds - 0.05).abs() < 1e-9, "{seconds} s");
    assert_eq!(later.times_alone(1001, &command("a")), vec![]);
    assert_eq!(later.times_alone(1000, &command("b")), vec![]);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, vec!["1000.json"]);
}

#[test]
fn a_store_keeps_the_most_recently_run_programs_and_no_long_command_line() {
    let topology = presets::machine("package:1 core:2").unwrap();
    let state = tempfile::tempdir().unwrap();
    let clock = HandClock::default();
    let mut history = clock.history(state.path().join("scaling"), topology);
    for id in 0..=PROGRAMS_PER_USER as u32 {
        history.follow(JobId(id), 7, &command(&format!("p{id}")));
        run_alone(&mut history, &clock, id, 0.001);
    }
    // The first program runs again: it becomes the newest, the second the oldest.
    let again = PROGRAMS_PER_USER as u32 + 1;
    history.follow(JobId(again), 7, &command("p0"));
    run_alone(&mut history, &clock, again, 0.001);
    let long = vec!["x".repeat(MAX_COMMAND_BYTES)];
    history.follow(JobId(again + 1), 7, &long);
    run_alone(&mut history, &clock, again + 1, 0.001);

    assert!(!history.times_alone(7, &command("p0")).is_empty());
    assert!(history.times_alone(7, &command("p1")).is_empty());
    assert!(!history.times_alone(7, &command("p2")).is_empty());
    assert!(history.times_alone(7, &long).is_empty());
    assert_eq!(history.stores[&7].scaling.len(), PROGRAMS_PER_USER);
}

#[test]
fn stores_are_written_at_most_once_per_save_interval_and_when_the_history_is_dropped() {
    let topology = presets::machine("package:1 core:2").unwrap();
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("scaling");
    let on_disk = |program: &str| {
        ScalingHistory::new(dir.clone(), topology.clone()).times_alone(1000, &command(program))
    };
    let clock = HandClock::default();
    let mut history = clock.history(dir.clone(), topology.clone());
    let within_interval = SAVE_INTERVAL.as_secs_f64() / 4.0;

    history.follow(JobId(1), 1000, &command("a"));
    run_alone(&mut history, &clock, 1, within_interval);
    assert!(!on_disk("a").is_empty(), "the first end is written at once");

    history.follow(JobId(2), 1000, &command("b"));
    run_alone(&mut history, &clock, 2, within_interval);
    assert!(on_disk("b").is_empty(), "written again within the interval");

    history.follow(JobId(3), 1000, &command("c"));
    run_alone(&mut history, &clock, 3, SAVE_INTERVAL.as_secs_f64());
    assert!(
        !on_disk("b").is_empty(),
        "held back after the interval passed"
    );
    assert!(!on_disk("c").is_empty());

    history.follow(JobId(4), 1000, &command("d"));
    run_alone(&mut history, &clock, 4, within_interval);
    assert!(on_disk("d").is_empty());
    drop(history);
    assert!(
        !on_disk("d").is_empty(),
        "not written when the history was dropped"
    );
}
