//! cosched as a node service: a daemon that users submit jobs to over a Unix socket, and the clients.
//!
//! - [`protocol`]: the versioned line-delimited JSON requests and responses.
//! - [`server`]: the socket, SO_PEERCRED, one thread, a timeout and a size cap per connection.
//! - [`registry`]: the jobs as clients see them; who may do what.
//! - [`attach`]: which running processes a client may hand to the daemon (`cosched attach`).
//! - [`journal`]: the fsynced append-only history, replayed at start.
//! - [`notify`]: readiness and status for systemd (`Type=notify`).
//! - [`slowdown`]: a job's slowdown so far, from the daemon's history.
//! - [`source`]: the executor's job source fed by submissions.
//! - [`switches`]: how late slot switches came, for `cosched bench daemon`.
//! - [`daemon`]: start-up, recovery and adoption after a restart, the executor run.
//! - [`client`], [`paths`]: what the `cosched submit|jobs|…` commands use.
//!
//! `docs/service.md` documents the protocol, the journal, the restart rules and the security model.

pub mod attach;
pub mod client;
pub mod daemon;
pub mod journal;
pub mod notify;
pub mod paths;
pub mod protocol;
pub mod registry;
pub mod server;
pub mod slowdown;
pub mod source;
pub mod switches;
