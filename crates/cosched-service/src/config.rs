//! The daemon's configuration file (`/etc/cosched/daemon.toml` for a system daemon, or the file
//! `--config` names): per-user limits, each user's share of the machine, what users see of each
//! other's jobs, how long finished jobs are kept, how jobs past their time limit are ended, and how
//! much of the node's memory jobs' `--mem` requests may take together. Every
//! key is optional; an unknown key is an error, so that a typo is not silently
//! ignored. `docs/service.md` lists the keys and their defaults.

use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a system daemon reads its configuration when `--config` names none.
pub const SYSTEM_CONFIG: &str = "/etc/cosched/daemon.toml";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    pub limits: Limits,
    pub shares: Shares,
    pub privacy: Privacy,
    pub history: History,
    pub jobs: Jobs,
    pub memory: Memory,
    /// `shares` with its names resolved, when the file was loaded.
    #[serde(skip)]
    pub share_table: ShareTable,
}

/// What one user may hold of the daemon at once. Root is held to none of them, and has connections
/// of its own beyond every other user's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Jobs submitted and not yet started, per user.
    pub queued_jobs_per_user: usize,
    /// Jobs running at once, per user; further ones wait, queued, until one ends.
    pub running_jobs_per_user: usize,
    /// Connections open at once, per user (each `cosched wait` holds one).
    pub connections_per_user: usize,
    /// Connections open at once, all users together.
    pub connections: usize,
    /// Of `connections`, how many only root may use, so that root can always reach the daemon.
    pub connections_reserved_for_root: usize,
    /// Bytes of command line and environment one job may carry (the journal keeps them).
    pub submission_bytes: usize,
    /// Bytes of logs a user may keep in the state directory's `logs/<uid>/`: no file a job writes
    /// may grow past it (RLIMIT_FSIZE), and no job with logs there starts queued once the user's
    /// logs hold it.
    pub log_bytes_per_user: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            queued_jobs_per_user: 10_000,
            running_jobs_per_user: 1024,
            connections_per_user: 64,
            connections: 512,
            connections_reserved_for_root: 8,
            submission_bytes: 128 * 1024,
            log_bytes_per_user: 1 << 30,
        }
    }
}

/// Each user's share of the machine against the other users' (as Slurm's fair-share `Shares`), by
/// user or by primary group; a user named in neither has a share of 1.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Shares {
    /// By user name (or uid, as digits).
    pub users: BTreeMap<String, f64>,
    /// By group name (or gid, as digits), for users not named in `users`.
    pub groups: BTreeMap<String, f64>,
}

/// [`Shares`] with the names resolved to ids, as the daemon looks them up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareTable {
    users: HashMap<u32, f64>,
    groups: HashMap<u32, f64>,
}

impl ShareTable {
    /// The share of user `uid` whose primary group is `gid`.
    pub fn of(&self, uid: u32, gid: u32) -> f64 {
        self.users
            .get(&uid)
            .or_else(|| self.groups.get(&gid))
            .copied()
            .unwrap_or(1.0)
    }
}

/// What a user sees of other users' jobs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Privacy {
    /// Hide from other users what a job's request chose (as Slurm's `PrivateData=jobs` hides
    /// jobs): they are listed without command, output paths, pid, error text or slowdown, and a
    /// default name reads `private`. Root and the daemon's own user see everything.
    pub private_jobs: bool,
}

impl Default for Privacy {
    fn default() -> Privacy {
        Privacy { private_jobs: true }
    }
}

/// How long, and how much of, the jobs that have ended the daemon remembers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct History {
    /// Seconds a finished job stays in `cosched jobs --all`, `show` and `wait`, and in the journal.
    pub retention_seconds: f64,
    /// Ended jobs kept per user (root excepted); past it the oldest are forgotten first.
    pub jobs_per_user: usize,
    /// Bytes of journal a user's ended jobs may take (root excepted; command lines, labels and log
    /// paths, as [`crate::protocol::JobView::footprint`] counts them); past it the oldest are
    /// forgotten first.
    pub bytes_per_user: u64,
}

impl Default for History {
    fn default() -> History {
        History {
            retention_seconds: 7.0 * 86400.0,
            jobs_per_user: 100_000,
            bytes_per_user: 64 << 20,
        }
    }
}

/// How the daemon ends jobs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Jobs {
    /// Seconds between the SIGTERM a job gets at its time limit and the SIGKILL that follows if it
    /// still runs (Slurm's `KillWait`).
    pub kill_wait_seconds: f64,
    /// Cancel a queued job once its dependency can never be met (Slurm's `kill_invalid_depend`);
    /// by default it stays pending, reason `dependency_never_satisfied`, for its user to cancel.
    pub kill_invalid_depend: bool,
}

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs {
            kill_wait_seconds: 30.0,
            kill_invalid_depend: false,
        }
    }
}

/// How much of the node's memory jobs may ask for (`cosched submit --mem`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Memory {
    /// Kept for the system and the daemon (Slurm's `MemSpecLimit`), as a size (`"2G"`): jobs'
    /// requests running at once add up to at most the node's memory less this. None by default.
    #[serde(with = "cosched_core::memory::size_text")]
    pub reserved: Option<u64>,
}

impl Memory {
    /// Bytes for jobs on a node with `total` bytes.
    pub fn for_jobs(&self, total: u64) -> u64 {
        total.saturating_sub(self.reserved.unwrap_or(0))
    }
}

impl History {
    pub fn retention(&self) -> Duration {
        Duration::try_from_secs_f64(self.retention_seconds).unwrap_or(Duration::MAX)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // `reason`, not `source`: the message includes it, and a chain printed whole would repeat it.
    #[error("cannot read the daemon configuration {path}: {reason}")]
    Read {
        path: PathBuf,
        reason: std::io::Error,
    },
    #[error("daemon configuration {path}: {reason}")]
    Parse {
        path: PathBuf,
        reason: toml::de::Error,
    },
    #[error("daemon configuration {path}: {key} = {value}: {rule}")]
    Invalid {
        path: PathBuf,
        key: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("daemon configuration {path}: shares.{table}: no {table_kind} is called {name}; name one that exists on this machine, or give its number")]
    UnknownName {
        path: PathBuf,
        table: &'static str,
        table_kind: &'static str,
        name: String,
    },
}

impl DaemonConfig {
    /// Reads `path`; `required`: a missing file is an error, else it means every default.
    pub fn load(path: &Path, required: bool) -> Result<DaemonConfig, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(DaemonConfig::default())
            }
            Err(reason) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    reason,
                })
            }
        };
        let config: DaemonConfig = toml::from_str(&text).map_err(|reason| ConfigError::Parse {
            path: path.to_path_buf(),
            reason,
        })?;
        config.check(path)?;
        let mut config = config;
        config.share_table = config.shares.resolve(path)?;
        Ok(config)
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |key, value: String, rule| ConfigError::Invalid {
            path: path.to_path_buf(),
            key,
            value,
            rule,
        };
        let limits = &self.limits;
        for (key, value) in [
            ("limits.queued_jobs_per_user", limits.queued_jobs_per_user),
            ("limits.running_jobs_per_user", limits.running_jobs_per_user),
            ("limits.connections_per_user", limits.connections_per_user),
            ("limits.submission_bytes", limits.submission_bytes),
            (
                "limits.log_bytes_per_user",
                limits.log_bytes_per_user.min(usize::MAX as u64) as usize,
            ),
            ("history.jobs_per_user", self.history.jobs_per_user),
        ] {
            if value == 0 {
                return Err(invalid(key, "0".into(), "must be at least 1"));
            }
        }
        if limits.connections <= limits.connections_reserved_for_root {
            return Err(invalid(
                "limits.connections",
                limits.connections.to_string(),
                "must exceed limits.connections_reserved_for_root, or no other user could connect",
            ));
        }
        let kill_wait = self.jobs.kill_wait_seconds;
        if !(kill_wait.is_finite() && (0.0..=86400.0).contains(&kill_wait)) {
            return Err(invalid(
                "jobs.kill_wait_seconds",
                kill_wait.to_string(),
                "must be a number of seconds from 0 to 86400",
            ));
        }
        for (table, shares) in [
            ("shares.users", &self.shares.users),
            ("shares.groups", &self.shares.groups),
        ] {
            if let Some((_, share)) = shares
                .iter()
                .find(|(_, share)| !(share.is_finite() && (1e-6..=1e6).contains(*share)))
            {
                return Err(invalid(
                    table,
                    share.to_string(),
                    "a share must be a number from 1e-6 to 1e6",
                ));
            }
        }
        let retention = self.history.retention_seconds;
        if !(retention.is_finite() && (0.0..=1e10).contains(&retention)) {
            return Err(invalid(
                "history.retention_seconds",
                retention.to_string(),
                "must be a number of seconds from 0 to 1e10",
            ));
        }
        Ok(())
    }
}

impl Shares {
    /// The table with every name resolved to its id; `path` names the file in errors.
    pub fn resolve(&self, path: &Path) -> Result<ShareTable, ConfigError> {
        let unknown = |table, table_kind, name: &str| ConfigError::UnknownName {
            path: path.to_path_buf(),
            table,
            table_kind,
            name: name.to_string(),
        };
        let mut resolved = ShareTable::default();
        for (name, &share) in &self.users {
            let uid = match name.parse::<u32>() {
                Ok(uid) => uid,
                Err(_) => nix::unistd::User::from_name(name)
                    .ok()
                    .flatten()
                    .ok_or_else(|| unknown("users", "user", name))?
                    .uid
                    .as_raw(),
            };
            resolved.users.insert(uid, share);
        }
        for (name, &share) in &self.groups {
            let gid = match name.parse::<u32>() {
                Ok(gid) => gid,
                Err(_) => nix::unistd::Group::from_name(name)
                    .ok()
                    .flatten()
                    .ok_or_else(|| unknown("groups", "group", name))?
                    .gid
                    .as_raw(),
            };
            resolved.groups.insert(gid, share);
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<DaemonConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.toml");
        std::fs::write(&path, text).unwrap();
        DaemonConfig::load(&path, true)
    }

    #[test]
    fn every_key_is_optional_and_a_missing_default_file_means_the_defaults() {
        assert_eq!(load("").unwrap(), DaemonConfig::default());
        let missing = Path::new("/nonexistent/cosched/daemon.toml");
        assert_eq!(
            DaemonConfig::load(missing, false).unwrap(),
            DaemonConfig::default()
        );
        let message = DaemonConfig::load(missing, true).unwrap_err().to_string();
        assert!(message.contains("cannot read"), "{message}");
        let some =
            load("[limits]\nqueued_jobs_per_user = 5\n[privacy]\nprivate_jobs = false\n").unwrap();
        assert_eq!(some.limits.queued_jobs_per_user, 5);
        assert_eq!(some.limits.connections_per_user, 64);
        assert!(!some.privacy.private_jobs);
    }

    #[test]
    fn unknown_keys_and_impossible_values_are_refused_naming_the_key() {
        let typo = load("[limits]\nqueued_job_per_user = 5\n")
            .unwrap_err()
            .to_string();
        assert!(typo.contains("queued_job_per_user"), "{typo}");
        let section = load("[limit]\n").unwrap_err().to_string();
        assert!(section.contains("limit"), "{section}");
        let zero = load("[limits]\nrunning_jobs_per_user = 0\n")
            .unwrap_err()
            .to_string();
        assert!(zero.contains("limits.running_jobs_per_user"), "{zero}");
        let root_only = load("[limits]\nconnections = 8\n").unwrap_err().to_string();
        assert!(
            root_only.contains("connections_reserved_for_root"),
            "{root_only}"
        );
        let negative = load("[history]\nretention_seconds = -1\n")
            .unwrap_err()
            .to_string();
        assert!(negative.contains("history.retention_seconds"), "{negative}");
        let endless = load("[jobs]\nkill_wait_seconds = inf\n")
            .unwrap_err()
            .to_string();
        assert!(endless.contains("jobs.kill_wait_seconds"), "{endless}");
        let share = load("[shares.users]\nroot = 0\n").unwrap_err().to_string();
        assert!(share.contains("shares.users"), "{share}");
        let nobody = load("[shares.users]\nno-such-user-here = 2\n")
            .unwrap_err()
            .to_string();
        assert!(nobody.contains("no-such-user-here"), "{nobody}");
    }

    #[test]
    fn the_memory_reserve_is_a_size_taken_off_the_node_for_jobs() {
        let gib = 1u64 << 30;
        assert_eq!(DaemonConfig::default().memory.for_jobs(8 * gib), 8 * gib);
        let reserved = load("[memory]\nreserved = \"2G\"\n").unwrap();
        assert_eq!(reserved.memory.for_jobs(8 * gib), 6 * gib);
        assert_eq!(reserved.memory.for_jobs(gib), 0);
        let bad = load("[memory]\nreserved = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("reserved") && bad.contains("e.g. 64M"),
            "{bad}"
        );
    }

    #[test]
    fn shares_are_by_user_then_by_primary_group_then_one() {
        let path = Path::new("daemon.toml");
        let config =
            load("[shares.users]\nroot = 3\n\"1000\" = 2\n[shares.groups]\n\"100\" = 5\n").unwrap();
        assert_eq!(config.share_table, config.shares.resolve(path).unwrap());
        let table = config.share_table;
        assert_eq!(table.of(0, 0), 3.0);
        assert_eq!(table.of(1000, 100), 2.0);
        assert_eq!(table.of(1001, 100), 5.0);
        assert_eq!(table.of(1001, 1001), 1.0);
    }
}
