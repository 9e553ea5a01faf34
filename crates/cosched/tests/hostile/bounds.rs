//! One user cannot grow the daemon's memory, journal or disk without bound; a full disk loses no
//! acknowledged job.

#[allow(unused_imports)]
use crate::common;
