//! Per-job and per-run results as CSV (for pandas/R) and JSON.

use crate::run::Run;
use crate::table::ComparisonRow;
use serde::Serialize;

/// One line per job per run.
pub fn jobs_csv(runs: &[Run]) -> String {
    let mut out = String::from(
        "run,policy,executor,job,name,status,arrival,start,finish,isolated,response,slowdown,\
bounded_slowdown,ntt,reconfigurations,migrations,thread_changes,cpu_seconds,error\n",
    );
    for run in runs {
        let executor = run.executor_name().unwrap_or_default();
        for job in &run.summary.jobs {
            let status = match (job.failed, job.finish) {
                (true, _) => "failed",
                (false, Some(_)) => "ok",
                (false, None) => "unfinished",
            };
            let fields = [
                run.label.clone(),
                run.summary.policy.clone(),
                executor.clone(),
                job.id.to_string(),
                job.name.clone(),
                status.into(),
                num(Some(job.arrival)),
                num(job.start),
                num(job.finish),
                num(job.isolated),
                num(job.response),
                num(job.slowdown),
                num(job.bounded_slowdown),
                num(job.ntt),
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

/// One line per run, the columns of `ComparisonRow`.
pub fn policies_csv(rows: &[ComparisonRow]) -> String {
    let mut out = String::from(
        "run,policy,executor,machine,workload,jobs,makespan,makespan_pct_of_bp,mean_slowdown,\
max_slowdown,mean_bounded_slowdown,antt,stp,fairness,reconfigurations,migrations,thread_changes,\
failed,unfinished,overhead_seconds\n",
    );
    for r in rows {
        let fields = [
            r.run.clone(),
            r.policy.clone(),
            r.executor.clone().unwrap_or_default(),
            r.machine.clone(),
            r.workload.clone(),
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
        ];
        push_record(&mut out, &fields);
    }
    out
}

#[derive(Serialize)]
struct RunJson<'a> {
    label: &'a str,
    trace: Option<String>,
    summary: &'a cosched_core::metrics::RunSummary,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    comparison: &'a [ComparisonRow],
    runs: Vec<RunJson<'a>>,
}

/// The comparison rows and every run's full summary (with per-job results).
pub fn results_json(runs: &[Run], rows: &[ComparisonRow]) -> String {
    let doc = ResultsJson {
        comparison: rows,
        runs: runs
            .iter()
            .map(|r| RunJson {
                label: &r.label,
                trace: r.source.as_ref().map(|p| p.display().to_string()),
                summary: &r.summary,
            })
            .collect(),
    };
    // Serialising plain data with string keys cannot fail.
    serde_json::to_string_pretty(&doc).expect("results serialise") + "\n"
}

/// Numbers at full precision; missing values as empty cells, which pandas and R read as NA.
fn num(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn push_record(out: &mut String, fields: &[String]) {
    let quoted: Vec<String> = fields.iter().map(|f| quote(f)).collect();
    out.push_str(&quoted.join(","));
    out.push('\n');
}

/// RFC 4180 quoting: only fields with a comma, quote or line break are quoted.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}
