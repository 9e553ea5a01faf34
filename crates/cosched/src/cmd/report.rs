//! `cosched report`: turn traces into an HTML report, standalone SVG figures and CSV/JSON results.

use cosched_report::{
    comparison, disambiguate_labels, label_experiments, text_table, write_report, Run,
};
use std::path::PathBuf;

/// Turn run traces into a self-contained HTML report with figures, plus CSV/JSON results
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes into DIR: report.html (one file, figures inlined), running-jobs.svg, \
slowdown.svg, ntt.svg, partitions-<run>.svg, jobs.csv (one line per job and run), policies.csv (one \
line per run) and results.json. Traces of different workloads or machines are refused unless \
--mixed is given.\n\nExamples:\n  cosched report results/default-*/*.jsonl\n  \
cosched report ue.jsonl taco.jsonl -o figures/\n  python3 -c \"import pandas; \
print(pandas.read_csv('figures/jobs.csv'))\""
)]
pub struct Args {
    /// Trace files (JSON Lines) written by `cosched run`, `cosched sim` or `cosched compare`
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Directory for the report and data files [default: the directory of the first trace]
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Accept traces of different workloads or machines, each row labelled with its own
    #[arg(long)]
    mixed: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut runs = args
        .traces
        .iter()
        .map(|path| Run::load(path))
        .collect::<Result<Vec<_>, _>>()?;
    label_experiments(&mut runs, args.mixed)?;
    disambiguate_labels(&mut runs);
    let dir = args.out.unwrap_or_else(|| match args.traces[0].parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    });
    let written = write_report(&runs, &dir)?;
    print!("{}", text_table(&comparison(&runs)));
    println!("report: {}", written.html.display());
    Ok(())
}
