//! Partitions over time (after TACO Fig. 2): one row per CPU, coloured by the job that holds it.
//!
//! A plan with several slots (gang scheduling) splits each CPU's row into horizontal bands, one per
//! slot, as tall as the slot's share of the cycle; jobs sharing a CPU within a slot split its band
//! evenly. Time-sharing thus reads as stacked shares. Pinned jobs run in every slot. A job is drawn only while it runs (between its start and its finish); a failed
//! job is hatched in red.

use crate::run::Run;
use crate::svg::{self, Frame, LegendEntry, Svg};
use cosched_core::job::JobId;
use cosched_core::plan::{Assignment, Plan};
use cosched_core::CpuSet;
use std::collections::BTreeMap;

const WIDTH: f64 = 900.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
/// Above this many jobs the legend would dwarf the chart; tooltips name the jobs instead.
const MAX_LEGEND_JOBS: usize = 48;

/// One drawn rectangle before merging: a job's band on a contiguous range of CPU rows.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
struct BandKey {
    job: JobId,
    /// Band offset and height within a row, in millionths of the row.
    band_from: u32,
    band_height: u32,
    first_row: usize,
    last_row: usize,
}

pub fn render(run: &Run, figure_id: &str) -> String {
    let hatch = svg::failed_hatch(figure_id);
    let rows = cpu_rows(run);
    let row_of: BTreeMap<u32, usize> = rows.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let row_height = if rows.len() <= 32 {
        (160.0 / rows.len().max(1) as f64).clamp(20.0, 44.0)
    } else {
        (640.0 / rows.len() as f64).max(1.0)
    };
    let end = run.end_time().max(1e-9);
    let jobs: BTreeMap<JobId, usize> = run
        .summary
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.id, i))
        .collect();
    let legend_entries = legend_entries(run, &hatch.fill);
    let legend_h = svg::legend_height(WIDTH - LEFT - RIGHT, &legend_entries);
    let frame = Frame {
        left: LEFT,
        top: TOP,
        width: WIDTH - LEFT - RIGHT,
        height: row_height * rows.len().max(1) as f64,
        x_max: end,
        y_max: 1.0,
    };
    let height = frame.bottom() + 44.0 + legend_h + 8.0;
    let mut doc = Svg::new(WIDTH, height);
    doc.def(&hatch.def);
    doc.text(
        LEFT,
        18.0,
        "start",
        &format!("Partitions over time: {}", run.label),
        r#"font-weight="bold""#,
    );

    for (key, spans) in merged_bands(run, &row_of) {
        let Some(job) = jobs.get(&key.job).map(|i| &run.summary.jobs[*i]) else {
            continue;
        };
        let colour = svg::job_colour(jobs[&key.job]);
        let y =
            frame.top + key.first_row as f64 * row_height + row_height * key.band_from as f64 / 1e6;
        let rows_spanned = (key.last_row - key.first_row) as f64;
        let h = rows_spanned * row_height + row_height * key.band_height as f64 / 1e6;
        let cpus = format_rows(&rows[key.first_row..=key.last_row]);
        for (from, to) in spans {
            let tooltip = format!(
                "{}{}: CPUs {cpus}, {from:.2}–{to:.2} s{}",
                job.name,
                if job.failed { " (failed)" } else { "" },
                if key.band_height < 1_000_000 {
                    format!(", {:.0}% share", key.band_height as f64 / 1e4)
                } else {
                    String::new()
                }
            );
            let x = frame.x(from);
            let w = frame.x(to) - x;
            // A hairline white gap keeps neighbouring rows and bands apart.
            doc.rect(x, y, w, (h - 0.6).max(0.4), &colour, Some(&tooltip));
            if job.failed {
                doc.rect(x, y, w, (h - 0.6).max(0.4), &hatch.fill, None);
            }
        }
    }

    let label_every = (12.0 / row_height).ceil().max(1.0) as usize;
    for (i, cpu) in rows.iter().enumerate().step_by(label_every) {
        let y = frame.top + (i as f64 + 0.5) * row_height + 4.0;
        doc.text(LEFT - 6.0, y, "end", &format!("cpu {cpu}"), "");
    }
    doc.line(LEFT, frame.top, LEFT, frame.bottom(), r##"stroke="#333""##);
    frame.draw_x_axis(&mut doc, "time (s)");
    svg::legend(
        &mut doc,
        LEFT,
        frame.bottom() + 44.0,
        WIDTH - LEFT - RIGHT,
        &legend_entries,
    );
    doc.finish(&format!("Partitions over time: {}", run.label))
}

/// Every CPU of the machine (0..cpus from `run_start`) plus any CPU a plan names.
fn cpu_rows(run: &Run) -> Vec<u32> {
    let mut all = CpuSet::from_range(0..run.cpus as u32);
    for period in run.plan_periods() {
        for a in period
            .plan
            .slots
            .iter()
            .flat_map(|s| &s.assignments)
            .chain(&period.plan.pinned)
        {
            all = all.union(&a.cpus);
        }
    }
    all.iter().collect()
}

/// Rectangles keyed by job, band and row range, each with the time spans it covers; spans that
/// continue across consecutive plans are merged so long runs stay one rectangle.
///
/// A slot's band on a CPU is split evenly between the jobs that share that CPU in the slot (UE puts
/// every job on every CPU), so sharing shows as stacked shares rather than one job hiding another.
fn merged_bands(run: &Run, row_of: &BTreeMap<u32, usize>) -> BTreeMap<BandKey, Vec<(f64, f64)>> {
    let lifetimes: BTreeMap<JobId, (f64, f64)> = run
        .summary
        .jobs
        .iter()
        .filter_map(|j| Some((j.id, (j.start?, j.finish.unwrap_or(f64::INFINITY)))))
        .collect();
    let mut bands: BTreeMap<BandKey, Vec<(f64, f64)>> = BTreeMap::new();
    for period in run.plan_periods() {
        let alive = |job: &JobId| {
            let (start, finish) = lifetimes.get(job)?;
            let (t0, t1) = (period.from.max(*start), period.to.min(*finish));
            (t1 > t0).then_some((t0, t1))
        };
        for (band_from, share, assignments) in layers(period.plan) {
            let mut jobs_on_row: BTreeMap<usize, Vec<JobId>> = BTreeMap::new();
            for a in assignments.iter().filter(|a| alive(&a.job).is_some()) {
                for row in a.cpus.iter().filter_map(|c| row_of.get(&c)) {
                    let jobs = jobs_on_row.entry(*row).or_default();
                    if !jobs.contains(&a.job) {
                        jobs.push(a.job);
                    }
                }
            }
            let mut rows_of_band: BTreeMap<(JobId, u32, u32), Vec<usize>> = BTreeMap::new();
            for (row, jobs) in jobs_on_row {
                let part = share / jobs.len() as f64;
                for (i, job) in jobs.into_iter().enumerate() {
                    let from = band_from + part * i as f64;
                    let key = (job, millionths(from), millionths(part));
                    rows_of_band.entry(key).or_default().push(row);
                }
            }
            for ((job, band_from, band_height), rows) in rows_of_band {
                let Some((t0, t1)) = alive(&job) else {
                    continue;
                };
                // Bands of consecutive rows touch only when they fill the row.
                let full_row = band_height == millionths(1.0);
                for (first_row, last_row) in row_ranges(rows, full_row) {
                    let key = BandKey {
                        job,
                        band_from,
                        band_height,
                        first_row,
                        last_row,
                    };
                    let spans = bands.entry(key).or_default();
                    match spans.last_mut() {
                        Some(last) if (last.1 - t0).abs() < 1e-9 => last.1 = t1,
                        _ => spans.push((t0, t1)),
                    }
                }
            }
        }
    }
    bands
}

/// The plan's slots as bands of a CPU row: (offset, height as a share of the cycle, who runs).
/// Pinned jobs run in every slot.
fn layers(plan: &Plan) -> Vec<(f64, f64, Vec<&Assignment>)> {
    if plan.slots.is_empty() {
        return vec![(0.0, 1.0, plan.pinned.iter().collect())];
    }
    let cycle = plan.cycle_length();
    let mut from = 0.0;
    plan.slots
        .iter()
        .map(|slot| {
            let share = if cycle > 0.0 {
                slot.length / cycle
            } else {
                1.0 / plan.slots.len() as f64
            };
            let layer = (
                from,
                share,
                plan.pinned.iter().chain(&slot.assignments).collect(),
            );
            from += share;
            layer
        })
        .collect()
}

fn millionths(fraction: f64) -> u32 {
    (fraction * 1e6).round() as u32
}

/// Rows as ranges: contiguous ones joined when `join` is set, else one range per row.
fn row_ranges(mut rows: Vec<usize>, join: bool) -> Vec<(usize, usize)> {
    rows.sort_unstable();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for r in rows {
        match ranges.last_mut() {
            Some(last) if join && last.1 + 1 == r => last.1 = r,
            _ => ranges.push((r, r)),
        }
    }
    ranges
}

fn format_rows(cpus: &[u32]) -> String {
    cpus.iter().copied().collect::<CpuSet>().to_string()
}

fn legend_entries(run: &Run, hatch: &str) -> Vec<LegendEntry> {
    if run.summary.jobs.len() > MAX_LEGEND_JOBS {
        return Vec::new();
    }
    run.summary
        .jobs
        .iter()
        .enumerate()
        .map(|(i, job)| LegendEntry {
            label: match (job.failed, job.start) {
                (true, None) => format!("{} (failed, never ran)", job.name),
                (true, Some(_)) => format!("{} (failed)", job.name),
                _ => job.name.clone(),
            },
            fill: svg::job_colour(i),
            overlay: job.failed.then(|| hatch.to_string()),
        })
        .collect()
}
