//! Where and how results were made: the record a command that runs jobs writes beside its traces
//! (`metadata.json`; a daemon, one per start beside that start's trace), carried into `results.json`
//! and every row of `policies.csv`, so that a table of results says which build, machine and
//! command line produced it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file, in a results directory, that holds its [`RunMetadata`].
pub const METADATA_FILE: &str = "metadata.json";

/// Facts of the invocation that made a set of runs; what a trace itself records (policy and its
/// settings, executor, mechanism, machine, workload, seed, start time) stays in the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunMetadata {
    pub cosched_version: String,
    /// The source revision the binary was built from, where the build knew it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_revision: Option<String>,
    pub host: String,
    pub cpu_model: String,
    pub kernel: String,
    /// `v2`, `v1` or `none`: the cgroup hierarchy mounted at /sys/fs/cgroup.
    pub cgroup_version: String,
    /// `root`, or `uid N` for an unprivileged user.
    pub privileges: String,
    /// When the command started, RFC 3339 in UTC.
    pub date: String,
    /// The command line as typed, each argument quoted for a POSIX shell where it needs to be.
    pub command_line: String,
    /// Each job's command by job name, its words joined and quoted as in `command_line`.
    pub job_commands: BTreeMap<String, String>,
    /// Each job's command by job id, where names need not tell jobs apart (a daemon's jobs); looked
    /// up before `job_commands`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub job_commands_by_id: BTreeMap<u64, String>,
}

impl RunMetadata {
    /// The record in `dir`, if one was written there and reads back; a missing or unreadable record
    /// only leaves the metadata columns empty.
    pub fn load_from(dir: &Path) -> Option<RunMetadata> {
        let text = std::fs::read_to_string(dir.join(METADATA_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Where the record of one trace lies when each trace has its own (a daemon's, one per start):
    /// `daemon-1-2.jsonl` has `daemon-1-2.metadata.json`.
    pub fn path_beside(trace: &Path) -> PathBuf {
        trace.with_extension(METADATA_FILE)
    }

    /// The record beside `trace` (see [`RunMetadata::path_beside`]), if one reads back.
    pub fn load_beside(trace: &Path) -> Option<RunMetadata> {
        let text = std::fs::read_to_string(Self::path_beside(trace)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The command of job `id` named `name`, as this record keeps it.
    pub fn command_of(&self, id: u64, name: &str) -> Option<&str> {
        self.job_commands_by_id
            .get(&id)
            .or_else(|| self.job_commands.get(name))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_trace_has_its_record_beside_it_and_commands_by_id_come_first() {
        assert_eq!(
            RunMetadata::path_beside(Path::new("/s/traces/daemon-5-9.jsonl")),
            Path::new("/s/traces/daemon-5-9.metadata.json")
        );
        let metadata = RunMetadata {
            job_commands: [("sh".to_string(), "sh a".to_string())].into(),
            job_commands_by_id: [(3, "sh b".to_string())].into(),
            ..RunMetadata::default()
        };
        assert_eq!(metadata.command_of(3, "sh"), Some("sh b"));
        assert_eq!(metadata.command_of(4, "sh"), Some("sh a"));
        assert_eq!(metadata.command_of(4, "lu"), None);
    }
}
