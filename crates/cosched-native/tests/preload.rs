//! Runs a real OpenMP program (native/tests/teamsize.c) under libcosched-omp.so and checks, from
//! the program's own output, that each parallel region follows the advice written to the control
//! page just before it: built with GCC against GNU libgomp (the GOMP_* wrappers), and built with
//! clang against LLVM libomp (the OMPT tool) where build.rs found clang and libomp.

use cosched_native::control::{keep_across_exec, ControlPage, CONTROL_ENV};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The team size the program gets when nothing caps it.
const DEFAULT_TEAM: u32 = 3;

fn teamsize_program() -> PathBuf {
    Path::new(env!("COSCHED_NATIVE_TEST_DIR")).join("teamsize")
}

/// The program built with clang against LLVM libomp, or `None` after saying the test is skipped.
fn libomp_program() -> Option<PathBuf> {
    let program = Path::new(env!("COSCHED_NATIVE_TEST_DIR")).join("teamsize-libomp");
    if !program.exists() {
        eprintln!("skipped: clang or LLVM libomp missing at build time (apt-get install clang libomp-dev)");
        return None;
    }
    Some(program)
}

fn command(preload: bool, control: Option<&OsStr>) -> Command {
    command_for(&teamsize_program(), preload, control)
}

fn command_for(program: &Path, preload: bool, control: Option<&OsStr>) -> Command {
    let mut command = Command::new(program);
    command
        .env("OMP_NUM_THREADS", DEFAULT_TEAM.to_string())
        .env_remove(CONTROL_ENV)
        .env_remove("LD_PRELOAD");
    if preload {
        command.env("LD_PRELOAD", cosched_native::preload_library());
    }
    if let Some(path) = control {
        command.env(CONTROL_ENV, path);
    }
    command
}

/// The program, driven one region at a time.
struct Program {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Program {
    fn start(page: &ControlPage) -> Program {
        Program::start_built(&teamsize_program(), page)
    }

    fn start_built(program: &Path, page: &ControlPage) -> Program {
        let mut command = command_for(program, true, Some(page.env_value().as_ref()));
        let fd = page.fd().as_raw_fd();
        // SAFETY: one fcntl between fork and exec, on a descriptor the page keeps open.
        unsafe { command.pre_exec(move || keep_across_exec(fd)) };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start teamsize");
        Program {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// Runs one construct and returns the team size it reported.
    fn team(&mut self, construct: &str) -> i32 {
        writeln!(self.input, "{construct}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let team = line
            .trim()
            .strip_prefix(&format!("{construct} team="))
            .unwrap_or_else(|| panic!("unexpected output {line:?}"));
        team.parse().unwrap()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn page() -> ControlPage {
    ControlPage::create(None).unwrap()
}

const CONSTRUCTS: &[&str] = &[
    "parallel",
    "static",
    "dynamic",
    "monotonic_dynamic",
    "guided",
    "runtime",
    "sections",
    "task_reduction",
    "legacy",
    "teams",
];

/// Every construct of `constructs` follows a shrink to 2 and 1 and a grow-back to 2 and the default.
fn follows_advice_down_and_up(program: &mut Program, page: &ControlPage, constructs: &[&str]) {
    for construct in constructs {
        for advice in [2, 1, 2, 0] {
            page.set_advice(advice);
            let expected = if advice == 0 { DEFAULT_TEAM } else { advice };
            assert_eq!(
                program.team(construct),
                expected as i32,
                "{construct} after advice {advice}"
            );
        }
    }
}

#[test]
fn every_construct_shrinks_and_grows_back_with_the_advice() {
    let page = page();
    let mut program = Program::start(&page);
    follows_advice_down_and_up(&mut program, &page, CONSTRUCTS);
}

/// Under libomp: the legacy GOMP pair is GCC's, and host teams get libomp's own per-team limit.
const LIBOMP_CONSTRUCTS: &[&str] = &[
    "parallel",
    "static",
    "dynamic",
    "guided",
    "runtime",
    "sections",
    "task_reduction",
];

/// A fresh page and the libomp build of the program under it, or `None` where it was not built.
fn libomp_started() -> Option<(ControlPage, Program)> {
    let built = libomp_program()?;
    let page = page();
    let program = Program::start_built(&built, &page);
    Some((page, program))
}

#[test]
fn libomp_regions_shrink_and_grow_back_with_the_advice() {
    let Some((page, mut program)) = libomp_started() else {
        return;
    };
    follows_advice_down_and_up(&mut program, &page, LIBOMP_CONSTRUCTS);
}

#[test]
fn libomp_counters_report_regions_and_the_advice_applied() {
    let Some((page, mut program)) = libomp_started() else {
        return;
    };
    page.set_advice(2);
    program.team("parallel");
    program.team("dynamic");
    page.set_advice(1);
    program.team("static");
    program.team("heartbeat");
    let counters = page.counters();
    assert_eq!(counters.regions_started, 3);
    assert_eq!(counters.regions_completed, 3);
    assert_eq!(counters.heartbeats, 1);
    assert_eq!(counters.last_team_size, 1);
    assert_eq!(counters.seen_generation, page.generation());
}

#[test]
fn libomp_num_threads_clauses_run_at_their_size_and_are_recorded_so() {
    let Some((page, mut program)) = libomp_started() else {
        return;
    };
    page.set_advice(1);
    assert_eq!(program.team("parallel"), 1);
    assert_eq!(program.team("three"), 3);
    assert_eq!(page.counters().last_team_size, 3);
    // The advice still holds for the next region without a clause, and lifts as before.
    assert_eq!(program.team("parallel"), 1);
    page.set_advice(0);
    assert_eq!(program.team("parallel"), DEFAULT_TEAM as i32);
}

#[test]
fn a_num_threads_clause_is_lowered_but_never_raised() {
    let page = page();
    let mut program = Program::start(&page);
    page.set_advice(2);
    assert_eq!(program.team("one"), 1);
    assert_eq!(program.team("three"), 2);
    page.set_advice(0);
    assert_eq!(program.team("one"), 1);
    assert_eq!(program.team("three"), 3);
}

#[test]
fn nested_regions_follow_openmp_not_the_advice() {
    let page = page();
    let mut program = Program::start(&page);
    page.set_advice(1);
    assert_eq!(program.team("nested"), 2);
}

#[test]
fn counters_report_regions_heartbeats_and_the_advice_applied() {
    let page = page();
    let mut program = Program::start(&page);
    page.set_advice(2);
    program.team("parallel");
    program.team("legacy");
    page.set_advice(1);
    program.team("static");
    program.team("heartbeat");
    program.team("heartbeat");
    let counters = page.counters();
    assert_eq!(counters.regions_started, 3);
    assert_eq!(counters.regions_completed, 3);
    assert_eq!(counters.heartbeats, 2);
    assert_eq!(counters.last_team_size, 1);
    assert_eq!(counters.seen_generation, page.generation());
    assert_eq!(counters.progress(), 5);
}

/// Runs a fixed script of constructs and returns the whole output.
fn script_output(mut command: Command) -> String {
    let script =
        "parallel\none\nthree\nstatic\ndynamic\nsections\nlegacy\nnested\nteams\nheartbeat\n";
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn without_a_valid_control_page_the_program_runs_as_if_not_preloaded() {
    let unpreloaded = script_output(command(false, None));
    assert!(unpreloaded.contains("parallel team=3"), "{unpreloaded}");
    assert_eq!(script_output(command(true, None)), unpreloaded);

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    assert_eq!(
        script_output(command(true, Some(missing.as_os_str()))),
        unpreloaded
    );

    let bad_magic = dir.path().join("bad-magic");
    let mut bytes = vec![0u8; 4096];
    bytes[8] = 1; // advice 1, which must be ignored
    std::fs::write(&bad_magic, bytes).unwrap();
    assert_eq!(
        script_output(command(true, Some(bad_magic.as_os_str()))),
        unpreloaded
    );
}
