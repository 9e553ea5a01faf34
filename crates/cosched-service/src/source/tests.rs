use super::*;
use crate::config::DaemonConfig;
use crate::journal::Journal;
use crate::protocol::{Reply, Request, Submission};
use crate::registry::{Peer, Registry};
use cosched_core::test_util::wait;
use cosched_core::trace::ExitStatus;
use std::sync::mpsc;
use std::time::Duration;

/// Long enough that only a thread stuck behind the journal misses it.
const WITHIN: Duration = Duration::from_secs(20);

#[test]
fn the_executors_thread_reports_an_end_while_the_disk_hangs_and_it_is_made_durable_after() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) =
        Journal::open(&dir.path().join("journal.jsonl"), &Default::default()).unwrap();
    let registry = Registry::new("eq".into(), 0, Default::default());
    let logs = dir.path().join("logs");
    let shared = Arc::new(Shared::new(
        registry,
        journal,
        logs,
        DaemonConfig::default(),
    ));
    shared.start_syncing().unwrap();
    let peer = Peer {
        pid: std::process::id() as i32,
        uid: shared.daemon_uid(),
        gid: 0,
    };
    let request = Request::Submit(Submission::of("/bin/true"));
    let reply = crate::requests::handle(&shared, request, peer);
    assert!(matches!(reply, Reply::Submitted { id: 0 }), "{reply:?}");
    let mut source = DaemonSource {
        shared: shared.clone(),
        cpus: 1,
        as_submitter: false,
        history: ScalingHistory::new(
            dir.path().join("scaling"),
            cosched_core::topology::synthetic::parse("core:1").unwrap(),
        ),
    };
    assert_eq!(source.take_arrived(0.0).len(), 1);
    let hung = shared.journal().hang_syncs();
    let before = shared.journal().fsyncs();
    let (reported_tx, reported) = mpsc::channel();
    std::thread::spawn(move || {
        source.finished(JobOutcome {
            id: JobId(0),
            name: "true".into(),
            pid: Some(1),
            threads: 1,
            started: Some(0.0),
            finished: Some(0.1),
            status: ExitStatus::Ok,
            exit_code: Some(0),
            signal: None,
            error: None,
            cpu_seconds: 0.0,
            user_seconds: 0.0,
            system_seconds: 0.0,
            peak_memory: None,
            oom_killed: false,
            stdout: "o".into(),
            stderr: "e".into(),
        });
        reported_tx.send(()).unwrap();
    });
    let reported_meanwhile = reported.recv_timeout(WITHIN);
    drop(hung);
    reported_meanwhile.expect("the executor's thread waited for the hanging fsync");
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"finished\""), "appended at once");
    assert!(
        wait::until(WITHIN, || shared.journal().fsyncs() != before),
        "the end was never made durable"
    );
}
