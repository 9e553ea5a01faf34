//! Where a job's output goes when its user names the files (`submit -o/-e`), with Slurm's
//! replacement symbols: `%j` the job id, `%x` its name, `%u` its user's name, `%A` the id of the
//! array it belongs to and `%a` its index there, `%%` a percent sign.

use crate::error::ServiceError;
use std::path::{Path, PathBuf};

/// Slurm writes this index for a job that belongs to no array.
const NO_ARRAY_INDEX: &str = "4294967294";

/// What the symbols of one job stand for.
pub struct JobNames<'a> {
    pub id: u64,
    pub name: &'a str,
    pub user: &'a str,
    /// The array's id and the job's index there, for an element of an array.
    pub array: Option<(u64, u64)>,
}

/// `pattern` with its symbols replaced, relative to `cwd` when not absolute.
pub fn expand(pattern: &str, job: &JobNames, cwd: &Path) -> Result<PathBuf, ServiceError> {
    let bad = |why: &str| ServiceError::BadOutputPattern {
        pattern: pattern.to_string(),
        why: why.to_string(),
    };
    if pattern.is_empty() || pattern.len() > 4096 || pattern.contains('\0') {
        return Err(bad("give a path of 1 to 4096 bytes"));
    }
    let mut expanded = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            expanded.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => expanded.push_str(&job.id.to_string()),
            Some('A') => expanded.push_str(&job.array.map_or(job.id, |(a, _)| a).to_string()),
            Some('x') => expanded.push_str(job.name),
            Some('u') => expanded.push_str(job.user),
            Some('a') => match job.array {
                Some((_, index)) => expanded.push_str(&index.to_string()),
                None => expanded.push_str(NO_ARRAY_INDEX),
            },
            Some('%') => expanded.push('%'),
            Some(other) => {
                return Err(bad(&format!(
                    "%{other} is not a symbol cosched knows; use %j %x %u %A %a or %%"
                )))
            }
            None => return Err(bad("it ends in a lone %; write %% for a percent sign")),
        }
    }
    Ok(cwd.join(expanded))
}

/// The name of user `uid`, or the number when the user database has none.
pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |user| user.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_replaced_as_slurm_replaces_them() {
        let job = JobNames {
            id: 42,
            name: "lu",
            user: "ana",
            array: None,
        };
        let cwd = Path::new("/home/ana/run");
        let path = |p: &str| expand(p, &job, cwd).unwrap();
        assert_eq!(path("out-%j.txt"), Path::new("/home/ana/run/out-42.txt"));
        assert_eq!(path("/tmp/%u/%x.%j"), Path::new("/tmp/ana/lu.42"));
        assert_eq!(path("%A_%a"), Path::new("/home/ana/run/42_4294967294"));
        assert_eq!(path("100%%-%j"), Path::new("/home/ana/run/100%-42"));
        let element = JobNames {
            array: Some((40, 2)),
            ..job
        };
        assert_eq!(
            expand("%A_%a", &element, cwd).unwrap(),
            Path::new("/home/ana/run/40_2")
        );
        for bad in ["out-%q", "out-%", ""] {
            let message = expand(bad, &job, cwd).unwrap_err().to_string();
            assert!(message.contains("output"), "{bad}: {message}");
        }
    }

    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0), "root");
    }
}
