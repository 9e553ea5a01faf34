//! A job's environment is its submitter's: no descriptor, umask, preload or memory high-water
//! mark of the daemon's.

#[allow(unused_imports)]
use crate::common;
