//! The journal against a full file system (the appender's fault seam) and against whatever bytes a
//! crash, a bad disk or a hostile edit may leave in it.

use super::replay::{self, History};
use super::{Entry, Journal};
use crate::config;
use crate::error::ServiceError;
use crate::protocol::Submission;
use proptest::prelude::*;
use std::path::Path;

const FOREVER: config::History = config::History {
    retention_seconds: f64::INFINITY,
    jobs_per_user: usize::MAX,
    bytes_per_user: u64::MAX,
};

fn submitted(id: u64, command: &str) -> Entry {
    Entry::Submitted {
        id,
        t: 1.0,
        uid: 1000,
        gid: 1000,
        submission: Submission::of(command),
        stdout: "o".into(),
        stderr: "e".into(),
    }
}

fn ids(history: &History) -> Vec<u64> {
    history.jobs.iter().map(|j| j.view.id).collect()
}

fn line(entry: &Entry) -> Vec<u8> {
    let mut line = serde_json::to_vec(entry).unwrap();
    line.push(b'\n');
    line
}

#[test]
fn an_append_that_fails_part_way_is_cut_back_and_the_next_entry_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (journal, _) = Journal::open(&path, &FOREVER).unwrap();
    journal.write(&submitted(1, "/bin/true")).unwrap();
    let before = std::fs::read(&path).unwrap();
    // Room for part of the next entry only, as a file system filling up leaves.
    journal.fail_at(Some(before.len() as u64 + 20));
    let refused = journal.write(&submitted(2, "/bin/true")).unwrap_err();
    assert!(
        matches!(refused, ServiceError::JournalFull { .. }),
        "{refused}"
    );
    let message = refused.to_string();
    assert!(message.contains("is full"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "torn bytes left");
    // Space comes back: the next entry is a line of its own.
    journal.fail_at(None);
    journal.write(&submitted(2, "/bin/sleep")).unwrap();
    drop(journal);
    let (_, history) = Journal::open(&path, &FOREVER).unwrap();
    assert_eq!(ids(&history), [1, 2]);
    assert_eq!(history.jobs[1].view.command, ["/bin/sleep"]);
    assert_eq!((history.unreadable, history.next_id), (0, 3));
}

#[test]
fn a_torn_tail_is_cut_in_place_and_the_next_entry_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let whole = line(&submitted(1, "a"));
    let mut bytes = whole.clone();
    bytes.extend_from_slice(&line(&submitted(2, "b"))[..30]);
    std::fs::write(&path, &bytes).unwrap();
    let (journal, history) = Journal::open(&path, &FOREVER).unwrap();
    assert_eq!(ids(&history), [1]);
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    journal.write(&submitted(2, "c")).unwrap();
    drop(journal);
    assert_eq!(ids(&replay::read(&path).unwrap()), [1, 2]);
}

/// A journal: entries about jobs, each whole line possibly followed by a line of garbage (no
/// newline inside: a corrupt line, as a bad disk leaves).
fn journal_bytes() -> impl Strategy<Value = (Vec<u8>, Vec<(usize, u64)>)> {
    let garbage = proptest::collection::vec(
        any::<u8>().prop_filter("no newline", |b| *b != b'\n'),
        0..40,
    );
    let step = (0u8..4, proptest::option::of(garbage));
    proptest::collection::vec(step, 1..24).prop_map(|steps| {
        let mut bytes = Vec::new();
        // Where each submission's line ends, and its id.
        let mut ends = Vec::new();
        let mut next = 1;
        for (kind, garbage) in steps {
            let entry = match kind {
                0 | 1 => {
                    next += 1;
                    submitted(next - 1, &"x".repeat(kind as usize * 5 + 1))
                }
                2 => Entry::Cancelled {
                    id: next / 2,
                    t: 2.0,
                },
                _ => Entry::Compacted {
                    t: 3.0,
                    next_id: next,
                },
            };
            bytes.extend(line(&entry));
            if let Entry::Submitted { id, .. } = entry {
                ends.push((bytes.len(), id));
            }
            if let Some(mut garbage) = garbage {
                garbage.push(b'\n');
                bytes.extend(garbage);
            }
        }
        (bytes, ends)
    })
}

fn replay_bytes(bytes: &[u8]) -> History {
    replay::read_from(bytes, Path::new("journal")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn replaying_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let history = replay_bytes(&bytes);
        prop_assert!(history.entries + history.unreadable <= bytes.len());
    }

    /// Cut anywhere (a crash mid-write): every submission whose line is whole is replayed, and the
    /// next id is past every id the whole lines gave.
    #[test]
    fn every_whole_entry_survives_a_cut_at_any_byte((bytes, ends) in journal_bytes()) {
        for cut in 0..=bytes.len() {
            let history = replay_bytes(&bytes[..cut]);
            let whole: Vec<u64> = ends.iter().filter(|(end, _)| *end <= cut).map(|(_, id)| *id).collect();
            prop_assert_eq!(ids(&history), whole.clone(), "cut at {}", cut);
            if let Some(last) = whole.last() {
                prop_assert!(history.next_id > *last, "cut at {}: next id {}", cut, history.next_id);
            }
        }
    }

    /// Opened by a daemon (torn tail cut, garbage compacted away) and appended to, the journal
    /// keeps every whole submission and never gives an id twice.
    #[test]
    fn a_journal_opened_after_a_cut_keeps_its_entries_and_never_reuses_an_id(
        (bytes, ends) in journal_bytes(),
        cut in any::<prop::sample::Index>(),
    ) {
        let cut = cut.index(bytes.len() + 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let (journal, history) = Journal::open(&path, &FOREVER).unwrap();
        let whole: Vec<u64> = ends.iter().filter(|(end, _)| *end <= cut).map(|(_, id)| *id).collect();
        prop_assert_eq!(ids(&history), whole.clone());
        let fresh = history.next_id;
        prop_assert!(whole.iter().all(|id| *id < fresh));
        journal.write(&submitted(fresh, "new")).unwrap();
        drop(journal);
        let again = replay::read(&path).unwrap();
        let mut expected = whole;
        expected.push(fresh);
        prop_assert_eq!(ids(&again), expected);
        prop_assert_eq!((again.unreadable, again.torn_bytes, again.next_id), (0, 0, fresh + 1));
    }
}

#[test]
fn a_restart_keeps_each_users_newest_ended_jobs_within_the_bounds_and_the_ids_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut bytes = Vec::new();
    for id in 1..=5 {
        bytes.extend(line(&submitted(id, "/bin/true")));
        let end = Entry::Finished {
            id,
            t: Some(crate::protocol::now_unix()),
            ok: true,
            exit_code: Some(0),
            signal: None,
            error: None,
            oom: false,
            accounting: None,
        };
        bytes.extend(line(&end));
    }
    std::fs::write(&path, &bytes).unwrap();
    let keep = config::History {
        jobs_per_user: 2,
        ..config::History::default()
    };
    let (_, history) = Journal::open(&path, &keep).unwrap();
    assert_eq!(ids(&history), [4, 5]);
    let again = replay::read(&path).unwrap();
    assert_eq!((ids(&again), again.next_id), (vec![4, 5], 6));
}
