//! The daemon's accounting of the jobs that ended in a `cosched report --since` window, as its
//! journal keeps it: `accounting.csv`, one line per job, and a summary line.

use anyhow::Context as _;
use cosched_core::memory::Size;
use cosched_report::csv_record;
use cosched_service::protocol::JobView;
use std::path::Path;

/// The columns of `accounting.csv`, each with its unit (`docs/service.md`).
const COLUMNS: [&str; 15] = [
    "job_id",
    "name",
    "user_id",
    "state",
    "submitted_s",
    "start_s",
    "end_s",
    "exit_code",
    "signal_code",
    "reason",
    "user_cpu_s",
    "system_cpu_s",
    "peak_memory_mib",
    "requested_memory_mib",
    "ran_on_cpus",
];

/// Every job the journal in `state` still keeps.
pub fn journal_jobs(state: &Path) -> anyhow::Result<Vec<JobView>> {
    let path = state.join("journal.jsonl");
    let history = cosched_service::journal::read_history(&path)
        .with_context(|| format!("cannot read the daemon's journal {}", path.display()))?;
    Ok(history.jobs.into_iter().map(|job| job.view).collect())
}

/// The jobs of `jobs` that ended from `from` to `to` (Unix seconds).
pub fn ended_in(jobs: &[JobView], from: f64, to: f64) -> Vec<JobView> {
    jobs.iter()
        .filter(|view| view.finished.is_some_and(|t| (from..=to).contains(&t)))
        .cloned()
        .collect()
}

pub fn csv(jobs: &[JobView]) -> String {
    let mut out = COLUMNS.join(",") + "\n";
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mib = |bytes: Option<u64>| num(bytes.map(|b| b as f64 / (1u64 << 20) as f64));
    for job in jobs {
        let accounting = job.accounting.as_ref();
        // A journal written before the signal was kept says it only in the error.
        let signal = match (job.signal, job.exit_code, job.wait_status()) {
            (Some(signal), _, _) => signal.to_string(),
            (None, None, status) if status > 128 => (status - 128).to_string(),
            _ => String::new(),
        };
        let fields = [
            job.id.to_string(),
            job.name.clone(),
            job.uid.to_string(),
            super::job_states::state_name(job.state).to_string(),
            job.submitted.to_string(),
            num(job.started),
            num(job.finished),
            job.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            signal,
            job.error.clone().unwrap_or_default(),
            num(accounting.and_then(|a| a.user_seconds)),
            num(accounting.and_then(|a| a.system_seconds)),
            mib(accounting.and_then(|a| a.peak_memory)),
            mib(job.mem),
            accounting.and_then(|a| a.cpus.clone()).unwrap_or_default(),
        ];
        out.push_str(&csv_record(&fields));
    }
    out
}

/// One line: how many jobs ended, the CPU time they used, the largest peak memory, how many
/// ran out of memory.
pub fn summary(jobs: &[JobView]) -> String {
    let used = jobs.iter().filter_map(|j| j.accounting.as_ref());
    let (user, system) = used.clone().fold((0.0, 0.0), |(u, s), a| {
        (
            u + a.user_seconds.unwrap_or(0.0),
            s + a.system_seconds.unwrap_or(0.0),
        )
    });
    let peak = used.filter_map(|a| a.peak_memory).max();
    let oom = jobs
        .iter()
        .filter(|j| j.state == cosched_service::protocol::JobState::Oom)
        .count();
    format!(
        "accounting: {} jobs ended, CPU time {:.1} s (user {user:.1} s, system {system:.1} s), \
         largest peak memory {}, {oom} out of memory",
        jobs.len(),
        user + system,
        peak.map_or("-".to_string(), |p| Size(p).to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_service::protocol::{Accounting, JobState, Submission};

    #[test]
    fn each_ended_job_is_a_line_with_its_usage_in_the_units_its_column_names() {
        let submission: Submission = serde_json::from_value(serde_json::json!({
            "name": "lu, big", "command": ["lu"], "cwd": "/", "env": {}, "min_threads": null,
            "max_threads": null, "kind": "rigid", "weight": 1.0, "coschedule": true,
            "hints": {}, "mem": 67108864
        }))
        .unwrap();
        let mut job = JobView::queued(7, 1000, 10.0, &submission, "o".into(), "e".into());
        job.state = JobState::Oom;
        job.started = Some(11.0);
        job.finished = Some(15.5);
        job.error = Some("killed by signal 9 (Killed)".into());
        job.accounting = Some(Box::new(Accounting {
            user_seconds: Some(1.5),
            system_seconds: Some(0.25),
            peak_memory: Some(64 << 20),
            cpus: Some("0-1,4".into()),
        }));
        let mut killed = job.clone();
        killed.exit_code = Some(137);
        killed.signal = Some(9);
        let text = csv(&[job.clone(), killed]);
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap().split(',').count(), COLUMNS.len());
        assert_eq!(
            lines.next().unwrap(),
            "7,\"lu, big\",1000,oom,10,11,15.5,,9,killed by signal 9 (Killed),1.5,0.25,64,64,\"0-1,4\""
        );
        assert_eq!(
            lines.next().unwrap(),
            "7,\"lu, big\",1000,oom,10,11,15.5,137,9,killed by signal 9 (Killed),1.5,0.25,64,64,\"0-1,4\""
        );
        // Every column but the words names its unit, as in the report's other CSV files.
        for column in COLUMNS
            .iter()
            .filter(|c| !["name", "state", "reason"].contains(c))
        {
            assert!(
                cosched_report::UNIT_SUFFIXES
                    .iter()
                    .any(|(suffix, _)| column.ends_with(suffix) || *column == &suffix[1..]),
                "{column} names no unit"
            );
        }
        let line = summary(&[job]);
        assert!(line.contains("1 jobs ended, CPU time 1.8 s"), "{line}");
        assert!(
            line.contains("largest peak memory 64M, 1 out of memory"),
            "{line}"
        );
    }
}
