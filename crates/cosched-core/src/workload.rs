//! Workload files: the jobs of a run, in TOML (documented in `docs/workload-format.md`).
//!
//! A job carries what the real executor needs (`command`, `env`) and what the simulator needs
//! (`profile`); a file may have either or both. Errors name the file, the line and the field.

use crate::job::{JobHints, JobId, JobKind, JobSpec, Owner};
use crate::names::{check_name, NameError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadInfo {
    pub name: String,
    #[serde(default)]
    pub description: String,
}

/// One `[[job]]` table as written in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobEntry {
    pub name: String,
    #[serde(default)]
    pub arrival: f64,
    #[serde(default)]
    pub kind: JobKind,
    #[serde(default = "one")]
    pub min_threads: u32,
    /// Absent: as many threads as the machine has CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<u32>,
    #[serde(default = "yes")]
    pub coschedule: bool,
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// Program and arguments; `{threads}`, `{bench}` and `{workload_dir}` are expanded at launch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Performance profile for the simulator (`nas/lu.A`, `amdahl(serial=0.05, runtime=60)`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default)]
    pub hints: JobHints,
    /// Memory it needs (`mem = "2G"`, as `cosched submit --mem`), in bytes: a real run limits it
    /// to that, and the simulator starts it only while the running jobs' requests fit the machine's
    /// memory.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::memory::size_text"
    )]
    pub mem: Option<u64>,
    /// The user the job belongs to (`owner = { user = 1000, share = 2.0 }`); absent for a workload
    /// of one user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn unit_weight() -> f64 {
    1.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    workload: WorkloadInfo,
    #[serde(default)]
    job: Vec<toml::Spanned<JobEntry>>,
}

/// The jobs of a piece of a workload file after its first.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoreJobs {
    job: Vec<toml::Spanned<JobEntry>>,
}

/// Below this size a workload file is parsed in one piece: splitting it would cost more than it saves.
const PIECE_BYTES: usize = 1 << 20;

/// The workload file `text`, parsed in pieces on several threads when it is large: a generated
/// workload of 100,000 jobs is 16 MB, whose parse held up every run for a second. It is cut only
/// before lines that open a `[[job]]` table and only if it has no multi-line string (which could hold
/// such a line); any piece that fails, or holds anything but jobs after the first, sends the whole
/// file to one parse, whose answer (and error) it is.
fn parse_file(text: &str) -> Result<WorkloadFile, toml::de::Error> {
    let most = text.len() / PIECE_BYTES;
    if most < 2 {
        // Asked before the CPUs are counted, which reads the process's cgroup files.
        return toml::from_str(text);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    parse_in_pieces(text, threads.min(most))
}

/// [`parse_file`] in about `pieces` pieces.
fn parse_in_pieces(text: &str, pieces: usize) -> Result<WorkloadFile, toml::de::Error> {
    let cuts = job_cuts(text, pieces);
    if cuts.is_empty() {
        return toml::from_str(text);
    }
    let ends = cuts.iter().copied().chain([text.len()]);
    let starts = std::iter::once(0).chain(cuts.iter().copied());
    let parts: Vec<(usize, &str)> = starts.zip(ends).map(|(a, b)| (a, &text[a..b])).collect();
    let parsed = std::thread::scope(|scope| {
        let more: Vec<_> = parts[1..]
            .iter()
            .map(|&(at, piece)| {
                scope.spawn(move || {
                    let more: MoreJobs = toml::from_str(piece).ok()?;
                    Some(shifted(more.job, at))
                })
            })
            .collect();
        let first: Option<WorkloadFile> = toml::from_str(parts[0].1).ok();
        let more: Option<Vec<_>> = more
            .into_iter()
            .map(|h| h.join().expect("a parse does not panic"))
            .collect();
        Some((first?, more?))
    });
    match parsed {
        Some((mut file, more)) => {
            file.job.extend(more.into_iter().flatten());
            Ok(file)
        }
        None => toml::from_str(text),
    }
}

/// Where to cut `text` into about `pieces` pieces of similar size, each cut at the start of a line
/// that opens a `[[job]]` table; none if it cannot be cut safely.
fn job_cuts(text: &str, pieces: usize) -> Vec<usize> {
    if pieces < 2 || text.contains("\"\"\"") || text.contains("'''") {
        return Vec::new();
    }
    const OPENS_A_JOB: &str = "\n[[job]]";
    let mut cuts: Vec<usize> = (1..pieces)
        .filter_map(|k| {
            let from = text.len() * k / pieces;
            let found = text.get(from..)?.find(OPENS_A_JOB)?;
            Some(from + found + 1)
        })
        .collect();
    cuts.dedup();
    cuts
}

/// `jobs` parsed from a piece that starts `at` bytes into the file, their spans made the file's.
fn shifted(jobs: Vec<toml::Spanned<JobEntry>>, at: usize) -> Vec<toml::Spanned<JobEntry>> {
    jobs.into_iter()
        .map(|job| {
            let span = job.span();
            toml::Spanned::new(span.start + at..span.end + at, job.into_inner())
        })
        .collect()
}

/// A parsed and checked workload. Jobs keep the order of the file; ids follow that order.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub info: WorkloadInfo,
    pub jobs: Vec<JobEntry>,
    /// Directory of the file, for `{workload_dir}` in commands.
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot read workload file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The TOML parser's complaint, placed at its line and field where it gives one.
    #[error("{path}: {}{message}", place(*line, key.as_deref()))]
    Toml {
        path: String,
        line: Option<usize>,
        key: Option<String>,
        message: String,
    },
    #[error(
        "{path}: no jobs; add at least one [[job]] table with a name and a command or profile"
    )]
    NoJobs { path: String },
    #[error("{path}: [workload] field `name`: {problem}")]
    WorkloadName { path: String, problem: NameError },
    #[error("{path}: line {line}: job {job:?}: {problem}")]
    Job {
        path: String,
        line: usize,
        job: String,
        problem: JobProblem,
    },
    #[error(
        "{path}: line {line}: field `name`: job name {job:?} is already used on line {first}; names \
         must be unique because they name the job's output files"
    )]
    DuplicateJob {
        path: String,
        line: usize,
        job: String,
        first: usize,
    },
}

/// `line N: field `KEY`: ` as far as they are known.
fn place(line: Option<usize>, key: Option<&str>) -> String {
    match (line, key) {
        (Some(line), Some(key)) => format!("line {line}: field `{key}`: "),
        (Some(line), None) => format!("line {line}: "),
        _ => String::new(),
    }
}

/// What is wrong with one job of a workload file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobProblem {
    #[error("field `name`: {0}")]
    Name(NameError),
    #[error("field `arrival`: {arrival} is not a time in seconds ≥ 0")]
    Arrival { arrival: f64 },
    #[error("field `min_threads`: must be at least 1")]
    NoThreads,
    #[error(
        "field `max_threads`: {max} is below min_threads ({min}); raise max_threads or lower \
         min_threads"
    )]
    ThreadRange { min: u32, max: u32 },
    #[error("field `weight`: {weight} must be a positive number")]
    Weight { weight: f64 },
    #[error("field `owner.share`: {share} must be a positive number")]
    Share { share: f64 },
    #[error("needs `command` (to run it for real) or `profile` (to simulate it), or both")]
    NothingToRun,
}

impl Workload {
    pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut workload = Workload::parse(&text, &path.display().to_string())?;
        workload.dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(workload)
    }

    /// Parses TOML text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<Workload, WorkloadError> {
        let path = || source_name.to_string();
        let file = parse_file(text).map_err(|e| {
            let line = e.span().map(|span| line_of(text, span.start));
            WorkloadError::Toml {
                path: path(),
                line,
                key: line.and_then(|line| key_on_line(text, line)),
                message: e.message().trim().to_string(),
            }
        })?;
        if file.job.is_empty() {
            return Err(WorkloadError::NoJobs { path: path() });
        }
        check_name(&file.workload.name).map_err(|problem| WorkloadError::WorkloadName {
            path: path(),
            problem,
        })?;
        let mut seen = BTreeMap::new();
        let mut lines = LineCounter::new(text);
        for spanned in &file.job {
            let line = lines.line_at(spanned.span().start);
            let job = spanned.get_ref();
            check_job(job).map_err(|problem| WorkloadError::Job {
                path: path(),
                line,
                job: job.name.clone(),
                problem,
            })?;
            if let Some(first) = seen.insert(job.name.clone(), line) {
                return Err(WorkloadError::DuplicateJob {
                    path: path(),
                    line,
                    job: job.name.clone(),
                    first,
                });
            }
        }
        Ok(Workload {
            info: file.workload,
            jobs: file
                .job
                .into_iter()
                .map(toml::Spanned::into_inner)
                .collect(),
            dir: PathBuf::from("."),
        })
    }

    /// The jobs as policies see them on a machine with `cpus` CPUs.
    pub fn specs(&self, cpus: usize) -> Vec<JobSpec> {
        self.jobs
            .iter()
            .enumerate()
            .map(|(i, job)| job.spec(JobId(i as u32), cpus))
            .collect()
    }

    pub fn to_toml(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            workload: &'a WorkloadInfo,
            job: &'a [JobEntry],
        }
        toml::to_string(&Out {
            workload: &self.info,
            job: &self.jobs,
        })
        .expect("workloads always serialise")
    }
}

impl JobEntry {
    pub fn spec(&self, id: JobId, cpus: usize) -> JobSpec {
        let max = self
            .max_threads
            .unwrap_or(cpus as u32)
            .max(self.min_threads);
        JobSpec {
            id,
            name: self.name.clone(),
            arrival: self.arrival,
            kind: self.kind,
            min_threads: self.min_threads,
            max_threads: max,
            coschedule: self.coschedule,
            weight: self.weight,
            hints: self.hints.clone(),
            owner: self.owner,
        }
    }
}

fn check_job(job: &JobEntry) -> Result<(), JobProblem> {
    check_name(&job.name).map_err(JobProblem::Name)?;
    if !(job.arrival.is_finite() && job.arrival >= 0.0) {
        return Err(JobProblem::Arrival {
            arrival: job.arrival,
        });
    }
    if job.min_threads == 0 {
        return Err(JobProblem::NoThreads);
    }
    if let Some(max) = job.max_threads {
        if max < job.min_threads {
            return Err(JobProblem::ThreadRange {
                min: job.min_threads,
                max,
            });
        }
    }
    if !(job.weight.is_finite() && job.weight > 0.0) {
        return Err(JobProblem::Weight { weight: job.weight });
    }
    if let Some(Owner { share, .. }) = job.owner {
        if !(share.is_finite() && share > 0.0) {
            return Err(JobProblem::Share { share });
        }
    }
    if job.command.is_empty() && job.profile.is_none() {
        return Err(JobProblem::NothingToRun);
    }
    Ok(())
}

/// The key of a `key = value` line, so type errors can name the field.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let (key, _) = text.lines().nth(line - 1)?.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

fn line_of(text: &str, offset: usize) -> usize {
    LineCounter::new(text).line_at(offset)
}

/// Line numbers of increasing offsets in one pass over the text: counting from the start for every job
/// made loading a workload quadratic in its size.
struct LineCounter<'t> {
    text: &'t str,
    offset: usize,
    line: usize,
}

impl<'t> LineCounter<'t> {
    fn new(text: &'t str) -> Self {
        LineCounter {
            text,
            offset: 0,
            line: 1,
        }
    }

    /// The line holding byte `offset`; offsets before the last one asked for count from the start.
    fn line_at(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        if offset < self.offset {
            (self.offset, self.line) = (0, 1);
        }
        self.line += self.text.as_bytes()[self.offset..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.offset = offset;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[workload]
name = "pair"

[[job]]
name = "lu"
kind = "malleable"
command = ["{bench}/barrier", "--threads", "{threads}"]
profile = "nas/lu.A"
hints = { sync = "spin" }

[[job]]
name = "ep"
arrival = 5.0
kind = "rigid"
min_threads = 2
max_threads = 2
profile = "nas/ep.B"
"#;

    #[test]
    fn jobs_get_defaults_and_machine_sized_bounds() {
        let workload = Workload::parse(GOOD, "pair.toml").unwrap();
        let specs = workload.specs(24);
        assert_eq!(specs[0].max_threads, 24);
        assert_eq!(specs[0].hints.sync, crate::job::SyncKind::Spin);
        assert!(specs[0].coschedule);
        assert_eq!(specs[1].id, JobId(1));
        assert_eq!((specs[1].min_threads, specs[1].max_threads), (2, 2));
    }

    #[test]
    fn round_trips_through_toml() {
        let workload = Workload::parse(GOOD, "pair.toml").unwrap();
        let again = Workload::parse(&workload.to_toml(), "again.toml").unwrap();
        assert_eq!(workload.jobs, again.jobs);
    }

    fn error_of(text: &str) -> String {
        Workload::parse(text, "w.toml").unwrap_err().to_string()
    }

    #[test]
    fn an_owner_reaches_the_spec_and_its_share_is_checked() {
        let owned = "[workload]\nname = \"x\"\n[[job]]\nname = \"a\"\nprofile = \"p\"\n";
        let with = |owner: &str| format!("{owned}owner = {owner}\n");
        let workload = Workload::parse(&with("{ user = 7 }"), "w.toml").unwrap();
        let spec = &workload.specs(4)[0];
        assert_eq!(
            spec.owner,
            Some(Owner {
                user: 7,
                share: 1.0
            })
        );
        assert_eq!(
            Workload::parse(owned, "w.toml").unwrap().specs(4)[0].owner,
            None
        );
        let err = error_of(&with("{ user = 7, share = 0 }"));
        assert!(err.contains("owner.share"), "{err}");
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let err = error_of("[workload]\nname = \"x\"\n[[job]]\nname = \"a\"\nthreads = 4\n");
        assert!(err.starts_with("w.toml: line 5"), "{err}");
        assert!(err.contains("threads"), "{err}");
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = error_of("[workload]\nname = \"x\"\n[[job]]\nname = \"a\"\narrival = \"soon\"\nprofile = \"p\"\n");
        assert!(err.contains("line 5") && err.contains("arrival"), "{err}");
    }

    #[test]
    fn semantic_errors_point_at_the_job() {
        let err = error_of("[workload]\nname = \"x\"\n\n[[job]]\nname = \"a\"\nmin_threads = 4\nmax_threads = 2\nprofile = \"p\"\n");
        assert!(
            err.contains("line 4") && err.contains("max_threads"),
            "{err}"
        );
        let err = error_of("[workload]\nname = \"x\"\n[[job]]\nname = \"a\"\n");
        assert!(err.contains("command") && err.contains("profile"), "{err}");
        let err = error_of("[workload]\nname = \"x\"\n[[job]]\nname = \"a\"\nprofile = \"p\"\n[[job]]\nname = \"a\"\nprofile = \"p\"\n");
        assert!(err.contains("line 6") && err.contains("line 3"), "{err}");
    }

    #[test]
    fn line_counter_counts_forwards_and_again_from_the_start() {
        let text = "a\nb\nc\n";
        let mut lines = LineCounter::new(text);
        assert_eq!(lines.line_at(0), 1);
        assert_eq!(lines.line_at(4), 3);
        assert_eq!(lines.line_at(2), 2);
        assert_eq!(lines.line_at(99), 4);
    }

    #[test]
    fn workload_name_that_leaves_the_results_directory_is_refused() {
        let err = error_of(
            "[workload]\nname = \"../../etc/x\"\n[[job]]\nname = \"a\"\nprofile = \"p\"\n",
        );
        assert!(
            err.starts_with("w.toml: [workload] field `name`") && err.contains("'/'"),
            "{err}"
        );
    }

    /// A workload of `jobs` jobs, each with a table of hints below it, and a comment between jobs.
    fn many_jobs(jobs: usize) -> String {
        let mut text = String::from("[workload]\nname = \"many\"\n");
        for i in 0..jobs {
            text += &format!(
                "\n# job {i}\n[[job]]\nname = \"j{i}\"\narrival = {i}.5\nprofile = \"nas/cg.B\"\n\n[job.hints]\nsync = \"block\"\n"
            );
        }
        text
    }

    /// Each job with the bytes it spans in the file.
    fn jobs_and_spans(file: &WorkloadFile) -> Vec<(std::ops::Range<usize>, JobEntry)> {
        file.job
            .iter()
            .map(|job| (job.span(), job.get_ref().clone()))
            .collect()
    }

    #[test]
    fn a_file_parsed_in_pieces_gives_the_jobs_and_places_of_one_parse() {
        let text = many_jobs(40);
        assert_eq!(job_cuts(&text, 4).len(), 3, "the file is cut");
        let whole: WorkloadFile = toml::from_str(&text).unwrap();
        let pieces = parse_in_pieces(&text, 4).unwrap();
        assert_eq!(pieces.workload, whole.workload);
        assert_eq!(jobs_and_spans(&pieces), jobs_and_spans(&whole));
    }

    #[test]
    fn a_file_that_does_not_split_cleanly_is_parsed_whole() {
        // The workload's own table after the jobs: the pieces after the first hold more than jobs.
        let text = many_jobs(40);
        let (head, jobs) = text.split_at(text.find("\n# job 0").unwrap());
        let reordered = format!("{jobs}\n{head}");
        let whole: WorkloadFile = toml::from_str(&reordered).unwrap();
        let pieces = parse_in_pieces(&reordered, 4).unwrap();
        assert_eq!(jobs_and_spans(&pieces), jobs_and_spans(&whole));
        // A second workload table at the end, which the whole file refuses: so must the pieces.
        let twice = format!("{text}\n[workload]\nname = \"again\"\n");
        let expected = toml::from_str::<WorkloadFile>(&twice).unwrap_err();
        assert_eq!(
            parse_in_pieces(&twice, 4).unwrap_err().message(),
            expected.message()
        );
        // A broken job in a late piece: the error is the whole file's, with its line.
        let broken = text.replace("name = \"j33\"", "name = j33");
        let expected = toml::from_str::<WorkloadFile>(&broken).unwrap_err();
        let error = parse_in_pieces(&broken, 4).unwrap_err();
        assert_eq!(error.span(), expected.span());
        assert_eq!(error.message(), expected.message());
    }
}
