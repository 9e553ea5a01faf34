//! How the daemon's jobs scaled, kept for their programs' next runs: a job's spells alone on its CPUs
//! at each width (`cosched_core::scaling`) are remembered when it ends, and a later job of the same
//! user with the same command line arrives with its times alone at those widths (`times_alone`), as
//! `cosched run` does from the store beside a workload.
//!
//! One store per user, `<state>/scaling/<uid>.json` (the format of `cosched_linux::IsolatedTimes`),
//! written by the daemon into its own directory: never into a user's files, and one user's runs never
//! inform another's jobs (the same command line runs another program under another user's `PATH`).
//! Each store keeps the most recently run `PROGRAMS_PER_USER` command lines, none longer than
//! `MAX_COMMAND_BYTES`, so that no user can grow it without bound.

use cosched_core::scaling::RunTracker;
use cosched_core::trace::Record;
use cosched_core::{JobId, Topology};
use cosched_linux::IsolatedTimes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Command lines remembered per user.
const PROGRAMS_PER_USER: usize = 64;

/// A longer command line (arguments and all) is not remembered.
const MAX_COMMAND_BYTES: usize = 4096;

/// The least time between two writes of the stores: the executor's thread, which runs at real-time
/// priority, writes them, and thousands of short jobs ending within seconds must not keep it busy.
const SAVE_INTERVAL: Duration = Duration::from_secs(1);

/// Time since the history began: the monotonic clock in the daemon; in tests, one they move by hand,
/// since how long a job ran alone is what the history records.
type Clock = Box<dyn Fn() -> Duration + Send>;

pub struct ScalingHistory {
    dir: PathBuf,
    topology: Topology,
    /// The clock the tracker's records and the saves are placed on.
    clock: Clock,
    tracker: RunTracker,
    /// Jobs whose runs are remembered: whose they are and what they run.
    followed: BTreeMap<JobId, (u32, Vec<String>)>,
    /// Users' stores read so far.
    stores: BTreeMap<u32, IsolatedTimes>,
    /// Users whose stores changed since they were last written, and when the stores were.
    unsaved: BTreeSet<u32>,
    saved_at: Option<Duration>,
}

impl ScalingHistory {
    /// The history kept in `dir` (created on the first save) for jobs on `topology`.
    pub fn new(dir: PathBuf, topology: Topology) -> ScalingHistory {
        let started = Instant::now();
        ScalingHistory::with_clock(dir, topology, Box::new(move || started.elapsed()))
    }

    fn with_clock(dir: PathBuf, topology: Topology, clock: Clock) -> ScalingHistory {
        ScalingHistory {
            dir,
            topology,
            clock,
            tracker: RunTracker::default(),
            followed: BTreeMap::new(),
            stores: BTreeMap::new(),
            unsaved: BTreeSet::new(),
            saved_at: None,
        }
    }

    /// Seconds alone on `k` CPUs, as `(k, seconds)` by width, that past runs of `command` by `uid`
    /// measured here.
    pub fn times_alone(&mut self, uid: u32, command: &[String]) -> Vec<(u32, f64)> {
        let topology = self.topology.clone();
        self.store(uid).times_alone(&topology, command)
    }

    /// Remembers how job `id`, which the daemon starts now for `uid`, scales once it ends. Jobs
    /// adopted after a restart are not followed: their spells would miss the part run before.
    pub fn follow(&mut self, id: JobId, uid: u32, command: &[String]) {
        let bytes: usize = command.iter().map(|a| a.len() + 1).sum();
        if bytes <= MAX_COMMAND_BYTES {
            self.followed.insert(id, (uid, command.to_vec()));
        }
    }

    /// Takes in a record of the executor's trace; at a followed job's end, saves what it showed.
    pub fn observe(&mut self, record: &Record) {
        let now = (self.clock)();
        let Some((id, run)) = self.tracker.observe(now.as_secs_f64(), record) else {
            return;
        };
        let Some((uid, command)) = self.followed.remove(&id) else {
            return;
        };
        if !run.informative() {
            return;
        }
        let topology = self.topology.clone();
        let store = self.store(uid);
        store.remember_scaling(&topology, &command, run, PROGRAMS_PER_USER);
        self.unsaved.insert(uid);
        if self
            .saved_at
            .is_none_or(|at| now.saturating_sub(at) >= SAVE_INTERVAL)
        {
            self.save(now);
        }
    }

    /// Writes the stores that changed since they were last written.
    fn save(&mut self, now: Duration) {
        self.saved_at = Some(now);
        for uid in std::mem::take(&mut self.unsaved) {
            let saved = std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))
                .and_then(|()| {
                    let path = self.path(uid);
                    let store = &self.stores[&uid];
                    store.save(&path).map_err(|e| e.to_string())
                });
            if let Err(e) = saved {
                eprintln!("cosched daemon: how uid {uid}'s jobs scaled is not remembered: {e}");
            }
        }
    }

    fn path(&self, uid: u32) -> PathBuf {
        self.dir.join(format!("{uid}.json"))
    }

    /// The user's store, read on first use; an unreadable one is started afresh.
    fn store(&mut self, uid: u32) -> &mut IsolatedTimes {
        let path = self.path(uid);
        self.stores.entry(uid).or_insert_with(|| {
            IsolatedTimes::load(&path).unwrap_or_else(|e| {
                eprintln!("cosched daemon: {e}; its scaling history starts afresh");
                IsolatedTimes::default()
            })
        })
    }
}

/// What changed since the last write is written when the daemon stops.
impl Drop for ScalingHistory {
    fn drop(&mut self) {
        let now = (self.clock)();
        self.save(now);
    }
}

#[cfg(test)]
mod tests;
