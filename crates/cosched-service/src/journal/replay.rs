//! Reading the journal back: every job's last state, in one pass with an index by id, so that a
//! restart takes time linear in the journal's length. A line that does not read (corrupt, not UTF-8)
//! is skipped, and a last line a crash left half written is cut off; both are counted and reported,
//! never a reason to refuse to start.

use super::entry::NewJob;
use super::Entry;
use crate::config;
use crate::protocol::{JobState, JobView, Submission};
use cosched_linux::Adopt;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Unreadable lines reported one by one; the rest are only counted.
const REPORTED: usize = 10;

/// A job as the journal left it, with what is needed to run or adopt it again.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub view: JobView,
    pub gid: u32,
    /// Without its environment once the job has ended: it never runs again.
    pub submission: Submission,
    pub start_ticks: Option<u64>,
    /// The process of an attached job, to adopt again instead of starting anything.
    pub attached: Option<Adopt>,
    /// The further tasks that joined it.
    pub joined: Vec<Adopt>,
    /// Its end is journaled (a cancelled job's end may not be yet).
    pub ended: bool,
}

/// What replaying a journal gives back.
#[derive(Debug, Default)]
pub struct History {
    /// By id.
    pub jobs: Vec<Replayed>,
    /// The last policy it names, and who set it.
    pub policy: Option<String>,
    pub policy_uid: u32,
    /// The id the next job gets: past every id the journal gave, forgotten jobs' included.
    pub next_id: u64,
    /// Entries read.
    pub entries: usize,
    /// Lines skipped because they did not read.
    pub unreadable: usize,
    /// Bytes of a last line left half written, cut off.
    pub torn_bytes: usize,
}

impl History {
    /// Forgets the jobs whose end was journaled more than `keep`'s retention before `now` (Unix
    /// seconds; a job that ended while no daemon watched counts from its submission), and each
    /// user's oldest ended jobs past `keep`'s bounds (root's excepted); how many.
    pub fn forget(&mut self, keep: &config::History, now: f64) -> usize {
        let cutoff = now - keep.retention_seconds;
        let before = self.jobs.len();
        // Newest first, each user's ended jobs counted against their bounds.
        let mut kept: HashMap<u32, (usize, u64)> = HashMap::new();
        let mut forget = vec![false; self.jobs.len()];
        for (job, forget) in self.jobs.iter().zip(&mut forget).rev() {
            let view = &job.view;
            if !job.ended {
                continue;
            }
            if view.finished.unwrap_or(view.submitted) < cutoff {
                *forget = true;
                continue;
            }
            if view.uid == 0 {
                continue;
            }
            let (jobs, bytes) = kept.entry(view.uid).or_default();
            *jobs += 1;
            *bytes += view.footprint();
            *forget = *jobs > keep.jobs_per_user || *bytes > keep.bytes_per_user;
        }
        let mut forget = forget.into_iter();
        self.jobs
            .retain(|_| !forget.next().expect("one flag per job"));
        before - self.jobs.len()
    }
}

/// Replays the journal at `path`; a missing file is an empty history.
pub fn read(path: &Path) -> io::Result<History> {
    match File::open(path) {
        Ok(file) => read_from(BufReader::with_capacity(1 << 16, file), path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(History::default()),
        Err(e) => Err(e),
    }
}

/// Replays the first `bytes` of the journal at `path` (whole lines: what was appended until then).
pub fn read_prefix(path: &Path, bytes: u64) -> io::Result<History> {
    let file = File::open(path)?.take(bytes);
    read_from(BufReader::with_capacity(1 << 16, file), path)
}

/// Replays the journal `reader` reads; `path` names it in messages.
pub(super) fn read_from(mut reader: impl BufRead, path: &Path) -> io::Result<History> {
    let mut replay = Replay::default();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        // Every entry is written with its newline in one write and fsynced before it counts: a last
        // line without one was never acknowledged.
        if line.last() != Some(&b'\n') {
            replay.history.torn_bytes = read;
            break;
        }
        match serde_json::from_slice::<Entry>(&line) {
            Ok(entry) => {
                replay.history.entries += 1;
                replay.apply(entry);
            }
            Err(e) => {
                replay.history.unreadable += 1;
                if replay.history.unreadable <= REPORTED {
                    eprintln!(
                        "cosched: {}:{number}: skipping an unreadable entry ({e})",
                        path.display()
                    );
                }
            }
        }
    }
    Ok(replay.history)
}

#[derive(Default)]
struct Replay {
    history: History,
    /// Where each id is in `history.jobs`.
    index: HashMap<u64, usize>,
}

impl Replay {
    fn apply(&mut self, entry: Entry) {
        match entry {
            Entry::Policy { name, uid, .. } => {
                self.history.policy = Some(name);
                self.history.policy_uid = uid;
            }
            Entry::Compacted { next_id, .. } => {
                self.history.next_id = self.history.next_id.max(next_id);
            }
            Entry::Submitted { .. } | Entry::Attached { .. } => self.add(entry),
            _ => {
                let at = entry.job().and_then(|id| self.index.get(&id));
                if let Some(&at) = at {
                    update(&mut self.history.jobs[at], entry);
                }
            }
        }
    }

    fn add(&mut self, entry: Entry) {
        let Some(NewJob {
            view,
            gid,
            submission,
            process: attached,
        }) = entry.into_new_job()
        else {
            return;
        };
        let id = view.id;
        self.history.next_id = self.history.next_id.max(id + 1);
        if self.index.contains_key(&id) {
            return;
        }
        self.index.insert(id, self.history.jobs.len());
        self.history.jobs.push(Replayed {
            view,
            gid,
            submission,
            start_ticks: attached.map(|a| a.start_ticks),
            attached,
            joined: Vec::new(),
            ended: false,
        });
    }
}

/// Applies an entry about an existing job: its view changes as the live registry's does
/// ([`Entry::change`]); what replay keeps beside the view (to adopt the job again, to compact it)
/// follows.
fn update(job: &mut Replayed, entry: Entry) {
    entry.change(&mut job.view);
    match entry {
        Entry::Started { start_ticks, .. } => job.start_ticks = Some(start_ticks),
        Entry::Joined {
            pid, start_ticks, ..
        } => {
            if let Some(main) = job.attached {
                job.joined.push(Adopt {
                    pid: pid as i32,
                    start_ticks,
                    ..main
                });
            }
        }
        Entry::Finished { .. } => {
            job.ended = true;
            job.submission.env = BTreeMap::new();
        }
        Entry::Held { held, .. } => job.submission.hold = held,
        _ => {}
    }
}

impl Replayed {
    /// The fewest entries whose replay gives back this job as it is.
    pub fn entries(&self) -> Vec<Entry> {
        let view = &self.view;
        let id = view.id;
        let mut entries = vec![match self.attached {
            Some(process) => Entry::Attached {
                id,
                t: view.submitted,
                uid: view.uid,
                gid: self.gid,
                submission: self.submission.clone(),
                pid: process.pid as u32,
                start_ticks: process.start_ticks,
                in_place: process.in_place,
            },
            None => Entry::Submitted {
                id,
                t: view.submitted,
                uid: view.uid,
                gid: self.gid,
                submission: self.submission.clone(),
                stdout: view.stdout.clone(),
                stderr: view.stderr.clone(),
            },
        }];
        if let (Some(t), Some(pid)) = (view.started, view.pid) {
            entries.push(Entry::Started {
                id,
                t,
                pid,
                start_ticks: self.start_ticks.unwrap_or(0),
                threads: view.threads.unwrap_or(1),
                adopted: view.adopted,
            });
        }
        entries.extend(self.joined.iter().map(|task| Entry::Joined {
            id,
            t: view.submitted,
            pid: task.pid as u32,
            start_ticks: task.start_ticks,
        }));
        if let Some(cpus) = &view.cpus {
            entries.push(Entry::Placed {
                id,
                t: view.submitted,
                cpus: cpus.clone(),
            });
        }
        match view.state {
            JobState::Cancelled => entries.push(Entry::Cancelled {
                id,
                t: view.submitted,
            }),
            JobState::Timeout => entries.push(Entry::TimedOut {
                id,
                t: view.submitted,
            }),
            _ => {}
        }
        if self.ended {
            entries.push(Entry::Finished {
                id,
                t: view.finished,
                ok: view.state == JobState::Done,
                exit_code: view.exit_code,
                signal: view.signal,
                error: view.error.clone(),
                oom: view.state == JobState::Oom,
                accounting: view.accounting.clone(),
            });
        }
        entries
    }
}
