//! `cosched bench daemon --attack`, its hostile users: four users of one daemon, one of whom submits
//! 10,000 jobs and opens 1,000 connections, while the others' jobs are measured for their fair share
//! of CPU time, their submissions for latency and the daemon's slot switches for lateness.

use crate::cmd::bench::common::Spread;
use cosched_core::topology::sysfs;
use cosched_core::JobKind;
use cosched_service::client::request;
use cosched_service::harness::{self, DaemonProcess, Launch};
use cosched_service::protocol::{JobState, Reply, Request, Submission};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub const FAIR_SHARE_TARGET: f64 = 0.9;
pub const SUBMIT_P99_TARGET_MS: f64 = 10.0;
pub const LATENESS_P99_TARGET_MS: f64 = 1.0;
/// The hostile user's submissions and connections, as issue #40 puts them.
const HOSTILE_JOBS: usize = 10_000;
const HOSTILE_CONNECTIONS: usize = 1_000;
const HOSTILE_UID: u32 = 65534;
/// The weight the hostile user asks for its jobs, as issue #40 puts it.
const HOSTILE_WEIGHT: f64 = 1e9;
/// The other users: uids without a passwd entry, which the daemon runs jobs as all the same.
const POLITE_UIDS: [u32; 3] = [60001, 60002, 60003];
/// Submissions each polite user times while the hostile one floods the daemon.
const PROBES: usize = 50;
/// Running jobs per user in the bench daemon's configuration: four users' fit in gang's 16 rows, so
/// that the shares measured come from the slots, not from rows being taken back.
const RUNNING_PER_USER: usize = 4;

/// One user's side of the bench, run as that user (`cosched bench daemon-user`, hidden): opens
/// connections and holds them, submits spinning jobs and times probe submissions, reports as JSON
/// lines, and holds its connections until its standard input closes.
#[derive(clap::Args, Debug)]
pub struct UserArgs {
    #[arg(long)]
    socket: PathBuf,
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Spinning jobs as wide as the machine
    #[arg(long, default_value_t = 0)]
    spinners: usize,
    #[arg(long, default_value_t = 0)]
    probes: usize,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// First try one spinner of this weight, and report whether the daemon took it
    #[arg(long)]
    try_weight: Option<f64>,
}

#[derive(Serialize, Deserialize)]
struct Connected {
    held: usize,
    refused: usize,
}

#[derive(Serialize, Deserialize)]
struct Submitted {
    /// What the daemon answered to the spinner of `--try-weight`.
    weight_answer: Option<String>,
    spinners: Vec<u64>,
    refused: usize,
    probe_latencies: Vec<f64>,
}

#[derive(Serialize)]
pub struct UsersFigures {
    /// The daemon's answer to the hostile user's spinner of weight [`HOSTILE_WEIGHT`].
    hostile_weight_answer: String,
    hostile_connections_held: usize,
    hostile_connections_refused: usize,
    hostile_jobs_submitted: usize,
    /// Refused, most because its own held connections fill its per-user connection limit.
    hostile_jobs_refused: usize,
    /// Of the other users, how many got a connection while the hostile one held its own.
    polite_users_connected: usize,
    window_s: f64,
    /// Each other user's CPU time over the window, over a quarter of all the jobs' CPU time.
    fair_share: Vec<f64>,
    submit_latency_ms: Spread,
    switches: usize,
    lateness_ms: Spread,
}

fn spinner(cpus: u32) -> Submission {
    Submission {
        name: "spin".into(),
        min_threads: Some(cpus),
        max_threads: Some(cpus),
        kind: JobKind::Rigid,
        ..harness::submission(&["sh", "-c", "while :; do :; done"])
    }
}

/// `cosched bench daemon-user`.
pub fn run_user(args: UserArgs) -> anyhow::Result<()> {
    // The jobs first, then the connections held while the others submit: a user who held every
    // connection of theirs first could not submit at all.
    let cpus = sysfs::discover()?.num_cpus() as u32;
    let socket = &args.socket;
    let mut tried = Vec::new();
    let weight_answer = args.try_weight.map(|weight| {
        let heavy = Submission {
            weight,
            ..spinner(cpus)
        };
        match request(socket, Request::Submit(heavy)) {
            Ok(Reply::Submitted { id }) => {
                tried.push(id);
                format!("taken as job {id}")
            }
            Ok(other) => format!("answered {other:?}"),
            Err(refused) => format!("refused: {refused}"),
        }
    });
    let results: Vec<(Vec<u64>, usize)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..args.threads)
            .map(|t| {
                let share =
                    args.spinners / args.threads + usize::from(t < args.spinners % args.threads);
                scope.spawn(move || {
                    let (mut ids, mut refused) = (Vec::new(), 0);
                    for _ in 0..share {
                        match request(socket, Request::Submit(spinner(cpus))) {
                            Ok(Reply::Submitted { id }) => ids.push(id),
                            _ => refused += 1,
                        }
                    }
                    (ids, refused)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("no panic"))
            .collect()
    });
    let mut connections = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        connections.push(UnixStream::connect(&args.socket)?);
    }
    // A refused connection is answered at once, then closed; an admitted one hears nothing.
    std::thread::sleep(Duration::from_millis(300));
    let mut held = 0;
    for stream in &connections {
        stream.set_nonblocking(true)?;
        let mut byte = [0u8; 1];
        if matches!((&*stream).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        {
            held += 1;
        }
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(
        &mut out,
        &Connected {
            held,
            refused: args.connections - held,
        },
    )?;
    writeln!(out)?;
    out.flush()?;
    let mut probe_latencies = Vec::with_capacity(args.probes);
    for _ in 0..args.probes {
        let sent = Instant::now();
        let reply = request(socket, Request::Submit(harness::submission(&["/bin/true"])))?;
        probe_latencies.push(sent.elapsed().as_secs_f64());
        anyhow::ensure!(
            matches!(reply, Reply::Submitted { .. }),
            "the daemon answered {reply:?}"
        );
    }
    let submitted = Submitted {
        weight_answer,
        spinners: tried
            .into_iter()
            .chain(results.iter().flat_map(|r| r.0.clone()))
            .collect(),
        refused: results.iter().map(|r| r.1).sum(),
        probe_latencies,
    };
    serde_json::to_writer(&mut out, &submitted)?;
    writeln!(out)?;
    out.flush()?;
    drop(out);
    // Hold the connections until the bench is done with us.
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(connections);
    Ok(())
}

struct User {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl User {
    fn start(uid: u32, args: &[String]) -> anyhow::Result<User> {
        let mut child = Command::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups")
            .arg(std::env::current_exe()?)
            .args(["bench", "daemon-user"])
            .args(args)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let lines = BufReader::new(child.stdout.take().expect("piped"));
        Ok(User { child, lines })
    }

    fn next<T: for<'de> Deserialize<'de>>(&mut self) -> anyhow::Result<T> {
        let mut line = String::new();
        self.lines.read_line(&mut line)?;
        serde_json::from_str(&line)
            .map_err(|e| anyhow::anyhow!("a bench user process said {line:?}: {e}"))
    }

    /// Lets it close its connections and end.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Waits, polling, until the daemon's slot switches number more than `count`; the number then.
fn switch_past(daemon: &DaemonProcess, count: u64) -> anyhow::Result<u64> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (now, _) = daemon.switches()?;
        if now > count {
            return Ok(now);
        }
        anyhow::ensure!(Instant::now() < until, "no slot switch within 30 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn ticks(pid: u32) -> u64 {
    cosched_linux::procfs::stat(pid as i32)
        .map(|s| s.cpu_ticks)
        .unwrap_or(0)
}

/// The jobs not ended, as the bench follows them.
struct Live {
    /// The running ones: (uid, pid).
    running: Vec<(u32, u32)>,
    /// The uid of each, queued or running.
    owners: Vec<u32>,
}

fn live_jobs(daemon: &DaemonProcess) -> anyhow::Result<Live> {
    match daemon.ask(Request::Jobs {
        all: false,
        filter: Default::default(),
    })? {
        Reply::Jobs { jobs } => Ok(Live {
            running: jobs
                .iter()
                // A job frozen between its gang slots is listed as suspended; it runs all the same.
                .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended))
                .filter_map(|j| Some((j.uid, j.pid.filter(|&p| p != 0)?)))
                .collect(),
            owners: jobs.iter().map(|j| j.uid).collect(),
        }),
        other => anyhow::bail!("the daemon answered {other:?} to `jobs`"),
    }
}

/// The four users against one gang daemon; `None` (saying why) unless run as root with setpriv.
pub fn hostile_users(dir: &Path, seconds: f64) -> anyhow::Result<Option<UsersFigures>> {
    if !nix::unistd::geteuid().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
    {
        eprintln!("hostile users: SKIPPED: needs root and setpriv (util-linux) to run other users");
        return Ok(None);
    }
    let mut daemon = start_limited_daemon(dir)?;
    let socket = daemon.socket.display().to_string();
    let mut hostile = User::start(
        HOSTILE_UID,
        &[
            "--socket".into(),
            socket.clone(),
            "--connections".into(),
            HOSTILE_CONNECTIONS.to_string(),
            "--spinners".into(),
            HOSTILE_JOBS.to_string(),
            "--threads".into(),
            "4".into(),
            "--try-weight".into(),
            HOSTILE_WEIGHT.to_string(),
        ],
    )?;
    let hostile_connected: Connected = hostile.next()?;
    let mut polite = POLITE_UIDS
        .iter()
        .map(|&uid| {
            User::start(
                uid,
                &[
                    "--socket".into(),
                    socket.clone(),
                    "--spinners".into(),
                    "1".into(),
                    "--probes".into(),
                    PROBES.to_string(),
                ],
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut polite_users_connected = 0;
    let mut latencies = Vec::new();
    for user in &mut polite {
        let connected: Connected = user.next()?;
        polite_users_connected += usize::from(connected.held == 1);
        let submitted: Submitted = user.next()?;
        latencies.extend(submitted.probe_latencies);
    }
    let hostile_submitted: Submitted = hostile.next()?;
    wait_until_spinning(&daemon, dir, &hostile_submitted.spinners)?;
    std::thread::sleep(Duration::from_secs(1));
    let window = measure_window(&daemon, seconds)?;
    for user in polite {
        user.finish();
    }
    hostile.finish();
    cancel_spinners(&daemon, &hostile_submitted.spinners)?;
    daemon.stop()?;
    Ok(Some(UsersFigures {
        hostile_weight_answer: hostile_submitted.weight_answer.unwrap_or_default(),
        hostile_connections_held: hostile_connected.held,
        hostile_connections_refused: hostile_connected.refused,
        hostile_jobs_submitted: hostile_submitted.spinners.len(),
        hostile_jobs_refused: hostile_submitted.refused,
        polite_users_connected,
        window_s: window.seconds,
        fair_share: window.fair_share,
        submit_latency_ms: Spread::of_ms(&latencies),
        switches: window.switches,
        lateness_ms: Spread::of_ms(&window.lateness),
    }))
}

/// A gang daemon in `dir` that runs at most [`RUNNING_PER_USER`] jobs of each user, on a socket
/// that the other users can reach.
fn start_limited_daemon(dir: &Path) -> anyhow::Result<DaemonProcess> {
    std::fs::create_dir_all(dir)?;
    for d in [dir, dir.parent().unwrap_or(dir)] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    }
    let config = dir.join("daemon.toml");
    std::fs::write(
        &config,
        format!("[limits]\nrunning_jobs_per_user = {RUNNING_PER_USER}\n"),
    )?;
    Ok(Launch::new(&std::env::current_exe()?, dir, "state")
        .args(["--policy", "gang", "--idle-timeout", "2", "--config"])
        .args([&config])
        .log_to(&dir.join("daemon.log"))
        .start()?)
}

/// Waits until every user's spinners run and the probes have ended: a probe waiting for its slot
/// would take a part of its user's share that no spinner of theirs uses. Cancels the hostile
/// user's `spinners` and fails after a minute.
fn wait_until_spinning(daemon: &DaemonProcess, dir: &Path, spinners: &[u64]) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let live = live_jobs(daemon)?;
        let runs = |uid| live.running.iter().any(|&(u, _)| u == uid);
        let only_spinner =
            |uid| runs(uid) && live.owners.iter().filter(|&&u| u == uid).count() == 1;
        if POLITE_UIDS.iter().all(|&u| only_spinner(u)) && runs(HOSTILE_UID) {
            return Ok(());
        }
        if started.elapsed() >= Duration::from_secs(60) {
            // A daemon's jobs outlive it by design; the bench's must not outlive the bench.
            cancel_spinners(daemon, spinners)?;
            anyhow::bail!(
                "the users' spinners did not all run, their probes ended, within a minute; see {}",
                dir.join("daemon.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the users got over the measured window.
struct Window {
    seconds: f64,
    /// Each polite user's CPU time over a fair share of all the jobs'.
    fair_share: Vec<f64>,
    switches: usize,
    /// Seconds each of the window's slot switches came late.
    lateness: Vec<f64>,
}

/// Each polite user's share of the CPU time over about `seconds`, stretched to a whole number of
/// gang cycles, and the slot switches meanwhile.
fn measure_window(daemon: &DaemonProcess, seconds: f64) -> anyhow::Result<Window> {
    let running = live_jobs(daemon)?.running;
    // Each spinner is as wide as the machine: a gang row of its own, and a cycle one slot of each.
    let rows = running.len() as u64;
    let (now, _) = daemon.switches()?;
    let switches_before = switch_past(daemon, now)?;
    let before: Vec<u64> = running.iter().map(|&(_, p)| ticks(p)).collect();
    let window = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (now, _) = daemon.switches()?;
    // A whole number of cycles, so that each row had as many slots, whichever it began with.
    // The first cycle end still to come.
    let cycles = (now - switches_before) / rows + 1;
    let switches_after = switch_past(daemon, switches_before + cycles * rows - 1)?;
    let after: Vec<u64> = running.iter().map(|&(_, p)| ticks(p)).collect();
    let window_s = window.elapsed().as_secs_f64();
    let (_, lateness) = daemon.switches()?;
    let used: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let total: u64 = used.iter().sum();
    let fair = total as f64 / (POLITE_UIDS.len() + 1) as f64;
    let fair_share = POLITE_UIDS
        .iter()
        .map(|&uid| {
            let own: u64 = running
                .iter()
                .zip(&used)
                .filter(|((u, _), _)| *u == uid)
                .map(|(_, t)| t)
                .sum();
            own as f64 / fair.max(1.0)
        })
        .collect();
    let switches = ((switches_after - switches_before) as usize).min(lateness.len());
    Ok(Window {
        seconds: window_s,
        fair_share,
        switches,
        lateness: lateness[lateness.len() - switches..].to_vec(),
    })
}

pub fn print(u: &UsersFigures) {
    println!(
        "hostile users: uid {HOSTILE_UID} held {} of {HOSTILE_CONNECTIONS} connections ({} refused) and submitted {} of {HOSTILE_JOBS} spinning jobs ({} refused); {} of {} other users got a connection meanwhile",
        u.hostile_connections_held,
        u.hostile_connections_refused,
        u.hostile_jobs_submitted,
        u.hostile_jobs_refused,
        u.polite_users_connected,
        POLITE_UIDS.len()
    );
    let worst = u.fair_share.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "  its spinner of weight {HOSTILE_WEIGHT:e}: {}",
        u.hostile_weight_answer
    );
    println!(
        "  other users' CPU time over {:.1} s, against a fair quarter of the jobs': {} (target >= {FAIR_SHARE_TARGET}: worst {:.2}x of target)",
        u.window_s,
        u.fair_share
            .iter()
            .map(|f| format!("{f:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        worst / FAIR_SHARE_TARGET
    );
    println!(
        "  their submissions meanwhile: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < {SUBMIT_P99_TARGET_MS} ms: {:.2}x of target)",
        u.submit_latency_ms.p50,
        u.submit_latency_ms.p99,
        u.submit_latency_ms.max,
        u.submit_latency_ms.p99 / SUBMIT_P99_TARGET_MS
    );
    println!(
        "  slot switches under gang: {} switches, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (target p99 < {LATENESS_P99_TARGET_MS} ms: {:.2}x of target)",
        u.switches,
        u.lateness_ms.p50,
        u.lateness_ms.p99,
        u.lateness_ms.max,
        u.lateness_ms.p99 / LATENESS_P99_TARGET_MS
    );
}

/// Cancels every spinner still queued or running (`known` and those listed) and waits for their end.
fn cancel_spinners(daemon: &DaemonProcess, known: &[u64]) -> anyhow::Result<()> {
    let mut ids: Vec<u64> = known.to_vec();
    let jobs = match daemon.ask(Request::Jobs {
        all: false,
        filter: Default::default(),
    })? {
        Reply::Jobs { jobs } => jobs,
        other => anyhow::bail!("the daemon answered {other:?} to `jobs`"),
    };
    // Spinners never end by themselves; a probe may end between the listing and the cancel.
    ids.extend(
        jobs.iter()
            .filter(|j| !j.state.ended() && j.name == "spin")
            .map(|j| j.id),
    );
    ids.sort_unstable();
    ids.dedup();
    for chunk in ids.chunks(2000) {
        let live: Vec<u64> = chunk.to_vec();
        daemon.ask(Request::Cancel { ids: live.clone() })?;
    }
    for chunk in ids.chunks(2000) {
        daemon.wait(chunk.to_vec())?;
    }
    Ok(())
}
