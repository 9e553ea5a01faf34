//! Per-job bars (after CaSAS Fig. 2): for every job, one bar per run, with a reference line at 1
//! (as fast as alone). A job that failed in a run gets a red cross instead of a bar.

use crate::run::Run;
use crate::svg::{self, Frame, LegendEntry, Svg};
use cosched_core::job::JobId;
use cosched_core::metrics::JobResult;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobMetric {
    /// Response time over isolated time.
    Slowdown,
    /// Execution time shared over time alone.
    Ntt,
}

impl JobMetric {
    pub fn title(self) -> &'static str {
        match self {
            JobMetric::Slowdown => "Slowdown per job (response / isolated time)",
            JobMetric::Ntt => "Normalised turnaround time per job (execution / isolated time)",
        }
    }

    pub fn axis(self) -> &'static str {
        match self {
            JobMetric::Slowdown => "slowdown",
            JobMetric::Ntt => "NTT",
        }
    }

    fn value(self, job: &JobResult) -> Option<f64> {
        match self {
            JobMetric::Slowdown => job.slowdown,
            JobMetric::Ntt => job.ntt,
        }
    }
}

const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const PLOT_HEIGHT: f64 = 240.0;
const MAX_NAME_CHARS: usize = 24;

pub fn render(runs: &[Run], metric: JobMetric, figure_id: &str) -> String {
    let hatch = svg::failed_hatch(figure_id);
    let mut names: BTreeMap<JobId, String> = BTreeMap::new();
    for job in runs.iter().flat_map(|r| &r.summary.jobs) {
        names.entry(job.id).or_insert_with(|| job.name.clone());
    }
    let per_run: Vec<BTreeMap<JobId, &JobResult>> = runs
        .iter()
        .map(|r| r.summary.jobs.iter().map(|j| (j.id, j)).collect())
        .collect();
    let bars_per_group = runs.len().max(1) as f64;
    let groups = names.len().max(1) as f64;
    let bar_width = (720.0 / (groups * bars_per_group)).clamp(3.0, 18.0);
    let width = (LEFT + RIGHT + (bar_width * (bars_per_group + 1.0)) * groups).max(600.0);
    // Groups spread over the whole width; the gap between groups is one bar or more.
    let group_width = (width - LEFT - RIGHT) / groups;
    let gap = group_width - bar_width * bars_per_group;
    let longest = names
        .values()
        .map(|n| n.chars().count().min(MAX_NAME_CHARS))
        .max()
        .unwrap_or(0) as f64;
    let label_depth = 12.0 + longest * svg::CHAR_WIDTH * 0.72;
    let highest = per_run
        .iter()
        .flat_map(|m| m.values())
        .filter_map(|j| metric.value(j))
        .fold(1.0, f64::max);
    let any_failed = per_run.iter().flat_map(|m| m.values()).any(|j| j.failed);
    let entries = legend_entries(runs, any_failed, &hatch.fill);
    let legend_h = svg::legend_height(width - LEFT - RIGHT, &entries);
    let frame = Frame {
        left: LEFT,
        top: TOP,
        width: width - LEFT - RIGHT,
        height: PLOT_HEIGHT,
        x_max: 1.0,
        y_max: highest * 1.1,
    };
    let legend_top = frame.bottom() + label_depth + 10.0;
    let mut doc = Svg::new(width, legend_top + legend_h + 6.0);
    doc.def(&hatch.def);
    doc.text(LEFT, 18.0, "start", metric.title(), r#"font-weight="bold""#);
    frame.draw_y_axis(&mut doc, metric.axis(), false);
    for (g, (id, name)) in names.iter().enumerate() {
        let group_left = LEFT + g as f64 * group_width + gap / 2.0;
        for (r, jobs) in per_run.iter().enumerate() {
            let Some(job) = jobs.get(id) else { continue };
            let bar = Bar {
                x: group_left + r as f64 * bar_width,
                width: bar_width,
                run: r,
                run_label: &runs[r].label,
                job_name: name,
            };
            draw_bar(&mut doc, &frame, &bar, job, metric, &hatch.fill);
        }
        let cx = group_left + bar_width * bars_per_group / 2.0;
        let cy = frame.bottom() + 12.0;
        let short: String = name.chars().take(MAX_NAME_CHARS).collect();
        doc.text(
            cx,
            cy,
            "end",
            &short,
            &format!(r#"transform="rotate(-40 {cx:.1} {cy:.1})""#),
        );
    }
    let one = frame.y(1.0);
    doc.line(
        LEFT,
        one,
        LEFT + frame.width,
        one,
        r##"stroke="#555" stroke-dasharray="4 3""##,
    );
    doc.line(
        LEFT,
        frame.bottom(),
        LEFT + frame.width,
        frame.bottom(),
        r##"stroke="#333""##,
    );
    svg::legend(&mut doc, LEFT, legend_top, frame.width, &entries);
    doc.finish(metric.title())
}

/// Where one job's bar for one run goes, and what its tooltip names.
struct Bar<'a> {
    x: f64,
    width: f64,
    run: usize,
    run_label: &'a str,
    job_name: &'a str,
}

/// A bar as high as the job's value, or a short hatched bar with a cross where the job failed.
fn draw_bar(
    doc: &mut Svg,
    frame: &Frame,
    bar: &Bar,
    job: &JobResult,
    metric: JobMetric,
    hatch_fill: &str,
) {
    if job.failed {
        let tip = format!(
            "{} under {}: failed{}",
            bar.job_name,
            bar.run_label,
            job.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        let h = 16.0;
        doc.rect(
            bar.x,
            frame.bottom() - h,
            bar.width - 1.0,
            h,
            hatch_fill,
            Some(&tip),
        );
        doc.text(
            bar.x + bar.width / 2.0,
            frame.bottom() - h - 3.0,
            "middle",
            "✕",
            &format!(r#"fill="{}" font-weight="bold""#, svg::FAILED_COLOUR),
        );
    } else if let Some(v) = metric.value(job) {
        let y = frame.y(v);
        doc.rect(
            bar.x,
            y,
            bar.width - 1.0,
            frame.bottom() - y,
            &svg::run_colour(bar.run),
            Some(&format!(
                "{} under {}: {} {v:.2}",
                bar.job_name,
                bar.run_label,
                metric.axis()
            )),
        );
    }
}

/// One entry per run, and one for failed jobs where any job failed.
fn legend_entries(runs: &[Run], any_failed: bool, hatch_fill: &str) -> Vec<LegendEntry> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| LegendEntry {
            label: r.label.clone(),
            fill: svg::run_colour(i),
            overlay: None,
        })
        .chain(any_failed.then(|| LegendEntry {
            label: "✕ failed".into(),
            fill: "white".into(),
            overlay: Some(hatch_fill.to_string()),
        }))
        .collect()
}
