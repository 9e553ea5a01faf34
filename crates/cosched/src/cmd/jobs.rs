//! `cosched jobs`: the daemon's jobs, queued and running (with `--all`, its whole history), filtered
//! and shown with the fields asked for, as `squeue`/`sacct` would.

use super::client::{unexpected, ClientArgs};
use anyhow::Context as _;
use cosched_core::memory::Size;
use cosched_service::protocol::{JobFilter, JobState, JobView, Reply, Request};
use std::collections::HashMap;

/// List the daemon's jobs: id, name, user, state, CPUs now, threads, elapsed, slowdown so far
#[derive(clap::Args, Debug)]
#[command(
    after_help = "States: pending (not started; `reason` says why), running, suspended \
(running, frozen between its slots), done, failed, cancelled, timeout, oom (killed for passing \
its --mem).\n\n\
Fields for --format: id (ARRAY_INDEX for an element of an array), job_id, name, user, uid, state, \
reason (why pending; why it ended), cpus (now; every CPU it had once ended), threads, elapsed, \
time_limit, submitted, started, finished, exit_code, exit (code, or the signal that killed it), \
error, slowdown, labels, priority (pending jobs start highest first), nice, mem (asked for), and \
once ended: cputime, user_time, system_time, maxrss \
(peak memory).\n\n\
Examples:\n  cosched jobs\n  cosched jobs --user ana --state running,suspended\n  \
cosched jobs --all --since 1h --format id,name,state,elapsed,exit_code\n  \
cosched jobs --all --since 1h --format id,name,state,exit,reason,cputime,maxrss,mem,cpus\n  \
cosched jobs --format id,state,reason,priority,nice\n  cosched jobs --name lu --json"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Include jobs that have ended
    #[arg(short, long)]
    all: bool,
    /// Fields to show, comma-separated, in order (see below)
    #[arg(short = 'o', long, value_name = "FIELDS")]
    format: Option<String>,
}

/// Which jobs, by Slurm's flags (`squeue`, `scancel`); `jobs` and `cancel` share them.
#[derive(clap::Args, Debug)]
pub struct FilterArgs {
    /// Jobs of these users, by name or uid, comma-separated
    #[arg(short, long, value_name = "USER,...")]
    pub user: Option<String>,
    /// Jobs in these states, comma-separated (pending, running, suspended, done, failed,
    /// cancelled, timeout, oom)
    #[arg(short = 't', long, value_name = "STATE,...")]
    pub state: Option<String>,
    /// Jobs with these names, comma-separated
    #[arg(short, long, value_name = "NAME,...")]
    pub name: Option<String>,
    /// Jobs not ended by WHEN: a time back from now (90s, 30m, 1h, 2d), a local time
    /// (2026-11-23 14:00) or @UNIX-SECONDS
    #[arg(short = 'S', long, value_name = "WHEN")]
    pub since: Option<String>,
}

impl FilterArgs {
    pub fn filter(&self) -> anyhow::Result<JobFilter> {
        let list = |text: &Option<String>| -> Vec<String> {
            text.iter()
                .flat_map(|t| t.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        Ok(JobFilter {
            users: list(&self.user)
                .iter()
                .map(|u| uid_of(u))
                .collect::<anyhow::Result<_>>()?,
            states: list(&self.state)
                .iter()
                .map(|s| state_of(s))
                .collect::<anyhow::Result<_>>()?,
            names: list(&self.name),
            arrays: Vec::new(),
            since: match &self.since {
                Some(text) => Some(
                    super::report::when(text, cosched_service::protocol::now_unix())
                        .with_context(|| format!("--since {text}"))?,
                ),
                None => None,
            },
        })
    }

    pub fn is_empty(&self) -> bool {
        self.user.is_none() && self.state.is_none() && self.name.is_none() && self.since.is_none()
    }
}

fn uid_of(user: &str) -> anyhow::Result<u32> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
        .with_context(|| format!("--user {user}: no such user"))
}

fn state_of(text: &str) -> anyhow::Result<JobState> {
    let name = match text.to_ascii_lowercase().as_str() {
        "pending" | "pd" => "queued".to_string(),
        other => other.to_string(),
    };
    serde_json::from_value(serde_json::Value::String(name)).map_err(|_| {
        anyhow::anyhow!(
            "--state {text}: use pending, running, suspended, done, failed, cancelled, timeout or oom"
        )
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let request = Request::Jobs {
        all: args.all || args.filter.since.is_some(),
        filter: args.filter.filter()?,
    };
    match args.client.request(request)? {
        Reply::Jobs { jobs } => {
            if !args.client.print_json(&jobs) {
                let fields = args.format.as_deref().unwrap_or(DEFAULT_FIELDS);
                print_table(&jobs, fields)?;
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
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
        "cpus" => or_dash(job.cpus.clone().or_else(|| {
            let accounting = job.accounting.as_ref()?;
            accounting.cpus.clone()
        })),
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
        "exit" => match (job.state.ended(), job.exit_code) {
            (false, _) => "-".into(),
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

/// How a state is shown: Slurm's word for a job not started.
pub fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "pending",
        JobState::Running => "running",
        JobState::Suspended => "suspended",
        JobState::Done => "done",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
        JobState::Timeout => "timeout",
        JobState::Oom => "oom",
    }
}

/// A Unix time as a local `YYYY-MM-DDTHH:MM:SS`, as `sacct` shows times (and `--since` reads them).
fn local_time(unix: f64) -> String {
    jiff::Timestamp::from_second(unix as i64).map_or_else(
        |_| format!("@{unix}"),
        |t| jiff::tz::TimeZone::system().to_datetime(t).to_string(),
    )
}
