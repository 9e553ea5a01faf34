//! `cosched daemon` with real processes, one module per concern. Each test runs its own daemon on a
//! socket and state directory of its own, one test at a time; `common` (shared with the other daemon
//! tests) holds what they need.

#[path = "../common/mod.rs"]
mod common;

mod attach;
mod lifecycle;
mod privilege;
mod reports;
mod socket;
mod users;
