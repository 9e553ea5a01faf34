//! What a user may see of another user's job where jobs are private (`privacy.private_jobs`):
//! nothing its request chose that could tell where the user works or what they run.

use crate::protocol::JobView;
use std::path::{Path, PathBuf};

/// Shown for a job whose name is its program's file name, which would otherwise give the program
/// away.
pub const HIDDEN_NAME: &str = "private";

/// The most bytes of a process's `comm`, which `attach` takes as an attached job's default name.
const COMM_BYTES: usize = 15;

/// `view` without its command, paths, pid, error text or slowdown (a ratio to the same command's
/// runs, so an oracle for what it runs), and with a neutral name for a name its program gave it.
/// Its id, owner, state, times, CPUs, threads, labels and exit code stay.
pub fn hidden(mut view: JobView) -> JobView {
    view.name = seen_name(&view).to_string();
    view.command = Vec::new();
    view.stdout = PathBuf::new();
    view.stderr = PathBuf::new();
    view.pid = None;
    view.tasks = Vec::new();
    // Launch errors name the program, the working directory or an output file.
    view.error = None;
    view.slowdown = None;
    view
}

/// The name others see of `view` where it is hidden: [`HIDDEN_NAME`] for the name `submit` or
/// `attach` gives by default (the program's file name, or that cut as the kernel cuts `comm`).
pub fn seen_name(view: &JobView) -> &str {
    let program = view
        .command
        .first()
        .map(Path::new)
        .and_then(Path::file_name);
    let program = program.map(|p| p.as_encoded_bytes()).unwrap_or_default();
    let name = view.name.as_bytes();
    let cut = &program[..program.len().min(COMM_BYTES)];
    match name == program || name == cut {
        true => HIDDEN_NAME,
        false => &view.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Submission;

    fn view(name: &str, program: &str) -> JobView {
        let mut submission = Submission::of(program);
        submission.name = name.into();
        let mut view = JobView::queued(7, 1000, 1.0, &submission, "/a/o".into(), "/a/e".into());
        view.pid = Some(4242);
        view.tasks = vec![4243];
        view.error = Some(format!("cannot start {program}"));
        view.slowdown = Some(1.5);
        view
    }

    #[test]
    fn a_hidden_job_keeps_no_path_program_pid_or_error() {
        let hidden = hidden(view("lu", "/home/ana/bin/lu"));
        let text = serde_json::to_string(&hidden).unwrap();
        for secret in ["/home/ana", "/a/", "4242", "4243", "lu", "1.5"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(
            (hidden.id, hidden.uid, hidden.name.as_str()),
            (7, 1000, HIDDEN_NAME)
        );
    }

    #[test]
    fn only_a_name_its_program_gave_is_hidden() {
        assert_eq!(seen_name(&view("lu", "/bin/lu")), HIDDEN_NAME);
        // `attach` names a job after its process's `comm`, cut to 15 bytes.
        let attached = view("a-rather-long-n", "/bin/a-rather-long-name");
        assert_eq!(seen_name(&attached), HIDDEN_NAME);
        assert_eq!(seen_name(&view("nightly", "/bin/lu")), "nightly");
    }
}
