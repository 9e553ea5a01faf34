//! Reports from hand-made traces of a 2-CPU machine: three policies over the same three jobs, one of
//! which fails to start. Checks the files, the failure handling, and (when Chromium is installed) that
//! the HTML renders every figure with visible marks in a real browser.

use cosched_core::job::{JobHints, JobId, JobKind, JobSpec};
use cosched_core::plan::{Assignment, Plan, Slot};
use cosched_core::trace::{ExecutorKind, ExitStatus, Record, TraceLine};
use cosched_report::{
    comparison, figures, text_table, write_report, Run, RunMetadata, UNIT_SUFFIXES,
};
use std::path::{Path, PathBuf};
use std::process::Command;

fn line(t: f64, record: Record) -> TraceLine {
    TraceLine { t, record }
}

fn arrival(id: u32, name: &str, at: f64, isolated: f64) -> TraceLine {
    line(
        at,
        Record::Arrival {
            job: JobSpec {
                owner: None,
                id: JobId(id),
                name: name.into(),
                arrival: at,
                kind: JobKind::Malleable,
                min_threads: 1,
                max_threads: 2,
                coschedule: true,
                weight: 1.0,
                hints: JobHints::default(),
            },
            isolated: Some(isolated),
        },
    )
}

fn assign(job: u32, cpus: &str) -> Assignment {
    Assignment {
        job: JobId(job),
        cpus: cpus.parse().unwrap(),
    }
}

fn plan(t: f64, slots: Vec<Vec<Assignment>>) -> TraceLine {
    line(
        t,
        Record::Plan {
            plan: Plan {
                slots: slots
                    .into_iter()
                    .map(|assignments| Slot {
                        length: 0.1,
                        assignments,
                    })
                    .collect(),
                ..Plan::default()
            },
        },
    )
}

fn start(t: f64, job: u32) -> TraceLine {
    line(
        t,
        Record::Start {
            job: JobId(job),
            threads: 2,
            pid: None,
        },
    )
}

fn finish(t: f64, job: u32) -> TraceLine {
    line(
        t,
        Record::Finish {
            job: JobId(job),
            status: ExitStatus::Ok,
            exit_code: Some(0),
            error: None,
        },
    )
}

/// `crash` (job 2) could not start: its program does not exist.
fn crash(t: f64) -> TraceLine {
    line(
        t,
        Record::Finish {
            job: JobId(2),
            status: ExitStatus::Failed,
            exit_code: None,
            error: Some("cannot run \"./crash\": No such file or directory, os error 2".into()),
        },
    )
}

fn run_start(policy: &str) -> TraceLine {
    line(
        0.0,
        Record::RunStart {
            version: 1,
            executor: ExecutorKind::Sim,
            policy: policy.into(),
            machine: "vm-2cpu".into(),
            cpus: 2,
            workload: "fixture".into(),
            seed: None,
            mechanism: None,
            started_unix: None,
        },
    )
}

fn run_end(t: f64) -> TraceLine {
    line(
        t,
        Record::RunEnd {
            overhead_seconds: Some(0.01),
            note: None,
        },
    )
}

fn arrivals() -> Vec<TraceLine> {
    vec![
        arrival(0, "lu", 0.0, 10.0),
        arrival(1, "cg", 0.0, 8.0),
        arrival(2, "crash", 1.0, 5.0),
    ]
}

/// Batch: one job at a time on both CPUs.
fn bp() -> Vec<TraceLine> {
    let mut t = vec![run_start("bp")];
    t.extend(arrivals());
    t.extend([
        plan(0.0, vec![vec![assign(0, "0-1")]]),
        start(0.0, 0),
        crash(1.0),
        finish(10.0, 0),
        plan(10.0, vec![vec![assign(1, "0-1")]]),
        start(10.0, 1),
        finish(18.0, 1),
        run_end(18.0),
    ]);
    t
}

/// Space sharing: one CPU each, then the survivor takes both.
fn eq() -> Vec<TraceLine> {
    let mut t = vec![run_start("eq")];
    t.extend(arrivals());
    t.extend([
        plan(0.0, vec![vec![assign(0, "0"), assign(1, "1")]]),
        start(0.0, 0),
        start(0.0, 1),
        crash(1.0),
        finish(14.0, 1),
        plan(14.0, vec![vec![assign(0, "0-1")]]),
        finish(17.0, 0),
        run_end(17.0),
    ]);
    t
}

/// Gang scheduling: two slots, each job on both CPUs in its own slot.
fn gang() -> Vec<TraceLine> {
    let mut t = vec![run_start("gang")];
    t.extend(arrivals());
    t.extend([
        plan(0.0, vec![vec![assign(0, "0-1")], vec![assign(1, "0-1")]]),
        start(0.0, 0),
        start(0.0, 1),
        crash(1.0),
        finish(16.0, 1),
        plan(16.0, vec![vec![assign(0, "0-1")]]),
        finish(18.0, 0),
        run_end(18.0),
    ]);
    t
}

fn runs() -> Vec<Run> {
    vec![
        Run::new(bp(), None),
        Run::new(eq(), None),
        Run::new(gang(), None),
    ]
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn report_writes_every_file_and_figures_are_well_formed_svg() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_report(&runs(), dir.path(), None).unwrap();
    // makespan against slowdown, running jobs, slowdown, NTT, and one partition figure per run
    assert_eq!(written.figures.len(), 1 + 3 + 3);
    assert!(written.figures[0].ends_with("makespan-vs-slowdown.svg"));
    for path in &written.figures {
        let text = read(path);
        let doc = roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{} is not well-formed: {e}", path.display()));
        let marks = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("mark"))
            .count();
        assert!(marks > 0, "{} draws no data", path.display());
    }
    let html = read(&written.html);
    for figure in figures(&runs()) {
        assert!(html.contains(&format!("<figure id=\"{}\">", figure.id)));
    }
    assert!(read(&written.results_json).contains("\"makespan\": 18.0"));
}

#[test]
fn failed_job_shows_in_table_list_figures_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_report(&runs(), dir.path(), None).unwrap();
    let html = read(&written.html);
    assert!(html.contains("<tr class=\"failed\"><td>bp</td>"), "{html}");
    assert!(html.contains("<ul id=\"failures\">"));
    assert!(html.contains("✕ crash</span> (job 2) under gang: cannot run &quot;./crash&quot;"));
    let slowdown = read(&dir.path().join("slowdown.svg"));
    assert!(slowdown.contains("crash under eq: failed (cannot run"));
    let gantt = read(&dir.path().join("partitions-eq.svg"));
    assert!(gantt.contains("crash (failed, never ran)"));
    let jobs = read(&written.jobs_csv);
    let crash_line = jobs
        .lines()
        .find(|l| l.starts_with("gang,gang,sim,2,crash,"))
        .unwrap();
    assert!(crash_line.contains(",failed,"), "{crash_line}");
    // the error has a comma, so the field is quoted and the line keeps its column count
    assert!(crash_line
        .ends_with("\"cannot run \"\"./crash\"\": No such file or directory, os error 2\""));
    let policies = read(&written.policies_csv);
    let header_columns = policies.lines().next().unwrap().split(',').count();
    for row in policies.lines().skip(1) {
        assert_eq!(row.split(',').count(), header_columns, "{row}");
    }
}

/// Rows of a CSV as maps from column to cell (RFC 4180 quoting, no line breaks in cells).
fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let cells = cosched_report::csv_fields;
    let mut lines = text.lines();
    let header = cells(lines.next().expect("a header line"));
    let rows: Vec<Vec<String>> = lines.map(cells).collect();
    for row in &rows {
        assert_eq!(row.len(), header.len(), "{row:?} against {header:?}");
    }
    (header, rows)
}

fn column<'a>(header: &[String], rows: &'a [Vec<String>], name: &str) -> Vec<&'a str> {
    let i = header
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"));
    rows.iter().map(|r| r[i].as_str()).collect()
}

fn metadata() -> RunMetadata {
    RunMetadata {
        cosched_version: "0.1.0".into(),
        git_revision: Some("abc1234".into()),
        host: "node7".into(),
        cpu_model: "Test CPU @ 2.0GHz".into(),
        kernel: "6.1.0".into(),
        cgroup_version: "v2".into(),
        privileges: "root".into(),
        date: "2026-11-28T07:00:00Z".into(),
        command_line: "cosched compare fixture.toml --policy bp,eq,gang".into(),
        job_commands: [("lu".to_string(), "./lu --size 'a b'".to_string())].into(),
        job_commands_by_id: Default::default(),
    }
}

/// Every CSV the report writes: a column that holds a number anywhere must say its unit. The
/// fixture's `start_cpus` holds `1` for a job on CPU 1, so CPU lists are held to the rule too.
#[test]
fn every_numeric_csv_column_names_its_unit() {
    let dir = tempfile::tempdir().unwrap();
    write_report(&runs(), dir.path(), Some(&metadata())).unwrap();
    let mut csvs: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    csvs.sort();
    assert_eq!(csvs.len(), 3, "{csvs:?}");
    let mut numeric_columns = 0;
    for csv in &csvs {
        let (header, rows) = csv_rows(&read(csv));
        assert!(!rows.is_empty(), "{} has no rows", csv.display());
        for (i, name) in header.iter().enumerate() {
            let numeric = rows.iter().any(|r| r[i].parse::<f64>().is_ok());
            if !numeric {
                continue;
            }
            numeric_columns += 1;
            let has_unit = UNIT_SUFFIXES
                .iter()
                .any(|(suffix, _)| name.ends_with(suffix) || name == &suffix[1..]);
            assert!(
                has_unit,
                "{}: numeric column {name:?} has no unit suffix (one of {:?})",
                csv.display(),
                UNIT_SUFFIXES.iter().map(|(s, _)| *s).collect::<Vec<_>>()
            );
        }
    }
    assert!(
        numeric_columns >= 30,
        "only {numeric_columns} numeric columns seen"
    );
}

#[test]
fn jobs_csv_has_kind_threads_cpus_at_start_command_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_report(&runs(), dir.path(), Some(&metadata())).unwrap();
    let (header, rows) = csv_rows(&read(&written.jobs_csv));
    let eq_rows: Vec<Vec<String>> = rows.into_iter().filter(|r| r[0] == "eq").collect();
    let col = |name| column(&header, &eq_rows, name);
    assert_eq!(col("job"), ["lu", "cg", "crash"]);
    assert_eq!(col("kind"), ["malleable"; 3]);
    assert_eq!(col("start_cpus"), ["0", "1", ""]);
    assert_eq!(col("start_cpu_count"), ["1", "1", ""]);
    assert_eq!(col("start_threads"), ["2", "2", ""]);
    assert_eq!(col("exit_code"), ["0", "0", ""]);
    assert_eq!(col("command"), ["./lu --size 'a b'", "", ""]);
    assert_eq!(col("finish_s"), ["17", "14", "1"]);
}

#[test]
fn runs_carry_the_invocations_metadata_and_relative_trace_paths() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("traces/bp.jsonl");
    std::fs::create_dir_all(trace.parent().unwrap()).unwrap();
    std::fs::write(&trace, "").unwrap();
    let runs = vec![Run::new(bp(), Some(trace)), Run::new(eq(), None)];
    let written = write_report(&runs, dir.path(), Some(&metadata())).unwrap();
    let (header, rows) = csv_rows(&read(&written.policies_csv));
    assert_eq!(column(&header, &rows, "host"), ["node7", "node7"]);
    assert_eq!(column(&header, &rows, "cgroup_version"), ["v2", "v2"]);
    assert_eq!(column(&header, &rows, "makespan_s"), ["18", "17"]);
    let json: serde_json::Value = serde_json::from_str(&read(&written.results_json)).unwrap();
    assert_eq!(json["metadata"]["cpu_model"], "Test CPU @ 2.0GHz");
    assert_eq!(json["runs"][0]["trace"], "traces/bp.jsonl");
}

/// The timeline steps where the partition figure changes colour: cg waits under BP until lu is done,
/// and under EQ lu grows from CPU 0 to both when cg finishes.
#[test]
fn timeline_csv_steps_at_every_change_of_state_cpus_or_threads() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_report(&runs(), dir.path(), None).unwrap();
    let (header, rows) = csv_rows(&read(&written.timeline_csv));
    let steps = |run: &str, job: &str| -> Vec<String> {
        let pick: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| r[0] == run && r[4] == job)
            .cloned()
            .collect();
        let (t, state, cpus) = (
            column(&header, &pick, "time_s"),
            column(&header, &pick, "state"),
            column(&header, &pick, "cpus"),
        );
        (0..pick.len())
            .map(|i| format!("{} {} {}", t[i], state[i], cpus[i]))
            .collect()
    };
    assert_eq!(
        steps("bp", "cg"),
        ["0 waiting ", "10 running 0-1", "18 finished "]
    );
    assert_eq!(
        steps("eq", "lu"),
        ["0 running 0", "14 running 0-1", "17 finished "]
    );
    assert_eq!(steps("eq", "crash"), ["1 failed "]);
    // Under gang, each job runs in one of two equal slots, frozen in the other, until cg finishes.
    let pick: Vec<Vec<String>> = (rows.iter())
        .filter(|r| r[0] == "gang" && r[4] == "lu")
        .cloned()
        .collect();
    let shares: Vec<(&str, &str)> = (column(&header, &pick, "time_s").into_iter())
        .zip(column(&header, &pick, "cycle_share_ratio"))
        .collect();
    assert_eq!(shares, [("0", "0.5"), ("16", "1"), ("18", "0")]);
}

#[test]
fn makespan_is_relative_to_bp_and_failures_are_counted() {
    let rows = comparison(&runs());
    let eq = rows.iter().find(|r| r.policy == "eq").unwrap();
    assert_eq!(eq.makespan, Some(17.0));
    assert!((eq.makespan_pct_of_bp.unwrap() - 100.0 * 17.0 / 18.0).abs() < 1e-9);
    assert!(rows.iter().all(|r| r.failed == 1));
    let table = text_table(&rows);
    assert!(table.lines().nth(2).unwrap().starts_with("eq "), "{table}");
    assert!(table.contains("94%"), "{table}");
}

#[test]
fn running_jobs_step_at_starts_and_finishes_only() {
    // the crashed job never started, so it never counts as running
    assert_eq!(
        Run::new(eq(), None).running_jobs(),
        vec![(0.0, 2), (14.0, 1), (17.0, 0)]
    );
}

#[test]
fn gang_slots_split_each_cpu_row_into_bands() {
    let dir = tempfile::tempdir().unwrap();
    write_report(&runs(), dir.path(), None).unwrap();
    let gantt = read(&dir.path().join("partitions-gang.svg"));
    let doc = roxmltree::Document::parse(&gantt).unwrap();
    let marks: Vec<(String, f64)> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("mark"))
        .map(|n| {
            let tip = n.first_element_child().unwrap().text().unwrap().to_string();
            (tip, n.attribute("height").unwrap().parse().unwrap())
        })
        .collect();
    // After cg finishes, lu alone holds both CPU rows with one full-height rectangle.
    let (_, both_rows) = marks
        .iter()
        .find(|(tip, _)| tip.starts_with("lu: CPUs 0-1, 16.00"))
        .unwrap();
    for job in ["lu", "cg"] {
        let bands: Vec<f64> = marks
            .iter()
            .filter(|(tip, _)| tip.starts_with(job) && tip.ends_with("50% share"))
            .map(|(_, h)| *h)
            .collect();
        assert_eq!(bands.len(), 2, "{job}: one band per CPU row in {marks:?}");
        for h in bands {
            assert!(
                (4.0 * h - both_rows).abs() < 3.0,
                "{job}: band {h} vs rows {both_rows}"
            );
        }
    }
}

fn chromium() -> Option<PathBuf> {
    let candidates = ["chromium", "chromium-browser", "google-chrome", "chrome"];
    let from_env = std::env::var_os("COSCHED_CHROMIUM").map(PathBuf::from);
    from_env
        .into_iter()
        .chain(candidates.iter().filter_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file())
            })
        }))
        .next()
}

fn dump_dom(browser: &Path, page: &Path) -> String {
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed on {}: {}",
        page.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Measures, inside the browser, every figure's size and the area its data marks cover.
const PROBE: &str = r#"<script>
const figures = [...document.querySelectorAll('figure')].map(f => {
  const svg = f.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const marks = svg ? [...svg.querySelectorAll('.mark')] : [];
  const area = marks.map(m => { const b = m.getBBox(); return Math.max(b.width, 1) * Math.max(b.height, 1) * (b.width > 0 || b.height > 0); })
                    .reduce((a, b) => a + b, 0);
  return {id: f.id, width: box.width, height: box.height, marks: marks.length, area: area};
});
const out = document.createElement('pre');
out.id = 'probe';
out.textContent = JSON.stringify(figures);
document.body.appendChild(out);
</script>"#;

#[test]
fn html_report_renders_every_figure_in_headless_chromium() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: chromium not found on PATH (install Debian's `chromium` or set COSCHED_CHROMIUM)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let written = write_report(&runs(), dir.path(), None).unwrap();
    let html = read(&written.html);
    let probed = dir.path().join("probed.html");
    std::fs::write(&probed, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let dom = dump_dom(&browser, &probed);
    let json = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .expect("the probe ran")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let measured: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let expected = figures(&runs());
    assert_eq!(measured.len(), expected.len(), "{json}");
    for (figure, m) in expected.iter().zip(&measured) {
        assert_eq!(m["id"], figure.id.as_str());
        assert!(m["width"].as_f64().unwrap() > 100.0, "{m}");
        assert!(m["height"].as_f64().unwrap() > 100.0, "{m}");
        assert!(m["marks"].as_u64().unwrap() > 0, "{m}");
        assert!(m["area"].as_f64().unwrap() > 50.0, "{m}");
    }
    for svg in &written.figures {
        let dom = dump_dom(&browser, svg);
        assert!(
            !dom.contains("parsererror"),
            "{} does not parse",
            svg.display()
        );
        assert!(dom.contains("class=\"mark\""), "{}", svg.display());
    }
}
