//! The self-contained HTML report: the comparison table, failures, every figure inlined as SVG, and the
//! per-job results. No scripts, no external files, so it can be mailed or archived as one file.

use crate::run::Run;
use crate::svg::escape;
use crate::table::{self, ComparisonRow};
use crate::Figure;
use std::fmt::Write;

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:2em auto;max-width:1000px;\
color:#222;padding:0 1em}table{border-collapse:collapse;margin:1em 0;font-size:14px}\
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}th:first-child,td:first-child\
{text-align:left}th{background:#f4f4f4}tr.failed td{color:#c00}.failed{color:#c00;font-weight:bold}\
figure{margin:1.5em 0;overflow-x:auto}figcaption{color:#555;font-size:13px;margin-top:.3em}\
details{margin:.5em 0}summary{cursor:pointer}code{background:#f4f4f4;padding:0 .2em}";

pub fn render(runs: &[Run], rows: &[ComparisonRow], figures: &[Figure]) -> String {
    let mut out = String::new();
    let title = report_title(runs);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n\
<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(out, "<p>{}</p>", escape(&run_context(runs)));
    out.push_str("<h2>Comparison</h2>\n");
    comparison_table(&mut out, rows);
    failures(&mut out, runs);
    for figure in figures {
        let _ = write!(
            out,
            "<figure id=\"{}\">\n{}<figcaption>{} (<a href=\"{}\">{}</a>)</figcaption>\n</figure>\n",
            figure.id,
            figure.svg,
            escape(&figure.caption),
            escape(&figure.file_name),
            escape(&figure.file_name)
        );
    }
    out.push_str("<h2>Per-job results</h2>\n");
    for run in runs {
        job_table(&mut out, run);
    }
    out.push_str(
        "<p>Data: <a href=\"jobs.csv\">jobs.csv</a> (one line per job and run), \
<a href=\"policies.csv\">policies.csv</a> (one line per run), \
<a href=\"results.json\">results.json</a> (everything).</p>\n</body>\n</html>\n",
    );
    out
}

fn report_title(runs: &[Run]) -> String {
    let workloads = distinct(runs.iter().map(|r| r.summary.workload.as_str()));
    format!("cosched report: {}", workloads.join(", "))
}

fn run_context(runs: &[Run]) -> String {
    let machines = distinct(runs.iter().map(|r| r.summary.machine.as_str()));
    let executors = distinct(
        runs.iter()
            .filter_map(|r| r.summary.executor)
            .map(|e| match e {
                cosched_core::trace::ExecutorKind::Real => "real processes",
                cosched_core::trace::ExecutorKind::Sim => "simulation",
            }),
    );
    let cpus = distinct(
        runs.iter()
            .map(|r| r.cpus.to_string())
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    );
    format!(
        "{} run(s) on machine {} ({} CPUs), {}.",
        runs.len(),
        machines.join(", "),
        cpus.join("/"),
        executors.join(" and ")
    )
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        if !item.is_empty() && !seen.iter().any(|s| s == item) {
            seen.push(item.to_string());
        }
    }
    seen
}

fn comparison_table(out: &mut String, rows: &[ComparisonRow]) {
    let (headings, body) = table::cells(rows);
    out.push_str("<table id=\"comparison\">\n<tr>");
    for h in headings {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for (row, cells) in rows.iter().zip(body) {
        let class = if row.failed > 0 {
            " class=\"failed\""
        } else {
            ""
        };
        let _ = write!(out, "<tr{class}>");
        for cell in cells {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out.push_str(
        "<p>Slowdown = response / isolated time; ANTT = mean of execution / isolated time; \
STP = Σ isolated / execution time; fairness = Jain's index over 1/NTT; failed jobs are counted and \
left out of the means. % of BP = makespan relative to the batch (FIFO, one job at a time) run.</p>\n",
    );
}

fn failures(out: &mut String, runs: &[Run]) {
    let failed: Vec<(&Run, &cosched_core::metrics::JobResult)> = runs
        .iter()
        .flat_map(|r| {
            r.summary
                .jobs
                .iter()
                .filter(|j| j.failed)
                .map(move |j| (r, j))
        })
        .collect();
    if failed.is_empty() {
        return;
    }
    out.push_str("<h2 class=\"failed\">Failed jobs</h2>\n<ul id=\"failures\">\n");
    for (run, job) in failed {
        let _ = writeln!(
            out,
            "<li><span class=\"failed\">✕ {}</span> (job {}) under {}{}</li>",
            escape(&job.name),
            job.id,
            escape(&run.label),
            job.error
                .as_deref()
                .map(|e| format!(": {}", escape(e)))
                .unwrap_or_default()
        );
    }
    out.push_str("</ul>\n");
}

fn job_table(out: &mut String, run: &Run) {
    let _ = write!(
        out,
        "<details><summary>{} — {} jobs{}</summary>\n<table>\n<tr><th>job</th><th>status</th>\
<th>arrival s</th><th>start s</th><th>finish s</th><th>isolated s</th><th>slowdown</th><th>NTT</th>\
<th>reconfig</th></tr>\n",
        escape(&run.label),
        run.summary.jobs.len(),
        if run.summary.failed > 0 {
            format!(", {} failed", run.summary.failed)
        } else {
            String::new()
        }
    );
    let f = |v: Option<f64>, d: usize| v.map_or("—".to_string(), |v| format!("{v:.d$}"));
    for job in &run.summary.jobs {
        let status = match (job.failed, job.finish) {
            (true, _) => format!(
                "failed{}",
                job.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
            (false, Some(_)) => "ok".into(),
            (false, None) => "unfinished".into(),
        };
        let class = if job.failed { " class=\"failed\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td></tr>",
            escape(&job.name),
            escape(&status),
            f(Some(job.arrival), 1),
            f(job.start, 1),
            f(job.finish, 1),
            f(job.isolated, 1),
            f(job.slowdown, 2),
            f(job.ntt, 2),
            job.reconfigurations
        );
    }
    out.push_str("</table>\n</details>\n");
}
