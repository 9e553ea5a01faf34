//! A job that truncates, grows or unlinks its control page leaves the daemon serving.

use crate::common::*;
use cosched_service::protocol::JobState;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// The files in /dev/shm whose name starts with `prefix`.
fn shm_files(prefix: &str) -> Vec<String> {
    let entries = std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten();
    let names = entries.map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|name| name.starts_with(prefix)).collect()
}

#[test]
fn a_job_that_resizes_or_replaces_its_page_leaves_the_daemon_serving() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut daemon = start_daemon(dir.path(), "eq", "");
    // Each lives past a sample, so that the daemon reads its page after the attack.
    let attacks = [
        "truncate -s 0 \"$COSCHED_CONTROL\"; sleep 1.5",
        "truncate -s 1M \"$COSCHED_CONTROL\"; sleep 1.5",
        "rm -f \"$COSCHED_CONTROL\"; printf x > \"$COSCHED_CONTROL\"; sleep 1.5",
    ];
    let ids: Vec<u64> = (attacks.iter())
        .map(|attack| submit_script_as(MALLORY, &daemon, dir.path(), attack))
        .collect();
    let ended = daemon.wait(ids).unwrap();
    assert!(ended.iter().all(|job| job.state.ended()), "{ended:?}");
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "the daemon died"
    );
    assert_serving(ALICE, &daemon, dir.path());
    daemon.stop().unwrap();
}

#[test]
fn a_restarted_daemon_outlives_a_job_that_attacks_every_page_and_leaves_none() {
    let _serial = one_at_a_time();
    let Some(dir) = dir_for_two_users() else {
        return;
    };
    let mut first = start_daemon(dir.path(), "eq", "");
    // Its own page, then every page in /dev/shm it can reach, again and again.
    let attack = "while :; do truncate -s 0 \"$COSCHED_CONTROL\" /dev/shm/cosched-* 2>/dev/null; \
                  sleep 0.05; done";
    let id = submit_script_as(MALLORY, &first, dir.path(), attack);
    assert!(runs_within(&first, id, LIMIT), "{:?}", show(&first, id));
    let prefix = format!("cosched-{}-", first.pid());
    first.kill();
    // What a daemon that kept its pages in /dev/shm would have left there.
    let left = std::path::Path::new("/dev/shm").join(format!("{prefix}0-0-00112233aabbccdd"));
    std::fs::write(&left, [0u8; 4096]).unwrap();
    let mut successor = start_daemon(dir.path(), "eq", "");
    let remaining = shm_files(&prefix);
    assert!(
        remaining.is_empty(),
        "pages left in /dev/shm: {remaining:?}"
    );
    // Running again, under the successor's executor, with whatever page it was handed.
    let adopted = wait::until(LIMIT, || {
        let job = show(&successor, id);
        job.adopted && job.state == JobState::Running
    });
    assert!(adopted, "{:?}", show(&successor, id));
    assert_serving(ALICE, &successor, dir.path());
    assert!(
        successor.child.try_wait().unwrap().is_none(),
        "the daemon died"
    );
    successor.cancel(&[id]).unwrap();
    assert_eq!(show(&successor, id).state, JobState::Cancelled);
    successor.stop().unwrap();
}
