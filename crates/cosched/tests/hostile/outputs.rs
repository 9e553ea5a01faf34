//! Output files, logs and listings: no link followed into another user's file, no unbounded
//! read, no terminal escape, nothing private shown to another user.

#[allow(unused_imports)]
use crate::common;
