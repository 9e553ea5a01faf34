//! A job that truncates, grows or unlinks its control page leaves the daemon serving.

#[allow(unused_imports)]
use crate::common;
