//! Real executor: runs jobs as Linux processes and enforces plans with cgroups, affinity and freezing.
