//! Which jobs, by Slurm's flags (`squeue`, `scancel`): `jobs` and `cancel` share them.

use crate::cmd::job_states::state_of;
use anyhow::Context as _;
use cosched_service::protocol::JobFilter;

/// Which jobs, by Slurm's flags (`squeue`, `scancel`); `jobs` and `cancel` share them.
#[derive(clap::Args, Debug)]
pub struct FilterArgs {
    /// Jobs of these users, by name or uid, comma-separated
    #[arg(short, long, value_name = "USER,...")]
    pub user: Option<String>,
    /// Jobs in these states, comma-separated, by name or Slurm's code (PD, R, S, CD, F, CA, TO,
    /// OOM); an ended state lists ended jobs without --all. Example: -t R,PD
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
                    crate::cmd::when::when(text, cosched_service::protocol::now_unix())
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
