//! What a `--machine` string names before it is read: one machine, or a cluster of them. The
//! one-machine reader (`presets::machine`) and the cluster reader (`cluster`) both ask this, so that
//! neither needs the other to tell them apart.

/// The prefix of a cluster in `--machine`.
pub const CLUSTER_PREFIX: &str = "cluster:";

/// Whether `spec` names a cluster (a `cluster:` prefix or a `.toml` machine file).
pub fn is_cluster(spec: &str) -> bool {
    let spec = spec.trim();
    spec.starts_with(CLUSTER_PREFIX) || spec.ends_with(".toml")
}
