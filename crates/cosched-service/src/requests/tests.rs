use super::*;
use crate::config::DaemonConfig;
use crate::journal::Journal;
use crate::protocol::Submission;
use std::sync::mpsc;
use std::time::Duration;

/// Long enough that only a request stuck behind the journal misses it.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

fn shared(dir: &std::path::Path) -> Shared {
    let (journal, _) = Journal::open(&dir.join("journal.jsonl"), &Default::default()).unwrap();
    let registry = Registry::new("eq".into(), 0, Default::default());
    Shared::new(registry, journal, dir.join("logs"), DaemonConfig::default())
}

/// The user the daemon runs as, whom it serves whether or not it is root.
fn peer(shared: &Shared) -> Peer {
    Peer {
        pid: std::process::id() as i32,
        uid: shared.daemon_uid(),
        gid: 0,
    }
}

fn submit(shared: &Shared) -> Reply {
    let request = Request::Submit(Submission::of("/bin/true"));
    handle(shared, request, peer(shared))
}

fn listed(reply: Reply) -> Vec<u64> {
    match reply {
        Reply::Jobs { jobs } => jobs.iter().map(|j| j.id).collect(),
        other => panic!("`jobs` answered {other:?}"),
    }
}

#[test]
fn a_cancel_of_many_queued_jobs_makes_one_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let ids: Vec<u64> = (0..50)
        .map(|_| match submit(&shared) {
            Reply::Submitted { id } => id,
            other => panic!("{other:?}"),
        })
        .collect();
    let before = shared.journal().fsyncs();
    let reply = handle(&shared, Request::Cancel { ids: ids.clone() }, peer(&shared));
    assert!(matches!(reply, Reply::Cancelled { .. }), "{reply:?}");
    // A cancelled and a finished entry for each job, all made durable together.
    assert_eq!(shared.journal().fsyncs() - before, 1);
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 50 * 3);
}

/// Waits until the journal holds `lines` entries (appended, not necessarily durable), without the
/// registry, which a request stuck behind the disk would hold.
fn wait_for_entries(dir: &std::path::Path, lines: usize) {
    let journal = dir.join("journal.jsonl");
    let appended = || std::fs::read_to_string(&journal).unwrap().lines().count() >= lines;
    assert!(
        cosched_core::test_util::wait::until(ANSWER_WITHIN, appended),
        "never appended"
    );
}

#[test]
fn listing_jobs_is_answered_while_a_submission_waits_on_a_hanging_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let hung = shared.journal().hang_syncs();
    std::thread::scope(|scope| {
        let (submitted_tx, submitted) = mpsc::channel();
        let shared = &shared;
        scope.spawn(move || submitted_tx.send(submit(shared)).unwrap());
        wait_for_entries(dir.path(), 1);
        let (listed_tx, listing) = mpsc::channel();
        scope.spawn(move || {
            let request = Request::Jobs {
                all: true,
                filter: Default::default(),
            };
            listed_tx
                .send(handle(shared, request, peer(shared)))
                .unwrap()
        });
        let listed_meanwhile = listing.recv_timeout(ANSWER_WITHIN);
        let acknowledged_meanwhile = submitted.try_recv().is_ok();
        // The disk comes back before any assertion, so that a failing one does not hang the test.
        drop(hung);
        let listed_meanwhile =
            listed_meanwhile.expect("`jobs` waited for the fsync: the registry was held meanwhile");
        assert_eq!(listed(listed_meanwhile), [0]);
        assert!(
            !acknowledged_meanwhile,
            "the submission was acknowledged before it was durable"
        );
        let reply = submitted.recv_timeout(ANSWER_WITHIN).unwrap();
        assert!(matches!(reply, Reply::Submitted { id: 0 }), "{reply:?}");
    });
}

#[test]
fn submissions_waiting_on_one_hanging_fsync_share_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    let hung = shared.journal().hang_syncs();
    let before = shared.journal().fsyncs();
    std::thread::scope(|scope| {
        let (tx, answers) = mpsc::channel();
        for _ in 0..8 {
            let (shared, tx) = (&shared, tx.clone());
            scope.spawn(move || tx.send(submit(shared)).unwrap());
        }
        // All eight appended before the disk comes back.
        wait_for_entries(dir.path(), 8);
        drop(hung);
        for _ in 0..8 {
            let reply = answers.recv_timeout(ANSWER_WITHIN).unwrap();
            assert!(matches!(reply, Reply::Submitted { .. }), "{reply:?}");
        }
    });
    assert_eq!(
        shared.journal().fsyncs() - before,
        1,
        "one fsync covers all"
    );
}

#[test]
fn another_user_sees_nothing_a_private_jobs_request_chose_but_its_owner_does() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    if shared.daemon_uid() != 0 {
        eprintln!("SKIPPED: only a root daemon serves two users");
        return;
    }
    let (alice, mallory) = (
        Peer {
            uid: 1000,
            ..peer(&shared)
        },
        Peer {
            uid: 1001,
            ..peer(&shared)
        },
    );
    let mut submission = Submission::of("/home/alice/secret-solver");
    submission.name = "secret-solver".into();
    submission.cwd = "/home/alice/secret-project".into();
    submission.output = Some("out-%j".into());
    let id = match handle(&shared, Request::Submit(submission), alice) {
        Reply::Submitted { id } => id,
        other => panic!("{other:?}"),
    };
    let error = "cannot start /home/alice/secret-solver: No such file or directory";
    shared.record(|registry| {
        let ending = crate::registry::Ending {
            t: Some(1.0),
            error: Some(error.into()),
            ..Default::default()
        };
        (vec![registry.finished_entry(id, ending)], ())
    });
    let jobs = |peer: Peer, names: &[&str]| {
        let filter = JobFilter {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        };
        handle(&shared, Request::Jobs { all: true, filter }, peer)
    };
    let listing = |peer: Peer, names: &[&str]| serde_json::to_string(&jobs(peer, names)).unwrap();
    let shown = |peer: Peer| serde_json::to_string(&handle(&shared, Request::Show { id }, peer));
    for seen in [listing(mallory, &[]), shown(mallory).unwrap()] {
        assert!(!seen.contains("secret"), "{seen}");
        assert!(seen.contains(r#""name":"private""#), "{seen}");
    }
    // Nor does a filter by the real name find it.
    assert_eq!(listed(jobs(mallory, &["secret-solver"])), [] as [u64; 0]);
    assert_eq!(listed(jobs(mallory, &["private"])), [id]);
    for peer in [alice, peer(&shared)] {
        for seen in [listing(peer, &["secret-solver"]), shown(peer).unwrap()] {
            assert!(seen.contains("/home/alice/secret-project/out-0"), "{seen}");
            assert!(seen.contains(error), "{seen}");
        }
    }
}
