//! Where and how results were made: the record a command that runs jobs writes beside its traces
//! (`metadata.json`), carried into `results.json` and every row of `policies.csv`, so that a table of
//! results says which build, machine and command line produced it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
}

impl RunMetadata {
    /// The record in `dir`, if one was written there and reads back; a missing or unreadable record
    /// only leaves the metadata columns empty.
    pub fn load_from(dir: &Path) -> Option<RunMetadata> {
        let text = std::fs::read_to_string(dir.join(METADATA_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}
