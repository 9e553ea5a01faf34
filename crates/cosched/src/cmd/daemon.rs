//! `cosched daemon`: the node service users submit jobs to (`docs/service.md`).

use cosched_service::config::{DaemonConfig, SYSTEM_CONFIG};
use cosched_service::daemon::{self, DaemonOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Run cosched as a service: take jobs from `cosched submit` and schedule them until stopped
#[derive(clap::Args, Debug)]
#[command(
    after_help = "As root (system mode): socket /run/cosched/cosched.sock, state in \
/var/lib/cosched, cgroups and the freezer; jobs run as the users who submit them. Otherwise (user \
mode): socket $XDG_RUNTIME_DIR/cosched.sock, state in ~/.local/state/cosched, affinity and signals; \
`submit --mem` needs a memory cgroup: a user daemon without one refuses it.\n\n\
Stopping or killing the daemon leaves its jobs running (thawed); the next daemon adopts them.\n\n\
Per-user limits, privacy, how long ended jobs are kept and the memory kept from jobs' --mem \
([memory] reserved): /etc/cosched/daemon.toml in system mode, \
or the file --config names (docs/service.md lists the keys).\n\n\
Examples:\n  cosched daemon\n  cosched daemon --policy gang\n  \
cosched daemon --config /etc/cosched/daemon.toml\n  \
sudo systemctl enable --now cosched"
)]
pub struct Args {
    /// Scheduling policy (`cosched policies` lists them) [default: the last one set, as the journal
    /// keeps it, else auto]
    #[arg(
        long,
        value_name = "POLICY",
        value_parser = super::policies::PolicyName,
        hide_possible_values = true
    )]
    policy: Option<String>,
    /// Socket to listen on [default: by mode, see below]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Directory for the journal, job logs and traces [default: by mode] (`--state` is an older
    /// spelling; in `jobs` and `cancel` `--state` means job states)
    #[arg(long = "state-dir", alias = "state", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Seconds a client may take to send a whole request before its connection is closed
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    idle_timeout: f64,
    /// Configuration file: per-user limits, privacy, history retention (`docs/service.md`)
    /// [default: /etc/cosched/daemon.toml in system mode, if it exists; none in user mode]
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (socket, state) = cosched_service::paths::default_daemon_paths();
    if !(args.idle_timeout.is_finite() && args.idle_timeout > 0.0) {
        anyhow::bail!(
            "--idle-timeout {} must be a positive number of seconds",
            args.idle_timeout
        );
    }
    let config = match &args.config {
        Some(path) => DaemonConfig::load(path, true)?,
        None if cosched_service::paths::is_root() => {
            DaemonConfig::load(Path::new(SYSTEM_CONFIG), false)?
        }
        None => DaemonConfig::default(),
    };
    daemon::run(&DaemonOptions {
        socket: args.socket.unwrap_or(socket),
        state: args.state_dir.unwrap_or(state),
        policy: args.policy,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout),
        config,
        metadata: serde_json::to_value(super::provenance::collect(&[])).ok(),
    })?;
    Ok(())
}
