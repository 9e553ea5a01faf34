//! How job states are written and read: Slurm's names, codes and long names (`squeue -t`),
//! shared by the daemon's client commands and `report`'s accounting.

use cosched_service::protocol::JobState;

/// Every state with Slurm's code for it and the words it may be asked by: its own name, Slurm's
/// code and Slurm's long name (`squeue -t`), and `completed` beside `done`.
const STATES: [(JobState, &str, &[&str]); 8] = [
    (JobState::Queued, "PD", &["pending", "pd", "queued"]),
    (JobState::Running, "R", &["running", "r"]),
    (JobState::Suspended, "S", &["suspended", "s"]),
    (JobState::Done, "CD", &["done", "cd", "completed"]),
    (JobState::Failed, "F", &["failed", "f"]),
    (JobState::Cancelled, "CA", &["cancelled", "ca", "canceled"]),
    (JobState::Timeout, "TO", &["timeout", "to"]),
    (JobState::Oom, "OOM", &["oom", "out_of_memory"]),
];

/// The state `text` names, in any of its spellings and any case.
pub fn state_of(text: &str) -> anyhow::Result<JobState> {
    let word = text.to_ascii_lowercase();
    STATES
        .iter()
        .find(|(_, _, words)| words.contains(&word.as_str()))
        .map(|(state, _, _)| *state)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--state {text}: no such state; use pending (PD), running (R), suspended (S), \
                 done (CD), failed (F), cancelled (CA), timeout (TO) or oom (OOM)"
            )
        })
}

/// Slurm's short code for `state` (`squeue`'s `%t`).
pub fn state_code(state: JobState) -> &'static str {
    STATES
        .iter()
        .find(|(s, _, _)| *s == state)
        .map_or("?", |(_, code, _)| code)
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
