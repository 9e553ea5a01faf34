//! The root daemon against hostile local users: two unprivileged uids (through `setpriv`) try to
//! crash it, exhaust it, read through it or leave their mark on each other's jobs. Each module is
//! one kind of attack; `common` (shared with the other daemon tests) holds what they need. Tests skip, saying so, without root or
//! `setpriv`.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod control_page;
mod environment;
mod outputs;
