//! Per-job, per-run and over-time results as CSV (for pandas/R) and JSON.
//!
//! Every numeric CSV column names its unit as the end of its name (see [`UNIT_SUFFIXES`]), so that a
//! column read alone says what its numbers are.

use crate::job_facts::job_facts;
use crate::metadata::RunMetadata;
use crate::run::Run;
use crate::table::ComparisonRow;
use crate::timeline::timeline;
use serde::Serialize;
use std::path::{Component, Path, PathBuf};

/// The ends a numeric column's name may have, with what they mean; a name may also be the unit alone
/// (`cpus`, `threads`).
pub const UNIT_SUFFIXES: &[(&str, &str)] = &[
    ("_s", "seconds"),
    ("_ms", "milliseconds"),
    ("_mib", "mebibytes"),
    ("_pct", "percent"),
    (
        "_ratio",
        "a dimensionless ratio of two times (slowdown, NTT) or an index built from them (STP, \
Jain fairness)",
    ),
    ("_count", "a number of things, events or jobs"),
    ("_threads", "a number of threads"),
    (
        "_cpus",
        "a set of CPUs in the kernel's list syntax (0-3,8), as taskset and /sys write it",
    ),
    ("_id", "an identifier (job id, user id, random seed)"),
    (
        "_ids",
        "identifiers separated by spaces (the nodes of a job)",
    ),
    (
        "_code",
        "a process exit code, or the number of the signal that ended it",
    ),
];

/// One line per job per run.
pub fn jobs_csv(runs: &[Run], metadata: Option<&RunMetadata>) -> String {
    let mut out = header(&[
        "run",
        "policy",
        "executor",
        "job_id",
        "job",
        "kind",
        "command",
        "status",
        "exit_code",
        "arrival_s",
        "start_s",
        "finish_s",
        "isolated_s",
        "response_s",
        "slowdown_ratio",
        "bounded_slowdown_ratio",
        "ntt_ratio",
        "start_threads",
        "peak_threads",
        "start_cpus",
        "start_cpu_count",
        "reconfigurations_count",
        "migrations_count",
        "thread_changes_count",
        "cpu_time_s",
        "error",
    ]);
    for run in runs {
        let metadata = run.metadata.as_ref().or(metadata);
        let executor = run.executor_name().unwrap_or_default();
        let facts = job_facts(&run.lines);
        for job in &run.summary.jobs {
            let status = match (job.failed, job.finish) {
                (true, _) => "failed",
                (false, Some(_)) => "ok",
                (false, None) => "unfinished",
            };
            let fact = facts.get(&job.id).cloned().unwrap_or_default();
            let command = metadata
                .and_then(|m| m.command_of(u64::from(job.id.0), &job.name))
                .unwrap_or_default()
                .to_string();
            let fields = [
                run.label.clone(),
                run.summary.policy.clone(),
                executor.clone(),
                job.id.to_string(),
                job.name.clone(),
                fact.kind.map(kind_name).unwrap_or_default(),
                command,
                status.into(),
                opt(fact.exit_code),
                num(Some(job.arrival)),
                num(job.start),
                num(job.finish),
                num(job.isolated),
                num(job.response),
                num(job.slowdown),
                num(job.bounded_slowdown),
                num(job.ntt),
                opt(fact.start_threads),
                opt(fact.peak_threads),
                fact.start_cpus
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                opt(fact.start_cpus.as_ref().map(|c| c.len())),
                job.reconfigurations.to_string(),
                job.migrations.to_string(),
                job.thread_changes.to_string(),
                num(Some(job.cpu_seconds)),
                job.error.clone().unwrap_or_default(),
            ];
            push_record(&mut out, &fields);
        }
    }
    out
}

/// One line per run: the columns of `ComparisonRow`, what the trace says of the run and the
/// invocation's metadata.
pub fn policies_csv(
    runs: &[Run],
    rows: &[ComparisonRow],
    metadata: Option<&RunMetadata>,
) -> String {
    let mut out = header(&[
        "run",
        "policy",
        "policy_settings",
        "executor",
        "mechanism",
        "machine",
        "workload",
        "seed_id",
        "jobs_count",
        "makespan_s",
        "makespan_of_bp_pct",
        "mean_slowdown_ratio",
        "max_slowdown_ratio",
        "mean_bounded_slowdown_ratio",
        "antt_ratio",
        "stp_ratio",
        "fairness_ratio",
        "reconfigurations_count",
        "migrations_count",
        "thread_changes_count",
        "failed_count",
        "unfinished_count",
        "overhead_s",
        "cosched_version",
        "git_revision",
        "host",
        "cpu_model",
        "kernel",
        "cgroup_version",
        "privileges",
        "date",
        "command_line",
    ]);
    let none = RunMetadata::default();
    for (r, run) in rows.iter().zip(runs) {
        let m = run.metadata.as_ref().or(metadata).unwrap_or(&none);
        let settings = r.policy.split_once(':').map_or("", |(_, s)| s);
        let fields = [
            r.run.clone(),
            r.policy.clone(),
            settings.to_string(),
            r.executor.clone().unwrap_or_default(),
            run.summary.mechanism.clone().unwrap_or_default(),
            r.machine.clone(),
            r.workload.clone(),
            opt(run.summary.seed),
            r.jobs.to_string(),
            num(r.makespan),
            num(r.makespan_pct_of_bp),
            num(r.mean_slowdown),
            num(r.max_slowdown),
            num(r.mean_bounded_slowdown),
            num(r.antt),
            num(r.stp),
            num(r.fairness),
            r.reconfigurations.to_string(),
            r.migrations.to_string(),
            r.thread_changes.to_string(),
            r.failed.to_string(),
            r.unfinished.to_string(),
            num(r.overhead_seconds),
            m.cosched_version.clone(),
            m.git_revision.clone().unwrap_or_default(),
            m.host.clone(),
            m.cpu_model.clone(),
            m.kernel.clone(),
            m.cgroup_version.clone(),
            m.privileges.clone(),
            m.date.clone(),
            m.command_line.clone(),
        ];
        push_record(&mut out, &fields);
    }
    out
}

/// Every job's state over time, one line per change (see [`crate::timeline`]).
pub fn timeline_csv(runs: &[Run]) -> String {
    let mut out = header(&[
        "run",
        "policy",
        "time_s",
        "job_id",
        "job",
        "state",
        "cpus",
        "cpu_count",
        "threads",
        "cycle_share_ratio",
    ]);
    for run in runs {
        let names: std::collections::BTreeMap<_, _> = run
            .summary
            .jobs
            .iter()
            .map(|j| (j.id, j.name.as_str()))
            .collect();
        for step in timeline(run) {
            let fields = [
                run.label.clone(),
                run.summary.policy.clone(),
                num(Some(step.t)),
                step.job.to_string(),
                names
                    .get(&step.job)
                    .copied()
                    .unwrap_or_default()
                    .to_string(),
                step.state.name().to_string(),
                step.cpus.to_string(),
                step.cpus.len().to_string(),
                step.threads.to_string(),
                step.cycle_share.to_string(),
            ];
            push_record(&mut out, &fields);
        }
    }
    out
}

#[derive(Serialize)]
struct RunJson<'a> {
    label: &'a str,
    /// The run's own record, where it has one apart from the report's.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a RunMetadata>,
    /// Relative to the results directory where the trace lies inside it.
    trace: Option<String>,
    summary: &'a cosched_core::metrics::RunSummary,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a RunMetadata>,
    comparison: &'a [ComparisonRow],
    runs: Vec<RunJson<'a>>,
}

/// The invocation's metadata, the comparison rows and every run's full summary (with per-job
/// results); trace paths relative to `dir`, the results directory.
pub fn results_json(
    runs: &[Run],
    rows: &[ComparisonRow],
    metadata: Option<&RunMetadata>,
    dir: &Path,
) -> String {
    let doc = ResultsJson {
        metadata,
        comparison: rows,
        runs: runs
            .iter()
            .map(|r| RunJson {
                label: &r.label,
                metadata: r.metadata.as_ref(),
                trace: r
                    .source
                    .as_ref()
                    .map(|p| relative_to(p, dir).display().to_string()),
                summary: &r.summary,
            })
            .collect(),
    };
    // Serialising plain data with string keys cannot fail.
    serde_json::to_string_pretty(&doc).expect("results serialise") + "\n"
}

/// `path` as seen from `base`, through `..` where it lies outside; as given if either cannot be
/// resolved.
fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let (Ok(path_abs), Ok(base_abs)) = (path.canonicalize(), base.canonicalize()) else {
        return path.to_path_buf();
    };
    let path_parts: Vec<Component> = path_abs.components().collect();
    let base_parts: Vec<Component> = base_abs.components().collect();
    let common = path_parts
        .iter()
        .zip(&base_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = PathBuf::new();
    for _ in common..base_parts.len() {
        relative.push("..");
    }
    for part in &path_parts[common..] {
        relative.push(part);
    }
    relative
}

fn kind_name(kind: cosched_core::JobKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn header(columns: &[&str]) -> String {
    columns.join(",") + "\n"
}

/// Numbers at full precision; missing values as empty cells, which pandas and R read as NA.
fn num(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn push_record(out: &mut String, fields: &[String]) {
    out.push_str(&csv_record(fields));
}

/// One CSV line of `fields`, quoted where they need it, with its line end.
pub fn csv_record(fields: &[String]) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| quote(f)).collect();
    quoted.join(",") + "\n"
}

/// The fields of one line [`csv_record`] wrote (RFC 4180 quoting; no line break inside a field),
/// for whatever reads the files back.
pub fn csv_fields(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// RFC 4180 quoting: only fields with a comma, quote or line break are quoted.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_as_written() {
        let fields: Vec<String> = ["a", "", "b,c", "say \"hi\"", "0-1,4"]
            .map(String::from)
            .to_vec();
        let line = csv_record(&fields);
        assert_eq!(line, "a,,\"b,c\",\"say \"\"hi\"\"\",\"0-1,4\"\n");
        assert_eq!(csv_fields(line.trim_end()), fields);
    }

    #[test]
    fn paths_are_relative_to_the_results_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("results");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/ue.jsonl"), "").unwrap();
        std::fs::write(root.path().join("elsewhere.jsonl"), "").unwrap();
        assert_eq!(
            relative_to(&dir.join("sub/ue.jsonl"), &dir),
            Path::new("sub/ue.jsonl")
        );
        assert_eq!(
            relative_to(&root.path().join("elsewhere.jsonl"), &dir),
            Path::new("../elsewhere.jsonl")
        );
    }
}
