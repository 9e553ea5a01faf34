//! The metadata record of a command that runs jobs (build, host, kernel, cgroups, privileges, date,
//! command line and every job's command), written beside its traces for `cosched report`.

use cosched_core::workload::JobEntry;
use cosched_report::{RunMetadata, METADATA_FILE};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The record of this invocation, running `jobs` (whose commands it keeps).
pub fn collect(jobs: &[JobEntry]) -> RunMetadata {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    RunMetadata {
        cosched_version: env!("CARGO_PKG_VERSION").to_string(),
        // Set by `make` from `git describe`; a plain `cargo build` does not know it.
        git_revision: option_env!("COSCHED_GIT_REVISION")
            .filter(|r| !r.is_empty())
            .map(str::to_string),
        host: proc_text("/proc/sys/kernel/hostname"),
        cpu_model: cpu_model(),
        kernel: proc_text("/proc/sys/kernel/osrelease"),
        cgroup_version: cgroup_version().to_string(),
        privileges: privileges(),
        date: super::output::rfc3339_utc(now),
        command_line: shell_words(std::env::args()),
        job_commands: jobs
            .iter()
            .filter(|j| !j.command.is_empty())
            .map(|j| (j.name.clone(), shell_words(j.command.iter().cloned())))
            .collect(),
        job_commands_by_id: Default::default(),
    }
}

/// Writes the record into the results directory `dir`.
pub fn write(dir: &Path, metadata: &RunMetadata) -> anyhow::Result<()> {
    let path = dir.join(METADATA_FILE);
    let text = serde_json::to_string_pretty(metadata)? + "\n";
    std::fs::write(&path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

fn proc_text(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|line| {
            let (key, name) = line.split_once(':')?;
            (key.trim() == "model name").then(|| name.trim().to_owned())
        })
        .unwrap_or_default()
}

fn cgroup_version() -> &'static str {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "v2"
    } else if Path::new("/sys/fs/cgroup/cpuset").exists() {
        "v1"
    } else {
        "none"
    }
}

/// `root`, or `uid N`: /proc/self belongs to the effective user.
fn privileges() -> String {
    match std::fs::metadata("/proc/self").map(|m| m.uid()) {
        Ok(0) => "root".to_string(),
        Ok(uid) => format!("uid {uid}"),
        Err(_) => String::new(),
    }
}

/// Words joined by spaces, each quoted for a POSIX shell where it holds anything but plain characters.
pub(super) fn shell_words(words: impl Iterator<Item = String>) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,@%+{}".contains(c);
    words
        .map(|w| {
            if !w.is_empty() && w.chars().all(plain) {
                w
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_spaces_or_quotes_are_quoted_for_a_shell() {
        let words = [
            "cosched",
            "compare",
            "--policy",
            "ue,taco:sizes=1/6",
            "a b",
            "it's",
            "",
        ];
        assert_eq!(
            shell_words(words.iter().map(|w| w.to_string())),
            r"cosched compare --policy ue,taco:sizes=1/6 'a b' 'it'\''s' ''"
        );
    }
}
