//! Reports from cosched traces: figures as SVG (makespan against mean slowdown with the Pareto front,
//! partitions over time, running jobs over time, per-job slowdown and NTT), a self-contained HTML page with the comparison table, and CSV/JSON exports
//! with a unit in every numeric column's name.
//!
//! Everything is computed from traces alone, so real and simulated runs are shown by the same code.
//! A failed job never stops a report: it is counted in the table, listed with its error, hatched red in
//! the partition figure and marked with a cross in the per-job figures.
//!
//! ```no_run
//! use cosched_report::{write_report, Run};
//! let runs = vec![Run::load("ue.jsonl".as_ref())?, Run::load("taco.jsonl".as_ref())?];
//! let written = write_report(&runs, "report".as_ref(), None)?;
//! println!("{}", written.html.display());
//! # Ok::<(), cosched_report::ReportError>(())
//! ```

mod bars;
mod export;
mod gantt;
mod html;
mod job_facts;
mod metadata;
mod pareto;
mod run;
mod running;
mod svg;
mod table;
mod timeline;
mod window;

pub use bars::JobMetric;
pub use export::results_json;
pub use run::Experiment;
pub use run::{disambiguate_labels, label_experiments, Run};
pub use table::{comparison, text_table, ComparisonRow, BASELINE_POLICY};
pub use window::window;

pub use export::{csv_fields, csv_record, UNIT_SUFFIXES};
pub use metadata::{RunMetadata, METADATA_FILE};

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] cosched_core::trace::TraceReadError),
    #[error("{0}: the trace is empty; was the run interrupted before it started?")]
    EmptyTrace(PathBuf),
    #[error("no runs to report; give at least one trace file")]
    NoRuns,
    #[error(
        "the traces come from different experiments ({}), so their figures do not compare; report \
         them separately, or add --mixed to label every row with its workload and machine",
        experiments.iter().map(Experiment::to_string).collect::<Vec<_>>().join("; ")
    )]
    MixedExperiments { experiments: Vec<Experiment> },
}

impl ReportError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One figure, both inlined in the HTML report and written as a standalone SVG file.
pub struct Figure {
    /// Element id in the HTML page, unique within it.
    pub id: String,
    pub file_name: String,
    pub caption: String,
    pub svg: String,
}

/// Every figure of a report, in the order the HTML page shows them.
pub fn figures(runs: &[Run]) -> Vec<Figure> {
    let mut figures = vec![
        Figure {
            id: "fig-running".into(),
            file_name: "running-jobs.svg".into(),
            caption: "Number of running jobs over time, one line per run (after TACO Fig. 3)."
                .into(),
            svg: running::render(runs),
        },
        Figure {
            id: "fig-slowdown".into(),
            file_name: "slowdown.svg".into(),
            caption: "Slowdown of each job under each run; the dashed line is 1, as fast as alone \
(after CaSAS Fig. 2). A red cross marks a failed job."
                .into(),
            svg: bars::render(runs, JobMetric::Slowdown, "fig-slowdown"),
        },
        Figure {
            id: "fig-ntt".into(),
            file_name: "ntt.svg".into(),
            caption: "Normalised turnaround time (execution time shared / alone) of each job."
                .into(),
            svg: bars::render(runs, JobMetric::Ntt, "fig-ntt"),
        },
    ];
    if let Some(svg) = pareto::render(&comparison(runs)) {
        figures.insert(
            0,
            Figure {
                id: "fig-pareto".into(),
                file_name: "makespan-vs-slowdown.svg".into(),
                caption:
                    "Makespan against mean slowdown, one dot per run; the ringed dots joined by \
the black staircase are the Pareto front, the runs no other run beats on both. Pick from the front."
                        .into(),
                svg,
            },
        );
    }
    for (i, run) in runs.iter().enumerate() {
        let id = format!("fig-gantt-{i}");
        figures.push(Figure {
            svg: gantt::render(run, &id),
            id,
            file_name: format!(
                "partitions-{}.svg",
                cosched_core::names::file_name_part(&run.label)
            ),
            caption: format!(
                "Partitions over time under {}: which job holds which CPUs (after TACO Fig. 2). \
Several slots of one plan (gang scheduling) split a CPU's row into bands as tall as each slot's share \
of the cycle; red hatching marks a failed job.",
                run.label
            ),
        });
    }
    figures
}

/// What `write_report` wrote.
#[derive(Debug)]
pub struct Written {
    pub html: PathBuf,
    pub figures: Vec<PathBuf>,
    pub jobs_csv: PathBuf,
    pub policies_csv: PathBuf,
    pub timeline_csv: PathBuf,
    pub results_json: PathBuf,
}

/// Writes `report.html`, one SVG per figure, `jobs.csv`, `policies.csv`, `timeline.csv` and
/// `results.json` into `dir`, creating it if needed. `metadata` describes the invocation that made the
/// runs (see [`RunMetadata`]); without it its columns stay empty.
pub fn write_report(
    runs: &[Run],
    dir: &Path,
    metadata: Option<&RunMetadata>,
) -> Result<Written, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let rows = comparison(runs);
    let figures = figures(runs);
    let write = |name: &str, text: &str| -> Result<PathBuf, ReportError> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| ReportError::io(&path, e))?;
        Ok(path)
    };
    let mut figure_paths = Vec::new();
    for figure in &figures {
        figure_paths.push(write(&figure.file_name, &figure.svg)?);
    }
    Ok(Written {
        html: write("report.html", &html::render(runs, &rows, &figures))?,
        figures: figure_paths,
        jobs_csv: write("jobs.csv", &export::jobs_csv(runs, metadata))?,
        policies_csv: write("policies.csv", &export::policies_csv(runs, &rows, metadata))?,
        timeline_csv: write("timeline.csv", &export::timeline_csv(runs))?,
        results_json: write(
            "results.json",
            &export::results_json(runs, &rows, metadata, dir),
        )?,
    })
}
