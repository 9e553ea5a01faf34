//! `cosched bench daemon`: a real daemon's submission latency and throughput, its CPU use while jobs
//! wait, and how late its slot switches come while hostile clients attack its socket.

use super::common::{start_daemon, Spread};
use cosched_core::topology::sysfs;
use cosched_core::JobKind;
use cosched_service::client::request;
use cosched_service::harness::{self, DaemonProcess};
use cosched_service::protocol::{Reply, Request, Submission};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

mod queued;
pub mod users;

/// Daemon speed: submissions per second and their latency, idle CPU, slot switches under attack,
/// restart with a long history
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Starts `cosched daemon` (this executable) on a socket and state directory of its \
own, in the mode of the user who runs the bench (system mode as root: cgroups and the freezer).\n\
1. Submissions: CLIENTS threads submit JOBS jobs (/bin/true) through the client library that \
`cosched submit` uses, one connection per request, each submission journaled (fsynced) before it is \
answered. Prints submissions/s (target >= 500, the sustained rate Slurm documents for simple batch \
jobs) and the latency p50/p99/max (target p99 < 10 ms).\n\
2. Idle: IDLE-JOBS jobs that sleep are submitted (under eq on this machine, one per CPU runs and the \
rest wait); after they settle, the daemon's CPU time (utime + stime of /proc/PID/stat, every thread) \
over IDLE-SECONDS, as a share of one CPU (target < 0.5%).\n\
3. With --attack: a second daemon under gang time-slices two sleeping jobs as wide as the machine; how late its slot switches \
come against their deadlines (p50/p99/max) over ATTACK-SECONDS quiet, then over ATTACK-SECONDS while \
200 idle connections, silent clients, malformed JSON, unknown fields and 1 MB request lines hit the \
socket.\nThen hostile users (as root, with setpriv): under gang, with running_jobs_per_user = 4, uid \
65534 opens 1,000 connections (the per-user limit refuses most) and submits 10,000 spinning jobs as \
wide as the machine, while uids 60001-60003 each connect, submit one such job and time 50 \
submissions; then over ATTACK-SECONDS each other user's CPU time against a quarter of all the jobs' \
(target >= 0.9), their submission latency (target p99 < 10 ms) and slot-switch lateness (target p99 \
< 1 ms).\n4. With --history N: a journal of N ended jobs (each submitted, started, placed and \
finished, within the retention) is written and a daemon started on it: the time until it listens \
(target < 2 s) and its resident memory then (target < 100 MiB), against a daemon started on an \
empty journal in the same run; then the time `cosched jobs --all` takes to list them.\n\
5. With --queued N: under gang with one row, a job as wide as the machine holds it and N elements \
of one array are submitted behind it, each timed (target p99 < 10 ms); then `jobs --state running` \
is timed 200 times with them queued (target p99 < 10 ms).\n\
Beside the latencies, the fsync of a 300-byte append in the bench's directory, timed 200 times: \
the floor under every journaled answer on this disk.\n\
Build with --release and measure on an idle machine (median of 3 runs).\n\n\
Examples:\n  cargo run --release -p cosched -- bench daemon --attack\n  \
cosched bench daemon --clients 16 --jobs 5000 --json\n  \
cosched bench daemon --history 100000\n  \
cosched bench daemon --queued 10000"
)]
pub struct DaemonArgs {
    /// Concurrent submitting clients
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Jobs submitted in all
    #[arg(long, default_value_t = 2000)]
    jobs: usize,
    /// Jobs that wait while the idle daemon's CPU is measured
    #[arg(long, default_value_t = 50)]
    idle_jobs: usize,
    /// Length of the idle measurement, seconds
    #[arg(long, default_value_t = 20.0)]
    idle_seconds: f64,
    /// Policy of the submission and idle daemon (`cosched policies` lists them)
    #[arg(
        long,
        value_name = "POLICY",
        default_value = "eq",
        value_parser = crate::cmd::policies::PolicyName,
        hide_possible_values = true
    )]
    policy: String,
    /// Also measure slot-switch lateness with and without hostile clients
    #[arg(long)]
    attack: bool,
    /// Length of each half (quiet, attacked) of the attack measurement, seconds
    #[arg(long, default_value_t = 5.0)]
    attack_seconds: f64,
    /// Also measure a restart over a journal of this many ended jobs
    #[arg(long, value_name = "JOBS")]
    history: Option<usize>,
    /// Also measure submissions and `jobs --state running` with this many array elements queued
    #[arg(long, value_name = "ELEMENTS")]
    queued: Option<usize>,
    /// Print the figures as one JSON object
    #[arg(long)]
    json: bool,
}

const THROUGHPUT_TARGET: f64 = 500.0;
const P99_TARGET_MS: f64 = 10.0;
const IDLE_TARGET_PERCENT: f64 = 0.5;
const RESTART_TARGET_S: f64 = 2.0;
const RESTART_RSS_TARGET_MIB: f64 = 100.0;
/// Idle connections held open during the attack, as in the hostile-requests test.
const IDLE_CONNECTIONS: usize = 200;

#[derive(Serialize)]
struct Figures {
    clients: usize,
    jobs: usize,
    submissions_per_s: f64,
    latency_ms: Spread,
    idle_jobs: usize,
    idle_seconds: f64,
    idle_cpu_percent: f64,
    attack: Option<AttackFigures>,
    history: Option<HistoryFigures>,
    queued: Option<queued::QueuedFigures>,
    /// A 300-byte append and fsync in the bench's directory: the disk's floor under a journaled answer.
    disk_fsync_ms: Spread,
    targets: Targets,
}

#[derive(Serialize)]
struct HistoryFigures {
    jobs: usize,
    journal_mib: f64,
    /// From the start of the process until it listens.
    restart_s: f64,
    rss_mib: f64,
    /// The same over an empty journal: the baseline.
    empty_restart_s: f64,
    empty_rss_mib: f64,
    /// `jobs --all` over the whole history.
    list_all_s: f64,
}

#[derive(Serialize)]
struct AttackFigures {
    quiet: Switches,
    attacked: Switches,
    hostile_requests: usize,
    /// `None` where the bench cannot run other users (not root, or no setpriv).
    users: Option<users::UsersFigures>,
}

#[derive(Serialize)]
struct Switches {
    switches: usize,
    lateness_ms: Spread,
}

#[derive(Serialize)]
struct Targets {
    submissions_per_s: f64,
    latency_p99_ms: f64,
    idle_cpu_percent: f64,
    restart_s: f64,
    restart_rss_mib: f64,
}

pub fn run(args: DaemonArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.clients >= 1 && args.jobs >= args.clients,
        "--clients must be at least 1 and --jobs at least --clients"
    );
    for (name, seconds) in [
        ("--idle-seconds", args.idle_seconds),
        ("--attack-seconds", args.attack_seconds),
    ] {
        anyhow::ensure!(
            seconds.is_finite() && seconds > 0.0,
            "{name} {seconds} must be a positive number of seconds"
        );
    }
    anyhow::ensure!(
        args.queued.is_none_or(|n| n >= 10),
        "--queued must be at least 10 elements"
    );
    let dir = std::env::temp_dir().join(format!("cosched-bench-daemon-{}", std::process::id()));
    let disk_fsync_ms = Spread::of_ms(&fsync_latencies(&dir)?);
    let mut daemon = start_daemon(&dir.join("load"), &args.policy)?;
    let (submissions_per_s, latencies) = submit_all(&daemon.socket, args.clients, args.jobs)?;
    let idle_cpu_percent = idle_cpu(&daemon, args.idle_jobs, args.idle_seconds)?;
    daemon.stop()?;
    let attack = if args.attack {
        Some(attack(&dir.join("attack"), args.attack_seconds)?)
    } else {
        None
    };
    let history = match args.history {
        Some(jobs) => Some(restart(&dir.join("history"), jobs)?),
        None => None,
    };
    let queued = match args.queued {
        Some(elements) => Some(queued::run(&dir.join("queued"), elements)?),
        None => None,
    };
    let _ = std::fs::remove_dir_all(&dir);
    let figures = Figures {
        clients: args.clients,
        jobs: args.jobs,
        submissions_per_s,
        latency_ms: Spread::of_ms(&latencies),
        idle_jobs: args.idle_jobs,
        idle_seconds: args.idle_seconds,
        idle_cpu_percent,
        attack,
        history,
        queued,
        disk_fsync_ms,
        targets: Targets {
            submissions_per_s: THROUGHPUT_TARGET,
            latency_p99_ms: P99_TARGET_MS,
            idle_cpu_percent: IDLE_TARGET_PERCENT,
            restart_s: RESTART_TARGET_S,
            restart_rss_mib: RESTART_RSS_TARGET_MIB,
        },
    };
    if args.json {
        println!("{}", serde_json::to_string(&figures)?);
    } else {
        print_figures(&figures);
    }
    Ok(())
}

fn print_figures(f: &Figures) {
    println!(
        "disk: a 300-byte append and fsync in the bench's directory: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (the floor under each journaled answer)",
        f.disk_fsync_ms.p50, f.disk_fsync_ms.p99, f.disk_fsync_ms.max
    );
    println!(
        "submissions: {} jobs from {} clients: {:.0} submissions/s (target >= {THROUGHPUT_TARGET:.0}: {:.2}x of target)",
        f.jobs,
        f.clients,
        f.submissions_per_s,
        f.submissions_per_s / THROUGHPUT_TARGET
    );
    println!(
        "  latency: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < {P99_TARGET_MS} ms: {:.2}x of target)",
        f.latency_ms.p50,
        f.latency_ms.p99,
        f.latency_ms.max,
        f.latency_ms.p99 / P99_TARGET_MS
    );
    println!(
        "idle: {} jobs waiting, {:.0} s: daemon CPU {:.3}% of one CPU (target < {IDLE_TARGET_PERCENT}%: {:.2}x of target)",
        f.idle_jobs,
        f.idle_seconds,
        f.idle_cpu_percent,
        f.idle_cpu_percent / IDLE_TARGET_PERCENT
    );
    if let Some(a) = &f.attack {
        for (what, s) in [("quiet", &a.quiet), ("attacked", &a.attacked)] {
            println!(
                "slot switches under gang, {what}: {} switches, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                s.switches, s.lateness_ms.p50, s.lateness_ms.p99, s.lateness_ms.max
            );
        }
        println!(
            "  during the attack: {IDLE_CONNECTIONS} idle connections and {} hostile requests",
            a.hostile_requests
        );
        if let Some(users) = &a.users {
            users::print(users);
        }
    }
    if let Some(h) = &f.history {
        println!(
            "restart over {} ended jobs ({:.1} MiB of journal): listening after {:.3} s (target < {RESTART_TARGET_S} s: {:.2}x of target; empty journal {:.3} s), RSS {:.1} MiB (target < {RESTART_RSS_TARGET_MIB} MiB: {:.2}x of target; empty journal {:.1} MiB)",
            h.jobs,
            h.journal_mib,
            h.restart_s,
            h.restart_s / RESTART_TARGET_S,
            h.empty_restart_s,
            h.rss_mib,
            h.rss_mib / RESTART_RSS_TARGET_MIB,
            h.empty_rss_mib
        );
        println!("  `jobs --all` over them: {:.3} s", h.list_all_s);
    }
    if let Some(q) = &f.queued {
        queued::print(q);
    }
}

/// Fsyncs timed after appends of 300 bytes to a file in `dir`, seconds.
fn fsync_latencies(dir: &Path) -> anyhow::Result<Vec<f64>> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let line = [b'x'; 300];
    let mut latencies = Vec::with_capacity(200);
    for _ in 0..200 {
        file.write_all(&line)?;
        let synced = Instant::now();
        file.sync_data()?;
        latencies.push(synced.elapsed().as_secs_f64());
    }
    std::fs::remove_file(&path)?;
    Ok(latencies)
}

/// A bench job: `command` on one thread.
fn submission(command: &[&str]) -> Submission {
    Submission {
        name: "bench".into(),
        ..harness::submission(command)
    }
}

/// Submits `jobs` jobs from `clients` threads; returns submissions/s and every latency in seconds.
/// Waits for the jobs to end, so that the next phase starts from a quiet daemon.
fn submit_all(socket: &Path, clients: usize, jobs: usize) -> anyhow::Result<(f64, Vec<f64>)> {
    let started = Instant::now();
    let results: Vec<anyhow::Result<Vec<(u64, f64)>>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients)
            .map(|c| {
                let share = jobs / clients + usize::from(c < jobs % clients);
                scope.spawn(move || {
                    (0..share)
                        .map(|_| {
                            let sent = Instant::now();
                            let reply =
                                request(socket, Request::Submit(submission(&["/bin/true"])))?;
                            let latency = sent.elapsed().as_secs_f64();
                            match reply {
                                Reply::Submitted { id } => Ok((id, latency)),
                                other => anyhow::bail!("the daemon answered {other:?}"),
                            }
                        })
                        .collect()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("client threads do not panic"))
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    let mut ids = Vec::with_capacity(jobs);
    let mut latencies = Vec::with_capacity(jobs);
    for result in results {
        for (id, latency) in result? {
            ids.push(id);
            latencies.push(latency);
        }
    }
    request(socket, Request::Wait { ids })?;
    Ok((jobs as f64 / wall, latencies))
}

/// CPU seconds process `pid` has used, all its threads (utime + stime of /proc/PID/stat).
fn cpu_seconds(pid: i32) -> anyhow::Result<f64> {
    Ok(cosched_linux::procfs::stat(pid)?.cpu_seconds())
}

/// The daemon's CPU use, in % of one CPU, over `seconds` while `jobs` sleeping jobs wait.
fn idle_cpu(daemon: &DaemonProcess, jobs: usize, seconds: f64) -> anyhow::Result<f64> {
    let ids = (0..jobs)
        .map(|_| daemon.submit(submission(&["sleep", "3600"])))
        .collect::<Result<Vec<_>, _>>()?;
    // Let the launches, the first samples and the policy's first plans pass.
    std::thread::sleep(Duration::from_secs(2));
    let (before, started) = (cpu_seconds(daemon.pid())?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let used = cpu_seconds(daemon.pid())? - before;
    let percent = 100.0 * used / started.elapsed().as_secs_f64();
    daemon.cancel(&ids)?;
    Ok(percent)
}

/// Slot-switch lateness of a gang daemon over `seconds` quiet, then over `seconds` under attack.
fn attack(dir: &Path, seconds: f64) -> anyhow::Result<AttackFigures> {
    let mut daemon = start_daemon(dir, "gang")?;
    // Each as wide as the machine, so that gang gives each a slot of its own.
    let cpus = sysfs::discover()?.num_cpus() as u32;
    let wide = Submission {
        min_threads: Some(cpus),
        max_threads: Some(cpus),
        kind: JobKind::Rigid,
        ..submission(&["sleep", "3600"])
    };
    let ids = (0..2)
        .map(|_| daemon.submit(wide.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::sleep(Duration::from_secs(1));
    let (start, _) = daemon.switches()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (quiet_end, quiet) = daemon.switches()?;
    let hostile_requests = hostile_clients(&daemon.socket, Duration::from_secs_f64(seconds))?;
    let (attacked_end, attacked) = daemon.switches()?;
    daemon.cancel(&ids)?;
    daemon.stop()?;
    let latest = |all: Vec<f64>, count: u64| {
        let count = (count as usize).min(all.len());
        let values = &all[all.len() - count..];
        Switches {
            switches: values.len(),
            lateness_ms: Spread::of_ms(values),
        }
    };
    let users = users::hostile_users(&dir.join("users"), seconds)?;
    Ok(AttackFigures {
        quiet: latest(quiet, quiet_end - start),
        attacked: latest(attacked, attacked_end - quiet_end),
        hostile_requests,
        users,
    })
}

/// Holds [`IDLE_CONNECTIONS`] silent connections open and sends hostile requests for `length`;
/// returns how many hostile requests were sent.
fn hostile_clients(socket: &Path, length: Duration) -> anyhow::Result<usize> {
    let until = Instant::now() + length;
    let idle: Vec<UnixStream> = (0..IDLE_CONNECTIONS)
        .map(|_| UnixStream::connect(socket))
        .collect::<Result<_, _>>()?;
    let mut huge = vec![b'x'; 1 << 20];
    huge.push(b'\n');
    let requests: [&[u8]; 4] = [
        b"{not json\n",
        b"{\"version\":1,\"request\":{\"jobs\":{\"all\":true,\"sudo\":true}}}\n",
        b"{\"version\":9,\"request\":{\"jobs\":{\"all\":true}}}\n",
        &huge,
    ];
    let mut sent = 0;
    let mut silent = Vec::new();
    while Instant::now() < until {
        for bytes in requests {
            let mut stream = UnixStream::connect(socket)?;
            stream.set_read_timeout(Some(Duration::from_secs(5)))?;
            let _ = stream.write_all(bytes);
            let mut answer = String::new();
            let _ = BufReader::new(&stream).read_line(&mut answer);
            sent += 1;
        }
        // Clients that connect and never send, until the daemon times them out.
        if silent.len() < 50 {
            silent.push(UnixStream::connect(socket)?);
            sent += 1;
        }
    }
    drop(idle);
    drop(silent);
    Ok(sent)
}

/// Resident memory of process `pid`, MiB.
fn rss_mib(pid: i32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kib / 1024.0)
}

/// Starts a daemon over `dir`'s journal: seconds until it listens, and its RSS then.
fn timed_start(dir: &Path) -> anyhow::Result<(DaemonProcess, f64, f64)> {
    let started = Instant::now();
    let daemon = start_daemon(dir, "eq")?;
    let seconds = started.elapsed().as_secs_f64();
    let rss = rss_mib(daemon.pid())?;
    Ok((daemon, seconds, rss))
}

/// A daemon started over an empty journal, then over one of `jobs` ended jobs.
fn restart(dir: &Path, jobs: usize) -> anyhow::Result<HistoryFigures> {
    let (mut empty, empty_restart_s, empty_rss_mib) = timed_start(&dir.join("empty"))?;
    empty.stop()?;
    let full = dir.join("full");
    let journal_bytes = harness::write_ended_history(&full.join("state"), jobs)?;
    let (mut daemon, restart_s, rss_mib) = timed_start(&full)?;
    let listed = Instant::now();
    let count = match daemon.ask(Request::Jobs {
        all: true,
        filter: Default::default(),
    })? {
        Reply::Jobs { jobs } => jobs.len(),
        other => anyhow::bail!("the daemon answered {other:?} to `jobs`"),
    };
    let list_all_s = listed.elapsed().as_secs_f64();
    anyhow::ensure!(
        count == jobs,
        "the daemon knows {count} of the {jobs} jobs of its journal"
    );
    daemon.stop()?;
    Ok(HistoryFigures {
        jobs,
        journal_mib: journal_bytes as f64 / (1 << 20) as f64,
        restart_s,
        rss_mib,
        empty_restart_s,
        empty_rss_mib,
        list_all_s,
    })
}
