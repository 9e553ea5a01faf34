//! A malleable OpenMP job (the bundled `spmv`, with the preload library) started on CPU 0 with one
//! thread, then moved to other CPUs and given more threads. Its OpenMP runtime must create the new
//! threads on the CPUs it has now: one bound at launch to its first CPUs would bind them to a CPU
//! outside its cpuset and abort ("Thread creation failed: Invalid argument"), or keep them on that
//! first CPU. Team sizes are read from the control page, CPUs from procfs.

mod common;

use common::*;
use cosched_core::trace::ExitStatus;
use cosched_core::{JobId, Plan};
use cosched_linux::{run, RunOptions};
use std::time::Duration;

/// `last_team_size` of the control page of the process whose command line has `marker` (its
/// offset in docs/control-page.md), read through that process's descriptor, if it runs yet.
fn last_team_size(marker: &str) -> Option<u32> {
    let pid = *processes_with(marker).first()?;
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let own_path = environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"COSCHED_CONTROL=/proc/self/"))?;
    let page = format!("/proc/{pid}/{}", String::from_utf8_lossy(own_path));
    let bytes = std::fs::read(page).ok()?;
    Some(u32::from_ne_bytes(bytes.get(32..36)?.try_into().ok()?))
}

/// Runs the job through `steps` (its CPUs and advised team, each step enforced once the job ran a
/// region with the previous one's team on the previous one's CPUs) and checks that it exits 0 and
/// that, in the last step, it ran a region of the advised team with every thread on the step's CPUs.
fn move_and_grow(steps: &[(&str, u32)]) {
    let _serial = serial();
    let machine = topology();
    if machine.num_cpus() < 2 {
        eprintln!("SKIPPED: needs 2 CPUs");
        return;
    }
    let limit = Duration::from_secs(60);
    let dir = tempfile::tempdir().unwrap();
    // A unique name, so that its process can be found by its command line.
    let program = dir.path().join("spmv-moved");
    std::os::unix::fs::symlink(cosched_native::benchmark("spmv"), &program).unwrap();
    let marker = program.display().to_string();
    // Many short regions, each one a chance to take the advised team; seconds of work, so that it
    // still runs after the last step.
    let text = format!(
        "[workload]\nname = \"moved\"\n[[job]]\nname = \"moved\"\nkind = \"malleable\"\n\
         max_threads = 2\ncommand = [{marker:?}, \"--size\", \"20000\", \"--iterations\", \"16000\"]\n"
    );
    let mut workload = cosched_core::workload::Workload::parse(&text, "moved.toml").unwrap();
    workload.dir = dir.path().to_path_buf();
    let plans = steps
        .iter()
        .map(|&(list, threads)| Plan {
            advice: [(JobId(0), threads)].into(),
            ..Plan::space_sharing(slot(1.0, &[(0, list)]).assignments)
        })
        .collect();
    let (policy, gate) = Gated::new(1, plans);
    let options = RunOptions {
        sample_interval: 0.2,
        ..RunOptions::new(dir.path().join("trace.jsonl"), dir.path().join("out"))
    };
    let handle = std::thread::spawn({
        let machine = machine.clone();
        move || run(&workload, &machine, policy, &options)
    });
    let mut reached = Vec::new();
    let mut last = Vec::new();
    // A job that dies stops the run, and with it the gate: its output explains more than the gate.
    let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for (index, &(list, threads)) in steps.iter().enumerate() {
            if index > 0 {
                gate.open_next(limit);
            }
            let ran = wait::until(limit, || {
                last = allowed_cpus_of(&marker);
                last_team_size(&marker) == Some(threads)
                    && last.len() >= threads as usize
                    && last.iter().all(|(_, allowed)| allowed == &cpus(list))
            });
            reached.push(ran);
            if !ran {
                break;
            }
        }
    }));
    let report = handle.join().unwrap().unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("out/moved.stderr")).unwrap_or_default();
    assert!(
        !stderr.contains("Thread creation failed"),
        "its OpenMP runtime could not grow its team: {stderr}"
    );
    assert_eq!(report.jobs[0].status, ExitStatus::Ok, "{stderr}");
    if let Err(panic) = stepped {
        std::panic::resume_unwind(panic);
    }
    assert!(
        reached.len() == steps.len() && reached.iter().all(|&r| r),
        "steps {steps:?}: reached {reached:?}; last seen team {:?}, threads and their CPUs {last:?}",
        last_team_size(&marker)
    );
}

#[test]
fn a_job_moved_to_disjoint_cpus_can_grow_its_team_there() {
    move_and_grow(&[("0", 1), ("1", 2)]);
}

#[test]
fn a_job_moved_and_then_given_more_cpus_runs_its_new_threads_on_all_of_them() {
    move_and_grow(&[("0", 1), ("1", 1), ("0-1", 2)]);
}
