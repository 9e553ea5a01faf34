//! How client commands show the daemon's jobs: a table of the fields asked for, or JSON as
//! `squeue --json` prints it.

use crate::cmd::job_states::{state_code, state_name};
use cosched_core::memory::Size;
use cosched_core::CpuSet;
use cosched_service::protocol::JobView;
use serde_json::Value;
use std::collections::HashMap;

/// Every field `--format` knows.
const FIELDS: [&str; 29] = [
    "id",
    "job_id",
    "name",
    "user",
    "uid",
    "state",
    "state_code",
    "reason",
    "cpus",
    "cpu_list",
    "threads",
    "elapsed",
    "time_limit",
    "submitted",
    "started",
    "finished",
    "exit_code",
    "signal",
    "exit",
    "mem",
    "cputime",
    "user_time",
    "system_time",
    "maxrss",
    "error",
    "slowdown",
    "priority",
    "nice",
    "labels",
];

pub fn check_fields(fields: &str) -> anyhow::Result<()> {
    for field in fields.split(',').map(str::trim) {
        if !FIELDS.contains(&field) {
            anyhow::bail!(
                "--format {field}: no such field; `cosched jobs --help` lists the fields (one of \
                 {})",
                FIELDS.join(", ")
            );
        }
    }
    Ok(())
}

/// `{"jobs": [...]}`, as `squeue --json` prints it: each job whole (with `cpus` a count and
/// `cpu_list` its CPUs, as in the table), or with `fields` only those, each as the table shows
/// it where the job has no value of that name.
pub fn print_json(jobs: &[JobView], fields: Option<&str>) -> anyhow::Result<()> {
    let mut names = UserNames::default();
    let now = cosched_service::protocol::now_unix();
    let mut listed = Vec::with_capacity(jobs.len());
    for job in jobs {
        let Value::Object(mut whole) = serde_json::to_value(job).expect("views serialise") else {
            unreachable!("a view is an object");
        };
        let cpu_list = whole.remove("cpus").unwrap_or(Value::Null);
        whole.insert(
            "cpus".into(),
            cpu_count(job).map_or(Value::Null, Value::from),
        );
        whole.insert("cpu_list".into(), cpu_list);
        whole.insert("state_code".into(), state_code(job.state).into());
        let Some(fields) = fields else {
            listed.push(Value::Object(whole));
            continue;
        };
        let mut chosen = serde_json::Map::new();
        for field in fields.split(',').map(str::trim) {
            let value = match whole.get(field) {
                Some(value) if field != "state" && field != "id" => value.clone(),
                _ => Value::String(value(job, field, now, &mut names)?),
            };
            chosen.insert(field.to_string(), value);
        }
        listed.push(Value::Object(chosen));
    }
    let out = serde_json::json!({ "jobs": listed });
    println!(
        "{}",
        serde_json::to_string(&out).expect("JSON values serialise")
    );
    Ok(())
}

/// How many CPUs the job has now, or once ended how many it ever had.
fn cpu_count(job: &JobView) -> Option<usize> {
    cpu_list(job)?.parse::<CpuSet>().ok().map(|set| set.len())
}

fn cpu_list(job: &JobView) -> Option<String> {
    job.cpus
        .clone()
        .or_else(|| job.accounting.as_ref()?.cpus.clone())
}

pub const DEFAULT_FIELDS: &str = "id,name,user,state,reason,cpus,threads,elapsed,slowdown,labels";

/// One line per job with `fields` (comma-separated), under a header; what users chose is escaped.
pub fn print_table(jobs: &[JobView], fields: &str) -> anyhow::Result<()> {
    let fields: Vec<&str> = fields.split(',').map(str::trim).collect();
    let mut names = UserNames::default();
    let now = cosched_service::protocol::now_unix();
    let mut rows = vec![fields.iter().map(|f| f.to_string()).collect::<Vec<_>>()];
    for job in jobs {
        let row = fields
            .iter()
            .map(|field| value(job, field, now, &mut names))
            .map(|cell| cell.map(|c| super::terminal::escaped(&c).into_owned()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        rows.push(row);
    }
    let widths: Vec<usize> = (0..fields.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(())
}

/// One line per job, with `cosched jobs`' default fields.
pub fn print_jobs(jobs: &[JobView]) {
    print_table(jobs, DEFAULT_FIELDS).expect("the default fields are all known");
}

/// User names by uid, each looked up once.
#[derive(Default)]
struct UserNames(HashMap<u32, String>);

impl UserNames {
    fn name(&mut self, uid: u32) -> String {
        self.0
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map_or_else(|| uid.to_string(), |u| u.name)
            })
            .clone()
    }
}

fn value(job: &JobView, field: &str, now: f64, names: &mut UserNames) -> anyhow::Result<String> {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let time = |t: Option<f64>| or_dash(t.map(local_time));
    Ok(match field {
        "id" => match (job.array_id, job.array_index) {
            (Some(array), Some(index)) => format!("{array}_{index}"),
            _ => job.id.to_string(),
        },
        "job_id" => job.id.to_string(),
        "name" => job.name.clone(),
        "user" => names.name(job.uid),
        "uid" => job.uid.to_string(),
        "state" => state_name(job.state).to_string(),
        "reason" => or_dash(job.reason.clone().or_else(|| job.error.clone())),
        "state_code" => state_code(job.state).to_string(),
        "cpus" => or_dash(cpu_count(job).map(|n| n.to_string())),
        "cpu_list" => or_dash(cpu_list(job)),
        "threads" => or_dash(job.threads.map(|t| t.to_string())),
        "elapsed" => or_dash(
            job.started
                .map(|s| super::slurm_time::format_duration(job.finished.unwrap_or(now) - s)),
        ),
        "time_limit" => or_dash(
            job.time_limit
                .map(|l| super::slurm_time::format_duration(l as f64)),
        ),
        "submitted" => time(Some(job.submitted)),
        "started" => time(job.started),
        "finished" => time(job.finished),
        "exit_code" => or_dash(job.exit_code.map(|c| c.to_string())),
        "signal" => or_dash(job.signal.map(|s| s.to_string())),
        "exit" => match (job.state.ended(), job.exit_code) {
            (false, _) => "-".into(),
            (true, _) if job.signal.is_some() => format!("signal {}", job.wait_status() - 128),
            (true, Some(code)) => code.to_string(),
            (true, None) => match job.wait_status() {
                status if status > 128 => format!("signal {}", status - 128),
                _ => "-".into(),
            },
        },
        "mem" => or_dash(job.mem.map(|m| Size(m).to_string())),
        "cputime" | "user_time" | "system_time" => or_dash(job.accounting.as_ref().and_then(|a| {
            let seconds = match field {
                "user_time" => a.user_seconds?,
                "system_time" => a.system_seconds?,
                _ => a.user_seconds? + a.system_seconds?,
            };
            Some(cpu_time(seconds))
        })),
        "maxrss" => or_dash(
            (job.accounting.as_ref())
                .and_then(|a| a.peak_memory)
                .map(|bytes| Size(bytes).to_string()),
        ),
        "error" => or_dash(job.error.clone()),
        "slowdown" => or_dash(job.slowdown.map(|s| format!("{s:.2}"))),
        "priority" => job.priority.to_string(),
        "nice" => job.nice.to_string(),
        "labels" => {
            let mut labels: Vec<String> =
                job.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if !job.tasks.is_empty() {
                labels.push(format!("tasks={}", job.tasks.len() + 1));
            }
            labels.join(",")
        }
        other => {
            anyhow::bail!("--format {other}: no such field; `cosched jobs --help` lists the fields")
        }
    })
}

/// CPU seconds as `sacct` shows them: H:MM:SS to the millisecond.
fn cpu_time(seconds: f64) -> String {
    let millis = (seconds.max(0.0) * 1000.0).round() as u64;
    let whole = super::slurm_time::format_duration((millis / 1000) as f64);
    format!("{whole}.{:03}", millis % 1000)
}

/// A Unix time as a local `YYYY-MM-DDTHH:MM:SS`, as `sacct` shows times (and `--since` reads them).
fn local_time(unix: f64) -> String {
    jiff::Timestamp::from_second(unix as i64).map_or_else(
        |_| format!("@{unix}"),
        |t| jiff::tz::TimeZone::system().to_datetime(t).to_string(),
    )
}
