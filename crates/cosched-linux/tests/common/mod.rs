//! Helpers of the executor's integration tests: a busy test program, hand-written policies, the
//! mechanism combinations to test, and procfs/cgroup inspection.

#![allow(dead_code)] // each test binary uses a different subset

pub use cosched_core::test_util::wait;
use cosched_core::workload::Workload;
use cosched_core::{Assignment, Context, CpuSet, Event, JobId, Plan, Policy, Slot, Topology};
use cosched_linux::{Freezer, Mechanisms, Placement};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The tests load both CPUs; running them one at a time keeps their CPU shares meaningful.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

const SPIN_C: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double deadline;
static volatile sig_atomic_t stopped;
static void stop(int signal) { (void)signal; stopped = 1; }
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static void *spin(void *arg) {
    volatile unsigned long x = 0;
    (void)arg;
    while (!stopped && now() < deadline) x++;
    return 0;
}
/* spin THREADS SECONDS DELAY_MS [label]: busy threads until SECONDS after start, or until SIGUSR1
   (then it exits with status 0); the extra threads are created after DELAY_MS, i.e. after the
   executor placed the process. */
int main(int argc, char **argv) {
    signal(SIGUSR1, stop);
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    int delay = argc > 3 ? atoi(argv[3]) : 0;
    pthread_t t[64];
    deadline = now() + seconds;
    usleep(delay * 1000);
    for (int i = 1; i < threads && i < 64; i++) pthread_create(&t[i], 0, spin, 0);
    spin(0);
    for (int i = 1; i < threads && i < 64; i++) pthread_join(t[i], 0);
    return 0;
}
"#;

/// A C program that keeps N threads busy for a wall-clock time (compiled once per test binary).
pub fn spin_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("spin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("spin.c");
        std::fs::write(&source, SPIN_C).unwrap();
        let program = dir.join("spin");
        let status = std::process::Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&program)
            .arg(&source)
            .status()
            .expect("a C compiler (cc) is needed for the executor tests");
        assert!(status.success(), "compiling spin.c failed");
        program
    })
}

/// A workload whose jobs run the given command lines (all arriving at 0).
pub fn workload(dir: &Path, jobs: &[(&str, Vec<String>)]) -> Workload {
    let mut text = String::from("[workload]\nname = \"test\"\n");
    for (name, command) in jobs {
        let command: Vec<String> = command.iter().map(|a| format!("{a:?}")).collect();
        text += &format!(
            "[[job]]\nname = \"{name}\"\nkind = \"rigid\"\nmin_threads = 1\nmax_threads = 2\ncommand = [{}]\n",
            command.join(", ")
        );
    }
    let mut workload = Workload::parse(&text, "test.toml").unwrap();
    workload.dir = dir.to_path_buf();
    workload
}

pub fn spin_command(threads: u32, seconds: f64, delay_ms: u32, label: &str) -> Vec<String> {
    vec![
        spin_program().display().to_string(),
        threads.to_string(),
        seconds.to_string(),
        delay_ms.to_string(),
        label.to_string(),
    ]
}

pub fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

/// A slot from (job, CPUs) pairs.
pub fn slot(length: f64, assignments: &[(u32, &str)]) -> Slot {
    Slot {
        length,
        assignments: assignments
            .iter()
            .map(|&(job, list)| Assignment {
                job: JobId(job),
                cpus: cpus(list),
            })
            .collect(),
    }
}

/// Enforces a fixed sequence of plans: the first once all `jobs` have arrived, each next one when the
/// previous plan's timer fires.
pub struct Scripted {
    pub jobs: usize,
    pub plans: Vec<Plan>,
    pub next: usize,
}

impl Scripted {
    pub fn new(jobs: usize, plans: Vec<Plan>) -> Box<Scripted> {
        Box::new(Scripted {
            jobs,
            plans,
            next: 0,
        })
    }
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let due = match event {
            Event::Arrived { .. } => self.next == 0 && ctx.jobs.len() == self.jobs,
            Event::Timer => true,
            _ => false,
        };
        if !due || self.next >= self.plans.len() {
            return None;
        }
        self.next += 1;
        let mut plan = self.plans[self.next - 1].clone();
        plan.slots.iter_mut().for_each(|s| {
            s.assignments.retain(|a| ctx.job(a.job).is_some());
        });
        Some(plan)
    }
}

/// What a test and a [`Gated`] policy share: how many plans the test let through, how many the policy
/// gave, and how many of its timers fired.
#[derive(Default)]
pub struct Gate {
    opened: AtomicUsize,
    given: AtomicUsize,
    ticks: AtomicUsize,
}

/// How often a [`Gated`] policy looks at its gate.
const GATE_POLL: f64 = 0.05;

impl Gate {
    /// Lets the next plan through and waits until it is enforced: the executor applies a plan before
    /// it fires the next timer, so one tick after the plan was given, it holds.
    pub fn open_next(&self, limit: Duration) {
        let next = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
        let given = wait::until(limit, || self.given.load(Ordering::SeqCst) > next);
        assert!(given, "plan {next} was never given");
        let tick = self.ticks.load(Ordering::SeqCst);
        let enforced = wait::until(limit, || self.ticks.load(Ordering::SeqCst) > tick);
        assert!(enforced, "no timer fired after plan {next}");
    }
}

/// Enforces a fixed sequence of plans: the first once all `jobs` have arrived, each next one once the
/// test has opened the gate for it (looked at every 50 ms), so that tests wait on what they observe
/// rather than on fixed times.
pub struct Gated {
    jobs: usize,
    plans: Vec<Plan>,
    gate: Arc<Gate>,
}

impl Gated {
    pub fn new(jobs: usize, plans: Vec<Plan>) -> (Box<Gated>, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        let policy = Gated {
            jobs,
            plans,
            gate: gate.clone(),
        };
        (Box::new(policy), gate)
    }
}

impl Policy for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn decide(&mut self, ctx: &Context, event: &Event) -> Option<Plan> {
        let given = self.gate.given.load(Ordering::SeqCst);
        let index = match event {
            Event::Arrived { .. } if given == 0 && ctx.jobs.len() == self.jobs => 0,
            Event::Timer => {
                self.gate.ticks.fetch_add(1, Ordering::SeqCst);
                let opened = self.gate.opened.load(Ordering::SeqCst);
                // The current plan again, only to set the next look at the gate.
                if opened >= given && given < self.plans.len() {
                    given
                } else {
                    given - 1
                }
            }
            _ => return None,
        };
        if index == given {
            self.gate.given.store(given + 1, Ordering::SeqCst);
        }
        let mut plan = self.plans[index].clone();
        plan.slots.iter_mut().for_each(|s| {
            s.assignments.retain(|a| ctx.job(a.job).is_some());
        });
        plan.timer = Some(ctx.now + GATE_POLL);
        Some(plan)
    }
}

/// Ends every spin process with `marker` in its command line (status 0).
pub fn stop_spinning(marker: &str) {
    for pid in processes_with(marker) {
        // SAFETY: a signal to a test's own spin process.
        unsafe { libc::kill(pid, libc::SIGUSR1) };
    }
}

/// The mechanism pairs under test; those this machine lacks are reported and left out.
pub fn mechanism_pairs() -> Vec<(Placement, Freezer)> {
    [
        (Placement::CgroupV2, Freezer::CgroupV2),
        (Placement::CgroupV1, Freezer::CgroupV1),
        (Placement::Affinity, Freezer::Signal),
        (Placement::Affinity, Freezer::CgroupV2),
    ]
    .into_iter()
    .filter(|&(p, f)| match Mechanisms::choose(Some(p), Some(f)) {
        Ok(_) => true,
        Err(why) => {
            eprintln!("SKIPPED placement={p} freezer={f}: {why}");
            false
        }
    })
    .collect()
}

pub fn topology() -> Topology {
    cosched_core::topology::sysfs::discover().unwrap()
}

/// Pids of the processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

/// CPU time of all threads of a process, nanoseconds (schedstat, finer than /proc/<pid>/stat).
pub fn cpu_ns(pid: i32) -> u64 {
    cosched_linux::procfs::threads(pid)
        .into_iter()
        .filter_map(|tid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Cgroups whose name starts with `prefix`, anywhere in the first levels of /sys/fs/cgroup.
pub fn cgroups_named(prefix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, prefix: &str, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(path.clone());
            }
            if depth > 1 {
                walk(&path, depth - 1, prefix, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 3, prefix, &mut found);
    found
}

/// Process state letter from /proc/<pid>/stat, if the process still exists.
pub fn state(pid: i32) -> Option<char> {
    cosched_linux::procfs::stat(pid).ok().map(|s| s.state)
}

/// Threads of every process with `marker` in its command line, with their allowed CPUs (threads that
/// end while being read are left out).
pub fn allowed_cpus_of(marker: &str) -> Vec<(i32, CpuSet)> {
    processes_with(marker)
        .into_iter()
        .flat_map(|pid| {
            cosched_linux::procfs::threads(pid)
                .into_iter()
                .filter_map(move |tid| {
                    Some((tid, cosched_linux::affinity::allowed_cpus(pid, tid).ok()?))
                })
        })
        .collect()
}
