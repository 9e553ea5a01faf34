//! The store of isolated times: each job alone on the whole machine, the denominator of slowdown and
//! NTT (TACO §4, CaSAS eq. 1). `cosched calibrate` measures them ([`crate::calibrate`]); `cosched run`
//! writes them into the trace.
//!
//! They are stored as JSON next to the workload file (`<name>.isolated.json`, see
//! [`IsolatedTimes::default_path`]), one entry per machine (topology name and CPU count) and job (name and
//! command line, so that an edited command is not matched with an old time).

use crate::Error;
use cosched_core::workload::JobEntry;
use cosched_core::Topology;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IsolatedTimes {
    pub entries: Vec<IsolatedTime>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolatedTime {
    pub machine: String,
    pub cpus: usize,
    pub job: String,
    pub command: Vec<String>,
    /// Thread count it ran with.
    pub threads: u32,
    /// Seconds from start to finish.
    pub seconds: f64,
}

impl IsolatedTimes {
    /// `dir/name.isolated.json` for the workload file `dir/name.toml`.
    pub fn default_path(workload_file: &Path) -> PathBuf {
        workload_file.with_extension("isolated.json")
    }

    /// Reads a file written by [`IsolatedTimes::save`]; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<IsolatedTimes, Error> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                Error::Calibration(format!(
                    "{}: {e}; delete it and run `cosched calibrate` again",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(IsolatedTimes::default()),
            Err(source) => Err(Error::Io {
                what: format!("cannot read {}", path.display()),
                source,
            }),
        }
    }

    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self).expect("isolated times always serialise");
        std::fs::write(path, text + "\n").map_err(|source| Error::Io {
            what: format!("cannot write {}", path.display()),
            source,
        })
    }

    pub fn lookup(&self, topology: &Topology, job: &JobEntry) -> Option<f64> {
        self.entries
            .iter()
            .find(|e| e.matches(topology, job))
            .map(|e| e.seconds)
    }

    /// Adds the time of every job that succeeded in `results`; returns how many failed.
    pub fn record(&mut self, results: Vec<Calibrated>) -> usize {
        let mut failed = 0;
        for result in results {
            match result {
                Calibrated::Time(time) => self.insert(time),
                Calibrated::Failed { .. } => failed += 1,
            }
        }
        failed
    }

    /// Adds an entry, replacing the one for the same machine and job.
    pub fn insert(&mut self, time: IsolatedTime) {
        self.entries.retain(|e| {
            (&e.machine, e.cpus, &e.job, &e.command)
                != (&time.machine, time.cpus, &time.job, &time.command)
        });
        self.entries.push(time);
    }
}

impl IsolatedTime {
    fn matches(&self, topology: &Topology, job: &JobEntry) -> bool {
        self.machine == topology.name
            && self.cpus == topology.num_cpus()
            && self.job == job.name
            && self.command == job.command
    }
}

/// One job's calibration result.
#[derive(Debug, Clone, PartialEq)]
pub enum Calibrated {
    Time(IsolatedTime),
    /// The job failed alone; the message says how.
    Failed {
        job: String,
        error: String,
    },
}
