//! Makespan against mean slowdown, one dot per run, with the Pareto front marked: the runs no other run
//! beats on both. The picture that says which policy to pick: on the front, each step left costs mean
//! slowdown and each step down costs makespan; off it, some policy is better on both.

use crate::svg::{self, Frame, Svg};
use crate::table::ComparisonRow;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;

/// Whether each point is on the Pareto front (smaller is better on both axes): no other point is at
/// least as good on both and better on one.
pub fn front(points: &[(f64, f64)]) -> Vec<bool> {
    points
        .iter()
        .map(|&(x, y)| {
            !points
                .iter()
                .any(|&(ox, oy)| ox <= x && oy <= y && (ox < x || oy < y))
        })
        .collect()
}

/// The figure, or `None` when fewer than two runs have both a makespan and a mean slowdown.
pub fn render(rows: &[ComparisonRow]) -> Option<String> {
    let dots: Vec<(usize, &ComparisonRow, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r, r.makespan?, r.mean_slowdown?)))
        .collect();
    if dots.len() < 2 {
        return None;
    }
    let points: Vec<(f64, f64)> = dots.iter().map(|d| (d.2, d.3)).collect();
    let on_front = front(&points);
    let frame = Frame {
        left: 64.0,
        top: 30.0,
        width: WIDTH - 180.0,
        height: HEIGHT - 80.0,
        x_max: points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.1,
        y_max: points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1,
    };
    let mut doc = Svg::new(WIDTH, HEIGHT);
    doc.text(
        frame.left,
        18.0,
        "start",
        "Makespan against mean slowdown (Pareto front in black)",
        r#"font-weight="bold""#,
    );
    frame.draw_y_axis(&mut doc, "mean slowdown", false);
    frame.draw_x_axis(&mut doc, "makespan (s)");
    let mut best: Vec<(f64, f64)> = points
        .iter()
        .zip(&on_front)
        .filter(|(_, on)| **on)
        .map(|(p, _)| *p)
        .collect();
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    if best.len() > 1 {
        // The front as a staircase: what is reachable is up and to the right of it.
        let mut steps = Vec::new();
        for (k, &(x, y)) in best.iter().enumerate() {
            if k > 0 {
                steps.push((frame.x(x), frame.y(best[k - 1].1)));
            }
            steps.push((frame.x(x), frame.y(y)));
        }
        doc.polyline(&steps, "#222", "Pareto front");
    }
    for ((i, row, x, y), on) in dots.iter().zip(&on_front) {
        let (cx, cy) = (frame.x(*x), frame.y(*y));
        let tooltip = format!(
            "{}: makespan {x:.1} s, mean slowdown {y:.2}{}",
            row.run,
            if *on { ", on the Pareto front" } else { "" }
        );
        let stroke = if *on { "#000" } else { "none" };
        doc.circle(cx, cy, 6.0, &svg::run_colour(*i), stroke, &tooltip);
        let weight = if *on { r#"font-weight="bold""# } else { "" };
        doc.text(cx + 9.0, cy + 4.0, "start", &row.run, weight);
    }
    Some(doc.finish("Makespan against mean slowdown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_keeps_exactly_the_points_nothing_beats_on_both() {
        // BP-like (long, fair), Gang-like (short, unfair), one beaten by both, a tie with Gang.
        let points = [(10.0, 2.0), (8.0, 4.0), (11.0, 4.5), (8.0, 4.0), (9.0, 3.0)];
        assert_eq!(front(&points), vec![true, true, false, true, true]);
        assert_eq!(front(&[(1.0, 1.0), (1.0, 2.0)]), vec![true, false]);
    }
}
