//! A plan: what must hold until the policy's next decision.

use crate::cpuset::CpuSet;
use crate::job::JobId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One job's place in a slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub job: JobId,
    pub cpus: CpuSet,
}

/// One time slot of the cycle: the jobs that run in it and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// Length of the slot in seconds; only the ratio between slots matters to the fluid simulator.
    pub length: f64,
    pub assignments: Vec<Assignment>,
}

/// A cycle of slots repeated until the next plan, plus jobs pinned outside the cycle and thread advice.
///
/// A started job that is in no slot and not pinned is frozen; a job never started stays pending until a
/// plan places it. A plan with one slot is pure space sharing; several slots are gang scheduling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub slots: Vec<Slot>,
    /// Jobs opted out of coscheduling: they keep these CPUs in every slot and are never frozen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<Assignment>,
    /// Thread count each job should use; jobs absent keep what they have.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "advice_keys"
    )]
    pub advice: BTreeMap<JobId, u32>,
    /// Absolute time at which the policy wants a `Timer` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<f64>,
    /// Why the policy chose this plan, for a person reading the trace (`auto`: its widths and order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Advice is a JSON object keyed by job id. Inside a flattened trace record serde buffers the object and
/// no longer turns its string keys into numbers, so the keys are read as strings and parsed here.
pub(crate) mod advice_keys {
    use super::{BTreeMap, JobId};
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        advice: &BTreeMap<JobId, u32>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        advice.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<JobId, u32>, D::Error> {
        BTreeMap::<String, u32>::deserialize(d)?
            .into_iter()
            .map(|(key, threads)| {
                let id = key
                    .parse()
                    .map_err(|_| D::Error::custom(format!("advice key {key:?} is not a job id")))?;
                Ok((JobId(id), threads))
            })
            .collect()
    }
}

impl Plan {
    /// A single-slot space-sharing plan.
    pub fn space_sharing(assignments: Vec<Assignment>) -> Plan {
        Plan {
            slots: vec![Slot {
                length: 1.0,
                assignments,
            }],
            ..Plan::default()
        }
    }

    /// Every job that runs at some point of the cycle (slotted or pinned).
    pub fn placed_jobs(&self) -> std::collections::BTreeSet<JobId> {
        self.slots
            .iter()
            .flat_map(|s| s.assignments.iter())
            .chain(&self.pinned)
            .map(|a| a.job)
            .collect()
    }

    /// The CPUs a job holds in the first slot it has (its pinned CPUs if it is pinned): where it
    /// starts.
    pub fn first_cpus(&self, job: JobId) -> Option<&CpuSet> {
        (0..self.slots.len().max(1)).find_map(|slot| self.cpus_in_slot(slot, job))
    }

    /// The CPUs a job holds in a slot, including when it is pinned.
    pub fn cpus_in_slot(&self, slot: usize, job: JobId) -> Option<&CpuSet> {
        self.pinned
            .iter()
            .chain(
                self.slots
                    .get(slot)
                    .into_iter()
                    .flat_map(|s| &s.assignments),
            )
            .find(|a| a.job == job)
            .map(|a| &a.cpus)
    }

    /// Total cycle length, seconds.
    pub fn cycle_length(&self) -> f64 {
        self.slots.iter().map(|s| s.length).sum()
    }

    /// Fraction of the cycle during which `job` runs.
    pub fn share(&self, job: JobId) -> f64 {
        if self.pinned.iter().any(|a| a.job == job) {
            return 1.0;
        }
        let cycle = self.cycle_length();
        if cycle <= 0.0 {
            return 0.0;
        }
        self.slots
            .iter()
            .filter(|s| s.assignments.iter().any(|a| a.job == job))
            .map(|s| s.length)
            .sum::<f64>()
            / cycle
    }
}
