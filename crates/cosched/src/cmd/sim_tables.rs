//! The text tables `cosched sim` prints: one row per policy, one block per workload set (TACO Table 4's
//! shape), and the tables of a sweep.

use cosched_sim::runner::{PolicyRow, SetResult};
use cosched_sim::scenario::PaperFigures;
use cosched_sim::sweep::{PointResult, Sweep};
use std::collections::BTreeMap;

fn number(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

fn percent(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{:.digits$}%", v * 100.0))
}

/// How a column prints a figure that may be missing.
type Format = fn(Option<f64>) -> String;

fn policy_label(row: &PolicyRow) -> String {
    if row.unfinished > 0 {
        format!("{} ({} unfinished)", row.policy, row.unfinished)
    } else {
        row.policy.clone()
    }
}

/// One row per policy; the LLC miss ratio where jobs have footprints, and the paper's figures where
/// the scenario gives them.
pub fn policy_table(rows: &[PolicyRow], paper: Option<&PaperFigures>) -> String {
    type Cell<'a> = Box<dyn Fn(&PolicyRow) -> String + 'a>;
    let mut columns: Vec<(&str, Cell)> = vec![
        ("runs", Box::new(|r| r.runs.to_string())),
        ("makespan s", Box::new(|r| number(r.makespan, 1))),
        ("vs BP", Box::new(|r| percent(r.makespan_vs_bp, 0))),
        ("mean slowdown", Box::new(|r| number(r.mean_slowdown, 2))),
        ("ANTT", Box::new(|r| number(r.antt, 2))),
        (
            "reconfigs",
            Box::new(|r| format!("{:.0}", r.reconfigurations)),
        ),
    ];
    if rows.iter().any(|r| r.llc_miss_rate.is_some()) {
        columns.push(("LLC miss", Box::new(|r| percent(r.llc_miss_rate, 1))));
    }
    if let Some(paper) = paper {
        let published: [(&str, &BTreeMap<String, f64>, Format); 5] = [
            ("paper makespan s", &paper.makespan_s, |v| number(v, 1)),
            ("paper vs BP", &paper.makespan_vs_bp, |v| percent(v, 0)),
            ("paper slowdown", &paper.mean_slowdown, |v| number(v, 1)),
            ("paper ANTT", &paper.antt, |v| number(v, 2)),
            ("paper LLC miss", &paper.llc_miss_rate, |v| percent(v, 1)),
        ];
        for (header, figures, format) in published {
            if !figures.is_empty() {
                let cell = move |r: &PolicyRow| format(figures.get(&r.policy).copied());
                columns.push((header, Box::new(cell)));
            }
        }
    }
    let mut header = vec!["policy".to_string()];
    header.extend(columns.iter().map(|(h, _)| h.to_string()));
    let mut lines = vec![header];
    for row in rows {
        let mut line = vec![policy_label(row)];
        line.extend(columns.iter().map(|(_, cell)| cell(row)));
        lines.push(line);
    }
    align(&lines, 1)
}

/// TACO Table 4's shape: per set and policy, makespan relative to BP, mean slowdown and
/// reconfigurations, simulated and published side by side.
pub fn sets_table(results: &[SetResult], papers: &[Option<&PaperFigures>]) -> String {
    let header = [
        "set",
        "policy",
        "makespan (BP = 100%)",
        "mean slowdown",
        "reconfigs",
        "paper makespan",
        "paper slowdown",
        "paper reconfigs",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for (set, paper) in results.iter().zip(papers) {
        for (i, row) in set.rows.iter().enumerate() {
            let published = |figures: fn(&PaperFigures) -> &BTreeMap<String, f64>| {
                paper.and_then(|p| figures(p).get(&row.policy).copied())
            };
            lines.push(vec![
                if i == 0 {
                    set.set.clone()
                } else {
                    String::new()
                },
                policy_label(row),
                percent(row.makespan_vs_bp, 0),
                number(row.mean_slowdown, 1),
                format!("{:.0}", row.reconfigurations),
                percent(published(|p| &p.makespan_vs_bp), 0),
                number(published(|p| &p.mean_slowdown), 1),
                number(published(|p| &p.reconfigurations), 0),
            ]);
        }
    }
    align(&lines, 2)
}

/// A sweep's tables. One axis: a row per value with every policy's figure and its ratio to the
/// baseline. Two axes: each policy's figures as a grid, then each ratio to the baseline as a grid.
pub fn sweep_tables(sweep: &Sweep, points: &[PointResult], policies: &[String]) -> String {
    let others: Vec<&String> = policies.iter().filter(|p| **p != sweep.baseline).collect();
    let Some(columns) = &sweep.columns else {
        let mut header = vec![sweep.rows.name.clone()];
        header.extend(policies.iter().map(|p| format!("{p} s")));
        header.extend(others.iter().map(|p| format!("{p} / {}", sweep.baseline)));
        let mut lines = vec![header];
        for point in points {
            let mut line = vec![point.row.clone()];
            line.extend(policies.iter().map(|p| number(point.seconds[p], 2)));
            line.extend(
                others
                    .iter()
                    .map(|p| number(point.ratio(p, &sweep.baseline), 2)),
            );
            lines.push(line);
        }
        return align(&lines, 1);
    };
    let grid = |title: String, cell: &dyn Fn(&PointResult) -> Option<f64>, digits: usize| {
        let corner = format!("{} \\ {}", sweep.rows.name, columns.name);
        let mut header = vec![corner];
        header.extend(columns.values.iter().map(|v| v.text()));
        let mut lines = vec![header];
        for row in &sweep.rows.values {
            let row = row.text();
            let mut line = vec![row.clone()];
            line.extend(
                points
                    .iter()
                    .filter(|p| p.row == row)
                    .map(|p| number(cell(p), digits)),
            );
            lines.push(line);
        }
        format!("{title}\n{}", align(&lines, 1))
    };
    let mut out = Vec::new();
    for policy in policies {
        out.push(grid(
            format!(
                "{policy}: seconds until the last {} finished",
                sweep.measure
            ),
            &|p| p.seconds[policy],
            1,
        ));
    }
    for policy in others {
        out.push(grid(
            format!("{policy} / {}", sweep.baseline),
            &|p| p.ratio(policy, &sweep.baseline),
            2,
        ));
    }
    out.join("\n")
}

/// Columns padded to their widest cell; the first `left` columns left-aligned, the rest right-aligned.
fn align(lines: &[Vec<String>], left: usize) -> String {
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c < left {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
