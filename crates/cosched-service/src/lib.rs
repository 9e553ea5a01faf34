//! cosched as a node service: a daemon that users submit jobs to over a Unix socket, and the clients.
//!
//! - [`protocol`]: the versioned line-delimited JSON requests and responses.
//! - [`server`]: the socket, SO_PEERCRED, one thread, a timeout and a size cap per connection.
//! - [`requests`]: each request answered: who may do what, the change journaled.
//! - [`registry`]: the jobs as clients see them and what the executor has yet to take.
//! - [`state`]: the registry under its lock, the journal and the wake-ups, shared by the threads.
//! - [`error`]: why a request is refused.
//! - [`config`]: the daemon's configuration file: per-user limits, privacy, history retention.
//! - [`attach`]: which running processes a client may hand to the daemon (`cosched attach`).
//! - [`journal`]: the fsynced append-only history, replayed at start and compacted to its retention.
//! - [`notify`]: readiness and status for systemd (`Type=notify`).
//! - [`output_paths`]: output files users name, with Slurm's `%j`-style symbols.
//! - [`slowdown`]: a job's slowdown so far, from the daemon's history.
//! - [`source`]: the executor's job source fed by submissions.
//! - [`scaling_history`]: how each user's programs scaled in their past jobs, for their next ones.
//! - [`switches`]: how late slot switches came, for `cosched bench daemon`.
//! - [`daemon`]: start-up, recovery and adoption after a restart, the executor run.
//! - [`processes`]: killing the processes of a job no executor watches.
//! - `harness` (feature `test-util`): a daemon started and driven from outside, for tests and
//!   `cosched bench daemon`.
//! - [`client`], [`paths`]: what the `cosched submit|jobs|…` commands use.
//!
//! `docs/service.md` documents the protocol, the journal, the restart rules and the security model.

pub mod attach;
pub mod client;
pub mod config;
pub mod daemon;
pub mod error;
#[cfg(feature = "test-util")]
pub mod harness;
pub mod journal;
pub mod logs;
pub mod notify;
pub mod output_paths;
pub mod paths;
pub mod processes;
pub mod protocol;
pub mod registry;
pub mod requests;
pub mod scaling_history;
pub mod server;
pub mod slowdown;
pub mod source;
pub mod state;
pub mod switches;
pub mod syncer;
