//! Jobs named as Slurm users name them: `ID`, an array by its id (every element of it), or
//! `ARRAY_INDEX` for one element; `wait`, `show` and `cancel` share the reading.

use super::common::{unexpected, ClientArgs};
use anyhow::Context as _;
use cosched_service::protocol::{JobFilter, JobView, Reply, Request};

/// One name of a job on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobName {
    /// A job, or every element of the array it begins.
    Id(u64),
    Element {
        array: u64,
        index: u64,
    },
}

fn parse(text: &str) -> anyhow::Result<JobName> {
    let number = |s: &str| {
        s.parse::<u64>()
            .with_context(|| format!("{text}: write a job id, or ARRAY_INDEX for one element"))
    };
    Ok(match text.split_once('_') {
        Some((array, index)) => JobName::Element {
            array: number(array)?,
            index: number(index)?,
        },
        None => JobName::Id(number(text)?),
    })
}

/// The ids of the jobs `names` name, in order, each once. Elements are looked for among the jobs
/// not ended, or among all with `ended_too`; an id that begins no array stands for itself, for
/// the daemon to say whether it exists.
pub fn resolve(client: &ClientArgs, names: &[String], ended_too: bool) -> anyhow::Result<Vec<u64>> {
    let names: Vec<JobName> = names
        .iter()
        .map(|n| parse(n))
        .collect::<anyhow::Result<_>>()?;
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let arrays: Vec<u64> = names
        .iter()
        .map(|name| match *name {
            JobName::Id(id) => id,
            JobName::Element { array, .. } => array,
        })
        .collect();
    let filter = JobFilter {
        arrays,
        ..Default::default()
    };
    let elements = match client.request(Request::Jobs {
        all: ended_too,
        filter,
    })? {
        Reply::Jobs { jobs } => jobs,
        other => return Err(unexpected(other)),
    };
    let mut ids = Vec::new();
    for name in names {
        for id in ids_of(name, &elements, ended_too)? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

/// The ids `name` stands for among `elements`, the jobs of the arrays named.
fn ids_of(name: JobName, elements: &[JobView], ended_too: bool) -> anyhow::Result<Vec<u64>> {
    match name {
        JobName::Id(id) => {
            let ids: Vec<u64> = elements
                .iter()
                .filter(|j| j.array_id == Some(id))
                .map(|j| j.id)
                .collect();
            Ok(if ids.is_empty() { vec![id] } else { ids })
        }
        JobName::Element { array, index } => elements
            .iter()
            .find(|j| j.array_id == Some(array) && j.array_index == Some(index))
            .map(|j| vec![j.id])
            .with_context(|| match ended_too {
                true => format!("{array}_{index}: array {array} has no element {index}"),
                false => format!(
                    "{array}_{index}: no element {index} of array {array} is queued or running"
                ),
            }),
    }
}
