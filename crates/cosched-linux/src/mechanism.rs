//! The ways a plan can be enforced on this machine, and the choice among them.

use crate::cgroup::{CgroupError, CgroupKind, Hierarchy};
use std::fmt;
use std::str::FromStr;

/// How a job is kept on its CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `cpuset.cpus` of a cgroup v2 (needs the cpuset controller delegated to cosched's cgroup).
    CgroupV2,
    /// `cpuset.cpus` of a cgroup in the v1 cpuset hierarchy.
    CgroupV1,
    /// `sched_setaffinity` on every thread of every process of the job (no privileges needed).
    Affinity,
}

/// How a job is stopped outside its time slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freezer {
    /// `cgroup.freeze` of a cgroup v2.
    CgroupV2,
    /// `freezer.state` of a cgroup in the v1 freezer hierarchy.
    CgroupV1,
    /// SIGSTOP/SIGCONT to the job's process group (visible to the job: a parent sees its child stop).
    Signal,
}

impl Placement {
    pub const ALL: [Placement; 3] = [
        Placement::CgroupV2,
        Placement::CgroupV1,
        Placement::Affinity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placement::CgroupV2 => "cgroup-v2",
            Placement::CgroupV1 => "cgroup-v1",
            Placement::Affinity => "affinity",
        }
    }

    /// The cgroup hierarchy it needs, or why it cannot be used here.
    pub fn probe(self) -> Result<Option<Hierarchy>, CgroupError> {
        let kind = match self {
            Placement::CgroupV2 => CgroupKind::V2,
            Placement::CgroupV1 => CgroupKind::V1Cpuset,
            Placement::Affinity => return Ok(None),
        };
        let hierarchy = Hierarchy::find(kind)?;
        hierarchy.probe(true)?;
        Ok(Some(hierarchy))
    }
}

impl Freezer {
    pub const ALL: [Freezer; 3] = [Freezer::CgroupV2, Freezer::CgroupV1, Freezer::Signal];

    pub fn name(self) -> &'static str {
        match self {
            Freezer::CgroupV2 => "cgroup-v2",
            Freezer::CgroupV1 => "cgroup-v1",
            Freezer::Signal => "signal",
        }
    }

    pub fn probe(self) -> Result<Option<Hierarchy>, CgroupError> {
        let kind = match self {
            Freezer::CgroupV2 => CgroupKind::V2,
            Freezer::CgroupV1 => CgroupKind::V1Freezer,
            Freezer::Signal => return Ok(None),
        };
        let hierarchy = Hierarchy::find(kind)?;
        hierarchy.probe(false)?;
        Ok(Some(hierarchy))
    }

    /// The freezer of the same cgroup version as a placement, tried first so one job uses one hierarchy
    /// where possible.
    fn matching(placement: Placement) -> Freezer {
        match placement {
            Placement::CgroupV2 => Freezer::CgroupV2,
            Placement::CgroupV1 => Freezer::CgroupV1,
            Placement::Affinity => Freezer::CgroupV2,
        }
    }
}

/// The hierarchy that limits jobs' memory: cgroup v2 first where the run places or freezes jobs
/// with it (one cgroup per job then does all three), else the v1 memory hierarchy, else cgroup v2;
/// the last reason why none can be used.
fn memory_hierarchy(used: [&Option<Hierarchy>; 2]) -> Result<Hierarchy, String> {
    let v2 = || -> Result<Hierarchy, CgroupError> {
        let hierarchy = Hierarchy::find(CgroupKind::V2)?;
        hierarchy.enable_v2_memory()?;
        hierarchy.probe(false)?;
        Ok(hierarchy)
    };
    let v1 = || -> Result<Hierarchy, CgroupError> {
        let hierarchy = Hierarchy::find(CgroupKind::V1Memory)?;
        hierarchy.probe(false)?;
        Ok(hierarchy)
    };
    let uses_v2 = used
        .iter()
        .any(|h| h.as_ref().is_some_and(|h| h.kind == CgroupKind::V2));
    let (first, second): (&dyn Fn() -> _, &dyn Fn() -> _) = match uses_v2 {
        true => (&v2, &v1),
        false => (&v1, &v2),
    };
    first().or_else(|_| second()).map_err(|e| {
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            reason = format!("{reason}: {cause}");
            source = cause.source();
        }
        reason
    })
}

/// A mechanism name that is none of the valid ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?}; valid: {}", valid.join(", "))]
pub struct UnknownMechanism {
    pub what: &'static str,
    pub name: String,
    pub valid: Vec<&'static str>,
}

/// A mechanism asked for that this machine cannot provide.
#[derive(Debug, thiserror::Error)]
#[error("{what} {name} is not available here (leave the option out to pick what works)")]
pub struct Unavailable {
    pub what: &'static str,
    pub name: &'static str,
    #[source]
    pub reason: CgroupError,
}

macro_rules! named {
    ($type:ty, $what:literal) => {
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $type {
            type Err = UnknownMechanism;

            fn from_str(text: &str) -> Result<Self, UnknownMechanism> {
                <$type>::ALL
                    .into_iter()
                    .find(|m| m.name() == text)
                    .ok_or_else(|| UnknownMechanism {
                        what: $what,
                        name: text.to_string(),
                        valid: <$type>::ALL.iter().map(|m| m.name()).collect(),
                    })
            }
        }
    };
}

named!(Placement, "placement mechanism");
named!(Freezer, "freezer");

/// The mechanisms a run uses, with the cgroup hierarchies they need.
#[derive(Debug, Clone)]
pub struct Mechanisms {
    pub placement: Placement,
    pub freezer: Freezer,
    pub placement_hierarchy: Option<Hierarchy>,
    pub freezer_hierarchy: Option<Hierarchy>,
    /// Where jobs' memory is limited and measured, or why it cannot be here.
    pub memory_hierarchy: Result<Hierarchy, String>,
}

impl Mechanisms {
    /// Uses the requested mechanisms (an error says why one is unavailable), or picks the first that
    /// works: placement cgroup-v2, cgroup-v1, affinity; freezer of the placement's cgroup version, then
    /// cgroup-v2, cgroup-v1, signal.
    pub fn choose(
        placement: Option<Placement>,
        freezer: Option<Freezer>,
    ) -> Result<Mechanisms, Unavailable> {
        let (placement, placement_hierarchy) = match placement {
            Some(p) => (
                p,
                p.probe().map_err(|reason| Unavailable {
                    what: "placement",
                    name: p.name(),
                    reason,
                })?,
            ),
            None => Placement::ALL
                .into_iter()
                .find_map(|p| p.probe().ok().map(|h| (p, h)))
                .expect("affinity placement is always available"),
        };
        let (freezer, freezer_hierarchy) = match freezer {
            Some(f) => (
                f,
                f.probe().map_err(|reason| Unavailable {
                    what: "freezer",
                    name: f.name(),
                    reason,
                })?,
            ),
            None => std::iter::once(Freezer::matching(placement))
                .chain(Freezer::ALL)
                .find_map(|f| f.probe().ok().map(|h| (f, h)))
                .expect("the signal freezer is always available"),
        };
        let memory_hierarchy = memory_hierarchy([&placement_hierarchy, &freezer_hierarchy]);
        Ok(Mechanisms {
            placement,
            freezer,
            placement_hierarchy,
            freezer_hierarchy,
            memory_hierarchy,
        })
    }

    pub fn describe(&self) -> String {
        format!("placement={} freezer={}", self.placement, self.freezer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_valid_ones() {
        for p in Placement::ALL {
            assert_eq!(p.name().parse::<Placement>(), Ok(p));
        }
        let err = "cgroups".parse::<Freezer>().unwrap_err().to_string();
        assert!(err.contains("cgroup-v2, cgroup-v1, signal"), "{err}");
    }

    #[test]
    fn the_unprivileged_fallbacks_are_always_chosen_when_asked() {
        let chosen = Mechanisms::choose(Some(Placement::Affinity), Some(Freezer::Signal)).unwrap();
        assert!(chosen.placement_hierarchy.is_none() && chosen.freezer_hierarchy.is_none());
    }
}
