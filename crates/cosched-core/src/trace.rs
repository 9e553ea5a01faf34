//! The trace: one JSON object per line, the single record of a run that reports and metrics read.
//! Real and simulated runs write the same records; `docs/trace-format.md` documents them.

use crate::event::Sample;
use crate::job::{JobId, JobSpec};
use crate::plan::Plan;
use crate::plan_change::{PlanChange, PlanReplay};
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Write};

/// Version 2 added `plan_change` records; version 1 traces read unchanged.
pub const TRACE_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceLine {
    /// Seconds since the start of the run.
    pub t: f64,
    #[serde(flatten)]
    pub record: Record,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    Real,
    Sim,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitStatus {
    Ok,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    RunStart {
        version: u32,
        executor: ExecutorKind,
        policy: String,
        machine: String,
        cpus: usize,
        workload: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<u64>,
        /// How enforcement was done (`cgroup-v1`, `affinity`, …) or the model's switches, free text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mechanism: Option<String>,
        /// Unix time (seconds) of `t = 0` in real runs, so that a trace can be placed in wall-clock
        /// time (`cosched report --since`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_unix: Option<f64>,
    },
    /// A job became known to the policy. `isolated` is its time alone on the whole machine with its best
    /// thread count, the denominator of slowdown and NTT.
    Arrival {
        job: JobSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        isolated: Option<f64>,
    },
    Plan {
        plan: Plan,
    },
    /// The plan in force from `t` on, as its difference from the previous one (large simulations).
    /// [`read_trace`] hands these back as whole `Plan` records.
    PlanChange(PlanChange),
    Start {
        job: JobId,
        threads: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// The job began using a new thread count.
    Threads {
        job: JobId,
        threads: u32,
    },
    Sample(Sample),
    Finish {
        job: JobId,
        status: ExitStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    RunEnd {
        /// CPU seconds the executor itself used (real runs) or wall seconds the simulation took.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        overhead_seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// Writes trace lines; any `Write` works (a file, a buffer for tests).
pub struct TraceWriter<W: Write> {
    out: W,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(out: W) -> Self {
        TraceWriter { out }
    }

    pub fn write(&mut self, t: f64, record: Record) -> io::Result<()> {
        let line = TraceLine { t, record };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceReadError {
    #[error("{source_name}:{line}: {source}")]
    Malformed {
        source_name: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{source_name}:{line}: trace version {version} is newer than this cosched reads \
         ({TRACE_VERSION}); upgrade cosched"
    )]
    NewerVersion {
        source_name: String,
        line: usize,
        version: u32,
    },
    #[error("{source_name}: {0}", source_name = .1)]
    Io(#[source] io::Error, String),
}

/// Reads a whole trace, `plan_change` records rebuilt into whole `Plan` records so that readers see one
/// kind of plan; `source_name` is only used in error messages.
pub fn read_trace(
    input: impl BufRead,
    source_name: &str,
) -> Result<Vec<TraceLine>, TraceReadError> {
    let mut lines = Vec::new();
    let mut plans = PlanReplay::default();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| TraceReadError::Io(e, source_name.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: TraceLine =
            serde_json::from_str(&line).map_err(|source| TraceReadError::Malformed {
                source_name: source_name.to_string(),
                line: i + 1,
                source,
            })?;
        if let Record::RunStart { version, .. } = &parsed.record {
            if *version > TRACE_VERSION {
                return Err(TraceReadError::NewerVersion {
                    source_name: source_name.to_string(),
                    line: i + 1,
                    version: *version,
                });
            }
        }
        let parsed = match parsed.record {
            Record::Plan { plan } => {
                plans.replace(&plan);
                TraceLine {
                    t: parsed.t,
                    record: Record::Plan { plan },
                }
            }
            Record::PlanChange(change) => TraceLine {
                t: parsed.t,
                record: Record::Plan {
                    plan: plans.apply(&change).clone(),
                },
            },
            _ => parsed,
        };
        lines.push(parsed);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobHints, JobKind};

    #[test]
    fn records_round_trip_through_json_lines() {
        let spec = JobSpec {
            id: JobId(3),
            name: "lu.A".into(),
            arrival: 1.5,
            kind: JobKind::Malleable,
            min_threads: 1,
            max_threads: 24,
            coschedule: true,
            weight: 1.0,
            hints: JobHints::default(),
        };
        let mut writer = TraceWriter::new(Vec::new());
        writer
            .write(
                1.5,
                Record::Arrival {
                    job: spec,
                    isolated: Some(10.0),
                },
            )
            .unwrap();
        writer
            .write(
                9.0,
                Record::Finish {
                    job: JobId(3),
                    status: ExitStatus::Failed,
                    exit_code: Some(1),
                    error: None,
                },
            )
            .unwrap();
        let bytes = writer.into_inner();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with(r#"{"t":1.5,"type":"arrival""#), "{text}");
        let lines = read_trace(&bytes[..], "mem").unwrap();
        assert_eq!(lines.len(), 2);
        assert!(matches!(
            lines[1].record,
            Record::Finish {
                status: ExitStatus::Failed,
                ..
            }
        ));
    }

    #[test]
    fn plans_with_thread_advice_read_back() {
        let line = r#"{"t":0.5,"type":"plan","plan":{"slots":[],"advice":{"3":2}}}"#;
        let lines = read_trace(line.as_bytes(), "mem").unwrap();
        let Record::Plan { plan } = &lines[0].record else {
            panic!("not a plan: {lines:?}");
        };
        assert_eq!(plan.advice.get(&JobId(3)), Some(&2));
    }

    #[test]
    fn plan_changes_read_back_as_whole_plans() {
        let text = concat!(
            r#"{"t":0,"type":"plan","plan":{"slots":[{"length":1.0,"assignments":[{"job":0,"cpus":"0-3"}]}]}}"#,
            "\n",
            r#"{"t":1,"type":"plan_change","slots":1,"placed":[{"slot":0,"job":1,"cpus":"4-7"}]}"#,
            "\n",
            r#"{"t":2,"type":"plan_change","slots":1,"removed":[[0,0]]}"#,
        );
        let lines = read_trace(text.as_bytes(), "mem").unwrap();
        let jobs: Vec<Vec<u32>> = lines
            .iter()
            .map(|l| match &l.record {
                Record::Plan { plan } => {
                    plan.slots[0].assignments.iter().map(|a| a.job.0).collect()
                }
                other => panic!("not a plan: {other:?}"),
            })
            .collect();
        assert_eq!(jobs, [vec![0], vec![0, 1], vec![1]]);
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let err = read_trace(&b"{\"t\":0,\"type\":\"timer\"}\n"[..], "x.jsonl").unwrap_err();
        assert!(err.to_string().starts_with("x.jsonl:1:"), "{err}");
    }
}
