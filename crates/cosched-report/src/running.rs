//! Number of running jobs over time (after TACO Fig. 3), one line per run.

use crate::run::Run;
use crate::svg::{self, Frame, LegendEntry, Svg};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 300.0;

pub fn render(runs: &[Run]) -> String {
    let end = runs.iter().map(Run::end_time).fold(0.0, f64::max).max(1e-9);
    let steps: Vec<Vec<(f64, usize)>> = runs.iter().map(Run::running_jobs).collect();
    let most = steps
        .iter()
        .flatten()
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0)
        .max(1);
    let entries: Vec<LegendEntry> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| LegendEntry {
            label: r.label.clone(),
            fill: svg::run_colour(i),
            overlay: None,
        })
        .collect();
    let legend_h = svg::legend_height(WIDTH - 80.0, &entries);
    let frame = Frame {
        left: 64.0,
        top: 30.0,
        width: WIDTH - 80.0,
        height: HEIGHT - 80.0,
        x_max: end,
        y_max: most as f64 * 1.1,
    };
    let mut doc = Svg::new(WIDTH, HEIGHT + legend_h);
    doc.text(
        frame.left,
        18.0,
        "start",
        "Running jobs over time",
        r#"font-weight="bold""#,
    );
    frame.draw_y_axis(&mut doc, "running jobs", true);
    frame.draw_x_axis(&mut doc, "time (s)");
    for (i, (run, steps)) in runs.iter().zip(&steps).enumerate() {
        let mut points = Vec::with_capacity(steps.len() * 2);
        for (k, (t, n)) in steps.iter().enumerate() {
            let y = frame.y(*n as f64);
            if k > 0 {
                points.push((frame.x(*t), frame.y(steps[k - 1].1 as f64)));
            }
            points.push((frame.x(*t), y));
        }
        let last = steps.last().map_or(0, |(_, n)| *n);
        points.push((frame.x(run.end_time()), frame.y(last as f64)));
        doc.polyline(
            &points,
            &svg::run_colour(i),
            &format!("{}: running jobs", run.label),
        );
    }
    svg::legend(&mut doc, frame.left, HEIGHT - 6.0, frame.width, &entries);
    doc.finish("Running jobs over time")
}
