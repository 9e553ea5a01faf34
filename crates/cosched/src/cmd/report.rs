//! `cosched report`: turn traces into an HTML report, standalone SVG figures and CSV/JSON results.

use super::when::when;
use anyhow::Context as _;
use cosched_core::trace::read_trace;
use cosched_report::window;
use cosched_report::{
    comparison, disambiguate_labels, label_experiments, results_json, text_table, write_report,
    Run, RunMetadata,
};
use cosched_service::protocol::JobView;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

/// Turn run traces into a self-contained HTML report with figures, plus CSV/JSON results
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes into DIR: report.html (one file, figures inlined), running-jobs.svg, \
slowdown.svg, ntt.svg, partitions-<run>.svg, jobs.csv (one line per job and run), policies.csv (one \
line per run, with the metadata.json found beside the first trace: version, host, CPU model, kernel, \
cgroup version, privileges, date, command line; with --since, each daemon start's own record), \
timeline.csv (every job's state, CPUs and threads whenever one changes), with --since accounting.csv (each job that ended in the window as the daemon's \
journal accounts it: start, end, exit code or signal, reason, user and system CPU time, peak memory, \
the CPUs it had) and results.json (trace paths relative to DIR). Every numeric CSV column ends \
in its unit: _s seconds, _ms, _mib, _pct percent, _ratio a ratio of times (slowdown, NTT) or an \
index of them (STP, fairness), _count, _threads, _cpus a CPU list (0-3,8), _id, _ids, _code an \
exit code or signal number; docs/results.md lists every column. \
An existing report.html is kept unless --force is given. Traces of different workloads or machines \
are refused unless --mixed is given.\n\nExamples:\n  cosched report results/default-*/*.jsonl --force\n  \
cosched report ue.jsonl taco.jsonl -o figures/\n  cosched report --since 1h        # the daemon's jobs of the last hour, into daemon-report/\n  \
cosched report --since '2026-11-23 08:00' --until '2026-11-23 12:00' --state-dir /var/lib/cosched\n  \
python3 -c \"import pandas; print(pandas.read_csv('figures/jobs.csv'))\"\n  \
python3 examples/analysis.py figures/       # the main figures as PNG, with pandas and matplotlib"
)]
pub struct Args {
    /// Trace files (JSON Lines) written by `cosched run`, `cosched sim` or `cosched compare`
    #[arg(required_unless_present = "since", value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Report the jobs a daemon received since WHEN instead: a time back from now (90s, 30m, 1h, 2d),
    /// a local time (2026-11-23 14:00, 2026-11-23T14:00:05) or @UNIX-SECONDS
    #[arg(long, value_name = "WHEN", conflicts_with = "traces")]
    since: Option<String>,
    /// End of the --since window [default: now]
    #[arg(long, value_name = "WHEN", requires = "since")]
    until: Option<String>,
    /// The daemon's state directory, for --since [default: /var/lib/cosched as root, else
    /// ~/.local/state/cosched]
    /// (`--state` is an older spelling; in `jobs` and `cancel` `--state` means job states)
    #[arg(
        long = "state-dir",
        alias = "state",
        value_name = "DIR",
        requires = "since"
    )]
    state_dir: Option<PathBuf>,
    /// Directory for the report and data files [default: the directory of the first trace]
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Accept traces of different workloads or machines, each row labelled with its own
    #[arg(long)]
    mixed: bool,
    /// Replace an earlier report in DIR
    #[arg(long)]
    force: bool,
    /// Print the comparison and every run's summary as JSON (results.json) instead of a table
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut ended = None;
    let (mut runs, default_dir) = match &args.since {
        Some(since) => {
            let (runs, jobs) = daemon_runs(&args, since)?;
            ended = Some(jobs);
            (runs, PathBuf::from("daemon-report"))
        }
        None => (
            args.traces
                .iter()
                .map(|path| Run::load(path))
                .collect::<Result<Vec<_>, _>>()?,
            match args.traces[0].parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                _ => PathBuf::from("."),
            },
        ),
    };
    label_experiments(&mut runs, args.mixed)?;
    disambiguate_labels(&mut runs);
    let metadata = match &args.since {
        Some(_) => None,
        None => RunMetadata::load_from(&default_dir),
    };
    let dir = args.out.unwrap_or(default_dir);
    let earlier = dir.join("report.html");
    anyhow::ensure!(
        args.force || !earlier.exists(),
        "{} already exists; choose another -o/--out, or add --force to replace it",
        earlier.display()
    );
    let written = write_report(&runs, &dir, metadata.as_ref())?;
    if let Some(jobs) = &ended {
        let path = dir.join("accounting.csv");
        std::fs::write(&path, super::report_accounting::csv(jobs))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let rows = comparison(&runs);
    if args.json {
        print!("{}", results_json(&runs, &rows, metadata.as_ref(), &dir));
    } else {
        print!("{}", text_table(&rows));
        if let Some(jobs) = &ended {
            println!("{}", super::report_accounting::summary(jobs));
        }
        println!("report: {}", written.html.display());
    }
    Ok(())
}

/// One run per daemon trace (one per daemon start) in the state directory, cut to the jobs that
/// arrived in the window; and the jobs that ended in the window, with their accounting, from the
/// daemon's journal.
fn daemon_runs(args: &Args, since: &str) -> anyhow::Result<(Vec<Run>, Vec<JobView>)> {
    let now = cosched_service::protocol::now_unix();
    let from = when(since, now).with_context(|| format!("--since {since}"))?;
    let to = match &args.until {
        Some(until) => when(until, now).with_context(|| format!("--until {until}"))?,
        None => now,
    };
    anyhow::ensure!(
        from < to,
        "--since {since} is not before the end of the window"
    );
    let state = args
        .state_dir
        .clone()
        .unwrap_or_else(|| cosched_service::paths::default_daemon_paths().1);
    let traces = state.join("traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&traces)
        .with_context(|| {
            format!(
                "cannot read the daemon's traces in {}; name its state directory with --state-dir",
                traces.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let jobs = super::report_accounting::journal_jobs(&state)?;
    let by_id: std::collections::HashMap<u64, &JobView> =
        jobs.iter().map(|view| (view.id, view)).collect();
    let mut runs = Vec::new();
    for file in files {
        let lines = read_trace(
            BufReader::new(File::open(&file).with_context(|| format!("{}", file.display()))?),
            &file.display().to_string(),
        )?;
        if let Some(lines) = window(&lines, from, to) {
            // The daemon's start wrote its metadata beside its trace (none beside a trace of a
            // daemon older than that record); each job's command is the journal's.
            let mut metadata = RunMetadata::load_beside(&file).unwrap_or_default();
            let mut run = Run::new(lines, Some(file));
            for job in &run.summary.jobs {
                let id = u64::from(job.id.0);
                if let Some(view) = by_id.get(&id) {
                    let command = super::provenance::shell_words(view.command.iter().cloned());
                    metadata.job_commands_by_id.insert(id, command);
                }
            }
            run.metadata = Some(metadata);
            runs.push(run);
        }
    }
    anyhow::ensure!(
        !runs.is_empty(),
        "no job reached the daemon of {} in that window; `cosched jobs --all` lists its history",
        state.display()
    );
    Ok((runs, super::report_accounting::ended_in(&jobs, from, to)))
}
