//! The store of isolated times: each job alone on the whole machine, the denominator of slowdown and
//! NTT (TACO §4, CaSAS eq. 1). `cosched calibrate` measures them ([`crate::calibrate`]); `cosched run`
//! writes them into the trace.
//!
//! They are stored as JSON next to the workload file (`<name>.isolated.json`, see
//! [`IsolatedTimes::default_path`]), one entry per machine (topology name and CPU count) and job (name and
//! command line, so that an edited command is not matched with an old time).
//!
//! Beside the times, the store keeps what past runs observed about each program
//! ([`cosched_core::observe::Behaviour`]: follows advice, spins, threads it really runs), keyed by machine
//! and command line: [`IsolatedTimes::learn`] takes in a finished run's samples, and the executor
//! applies what is known to a job's spec on arrival ([`IsolatedTimes::behaviour`]), so that a job known
//! to ignore advice starts rigid instead of after a 2 s deadline. A daemon feeds it the same way: keep
//! an `Observer` per job from its samples, and at its finish call [`IsolatedTimes::remember`] with
//! `observer.job(id).behaviour()` and save.

use crate::Error;
use cosched_core::observe::{behaviours, Behaviour};
use cosched_core::trace::{Record, TraceLine};
use cosched_core::workload::JobEntry;
use cosched_core::{JobKind, Topology};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IsolatedTimes {
    pub entries: Vec<IsolatedTime>,
    /// Each job alone on one CPU of the same machine (`cosched calibrate --scaling`): with `entries`,
    /// how the job scales here, which the simulator fits (`docs/simulation-model.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_cpu: Vec<IsolatedTime>,
    /// What past runs showed about programs; absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub behaviour: Vec<ObservedProgram>,
}

/// What runs of one command line on one machine showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedProgram {
    pub machine: String,
    pub cpus: usize,
    pub command: Vec<String>,
    #[serde(flatten)]
    pub behaviour: Behaviour,
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
            Ok(text) => serde_json::from_str(&text).map_err(|source| Error::IsolatedTimes {
                path: path.to_path_buf(),
                source,
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
        self.entry(topology, job).map(|e| e.seconds)
    }

    /// The job's time alone on the whole machine, with the threads it ran.
    pub fn entry(&self, topology: &Topology, job: &JobEntry) -> Option<&IsolatedTime> {
        self.entries.iter().find(|e| e.matches(topology, job))
    }

    /// The job's time alone on one CPU of this machine with one thread, if it was measured.
    pub fn one_thread_seconds(&self, topology: &Topology, job: &JobEntry) -> Option<f64> {
        (self.one_cpu.iter())
            .find(|e| e.matches(topology, job))
            .filter(|one| one.threads == 1)
            .map(|one| one.seconds)
    }

    /// What past runs showed about this command line here, if any run tested anything.
    pub fn behaviour(&self, topology: &Topology, command: &[String]) -> Option<Behaviour> {
        self.behaviour
            .iter()
            .find(|p| {
                p.machine == topology.name && p.cpus == topology.num_cpus() && p.command == command
            })
            .map(|p| p.behaviour)
    }

    /// Merges one run's findings about a command line into what is known.
    pub fn remember(&mut self, topology: &Topology, command: &[String], found: Behaviour) {
        if found == Behaviour::default() {
            return;
        }
        match self
            .behaviour
            .iter_mut()
            .find(|p| p.is_for(topology, command))
        {
            Some(known) => known.behaviour.merge(found),
            None => self.behaviour.push(ObservedProgram {
                machine: topology.name.clone(),
                cpus: topology.num_cpus(),
                command: command.to_vec(),
                behaviour: found,
            }),
        }
    }

    /// Takes in what the samples of a finished run of `jobs` (job id = index) showed.
    pub fn learn(&mut self, topology: &Topology, jobs: &[JobEntry], trace: &[TraceLine]) {
        let samples = trace.iter().filter_map(|line| match &line.record {
            Record::Sample(s) => Some(s),
            _ => None,
        });
        for (id, mut found) in behaviours(samples) {
            let Some(entry) = jobs.get(id.0 as usize) else {
                continue;
            };
            // Only malleable jobs are advised at run time; others never read the advice.
            if entry.kind != JobKind::Malleable {
                found.follows_advice = None;
            }
            self.remember(topology, &entry.command, found);
        }
    }

    /// Adds the time of every job that succeeded in `results` (runs on the whole machine); returns
    /// how many failed.
    pub fn record(&mut self, results: Vec<Calibrated>) -> usize {
        record_into(&mut self.entries, results)
    }

    /// As [`IsolatedTimes::record`], for runs on one CPU.
    pub fn record_one_cpu(&mut self, results: Vec<Calibrated>) -> usize {
        record_into(&mut self.one_cpu, results)
    }

    /// Adds an entry, replacing the one for the same machine and job.
    pub fn insert(&mut self, time: IsolatedTime) {
        insert_into(&mut self.entries, time);
    }
}

fn record_into(list: &mut Vec<IsolatedTime>, results: Vec<Calibrated>) -> usize {
    let mut failed = 0;
    for result in results {
        match result {
            Calibrated::Time(time) => insert_into(list, time),
            Calibrated::Failed { .. } => failed += 1,
        }
    }
    failed
}

fn insert_into(list: &mut Vec<IsolatedTime>, time: IsolatedTime) {
    list.retain(|e| {
        (&e.machine, e.cpus, &e.job, &e.command)
            != (&time.machine, time.cpus, &time.job, &time.command)
    });
    list.push(time);
}

impl ObservedProgram {
    fn is_for(&self, topology: &Topology, command: &[String]) -> bool {
        self.machine == topology.name && self.cpus == topology.num_cpus() && self.command == command
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

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::event::{RateSource, Sample};
    use cosched_core::topology::presets;
    use cosched_core::workload::Workload;
    use cosched_core::JobId;

    fn stuck_second(job: u32) -> TraceLine {
        TraceLine {
            t: 0.0,
            record: Record::Sample(Sample {
                os_threads: Some(2),
                team_size: Some(2),
                regions_started: Some(0),
                advice_seen: Some(false),
                ..Sample::new(JobId(job), 0.0, RateSource::ControlPage, 1, 1.0, 1.0)
            }),
        }
    }

    #[test]
    fn a_run_teaches_the_store_what_the_next_run_of_the_same_command_starts_with() {
        let topology = presets::machine("package:1 core:2").unwrap();
        let workload = Workload::parse(
            "[workload]\nname = \"w\"\n[[job]]\nname = \"a\"\ncommand = [\"x\", \"1\"]\n\
             [[job]]\nname = \"b\"\ncommand = [\"x\", \"2\"]\n",
            "test",
        )
        .unwrap();
        let mut store = IsolatedTimes::default();
        let trace: Vec<TraceLine> = (0..3).map(|_| stuck_second(1)).collect();
        store.learn(&topology, &workload.jobs, &trace);
        let rigid = Workload {
            jobs: (workload.jobs.iter().cloned())
                .map(|j| JobEntry {
                    kind: JobKind::Rigid,
                    command: vec!["y".into()],
                    ..j
                })
                .collect(),
            ..workload.clone()
        };
        let mut others = IsolatedTimes::default();
        others.learn(&topology, &rigid.jobs, &trace);
        let y = others.behaviour(&topology, &["y".to_string()]).unwrap();
        assert_eq!(
            y.follows_advice, None,
            "a rigid job is never advised at run time"
        );
        let x2 = store
            .behaviour(&topology, &workload.jobs[1].command)
            .unwrap();
        assert_eq!((x2.follows_advice, x2.threads), (Some(false), Some(2)));
        assert_eq!(store.behaviour(&topology, &workload.jobs[0].command), None);
        let other = presets::machine("package:1 core:4").unwrap();
        assert_eq!(store.behaviour(&other, &workload.jobs[1].command), None);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.isolated.json");
        store.save(&path).unwrap();
        assert_eq!(IsolatedTimes::load(&path).unwrap(), store);
        std::fs::write(&path, "{\"entries\": []}").unwrap();
        assert!(
            IsolatedTimes::load(&path).unwrap().behaviour.is_empty(),
            "older files load"
        );
    }
}
