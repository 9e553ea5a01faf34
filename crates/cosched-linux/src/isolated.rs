//! The store of isolated times: each job alone on the whole machine, the denominator of slowdown and
//! NTT (TACO §4, CaSAS eq. 1). `cosched calibrate` measures them ([`crate::calibrate`]); `cosched run`
//! writes them into the trace.
//!
//! They are stored as JSON next to the workload file (`<name>.isolated.json`, see
//! [`IsolatedTimes::default_path`]), one entry per machine (topology name and CPU count) and job (name and
//! command line, so that an edited command is not matched with an old time).
//!
//! Beside the times, the store keeps what past runs observed about each program
//! ([`cosched_core::observe::Behaviour`]: whether it takes advice at start, at region boundaries or
//! never, and whether it spins), keyed by machine and command line: [`IsolatedTimes::learn`] takes in a
//! finished run's start and sample records, and the executor applies what is known to a job's spec on
//! arrival ([`IsolatedTimes::behaviour`]), so that a job known to keep the threads it starts with starts
//! moldable instead of being found out after a 2 s deadline. A daemon feeds it the same way: keep an
//! `Observer` per job from its samples, and at its finish call [`IsolatedTimes::remember`] with
//! `observer.job(id).behaviour(started_with)` and save.
//!
//! It also keeps, per machine and command line, how each run of the program scaled
//! ([`cosched_core::scaling`]: its spells alone on its CPUs at each width, and whether they cover the
//! whole run): [`IsolatedTimes::learn`] takes them from a finished run's trace, and every calibration
//! adds its run alone on the whole machine (and on one CPU with `--scaling`). The fitted curve gives a
//! job's time on one CPU where it was never measured ([`IsolatedTimes::one_cpu_seconds`]), and its time
//! on the whole machine where no calibration measured it ([`IsolatedTimes::runtime_estimate`]).

use crate::Error;
use cosched_core::observe::{behaviours, Behaviour, RunBehaviour};
use cosched_core::scaling::{fit, runs_from_trace, speedup, times_alone, ScalingFit, ScalingRun};
use cosched_core::trace::TraceLine;
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
    /// How past runs of programs scaled; absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<ProgramScaling>,
}

/// How runs of one command line on one machine scaled, the newest last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramScaling {
    pub machine: String,
    pub cpus: usize,
    pub command: Vec<String>,
    pub runs: Vec<ScalingRun>,
}

impl ProgramScaling {
    /// Whether these are the runs of `command` on `machine` with `cpus` CPUs.
    fn is(&self, machine: &str, cpus: usize, command: &[String]) -> bool {
        self.machine == machine && self.cpus == cpus && self.command == command
    }
}

/// Runs kept per program: the newest show the program as it is now.
const KEPT_RUNS: usize = 8;

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

    /// Takes one run's findings about a command line into what is known.
    pub fn remember(&mut self, topology: &Topology, command: &[String], found: &RunBehaviour) {
        match self
            .behaviour
            .iter_mut()
            .find(|p| p.is_for(topology, command))
        {
            Some(known) => known.behaviour.learn(found),
            None => {
                let mut behaviour = Behaviour::default();
                behaviour.learn(found);
                if behaviour != Behaviour::default() {
                    self.behaviour.push(ObservedProgram {
                        machine: topology.name.clone(),
                        cpus: topology.num_cpus(),
                        command: command.to_vec(),
                        behaviour,
                    });
                }
            }
        }
    }

    /// Takes in what a finished run of `jobs` (job id = index) showed: each program's behaviour and
    /// how it scaled.
    pub fn learn(&mut self, topology: &Topology, jobs: &[JobEntry], trace: &[TraceLine]) {
        for (id, mut found) in behaviours(trace.iter().map(|line| &line.record)) {
            let Some(entry) = jobs.get(id.0 as usize) else {
                continue;
            };
            // Only malleable jobs are advised at run time; others never read the advice.
            if entry.kind != JobKind::Malleable {
                found.follows_advice = None;
            }
            self.remember(topology, &entry.command, &found);
        }
        for (id, run) in runs_from_trace(trace) {
            if let Some(entry) = jobs.get(id.0 as usize) {
                self.add_scaling(&topology.name, topology.num_cpus(), &entry.command, run);
            }
        }
    }

    /// Adds the time of every job that succeeded in `results` (runs on the whole machine) to the
    /// isolated times and to the scaling history; returns how many failed.
    pub fn record(&mut self, results: Vec<Calibrated>) -> usize {
        self.scaled_alone(&results, |time| time.cpus as u32);
        record_into(&mut self.entries, results)
    }

    /// As [`IsolatedTimes::record`], for runs on one CPU.
    pub fn record_one_cpu(&mut self, results: Vec<Calibrated>) -> usize {
        self.scaled_alone(&results, |_| 1);
        record_into(&mut self.one_cpu, results)
    }

    /// Adds calibration runs, each alone on `width(time)` CPUs, to the scaling history; one with
    /// more threads than CPUs shows how crowding slows it, not how it scales.
    fn scaled_alone(&mut self, results: &[Calibrated], width: impl Fn(&IsolatedTime) -> u32) {
        for result in results {
            if let Calibrated::Time(time) = result {
                if time.threads > width(time) {
                    continue;
                }
                let run = ScalingRun::alone(width(time), time.threads, time.seconds);
                self.add_scaling(&time.machine, time.cpus, &time.command, run);
            }
        }
    }

    /// Keeps what one more run of a command line here showed about its scaling (a daemon's job,
    /// followed with `cosched_core::scaling::RunTracker`), and at most `programs` command lines: the
    /// least recently run are forgotten first.
    pub fn remember_scaling(
        &mut self,
        topology: &Topology,
        command: &[String],
        run: ScalingRun,
        programs: usize,
    ) {
        let (machine, cpus) = (&topology.name, topology.num_cpus());
        // Most recently run last.
        if let Some(i) = (self.scaling.iter()).position(|p| p.is(machine, cpus, command)) {
            let program = self.scaling.remove(i);
            self.scaling.push(program);
        }
        self.add_scaling(machine, cpus, command, run);
        let excess = self.scaling.len().saturating_sub(programs);
        self.scaling.drain(..excess);
    }

    /// Keeps one more run of a command line, dropping the oldest beyond `KEPT_RUNS`.
    fn add_scaling(&mut self, machine: &str, cpus: usize, command: &[String], run: ScalingRun) {
        if !run.informative() {
            return;
        }
        let known = (self.scaling.iter_mut()).find(|p| p.is(machine, cpus, command));
        let program = match known {
            Some(program) => program,
            None => {
                self.scaling.push(ProgramScaling {
                    machine: machine.to_string(),
                    cpus,
                    command: command.to_vec(),
                    runs: Vec::new(),
                });
                self.scaling.last_mut().expect("just pushed")
            }
        };
        program.runs.push(run);
        let excess = program.runs.len().saturating_sub(KEPT_RUNS);
        program.runs.drain(..excess);
    }

    /// How this command line scales here, fitted from its runs, if they tell and fit well enough.
    pub fn scaling(&self, topology: &Topology, command: &[String]) -> Option<ScalingFit> {
        fit(self.scaling_runs(topology, command)).filter(ScalingFit::trusted)
    }

    /// This command line's time alone on its CPUs at each width its past runs here measured, as
    /// `(width, seconds)` by width (`JobHints::times_alone`); empty where none did.
    pub fn times_alone(&self, topology: &Topology, command: &[String]) -> Vec<(u32, f64)> {
        (times_alone(self.scaling_runs(topology, command)).iter())
            .map(|t| (t.width, t.seconds))
            .collect()
    }

    /// The runs kept of this command line here, the newest last.
    fn scaling_runs(&self, topology: &Topology, command: &[String]) -> &[ScalingRun] {
        (self.scaling.iter())
            .find(|p| p.is(&topology.name, topology.num_cpus(), command))
            .map_or(&[], |p| p.runs.as_slice())
    }

    /// The job's time alone on one CPU with one thread: measured, else from its fitted scaling and
    /// its time alone on the whole machine.
    pub fn one_cpu_seconds(&self, topology: &Topology, job: &JobEntry) -> Option<f64> {
        if let Some(measured) = self.one_thread_seconds(topology, job) {
            return Some(measured);
        }
        let scaling = self.scaling(topology, &job.command)?;
        scaling.one_cpu_seconds.or_else(|| {
            let alone = self.entry(topology, job)?;
            let width = (alone.threads as usize).clamp(1, topology.num_cpus()) as u32;
            Some(alone.seconds * speedup(scaling.serial, width))
        })
    }

    /// The job's time alone on `width` CPUs of the whole machine: its isolated time, else what its
    /// past runs' fitted scaling predicts.
    pub fn runtime_estimate(&self, topology: &Topology, job: &JobEntry, width: u32) -> Option<f64> {
        self.lookup(topology, job).or_else(|| {
            let scaling = self.scaling(topology, &job.command)?;
            Some(scaling.one_cpu_seconds? / speedup(scaling.serial, width))
        })
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
    use cosched_core::observe::Advice;
    use cosched_core::topology::presets;
    use cosched_core::trace::Record;
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
        let start = Record::Start {
            job: JobId(1),
            threads: 2,
            pid: None,
        };
        let trace: Vec<TraceLine> = std::iter::once(line(0.0, start))
            .chain((0..3).map(|_| stuck_second(1)))
            .collect();
        store.learn(&topology, &workload.jobs, &trace);
        let rigid = Workload {
            jobs: (workload.jobs.iter().cloned())
                .map(|j| JobEntry {
                    owner: None,
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
        assert_eq!(y.advice, None, "a rigid job is never advised at run time");
        let x2 = store
            .behaviour(&topology, &workload.jobs[1].command)
            .unwrap();
        assert_eq!(
            x2.advice,
            Some(Advice::AtStart),
            "it took its two threads at start and kept them"
        );
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
        // Written when a run's threads were remembered as the program's own after one run.
        std::fs::write(
            &path,
            r#"{"entries": [], "behaviour": [{"machine": "m", "cpus": 2, "command": ["x"],
                "follows_advice": false, "threads": 1, "spins": true}]}"#,
        )
        .unwrap();
        assert_eq!(
            IsolatedTimes::load(&path).unwrap().behaviour[0].behaviour,
            Behaviour {
                spins: Some(true),
                ..Behaviour::default()
            },
            "the threads one run gave it are forgotten"
        );
    }

    fn line(t: f64, record: Record) -> TraceLine {
        TraceLine { t, record }
    }

    fn alone_on(cpus: &str) -> Record {
        Record::Plan {
            plan: cosched_core::Plan::space_sharing(vec![cosched_core::Assignment {
                job: JobId(0),
                cpus: cpus.parse().unwrap(),
            }]),
        }
    }

    fn progress(cpus: u32, rate: f64) -> Record {
        Record::Sample(Sample::new(
            JobId(0),
            rate,
            RateSource::ControlPage,
            cpus,
            cpus as f64,
            1.0,
        ))
    }

    #[test]
    fn runs_and_calibrations_teach_the_store_how_a_program_scales() {
        let topology = presets::machine("package:1 core:2").unwrap();
        let workload = Workload::parse(
            "[workload]\nname = \"w\"\n[[job]]\nname = \"a\"\ncommand = [\"x\"]\n",
            "test",
        )
        .unwrap();
        let job = &workload.jobs[0];
        let mut store = IsolatedTimes::default();
        store.record(vec![Calibrated::Time(IsolatedTime {
            machine: topology.name.clone(),
            cpus: 2,
            job: "a".into(),
            command: job.command.clone(),
            threads: 2,
            seconds: 10.0,
        })]);
        assert_eq!(store.scaling(&topology, &job.command), None, "one width");
        assert_eq!(store.one_cpu_seconds(&topology, job), None);
        // A run in which it spent 2 s on one CPU, then 2 s on both: 1.8 times the progress there.
        let trace = vec![
            line(0.0, alone_on("0")),
            line(
                0.0,
                Record::Start {
                    job: JobId(0),
                    threads: 1,
                    pid: None,
                },
            ),
            line(1.0, progress(1, 10.0)),
            line(2.0, progress(1, 10.0)),
            line(2.0, alone_on("0-1")),
            line(
                2.0,
                Record::Threads {
                    job: JobId(0),
                    threads: 2,
                },
            ),
            line(3.0, progress(2, 18.0)),
            line(4.0, progress(2, 18.0)),
        ];
        store.learn(&topology, &workload.jobs, &trace);
        let scaling = store.scaling(&topology, &job.command).unwrap();
        assert!((scaling.speedup(2) - 1.8).abs() < 0.01, "{scaling:?}");
        let one_cpu = store.one_cpu_seconds(&topology, job).unwrap();
        assert!((one_cpu - 18.0).abs() < 0.1, "{one_cpu}");
        let other = presets::machine("package:1 core:4").unwrap();
        assert_eq!(store.scaling(&other, &job.command), None);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.isolated.json");
        store.save(&path).unwrap();
        assert_eq!(IsolatedTimes::load(&path).unwrap(), store);
    }

    #[test]
    fn whole_runs_at_two_widths_predict_a_time_never_measured() {
        let topology = presets::machine("package:1 core:2").unwrap();
        let command = vec!["x".to_string()];
        let mut store = IsolatedTimes::default();
        let time = |cpus: usize, threads: u32, seconds: f64| {
            Calibrated::Time(IsolatedTime {
                machine: topology.name.clone(),
                cpus,
                job: "a".into(),
                command: command.clone(),
                threads,
                seconds,
            })
        };
        store.record_one_cpu(vec![time(2, 1, 20.0), time(2, 2, 30.0)]);
        assert!(
            store.scaling[0].runs.len() == 1,
            "two threads on one CPU are left out"
        );
        store.record(vec![time(2, 2, 13.0)]);
        let entry = JobEntry {
            owner: None,
            command: vec!["y".into()],
            ..Workload::parse(
                "[workload]\nname = \"w\"\n[[job]]\nname = \"b\"\ncommand = [\"x\"]\n",
                "test",
            )
            .unwrap()
            .jobs[0]
                .clone()
        };
        let same_program = JobEntry {
            command: command.clone(),
            ..entry.clone()
        };
        let predicted = store.runtime_estimate(&topology, &same_program, 2).unwrap();
        assert!((predicted - 13.0).abs() < 0.05, "{predicted}");
        assert_eq!(store.runtime_estimate(&topology, &entry, 2), None);
    }
}
