//! A minimal SVG writer and the chart frame (axes, ticks, legend) shared by all figures.
//!
//! Hand-written rather than a plotting crate so that figures need no system fonts and stay small text
//! files that diff well and open in any browser or paper toolchain.

use std::fmt::Write;

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Fixed-point number for SVG coordinates: short and locale-independent.
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

pub struct Svg {
    width: f64,
    height: f64,
    defs: String,
    body: String,
}

pub const FONT_SIZE: f64 = 12.0;
/// Rough width of one character at `FONT_SIZE` in a sans-serif font, for layout without font metrics.
pub const CHAR_WIDTH: f64 = 6.8;

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            defs: String::new(),
            body: String::new(),
        }
    }

    pub fn def(&mut self, element: &str) {
        self.defs.push_str(element);
        self.defs.push('\n');
    }

    /// A rectangle; one with a `tooltip` is a data mark (class `mark`, checked by the browser test),
    /// and the tooltip becomes a `<title>` child that browsers show on hover.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tooltip: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}""#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            fill
        );
        match tooltip {
            Some(t) => {
                let _ = writeln!(
                    self.body,
                    r#" class="mark"><title>{}</title></rect>"#,
                    escape(t)
                );
            }
            None => self.body.push_str("/>\n"),
        }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" {style}/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2)
        );
    }

    /// Text; `anchor` is `start`, `middle` or `end`; `extra` adds attributes (e.g. a rotation).
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, text: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" {extra}>{}</text>"#,
            num(x),
            num(y),
            escape(text)
        );
    }

    /// A dot, a data mark with a tooltip; `stroke` rings it (`none` for no ring).
    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str, stroke: &str, tooltip: &str) {
        let _ = writeln!(
            self.body,
            r#"<circle class="mark" cx="{}" cy="{}" r="{}" fill="{fill}" stroke="{stroke}" stroke-width="2"><title>{}</title></circle>"#,
            num(x),
            num(y),
            num(r),
            escape(tooltip)
        );
    }

    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, tooltip: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
            .collect();
        let _ = writeln!(
            self.body,
            r#"<polyline class="mark" points="{}" fill="none" stroke="{stroke}" stroke-width="2"><title>{}</title></polyline>"#,
            pts.join(" "),
            escape(tooltip)
        );
    }

    /// The finished document; `title` is the accessible name of the figure.
    pub fn finish(self, title: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="{FONT_SIZE}" role="img">"#,
            w = num(self.width),
            h = num(self.height)
        );
        let _ = writeln!(out, "<title>{}</title>", escape(title));
        if !self.defs.is_empty() {
            let _ = write!(out, "<defs>\n{}</defs>\n", self.defs);
        }
        let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }
}

/// Round tick values covering `0..=max`, about `target` of them.
pub fn ticks(max: f64, target: usize) -> Vec<f64> {
    nice_ticks(max, target, false)
}

/// Ticks for counts: whole numbers only.
pub fn integer_ticks(max: f64, target: usize) -> Vec<f64> {
    nice_ticks(max, target, true)
}

fn nice_ticks(max: f64, target: usize, integer: bool) -> Vec<f64> {
    if max.is_nan() || max <= 0.0 || max.is_infinite() {
        return vec![0.0];
    }
    let raw = max / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .map(|s| if integer { s.ceil().max(1.0) } else { s })
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// A tick label without useless decimals.
pub fn tick_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The plotting area of a chart and the mapping from data to pixels.
pub struct Frame {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x_max: f64,
    pub y_max: f64,
}

impl Frame {
    pub fn x(&self, v: f64) -> f64 {
        self.left + self.width * (v / self.x_max).clamp(0.0, 1.0)
    }

    pub fn y(&self, v: f64) -> f64 {
        self.top + self.height * (1.0 - (v / self.y_max).clamp(0.0, 1.0))
    }

    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// The numeric x axis (time) with its ticks and title.
    pub fn draw_x_axis(&self, svg: &mut Svg, label: &str) {
        for v in ticks(self.x_max, 8)
            .into_iter()
            .filter(|v| *v <= self.x_max * 1.0001)
        {
            let x = self.x(v);
            svg.line(
                x,
                self.bottom(),
                x,
                self.bottom() + 4.0,
                r##"stroke="#333""##,
            );
            svg.text(x, self.bottom() + 17.0, "middle", &tick_label(v), "");
        }
        svg.line(
            self.left,
            self.bottom(),
            self.left + self.width,
            self.bottom(),
            r##"stroke="#333""##,
        );
        svg.text(
            self.left + self.width / 2.0,
            self.bottom() + 34.0,
            "middle",
            label,
            "",
        );
    }

    /// A numeric y axis with grid lines and its title; `integer` for counts.
    pub fn draw_y_axis(&self, svg: &mut Svg, label: &str, integer: bool) {
        let values = if integer {
            integer_ticks(self.y_max, 5)
        } else {
            ticks(self.y_max, 5)
        };
        for v in values.into_iter().filter(|v| *v <= self.y_max * 1.0001) {
            let y = self.y(v);
            svg.line(
                self.left,
                y,
                self.left + self.width,
                y,
                r##"stroke="#e5e5e5""##,
            );
            svg.text(self.left - 6.0, y + 4.0, "end", &tick_label(v), "");
        }
        svg.line(
            self.left,
            self.top,
            self.left,
            self.bottom(),
            r##"stroke="#333""##,
        );
        self.y_title(svg, label);
    }

    pub fn y_title(&self, svg: &mut Svg, label: &str) {
        let x = 16.0;
        let y = self.top + self.height / 2.0;
        svg.text(
            x,
            y,
            "middle",
            label,
            &format!(r#"transform="rotate(-90 {} {})""#, num(x), num(y)),
        );
    }
}

/// A legend laid out in rows below a chart; returns the height it took.
pub fn legend(svg: &mut Svg, left: f64, top: f64, width: f64, entries: &[LegendEntry]) -> f64 {
    let mut x = left;
    let mut y = top;
    let row = 18.0;
    for entry in entries {
        let w = 18.0 + entry.label.chars().count() as f64 * CHAR_WIDTH + 14.0;
        if x + w > left + width && x > left {
            x = left;
            y += row;
        }
        svg.rect(x, y, 12.0, 12.0, &entry.fill, None);
        if let Some(overlay) = &entry.overlay {
            svg.rect(x, y, 12.0, 12.0, overlay, None);
        }
        svg.text(x + 17.0, y + 10.5, "start", &entry.label, "");
        x += w;
    }
    if entries.is_empty() {
        0.0
    } else {
        y - top + row
    }
}

/// Height a legend will take, for sizing the document before drawing.
pub fn legend_height(width: f64, entries: &[LegendEntry]) -> f64 {
    let mut probe = Svg::new(0.0, 0.0);
    legend(&mut probe, 0.0, 0.0, width, entries)
}

pub struct LegendEntry {
    pub label: String,
    pub fill: String,
    pub overlay: Option<String>,
}

/// Colours for jobs: Tableau 10 first, then hues spaced by the golden angle so any count stays distinct.
pub fn job_colour(index: usize) -> String {
    const TABLEAU: [&str; 10] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
        "#bab0ac", "#86bcb6",
    ];
    match TABLEAU.get(index) {
        Some(c) => (*c).to_string(),
        None => format!("hsl({:.0},55%,58%)", (index as f64 * 137.508) % 360.0),
    }
}

/// Colours for runs (policies), darker than job colours so lines read well.
pub fn run_colour(index: usize) -> String {
    const DARK: [&str; 8] = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
    ];
    match DARK.get(index) {
        Some(c) => (*c).to_string(),
        None => format!("hsl({:.0},65%,40%)", (index as f64 * 137.508) % 360.0),
    }
}

/// The red hatching laid over anything that belongs to a failed job. Its id carries the figure's id so
/// that several figures inlined in one HTML page never share an element id.
pub struct Hatch {
    pub fill: String,
    pub def: String,
}

pub fn failed_hatch(figure_id: &str) -> Hatch {
    let id = format!("{figure_id}-failed");
    Hatch {
        fill: format!("url(#{id})"),
        def: format!(
            r##"<pattern id="{id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="{FAILED_COLOUR}" stroke-width="2.5"/></pattern>"##
        ),
    }
}

pub const FAILED_COLOUR: &str = "#c00";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(37.0, 8);
        assert_eq!(t[1], 5.0);
        assert!(*t.last().unwrap() >= 37.0);
        assert_eq!(ticks(0.0, 5), vec![0.0]);
        assert_eq!(integer_ticks(3.0, 5), vec![0.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn text_is_escaped() {
        let mut svg = Svg::new(10.0, 10.0);
        svg.text(0.0, 0.0, "start", "a<b & \"c\"", "");
        let doc = svg.finish("t");
        assert!(doc.contains("a&lt;b &amp; &quot;c&quot;"), "{doc}");
    }
}
