//! The Standard Workload Format of the Parallel Workloads Archive (Chapin et al., "Benchmarks and
//! Standards for the Evaluation of Parallel Job Schedulers", JSSPP 1999): one job per line, 18
//! whitespace-separated fields, `-1` for unknown, header comments starting with `;`.
//!
//! Each job becomes a rigid job: requested processors (allocated ones when the request is unknown)
//! for its recorded run time, with the requested time as the user's estimate.

use std::path::Path;

/// Fields per job line, as the format defines them.
const FIELDS: usize = 18;
const SUBMIT: usize = 1;
const RUN_TIME: usize = 3;
const ALLOCATED_PROCS: usize = 4;
const REQUESTED_PROCS: usize = 7;
const REQUESTED_TIME: usize = 8;

/// One rigid job of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct SwfJob {
    /// The job number (field 1).
    pub id: u64,
    /// Submit time in seconds from the trace's start.
    pub submit: f64,
    /// Recorded run time in seconds.
    pub run: f64,
    /// Processors the job holds for its whole run.
    pub procs: u32,
    /// The user's run-time estimate (requested time); the run time when the trace does not know it.
    pub estimate: f64,
}

/// A parsed trace: its jobs in file order and what its header says about the machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwfTrace {
    pub jobs: Vec<SwfJob>,
    /// `; MaxProcs:` of the header.
    pub max_procs: Option<u32>,
    /// `; MaxNodes:` of the header.
    pub max_nodes: Option<u32>,
    /// Job lines left out because their run time or processor count is unknown (cancelled jobs).
    pub skipped: usize,
}

impl SwfTrace {
    /// The machine's size in processors as the header gives it (MaxProcs, else MaxNodes).
    pub fn machine_procs(&self) -> Option<u32> {
        self.max_procs.or(self.max_nodes)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SwfError {
    #[error("cannot read SWF file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}:{line}: {problem}")]
    Line {
        origin: String,
        line: usize,
        problem: SwfLineError,
    },
}

/// What is wrong with one line of an SWF file.
#[derive(Debug, thiserror::Error)]
pub enum SwfLineError {
    #[error("header `{key}:` must be a whole number of processors, not `{value}`")]
    HeaderNotANumber { key: String, value: String },
    #[error("a job line has {FIELDS} whitespace-separated fields, this one has {0} (header lines start with `;`)")]
    FieldCount(usize),
    #[error("field {field} is `{text}`, not a number")]
    NotANumber { field: usize, text: String },
    #[error("field 1 (job number) must be a whole number, not `{0}`")]
    JobNumber(String),
    #[error("field 2 (submit time) is unknown; every job needs one")]
    NoSubmitTime,
    #[error("processor count {0} is not a whole number of processors")]
    Processors(f64),
}

/// Reads an SWF file.
pub fn load(path: &Path) -> Result<SwfTrace, SwfError> {
    let text = std::fs::read_to_string(path).map_err(|source| SwfError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

/// Parses SWF text; `origin` names it in errors (a file name).
pub fn parse(text: &str, origin: &str) -> Result<SwfTrace, SwfError> {
    let mut trace = SwfTrace::default();
    for (index, line) in text.lines().enumerate() {
        let error = |problem: SwfLineError| SwfError::Line {
            origin: origin.to_string(),
            line: index + 1,
            problem,
        };
        let line = line.trim();
        if let Some(comment) = line.strip_prefix(';') {
            read_header(comment, &mut trace).map_err(error)?;
            continue;
        }
        if line.is_empty() {
            continue;
        }
        match parse_job(line).map_err(error)? {
            Some(job) => trace.jobs.push(job),
            None => trace.skipped += 1,
        }
    }
    Ok(trace)
}

fn read_header(comment: &str, trace: &mut SwfTrace) -> Result<(), SwfLineError> {
    let Some((key, value)) = comment.split_once(':') else {
        return Ok(());
    };
    let slot = match key.trim() {
        "MaxProcs" => &mut trace.max_procs,
        "MaxNodes" => &mut trace.max_nodes,
        _ => return Ok(()),
    };
    let value = value.trim();
    *slot = Some(value.parse().map_err(|_| SwfLineError::HeaderNotANumber {
        key: key.trim().to_string(),
        value: value.to_string(),
    })?);
    Ok(())
}

/// A job, or `None` for a job whose run time or processor count is unknown.
fn parse_job(line: &str) -> Result<Option<SwfJob>, SwfLineError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() != FIELDS {
        return Err(SwfLineError::FieldCount(fields.len()));
    }
    let mut values = [0.0_f64; FIELDS];
    for (i, field) in fields.iter().enumerate() {
        values[i] = field
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| SwfLineError::NotANumber {
                field: i + 1,
                text: field.to_string(),
            })?;
    }
    let known = |i: usize| (values[i] >= 0.0).then_some(values[i]);
    let id = values[0];
    if id < 0.0 || id.fract() != 0.0 {
        return Err(SwfLineError::JobNumber(fields[0].to_string()));
    }
    let Some(submit) = known(SUBMIT) else {
        return Err(SwfLineError::NoSubmitTime);
    };
    let procs = known(REQUESTED_PROCS)
        .filter(|&p| p > 0.0)
        .or(known(ALLOCATED_PROCS).filter(|&p| p > 0.0));
    let (Some(run), Some(procs)) = (known(RUN_TIME), procs) else {
        return Ok(None);
    };
    if procs.fract() != 0.0 || procs > f64::from(u32::MAX) {
        return Err(SwfLineError::Processors(procs));
    }
    Ok(Some(SwfJob {
        id: id as u64,
        submit,
        run,
        procs: procs as u32,
        estimate: known(REQUESTED_TIME).filter(|&t| t > 0.0).unwrap_or(run),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "7 100 5 60 4 -1 -1 8 120 -1 1 1 1 -1 -1 -1 -1 -1";

    #[test]
    fn requested_processors_and_time_make_the_rigid_job() {
        let trace = parse(
            &format!("; MaxProcs: 100\n; MaxNodes: 50\n{LINE}\n"),
            "t.swf",
        )
        .unwrap();
        assert_eq!(trace.max_procs, Some(100));
        assert_eq!(trace.machine_procs(), Some(100));
        let expected = SwfJob {
            id: 7,
            submit: 100.0,
            run: 60.0,
            procs: 8,
            estimate: 120.0,
        };
        assert_eq!(trace.jobs, vec![expected]);
    }

    #[test]
    fn unknown_request_falls_back_to_allocation_and_run_time() {
        let line = "7 100 5 60 4 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1";
        let job = &parse(line, "t.swf").unwrap().jobs[0];
        assert_eq!((job.procs, job.estimate), (4, 60.0));
    }

    #[test]
    fn jobs_without_run_time_or_processors_are_skipped_and_counted() {
        let text = "1 0 0 -1 4 -1 -1 4 10 -1 5 1 1 -1 -1 -1 -1 -1\n\
                    2 0 0 10 -1 -1 -1 -1 10 -1 5 1 1 -1 -1 -1 -1 -1\n";
        let trace = parse(text, "t.swf").unwrap();
        assert_eq!((trace.jobs.len(), trace.skipped), (0, 2));
    }

    #[test]
    fn malformed_lines_are_named() {
        let err = parse(&format!("; ok\n{LINE}\n1 2 3\n"), "t.swf")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.swf:3:") && err.contains("18"), "{err}");
        let err = parse("1 0 0 x 4 -1 -1 4 10 -1 5 1 1 -1 -1 -1 -1 -1", "t.swf")
            .unwrap_err()
            .to_string();
        assert!(err.contains("t.swf:1:") && err.contains("field 4"), "{err}");
        let err = parse("1 0 0 inf 4 -1 -1 4 10 -1 5 1 1 -1 -1 -1 -1 -1", "t.swf")
            .unwrap_err()
            .to_string();
        assert!(err.contains("field 4"), "{err}");
        let err = parse("; MaxProcs: many", "t.swf").unwrap_err().to_string();
        assert!(err.contains("MaxProcs") && err.contains("many"), "{err}");
    }
}
