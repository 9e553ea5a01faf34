//! The comparison table: one row per run, relative makespan against BP (the batch baseline every
//! paper reports against) when a BP run is present.

use crate::run::Run;
use serde::Serialize;
use std::fmt::Write;

/// The policy whose makespan the others are compared with.
pub const BASELINE_POLICY: &str = "bp";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub run: String,
    pub policy: String,
    pub executor: Option<String>,
    pub machine: String,
    pub workload: String,
    pub jobs: usize,
    pub makespan: Option<f64>,
    /// Makespan as a percentage of the BP run's makespan.
    pub makespan_pct_of_bp: Option<f64>,
    pub mean_slowdown: Option<f64>,
    pub max_slowdown: Option<f64>,
    pub mean_bounded_slowdown: Option<f64>,
    pub antt: Option<f64>,
    pub stp: Option<f64>,
    pub fairness: Option<f64>,
    pub reconfigurations: u32,
    pub migrations: u32,
    pub thread_changes: u32,
    pub failed: usize,
    pub unfinished: usize,
    pub overhead_seconds: Option<f64>,
}

pub fn comparison(runs: &[Run]) -> Vec<ComparisonRow> {
    let baseline = runs
        .iter()
        .find(|r| r.summary.policy == BASELINE_POLICY)
        .and_then(|r| r.summary.makespan)
        .filter(|m| *m > 0.0);
    runs.iter()
        .map(|run| {
            let s = &run.summary;
            ComparisonRow {
                run: run.label.clone(),
                policy: s.policy.clone(),
                executor: run.executor_name(),
                machine: s.machine.clone(),
                workload: s.workload.clone(),
                jobs: s.jobs.len(),
                makespan: s.makespan,
                makespan_pct_of_bp: s.makespan.zip(baseline).map(|(m, b)| 100.0 * m / b),
                mean_slowdown: s.mean_slowdown,
                max_slowdown: s.max_slowdown,
                mean_bounded_slowdown: s.mean_bounded_slowdown,
                antt: s.antt,
                stp: s.stp,
                fairness: s.fairness,
                reconfigurations: s.reconfigurations,
                migrations: s.migrations,
                thread_changes: s.thread_changes,
                failed: s.failed,
                unfinished: s.unfinished,
                overhead_seconds: s.overhead_seconds,
            }
        })
        .collect()
}

/// Column headings and cell texts, shared by the terminal table and the HTML table.
pub fn cells(rows: &[ComparisonRow]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let headings = vec![
        "policy",
        "makespan s",
        "% of BP",
        "mean slowdown",
        "max slowdown",
        "ANTT",
        "STP",
        "fairness",
        "reconfig",
        "failed",
        "overhead s",
    ];
    let body = rows
        .iter()
        .map(|r| {
            vec![
                r.run.clone(),
                match (r.makespan, r.unfinished) {
                    (Some(m), _) => format!("{m:.1}"),
                    (None, n) if n > 0 => format!("({n} unfinished)"),
                    (None, _) => "—".into(),
                },
                opt(r.makespan_pct_of_bp, 0).map_or("—".into(), |p| format!("{p}%")),
                opt(r.mean_slowdown, 2).unwrap_or("—".into()),
                opt(r.max_slowdown, 2).unwrap_or("—".into()),
                opt(r.antt, 2).unwrap_or("—".into()),
                opt(r.stp, 2).unwrap_or("—".into()),
                opt(r.fairness, 3).unwrap_or("—".into()),
                r.reconfigurations.to_string(),
                r.failed.to_string(),
                opt(r.overhead_seconds, 3).unwrap_or("—".into()),
            ]
        })
        .collect();
    (headings, body)
}

fn opt(v: Option<f64>, decimals: usize) -> Option<String> {
    v.map(|v| format!("{v:.decimals$}"))
}

/// A plain-text table with aligned columns, for the terminal.
pub fn text_table(rows: &[ComparisonRow]) -> String {
    let (headings, body) = cells(rows);
    let widths: Vec<usize> = (0..headings.len())
        .map(|c| {
            body.iter()
                .map(|row| row[c].chars().count())
                .chain([headings[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |cols: Vec<&str>, out: &mut String| {
        let padded: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(c, text)| {
                let pad = widths[c] - text.chars().count();
                if c == 0 {
                    format!("{text}{}", " ".repeat(pad))
                } else {
                    format!("{}{text}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(headings.clone(), &mut out);
    for row in &body {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}
