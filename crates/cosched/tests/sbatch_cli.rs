//! Slurm batch scripts submitted unchanged to a real daemon: their `#SBATCH` lines read as sbatch
//! reads them, each checked by its effect (the files a job wrote where it ran, the environment it
//! saw, the order the daemon started and ended jobs in), and a directive cosched cannot honour
//! refused by name with nothing queued.

mod common;

use common::{one_at_a_time, show, start_daemon, wait};
use cosched_service::harness::DaemonProcess;
use cosched_service::protocol::{JobFilter, JobState, JobView, Reply, Request};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// `cosched submit ARGS…` against `daemon`, from `cwd`, with the test's environment and `env`.
fn submit(daemon: &DaemonProcess, cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["submit", "--socket"])
        .arg(&daemon.socket)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The id in sbatch's `Submitted batch job N`.
fn batch_job(out: &Output) -> u64 {
    let line = said(out);
    let id = line.strip_prefix("Submitted batch job ");
    id.unwrap_or_else(|| panic!("{line:?}")).parse().unwrap()
}

/// Writes `text` as `name` in `dir`, not executable: sbatch needs no execute permission.
fn script(dir: &Path, name: &str, text: &str) -> String {
    std::fs::write(dir.join(name), text).unwrap();
    name.to_string()
}

/// Job `id` as listed, with why it is pending.
fn listed(daemon: &DaemonProcess, id: u64) -> JobView {
    let filter = JobFilter::default();
    match daemon.ask(Request::Jobs { all: true, filter }) {
        Ok(Reply::Jobs { jobs }) => jobs.into_iter().find(|j| j.id == id).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn ended(daemon: &DaemonProcess, ids: &[u64]) -> Vec<JobView> {
    let jobs = daemon.wait(ids.to_vec()).unwrap();
    for job in &jobs {
        assert_eq!(job.state, JobState::Done, "{job:?}");
    }
    jobs
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_scripts_name_directory_outputs_environment_and_array_are_honoured() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let here = dir.path();
    std::fs::create_dir(here.join("work")).unwrap();
    let env = [("KEEP", "kept"), ("DROP", "dropped")];

    let none = script(
        here,
        "none.sh",
        "#!/bin/sh\n# a job of a Slurm user\n\n#SBATCH --job-name=\"hello there\"\n\
         #SBATCH --chdir=work -o out-%j.txt\n#SBATCH --export=NONE\n\
         echo \"pwd=$(pwd -P) keep=${KEEP-unset} drop=${DROP-unset}\"\n\
         #SBATCH --job-name=ignored-after-the-first-command\n",
    );
    let id = batch_job(&submit(&daemon, here, &env, &[&none]));
    let job = &ended(&daemon, &[id])[0];
    assert_eq!(job.name, "hello there");
    let out = read(&here.join(format!("work/out-{id}.txt")));
    let work = here.join("work").canonicalize().unwrap();
    assert_eq!(
        out.trim(),
        format!("pwd={} keep=unset drop=unset", work.display())
    );

    let list = script(
        here,
        "list.sh",
        "#!/bin/sh\n#SBATCH --export=KEEP,SET=given -o list-%j.txt\n\
         echo \"keep=${KEEP-unset} set=${SET-unset} drop=${DROP-unset}\"\n",
    );
    // The command line's -o wins over the script's.
    let id = said(&submit(
        &daemon,
        here,
        &env,
        &["--parsable", "-o", "cli-%j.txt", &list],
    ));
    ended(&daemon, &[id.parse().unwrap()]);
    let out = read(&here.join(format!("cli-{id}.txt")));
    assert_eq!(out.trim(), "keep=kept set=given drop=unset");

    let array = script(
        here,
        "array.sh",
        "#!/bin/sh\n#SBATCH --array=1-4%2\n#SBATCH -o arr-%A_%a.txt\n\
         echo \"task=$COSCHED_ARRAY_TASK_ID\"\nsleep 0.5\n",
    );
    let first = batch_job(&submit(&daemon, here, &[], &[&array]));
    let jobs = ended(&daemon, &(first..first + 4).collect::<Vec<_>>());
    for index in 1..=4 {
        let out = read(&here.join(format!("arr-{first}_{index}.txt")));
        assert_eq!(out.trim(), format!("task={index}"));
    }
    // %2: at most two elements ran at once, by the starts and ends the daemon recorded.
    for job in &jobs {
        let start = job.started.unwrap();
        let running = jobs
            .iter()
            .filter(|o| o.started.unwrap() <= start && o.finished.unwrap() > start)
            .count();
        assert!(running <= 2, "{running} ran at once: {jobs:?}");
    }
    daemon.stop().unwrap();
}

#[test]
fn dependencies_hold_and_begin_order_a_scripts_jobs_and_bad_directives_queue_nothing() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let here = dir.path();
    let sleeper = script(here, "sleeper.sh", "#!/bin/sh\nsleep 1\n");
    let failing = script(here, "failing.sh", "#!/bin/sh\nexit 3\n");

    let first = said(&submit(&daemon, here, &[], &["--parsable", &sleeper]));
    let after_ok = script(
        here,
        "after_ok.sh",
        &format!("#!/bin/sh\n#SBATCH --dependency=afterok:{first}\ntrue\n"),
    );
    let then = batch_job(&submit(&daemon, here, &[], &[&after_ok]));
    let fails = said(&submit(&daemon, here, &[], &["--parsable", &failing]));
    let either = format!("afterok:{fails}?afterok:{first}");
    let any = batch_job(&submit(&daemon, here, &[], &["-d", &either, &sleeper]));
    let never = batch_job(&submit(
        &daemon,
        here,
        &[],
        &["-d", &format!("afterok:{fails}"), &sleeper],
    ));
    let solo = script(
        here,
        "solo.sh",
        "#!/bin/sh\n#SBATCH -J solo --dependency=singleton\nsleep 1\n",
    );
    let solo_1 = batch_job(&submit(&daemon, here, &[], &[&solo]));
    let solo_2 = batch_job(&submit(&daemon, here, &[], &[&solo]));

    let first: u64 = first.parse().unwrap();
    let jobs = ended(&daemon, &[first, then, any, solo_1, solo_2]);
    let [first_job, then_job, any_job, solo_1_job, solo_2_job] = &jobs[..] else {
        unreachable!()
    };
    assert!(then_job.started.unwrap() >= first_job.finished.unwrap());
    // `?`: the failed job does not keep it from running once the other succeeded.
    assert!(any_job.started.unwrap() >= first_job.finished.unwrap());
    assert!(solo_2_job.started.unwrap() >= solo_1_job.finished.unwrap());
    // Slurm keeps a job whose dependency can never be met pending, saying so.
    let kept = listed(&daemon, never);
    assert_eq!(kept.state, JobState::Queued, "{kept:?}");
    assert_eq!(kept.reason.as_deref(), Some("dependency_never_satisfied"));

    let held = script(here, "held.sh", "#!/bin/sh\n#SBATCH --hold\ntrue\n");
    let held = batch_job(&submit(&daemon, here, &[], &[&held]));
    let later = batch_job(&submit(&daemon, here, &[], &["--begin", "now+2", &sleeper]));
    assert_eq!(listed(&daemon, later).reason.as_deref(), Some("begin_time"));
    // A job submitted after the held one runs to its end while the held one stays pending.
    let other = said(&submit(&daemon, here, &[], &["--parsable", &sleeper]));
    ended(&daemon, &[other.parse().unwrap()]);
    let waiting = listed(&daemon, held);
    assert_eq!(waiting.state, JobState::Queued);
    assert_eq!(waiting.reason.as_deref(), Some("job_held_user"));
    let released = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(["release", "--socket"])
        .arg(&daemon.socket)
        .arg(held.to_string())
        .output()
        .unwrap();
    assert_eq!(said(&released), format!("released {held}"));
    let jobs = ended(&daemon, &[held, later]);
    assert!(
        jobs[1].started.unwrap() >= jobs[1].submitted + 2.0,
        "{jobs:?}"
    );

    let before = daemon.ask(Request::Jobs {
        all: true,
        filter: JobFilter::default(),
    });
    let nodes = script(
        here,
        "nodes.sh",
        "#!/bin/sh\n#SBATCH -J wide\n#SBATCH --nodes=4\nsrun ./solver\n",
    );
    let refused = submit(&daemon, here, &[], &[&nodes]);
    assert_eq!(refused.status.code(), Some(2));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("one node") && message.contains("#SBATCH --nodes=4 (line 3)"),
        "{message}"
    );
    let after = daemon.ask(Request::Jobs {
        all: true,
        filter: JobFilter::default(),
    });
    assert_eq!(before.unwrap(), after.unwrap(), "nothing was queued");
    daemon.stop().unwrap();
}

#[test]
fn an_exclusive_job_waits_for_an_empty_node_and_runs_alone() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = start_daemon(dir.path(), "eq", "");
    let here = dir.path();
    let sleeper = script(here, "sleeper.sh", "#!/bin/sh\nsleep 1\n");
    let running = said(&submit(&daemon, here, &[], &["--parsable", &sleeper]));
    let running: u64 = running.parse().unwrap();
    assert!(wait::until(LIMIT, || show(&daemon, running).state == JobState::Running));
    let alone = script(
        here,
        "alone.sh",
        "#!/bin/sh\n#SBATCH --exclusive\nsleep 1\n",
    );
    let alone = batch_job(&submit(&daemon, here, &[], &[&alone]));
    let beside = said(&submit(&daemon, here, &[], &["--parsable", &sleeper]));
    let jobs = ended(&daemon, &[running, alone, beside.parse().unwrap()]);
    let (running, alone, beside) = (&jobs[0], &jobs[1], &jobs[2]);
    assert!(
        alone.started.unwrap() >= running.finished.unwrap(),
        "{jobs:?}"
    );
    assert!(
        beside.started.unwrap() >= alone.finished.unwrap(),
        "{jobs:?}"
    );
    daemon.stop().unwrap();
}
