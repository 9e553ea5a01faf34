//! What cosched's exit status says (README, "Exit status"): 0 every job succeeded, 1 a job failed or was
//! cancelled, 2 bad usage or input, 3 an internal error or a daemon that cannot be reached, 130
//! interrupted by a signal.

use std::process::ExitCode;

/// Some jobs of a run did not succeed; the run itself completed and wrote its results.
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {total} job(s) failed or were cancelled")]
pub struct JobsFailed {
    pub failed: usize,
    pub total: usize,
}

impl JobsFailed {
    /// `Ok` when no job failed, so a subcommand can end with `JobsFailed::check(failed, total)`.
    pub fn check(failed: usize, total: usize) -> anyhow::Result<()> {
        if failed == 0 {
            Ok(())
        } else {
            Err(JobsFailed { failed, total }.into())
        }
    }
}

pub const JOB_FAILED: u8 = 1;
pub const BAD_INPUT: u8 = 2;
pub const INTERNAL: u8 = 3;
pub const INTERRUPTED: u8 = 130;

/// The exit status for an error that ended a subcommand. Errors are bad input unless the chain shows a
/// failed job, an interruption, or a failure of cosched itself while running jobs.
pub fn status_of(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.is::<JobsFailed>() {
            return JOB_FAILED;
        }
        if let Some(run_error) = cause.downcast_ref::<cosched_linux::Error>() {
            return match run_error {
                cosched_linux::Error::Interrupted(_) => INTERRUPTED,
                cosched_linux::Error::NoCommand { .. } | cosched_linux::Error::Mechanism(_) => {
                    BAD_INPUT
                }
                _ => INTERNAL,
            };
        }
        if let Some(client_error) = cause.downcast_ref::<cosched_service::client::ClientError>() {
            return match client_error {
                cosched_service::client::ClientError::Refused(_) => BAD_INPUT,
                _ => INTERNAL,
            };
        }
    }
    BAD_INPUT
}

/// Prints the error and gives the exit status it calls for.
pub fn report(error: &anyhow::Error) -> ExitCode {
    let status = status_of(error);
    eprintln!("error: {}", chain_message(error));
    ExitCode::from(status)
}

/// Every cause of the chain, from the outermost, joined by ": ", leaving out a cause whose text the
/// messages before it already hold (some errors repeat their source in their own message).
fn chain_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// A closed pipe ends cosched quietly, as it does `cat` or `grep`: the default action of SIGPIPE.
/// Rust ignores SIGPIPE, which turns `cosched gen | head -1` into a panic. Jobs launched later get
/// the default disposition anyway, and a real run killed this way is cleaned up by its watchdog.
pub fn die_quietly_on_closed_pipe() {
    // SAFETY: sets a signal disposition before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_error_chain() {
        let failed = anyhow::Error::from(JobsFailed {
            failed: 1,
            total: 2,
        })
        .context("run");
        assert_eq!(status_of(&failed), JOB_FAILED);
        let interrupted =
            anyhow::Error::from(cosched_linux::Error::Interrupted("SIGINT")).context("run");
        assert_eq!(status_of(&interrupted), INTERRUPTED);
        let stalled = anyhow::Error::from(cosched_linux::Error::Plan {
            policy: "p".into(),
            source: cosched_core::PlanError::Stalled { waiting: 1 },
        });
        assert_eq!(status_of(&stalled), INTERNAL);
        assert_eq!(status_of(&anyhow::anyhow!("no such file")), BAD_INPUT);
        let unreachable = anyhow::Error::from(cosched_service::client::ClientError::Connect {
            socket: "/run/cosched/cosched.sock".into(),
            source: std::io::ErrorKind::NotFound.into(),
        });
        assert_eq!(status_of(&unreachable), INTERNAL);
        let refused = anyhow::Error::from(cosched_service::client::ClientError::Refused(
            "no job 7".into(),
        ));
        assert_eq!(status_of(&refused), BAD_INPUT);
    }

    #[test]
    fn the_printed_chain_has_every_cause_once() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let repeating = cosched_linux::Error::Io {
            what: "cannot read x".into(),
            source: missing,
        };
        let error = anyhow::Error::from(repeating).context("run of w failed");
        let message = chain_message(&error);
        assert_eq!(message.matches("entity not found").count(), 1, "{message}");
        assert!(
            message.starts_with("run of w failed: cannot read x"),
            "{message}"
        );
        let unavailable = cosched_linux::Error::from(cosched_linux::Unavailable {
            what: "freezer",
            name: "cgroup-v1",
            reason: cosched_linux::cgroup::CgroupError::NoCgroup2,
        });
        assert_eq!(
            chain_message(&unavailable.into()),
            "freezer cgroup-v1 is not available here (leave the option out to pick what works): \
             no cgroup2 file system is mounted"
        );
    }
}
