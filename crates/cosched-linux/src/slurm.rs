//! Which Slurm job step a process belongs to, read from the kernel's record of its cgroups
//! (`/proc/<pid>/cgroup`) rather than from anything the process says about itself: Slurm's cgroup
//! plugins put every task of step S of job J under `…/job_J/step_S/…` (cgroup v1: in the freezer,
//! cpuset and other hierarchies; cgroup v2: `…/job_J/step_S/user/task_N`). A process cannot leave
//! those cgroups without privileges, so the ids cannot be forged by a job's user.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Slurm job step: the job id and the step (`batch`, `extern`, `interactive`, or a number).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmStep {
    pub job: u64,
    pub step: String,
}

impl fmt::Display for SlurmStep {
    /// `J.S`, as `sacct` and `squeue --steps` write it.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}.{}", self.job, self.step)
    }
}

impl SlurmStep {
    /// The Slurm step of process `pid`, or `None` when it runs outside Slurm (or is gone).
    pub fn of_process(pid: i32) -> Option<SlurmStep> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        SlurmStep::from_cgroups(&text)
    }

    /// Parses `/proc/<pid>/cgroup` (lines `id:controllers:path`): the first path holding a `job_J`
    /// directory directly followed by `step_S`.
    pub fn from_cgroups(text: &str) -> Option<SlurmStep> {
        text.lines().find_map(|line| {
            let path = line.splitn(3, ':').nth(2)?;
            let parts: Vec<&str> = path.split('/').collect();
            parts.windows(2).find_map(|pair| {
                let job = pair[0].strip_prefix("job_")?.parse().ok()?;
                let step = pair[1].strip_prefix("step_")?;
                let valid = !step.is_empty()
                    && step
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+');
                valid.then(|| SlurmStep {
                    job,
                    step: step.to_string(),
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v1_and_v2_layouts_name_the_step() {
        let v1 = "6:freezer:/slurm_vm/uid_0/job_12/step_batch\n4:memory:/x\n\
3:cpuset:/slurm_vm/uid_0/job_12/step_batch\n0::/\n";
        assert_eq!(
            SlurmStep::from_cgroups(v1),
            Some(SlurmStep {
                job: 12,
                step: "batch".into()
            })
        );
        let v2 = "0::/system.slice/slurmstepd.scope/job_7/step_3/user/task_1\n";
        let step = SlurmStep::from_cgroups(v2).unwrap();
        assert_eq!(step.to_string(), "7.3");
    }

    #[test]
    fn processes_outside_slurm_have_no_step() {
        for text in [
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "6:freezer:/job_12\n",
            "6:freezer:/job_x/step_0\n",
            "6:freezer:/slurm/job_3/step_\n",
            "",
        ] {
            assert_eq!(SlurmStep::from_cgroups(text), None, "{text:?}");
        }
    }
}
