//! cosched under a real Slurm on localhost: munged, slurmctld and slurmd started by the test with a
//! private configuration (`SLURM_CONF`), state and spool, one 2-CPU node in an oversubscribed
//! partition, and the TaskProlog shipped in `dist/slurm/task-prolog` handing every task to a cosched
//! daemon of the test's own. Each test skips, saying why, where Slurm is not installed, where it does
//! not run as root, or where the cluster does not come up.

use cosched_core::test_util::wait::{self, Wait};
use cosched_linux::slurm::SlurmStep;
use cosched_service::harness::{DaemonProcess, Launch};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One cluster at a time: they share the node's CPUs and Slurm's cgroups.
static SERIAL: Mutex<()> = Mutex::new(());

const TOOLS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "scancel",
    "scontrol",
    "sinfo",
];

/// Why Slurm cannot be used here, or `None` when it can.
fn unavailable() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .collect();
    let missing: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|tool| !dirs.iter().any(|d| d.join(tool).is_file()))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not installed (apt-get install slurm-wlm munge)",
            missing.join(", ")
        ));
    }
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("slurmd must run as root".into());
    }
    None
}

fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let path = Path::new(dir).join(name);
        if path.is_file() {
            return path;
        }
    }
    PathBuf::from(name)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is as long as we say.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).to_string();
    name.split('.').next().unwrap_or("localhost").to_string()
}

/// Slurm's own time slicing, for the comparison: jobs of one partition suspended and resumed in turn.
const GANG: &str = "PreemptMode=GANG\nSchedulerTimeSlice=5\n";

struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    node: String,
    munged: Child,
    slurmctld: Child,
    slurmd: Option<Child>,
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd with a configuration of their own under `dir`; `extra` is
    /// appended to slurm.conf.
    fn start(dir: &Path, extra: &str) -> Result<Cluster, String> {
        let node = hostname();
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let munge = dir.join("munge");
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o755)).unwrap();
        let key = munge.join("munge.key");
        let mut bytes = [0u8; 128];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .unwrap();
        std::fs::write(&key, bytes).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        let socket = munge.join("socket");
        let munged = Command::new(tool("munged"))
            .args(["-F", "-f"])
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", munge.join("pid").display()))
            .arg(format!("--seed-file={}", munge.join("seed").display()))
            .arg(format!(
                "--log-file={}",
                dir.join("log/munged.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start munged: {e}"))?;
        let prolog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/slurm/task-prolog");
        let prolog = prolog.canonicalize().unwrap();
        let d = dir.display();
        let conf = format!(
            "ClusterName=cosched\n\
SlurmctldHost={node}(127.0.0.1)\n\
SlurmctldPort={ctld}\n\
SlurmdPort={slurmd}\n\
SlurmUser=root\n\
AuthType=auth/munge\n\
AuthInfo=socket={socket}\n\
CredType=cred/munge\n\
StateSaveLocation={d}/state\n\
SlurmdSpoolDir={d}/spool\n\
SlurmctldPidFile={d}/slurmctld.pid\n\
SlurmdPidFile={d}/slurmd.pid\n\
SlurmctldLogFile={d}/log/slurmctld.log\n\
SlurmdLogFile={d}/log/slurmd.log\n\
ProctrackType=proctrack/cgroup\n\
TaskPlugin=task/cgroup,task/affinity\n\
TaskProlog={prolog}\n\
JobAcctGatherType=jobacct_gather/linux\n\
JobCompType=jobcomp/filetxt\n\
JobCompLoc={d}/log/jobcomp.txt\n\
AccountingStorageType=accounting_storage/none\n\
SchedulerType=sched/builtin\n\
SelectType=select/cons_tres\n\
SelectTypeParameters=CR_Core\n\
ReturnToService=2\n\
KillWait=2\n\
MpiDefault=none\n\
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=500 State=UNKNOWN\n\
PartitionName=shared Nodes={node} Default=YES OverSubscribe=FORCE:2 MaxTime=INFINITE State=UP\n\
{extra}",
            ctld = free_port(),
            slurmd = free_port(),
            socket = socket.display(),
            prolog = prolog.display(),
        );
        let conf_path = dir.join("slurm.conf");
        std::fs::write(&conf_path, conf).unwrap();
        // Slurm's cgroup plugins keep each step's tasks in its cgroups; cosched stays inside them.
        std::fs::write(
            dir.join("cgroup.conf"),
            "CgroupPlugin=autodetect\nConstrainCores=yes\nIgnoreSystemd=yes\n",
        )
        .unwrap();
        std::fs::write(dir.join("plugstack.conf"), "").unwrap();
        if !wait::until(Duration::from_secs(10), || socket.exists()) {
            return Err("munged did not create its socket".into());
        }
        let quiet = |c: &mut Command| {
            c.env("SLURM_CONF", &conf_path)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        };
        let mut ctld = Command::new(tool("slurmctld"));
        ctld.args(["-D", "-i"]);
        quiet(&mut ctld);
        let slurmctld = ctld
            .spawn()
            .map_err(|e| format!("cannot start slurmctld: {e}"))?;
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: conf_path,
            node,
            munged,
            slurmctld,
            slurmd: None,
        };
        cluster.start_slurmd()?;
        let mut state = String::new();
        let idle = Wait::default().every(Duration::from_millis(200)).until(
            Duration::from_secs(30),
            || {
                state = cluster.output("sinfo", &["-h", "-o", "%T"]);
                state.trim() == "idle"
            },
        );
        match idle {
            true => Ok(cluster),
            false => Err(format!(
                "the node did not become idle (sinfo: {:?}); logs in {}",
                state.trim(),
                cluster.dir.join("log").display()
            )),
        }
    }

    fn start_slurmd(&mut self) -> Result<(), String> {
        let mut command = Command::new(tool("slurmd"));
        command
            .args(["-D", "-N", &self.node])
            .env("SLURM_CONF", &self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.slurmd = Some(
            command
                .spawn()
                .map_err(|e| format!("cannot start slurmd: {e}"))?,
        );
        Ok(())
    }

    /// Stops slurmd and starts it again; running steps (their slurmstepd) are not affected.
    fn restart_slurmd(&mut self) {
        if let Some(mut slurmd) = self.slurmd.take() {
            unsafe { libc::kill(slurmd.id() as i32, libc::SIGTERM) };
            let _ = slurmd.wait();
        }
        self.start_slurmd().unwrap();
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(tool(program));
        command.env("SLURM_CONF", &self.conf);
        command
    }

    fn output(&self, program: &str, args: &[&str]) -> String {
        let output = self.command(program).args(args).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Submits a batch job with `env` added to its environment; its output goes to `<dir>/<id>.out`.
    fn sbatch(&self, args: &[&str], env: &[(&str, &str)], script: &str) -> u64 {
        let output = self
            .command("sbatch")
            .args(["--parsable", "-o"])
            .arg(self.dir.join("%j.out"))
            .args(args)
            .arg("--wrap")
            .arg(script)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        text.trim()
            .split(';')
            .next()
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "sbatch failed: {}{}",
                    text,
                    String::from_utf8_lossy(&output.stderr)
                )
            })
    }

    /// Job ids still known to squeue (pending, running, suspended, completing).
    fn queued(&self) -> Vec<u64> {
        self.output("squeue", &["-h", "-o", "%i"])
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Waits until none of `ids` is in the queue; false after `limit`.
    fn wait_gone(&self, ids: &[u64], limit: Duration) -> bool {
        Wait::default()
            .every(Duration::from_millis(100))
            .until(limit, || !self.queued().iter().any(|id| ids.contains(id)))
    }

    fn cancel(&self, ids: &[u64]) {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        let _ = self.command("scancel").args(&ids).status();
    }

    /// `JobState=…` of a finished job, from the job completion log.
    fn completion(&self, id: u64) -> Option<String> {
        let log = std::fs::read_to_string(self.dir.join("log/jobcomp.txt")).ok()?;
        log.lines()
            .find(|l| l.starts_with(&format!("JobId={id} ")))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix("JobState="))
            })
            .map(str::to_string)
    }

    /// What the job script printed about its run (see `spinning_job`).
    fn record(&self, id: u64) -> Option<JobRecord> {
        JobRecord::parse(&std::fs::read_to_string(self.dir.join(format!("{id}.out"))).ok()?)
    }
}

/// The node's CPU time counters (`/proc/stat`'s first line), in clock ticks of all CPUs together.
#[derive(Debug, Clone, Copy)]
struct NodeTicks {
    /// user + nice + system + irq + softirq: time some process or the kernel ran.
    busy: u64,
    /// Time the hypervisor ran something else on this machine's virtual CPUs.
    steal: u64,
}

impl NodeTicks {
    fn parse(fields: &[&str]) -> Option<NodeTicks> {
        let n = |i: usize| fields.get(i)?.parse::<u64>().ok();
        Some(NodeTicks {
            busy: n(0)? + n(1)? + n(2)? + n(5)? + n(6)?,
            steal: n(7)?,
        })
    }
}

/// A measured job's run as its script recorded it: wall-clock marks, the node's counters at both, and
/// the CPU time of the job's own program.
#[derive(Debug, Clone, Copy)]
struct JobRecord {
    start: f64,
    end: f64,
    node_at_start: NodeTicks,
    node_at_end: NodeTicks,
    /// User + system ticks of the processes the script waited for (its program).
    job_ticks: u64,
}

impl JobRecord {
    /// Reads `start <time> cpu <counters…>` and `end <time> cpu <counters…> <script's /proc/PID/stat>`.
    fn parse(text: &str) -> Option<JobRecord> {
        let line = |mark: &str| text.lines().find_map(|l| l.strip_prefix(mark));
        fn fields(line: &str) -> Vec<&str> {
            line.split_whitespace().collect()
        }
        let start = fields(line("start ")?);
        let end_line = line("end ")?;
        let end = fields(end_line);
        // The script's stat line begins with its pid, the word before `(comm)`.
        let name = end_line.find('(')?;
        let pid_at = end_line[..name].trim_end().rfind(' ')? + 1;
        let script = cosched_linux::procfs::parse_stat(&end_line[pid_at..])?;
        Some(JobRecord {
            start: start.first()?.parse().ok()?,
            end: end.first()?.parse().ok()?,
            node_at_start: NodeTicks::parse(start.get(2..)?)?,
            node_at_end: NodeTicks::parse(end.get(2..)?)?,
            job_ticks: script.children_ticks,
        })
    }
}

/// How much of the node's CPU time went, while `jobs` ran (from the first one's start to the last
/// one's end), to anything but those jobs and `own_seconds` of the scheduler under test.
fn disturbance(jobs: &[JobRecord], own_seconds: f64) -> Disturbance {
    let first = jobs
        .iter()
        .min_by(|a, b| a.start.total_cmp(&b.start))
        .unwrap();
    let last = jobs.iter().max_by(|a, b| a.end.total_cmp(&b.end)).unwrap();
    let tick = cosched_linux::procfs::clock_ticks_per_second();
    let busy = last
        .node_at_end
        .busy
        .saturating_sub(first.node_at_start.busy) as f64
        / tick;
    let steal = last
        .node_at_end
        .steal
        .saturating_sub(first.node_at_start.steal) as f64
        / tick;
    let measured = jobs.iter().map(|j| j.job_ticks).sum::<u64>() as f64 / tick + own_seconds;
    let node = NODE_CPUS * span(jobs);
    Disturbance {
        others: (busy - measured).max(0.0) / node,
        steal: steal / node,
    }
}

/// Shares of the node's CPU time taken from measured jobs.
#[derive(Debug, Clone, Copy, Default)]
struct Disturbance {
    /// Other processes and the kernel.
    others: f64,
    /// The hypervisor, running something else on this machine's virtual CPUs.
    steal: f64,
}

impl Disturbance {
    fn total(&self) -> f64 {
        self.others + self.steal
    }

    /// The larger of two.
    fn max(self, other: Disturbance) -> Disturbance {
        match self.total() >= other.total() {
            true => self,
            false => other,
        }
    }
}

/// CPUs of the test's node.
const NODE_CPUS: f64 = 2.0;

/// CPU seconds (their own and their waited-for children's) of every process now, by pid and start.
fn cpu_by_process() -> std::collections::HashMap<(i32, u64), (String, f64)> {
    cosched_linux::procfs::all_processes()
        .into_iter()
        .map(|p| ((p.pid, p.start_ticks), (comm(p.pid), p.cpu_seconds())))
        .collect()
}

/// The processes that took the most CPU time between two `cpu_by_process` snapshots, for saying what
/// disturbed a measurement.
fn busiest(
    before: &std::collections::HashMap<(i32, u64), (String, f64)>,
    after: &std::collections::HashMap<(i32, u64), (String, f64)>,
) -> String {
    let mut used: Vec<(f64, String)> = after
        .iter()
        .map(|(key, (name, seconds))| {
            let earlier = before.get(key).map_or(0.0, |b| b.1);
            (seconds - earlier, format!("{name} ({})", key.0))
        })
        .filter(|(seconds, _)| *seconds >= 0.1)
        .collect();
    used.sort_by(|a, b| b.0.total_cmp(&a.0));
    used.iter()
        .take(4)
        .map(|(seconds, name)| format!("{name} {seconds:.1} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Drop for Cluster {
    /// Cancels every job, then stops the daemons: a failed test leaves nothing running.
    fn drop(&mut self) {
        let ids = self.queued();
        if !ids.is_empty() {
            self.cancel(&ids);
            self.wait_gone(&ids, Duration::from_secs(20));
        }
        let mut children: Vec<&mut Child> = vec![&mut self.slurmctld, &mut self.munged];
        if let Some(slurmd) = self.slurmd.as_mut() {
            children.insert(0, slurmd);
        }
        for child in children {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

/// A cosched daemon of the test's own, which the TaskProlog reaches through `COSCHED_SOCKET`.
struct Daemon(DaemonProcess);

impl std::ops::Deref for Daemon {
    type Target = DaemonProcess;
    fn deref(&self) -> &DaemonProcess {
        &self.0
    }
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let launch = Launch::new(
            Path::new(env!("CARGO_BIN_EXE_cosched")),
            dir,
            "cosched-state",
        )
        .log_to(&dir.join("cosched-daemon.log"));
        Daemon(launch.start().unwrap())
    }

    fn kill(&mut self) {
        self.0.kill()
    }

    /// `cosched ARGS` against this daemon, which must succeed; its standard output.
    fn client(&self, args: &[&str]) -> Vec<u8> {
        let output = Command::new(env!("CARGO_BIN_EXE_cosched"))
            .args(args)
            .env("COSCHED_SOCKET", &self.socket)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cosched {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    /// `cosched jobs --all --json`.
    fn jobs(&self) -> Vec<serde_json::Value> {
        let stdout = self.client(&["jobs", "--all", "--json"]);
        let value: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        value["jobs"].as_array().cloned().unwrap_or_default()
    }
}

/// The environment a job needs for its TaskProlog to reach `socket` (a path with no daemon behind it
/// runs the job without cosched).
fn prolog_env(socket: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("COSCHED_SOCKET", socket.display().to_string()),
        ("COSCHED_BIN", env!("CARGO_BIN_EXE_cosched").to_string()),
    ]
}

/// A 2-thread OpenMP program whose threads spin while they wait (`OMP_WAIT_POLICY=active`): many
/// short parallel regions of a small stencil, so a thread descheduled while its partner spins costs
/// the job its progress.
fn spinning_job(iterations: u64) -> String {
    let stencil = cosched_native::benchmark("stencil");
    // The same program and OpenMP settings on every side of the comparison, whatever the caller's
    // environment (sbatch passes it on): no thread binding of libgomp's own, which cosched's
    // placement of an attached task would override on one side only. Each mark carries the node's
    // CPU counters, and the end mark the CPU time of the program, for `disturbance`.
    format!(
        "unset OMP_PLACES OMP_PROC_BIND GOMP_CPU_AFFINITY GOMP_SPINCOUNT; \
echo start $(date +%s.%N) $(head -1 /proc/stat); OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active {} \
--size 200 --iterations {iterations}; echo end $(date +%s.%N) $(head -1 /proc/stat) $(cat /proc/$$/stat)",
        stencil.display()
    )
}

/// Submits the spinning job, asking for the node's 2 CPUs.
fn submit(cluster: &Cluster, args: &[&str], iterations: u64, socket: &Path) -> u64 {
    let env = prolog_env(socket);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args: Vec<&str> = ["-c", "2"].iter().chain(args).copied().collect();
    cluster.sbatch(&args, &env, &spinning_job(iterations))
}

/// Seconds from the first job's start to the last one's end.
fn makespan(cluster: &Cluster, ids: &[u64]) -> f64 {
    let records: Vec<JobRecord> = ids
        .iter()
        .map(|&id| {
            cluster
                .record(id)
                .unwrap_or_else(|| panic!("job {id} printed no start and end"))
        })
        .collect();
    span(&records)
}

/// Seconds from the first job's start mark to the last one's end mark.
fn span(jobs: &[JobRecord]) -> f64 {
    let start = jobs.iter().map(|j| j.start).fold(f64::INFINITY, f64::min);
    let end = jobs.iter().map(|j| j.end).fold(0.0, f64::max);
    end - start
}

fn skip(reason: &str) {
    eprintln!("skipped: {reason}");
}

/// One test at a time, a temporary directory and a cluster in its `cluster/` with `extra` in its
/// slurm.conf; `None`, saying why, where Slurm cannot run.
fn start(extra: &str) -> Option<(MutexGuard<'static, ()>, tempfile::TempDir, Cluster)> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(reason) = unavailable() {
        skip(&reason);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    match Cluster::start(&dir.path().join("cluster"), extra) {
        Ok(cluster) => Some((serial, dir, cluster)),
        Err(reason) => {
            skip(&format!("Slurm did not start here: {reason}"));
            None
        }
    }
}

/// Iterations of each job: about 5.5 s alone on an idle 2-CPU machine (0.028 ms each), longer than Slurm's shortest
/// time slice (5 s), so that its gang scheduling really switches.
const ITERATIONS: u64 = 200_000;

/// Longest wait for jobs to end.
const LIMIT: Duration = Duration::from_secs(600);

/// Pairs of measurements, one after the other and under cosched: the ratio asserted is their median.
const ROUNDS: usize = 3;

/// Waits until every job of `ids` has printed its end mark, or ended without one (it failed: the job
/// completion log has it), and left the queue; false after `limit`. While the jobs run it only reads
/// files: asking squeue would start a client, munged and slurmctld on the measured CPUs.
fn wait_ended(cluster: &Cluster, ids: &[u64], limit: Duration) -> bool {
    let started = Instant::now();
    let ended = Wait::default()
        .every(Duration::from_millis(500))
        .until(limit, || {
            ids.iter()
                .all(|&id| cluster.record(id).is_some() || cluster.completion(id).is_some())
        });
    ended && cluster.wait_gone(ids, limit.saturating_sub(started.elapsed()))
}

/// Most of the node's CPU time that anything but the measured jobs (and cosched's daemon) may take
/// while they run for the 1.1 bound to be judged: a spinning 2-thread job loses far more than the CPU
/// time another process takes from one of its threads.
const UNDISTURBED: f64 = 0.05;

/// The bound asserted where 1.1 cannot be judged (something else ran, or the machine varied by
/// itself): it still tells coscheduling from the thrashing of plain oversubscription.
const VARYING: f64 = 1.5;

/// The two spinning jobs one after the other (Slurm starts the second of one name only when the
/// first has ended): what each one's script recorded, each measured from its own start to its own
/// end, without Slurm's gap between them.
fn one_after_the_other(cluster: &Cluster, nowhere: &Path) -> Vec<JobRecord> {
    let ids: Vec<u64> = (0..2)
        .map(|_| {
            submit(
                cluster,
                &["-J", "serial", "--dependency=singleton"],
                ITERATIONS,
                nowhere,
            )
        })
        .collect();
    assert!(
        wait_ended(cluster, &ids, LIMIT),
        "the serial jobs did not end"
    );
    ids.iter()
        .map(|&id| cluster.record(id).expect("job times"))
        .collect()
}

/// Both jobs at once, handed to `daemon` by the TaskProlog: what their scripts recorded, and the CPU
/// seconds the daemon took meanwhile.
fn under_cosched(cluster: &Cluster, daemon: &Daemon) -> (Vec<JobRecord>, f64) {
    let daemon_cpu = || {
        cosched_linux::procfs::stat(daemon.child.id() as i32)
            .expect("the daemon runs")
            .cpu_seconds()
    };
    let before = daemon_cpu();
    let ids: Vec<u64> = (0..2)
        .map(|_| submit(cluster, &["-J", "cosched"], ITERATIONS, &daemon.socket))
        .collect();
    assert!(
        wait_ended(cluster, &ids, LIMIT),
        "the cosched jobs did not end"
    );
    let daemon_seconds = daemon_cpu() - before;
    let jobs = daemon.jobs();
    for &id in &ids {
        assert_eq!(
            cluster.completion(id).as_deref(),
            Some("COMPLETED"),
            "job {id}"
        );
        let view = attached(&jobs, id).unwrap_or_else(|| panic!("job {id} was not attached"));
        assert_eq!(view["name"], format!("slurm-{id}.batch"));
    }
    let records = ids
        .iter()
        .map(|&id| cluster.record(id).expect("job times"))
        .collect();
    (records, daemon_seconds)
}

/// One round: the two jobs one after the other, then both at once under cosched.
struct Round {
    alone: Vec<JobRecord>,
    cosched: Vec<JobRecord>,
    /// The most that something else took from any measured run of the round.
    disturbance: Disturbance,
    /// The processes that took the most CPU time during the round.
    disturbers: String,
}

impl Round {
    fn measure(cluster: &Cluster, daemon: &Daemon, nowhere: &Path) -> Round {
        let before = cpu_by_process();
        let alone = one_after_the_other(cluster, nowhere);
        let (cosched, daemon_seconds) = under_cosched(cluster, daemon);
        let after = cpu_by_process();
        let disturbance = alone
            .iter()
            .map(|job| disturbance(std::slice::from_ref(job), 0.0))
            .chain([disturbance(&cosched, daemon_seconds)])
            .fold(Disturbance::default(), Disturbance::max);
        Round {
            alone,
            cosched,
            disturbance,
            disturbers: busiest(&before, &after),
        }
    }

    fn one_after_the_other(&self) -> f64 {
        self.alone.iter().map(|j| j.end - j.start).sum()
    }

    fn with_cosched(&self) -> f64 {
        span(&self.cosched)
    }

    fn ratio(&self) -> f64 {
        self.with_cosched() / self.one_after_the_other()
    }
}

#[test]
fn two_spinning_jobs_under_cosched_take_at_most_1_1_times_one_after_the_other() {
    let Some((_serial, dir, cluster)) = start("") else {
        return;
    };
    let nowhere = dir.path().join("no-daemon.sock");
    let daemon = Daemon::start(dir.path());

    // Each ratio compares runs made back to back, so that a machine whose speed drifts (other
    // tenants, frequency) moves both alike; the median of the rounds is asserted.
    let mut rounds: Vec<Round> = (0..ROUNDS)
        .map(|_| Round::measure(&cluster, &daemon, &nowhere))
        .collect();

    // Both at once on the oversubscribed node, Linux alone sharing the CPUs; cut short once it
    // has taken three times as long as one after the other.
    let plain: Vec<u64> = (0..2)
        .map(|_| submit(&cluster, &["-J", "plain"], ITERATIONS, &nowhere))
        .collect();
    let cap = Duration::from_secs_f64(3.0 * rounds[0].one_after_the_other());
    let plain_makespan = match wait_ended(&cluster, &plain, cap) {
        true => format!("{:.1} s", makespan(&cluster, &plain)),
        false => {
            cluster.cancel(&plain);
            assert!(cluster.wait_gone(&plain, LIMIT));
            format!("> {:.1} s (cancelled)", cap.as_secs_f64())
        }
    };
    drop(daemon);
    drop(cluster);

    // Slurm's own gang scheduling, in a cluster configured for it.
    let gang_cluster = Cluster::start(&dir.path().join("gang"), GANG).expect("gang cluster");
    let gang: Vec<u64> = (0..2)
        .map(|_| submit(&gang_cluster, &["-J", "gang"], ITERATIONS, &nowhere))
        .collect();
    assert!(
        wait_ended(&gang_cluster, &gang, LIMIT),
        "the gang jobs did not end"
    );
    let gang_makespan = makespan(&gang_cluster, &gang);

    eprintln!(
        "two 2-thread spinning OpenMP jobs on one oversubscribed 2-CPU node, makespan:\n  \
Slurm, no time slicing  {plain_makespan}\n  \
Slurm gang scheduling (5 s slices)  {gang_makespan:.1} s"
    );
    for round in &rounds {
        let alone: Vec<String> = round
            .alone
            .iter()
            .map(|j| format!("{:.1}", j.end - j.start))
            .collect();
        eprintln!(
            "  one after the other  {:.1} s ({} s), Slurm + cosched  {:.1} s, ratio {:.2}; \
node taken from a measured run: {:.1}% by other processes, {:.1}% by the hypervisor",
            round.one_after_the_other(),
            alone.join(" + "),
            round.with_cosched(),
            round.ratio(),
            100.0 * round.disturbance.others,
            100.0 * round.disturbance.steal,
        );
        if round.disturbance.total() > UNDISTURBED {
            eprintln!("    busiest processes meanwhile: {}", round.disturbers);
        }
    }
    let bound = bound_to_assert(&rounds);
    let median = median_round(&mut rounds);
    let ratio = median.ratio();
    eprintln!("  median ratio {ratio:.2} (target 1.10)");
    let bound = match bound {
        Ok(bound) if bound > 1.1 => {
            eprintln!(
                "  something else took more than {:.0}% of the node during a measured run: 1.1 x is \
not judged, only {bound} x is asserted; measure on an idle machine (docs/slurm.md)",
                100.0 * UNDISTURBED
            );
            bound
        }
        Ok(bound) => bound,
        Err(finding) => {
            eprintln!("  1.1 x is NOT judged: {finding}; only {VARYING} x is asserted");
            VARYING
        }
    };
    assert!(
        ratio <= bound,
        "with cosched the jobs took {:.1} s, {ratio:.2} x one after the other ({:.1} s)",
        median.with_cosched(),
        median.one_after_the_other()
    );
}

/// The round whose ratio is the median.
fn median_round(rounds: &mut [Round]) -> &Round {
    rounds.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    &rounds[rounds.len() / 2]
}

/// The most the median ratio may be: the 1.1 where the rounds were measured undisturbed; 1.5
/// where something else ran; an error, saying why, where an undisturbed baseline varied by itself.
///
/// A spinning job that shares a CPU with anything else loses far more than that CPU time (its threads
/// may even end up on one CPU together), so a job alone is only a baseline where nothing else ran.
/// Where something did (other builds and tests on the machine, or the hypervisor), only the thrashing
/// of plain oversubscription can still be told apart. Undisturbed, the same job alone twice in a row
/// must take the same time: if it does not, the machine itself varies (a VM's host slowing its memory
/// access shows as neither another process nor steal): the ratio is then noise, so the finding is
/// printed and only `VARYING` is asserted. A drift from one round to the next is what the
/// back-to-back rounds and their median absorb.
fn bound_to_assert(rounds: &[Round]) -> Result<f64, String> {
    if rounds.iter().any(|r| r.disturbance.total() > UNDISTURBED) {
        return Ok(VARYING);
    }
    for round in rounds {
        let runs: Vec<f64> = round.alone.iter().map(|j| j.end - j.start).collect();
        let shortest = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let longest = runs.iter().copied().fold(0.0, f64::max);
        if longest > 1.1 * shortest {
            return Err(format!(
                "on an undisturbed node the same job alone took {:.1} and {:.1} s back to back: \
the machine varies by itself more than the 10% bound",
                runs[0], runs[1]
            ));
        }
    }
    Ok(1.1)
}

#[test]
fn the_bound_is_1_1_only_for_undisturbed_rounds_whose_lone_runs_agree() {
    let node = NodeTicks { busy: 0, steal: 0 };
    let job = |start: f64, end: f64| JobRecord {
        start,
        end,
        node_at_start: node,
        node_at_end: node,
        job_ticks: 0,
    };
    let round = |first: f64, second: f64, others: f64| Round {
        alone: vec![job(0.0, first), job(first, first + second)],
        cosched: vec![job(0.0, 11.0), job(0.0, 10.5)],
        disturbance: Disturbance { others, steal: 0.0 },
        disturbers: String::new(),
    };
    let steady = || {
        vec![
            round(5.0, 5.2, 0.01),
            round(5.1, 5.0, 0.0),
            round(5.0, 5.0, 0.02),
        ]
    };
    assert_eq!(bound_to_assert(&steady()), Ok(1.1));
    let mut rounds = steady();
    assert!((median_round(&mut rounds).ratio() - 11.0 / 10.1).abs() < 1e-9);

    let mut disturbed = steady();
    disturbed[1] = round(5.0, 9.0, 0.3);
    assert_eq!(bound_to_assert(&disturbed), Ok(VARYING));

    let mut varies = steady();
    varies[2] = round(5.0, 6.0, 0.0);
    let finding = bound_to_assert(&varies).unwrap_err();
    assert!(finding.contains("5.0 and 6.0 s"), "{finding}");
}

/// Every process in Slurm job `job`'s cgroups (the tasks, and in cgroup v1 their slurmstepd).
fn processes_of(job: u64) -> Vec<i32> {
    cosched_linux::procfs::all_processes()
        .into_iter()
        .filter(|p| SlurmStep::of_process(p.pid).is_some_and(|s| s.job == job))
        .map(|p| p.pid)
        .collect()
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `(thread id, state letter, Cpus_allowed_list)` of every thread of `pid`.
fn threads(pid: i32) -> Vec<(i32, char, String)> {
    cosched_linux::procfs::threads(pid)
        .into_iter()
        .filter_map(|tid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            let state = field("State:")?.chars().next()?;
            Some((tid, state, field("Cpus_allowed_list:")?))
        })
        .collect()
}

/// Stopped threads (T) among the processes of `jobs`.
fn stopped(jobs: &[u64]) -> Vec<(u64, i32, String)> {
    jobs.iter()
        .flat_map(|&job| {
            processes_of(job).into_iter().flat_map(move |pid| {
                threads(pid)
                    .into_iter()
                    .filter(|t| t.1 == 'T')
                    .map(move |_| (job, pid, comm(pid)))
            })
        })
        .collect()
}

/// The cosched job attached for Slurm job `job`'s batch step (label `slurm=J.batch`).
fn attached(jobs: &[serde_json::Value], job: u64) -> Option<&serde_json::Value> {
    let step = format!("{job}.batch");
    jobs.iter().find(|j| j["labels"]["slurm"] == step.as_str())
}

/// Waits until the daemon runs a job for each of the Slurm jobs `ids`.
fn wait_attached(daemon: &Daemon, ids: &[u64]) {
    let mut jobs = Vec::new();
    let all =
        Wait::default()
            .every(Duration::from_millis(200))
            .until(Duration::from_secs(120), || {
                jobs = daemon.jobs();
                ids.iter().all(|&id| {
                    attached(&jobs, id).is_some_and(|j| {
                        matches!(j["state"].as_str(), Some("running" | "suspended"))
                    })
                })
            });
    assert!(all, "Slurm jobs {ids:?} were not all attached: {jobs:#?}");
}

/// Cgroup directories, in any mounted hierarchy, whose name `wanted` accepts (not searched below).
fn cgroup_dirs(wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            match wanted(&entry.file_name().to_string_lossy()) {
                true => found.push(entry.path()),
                false => stack.push(entry.path()),
            }
        }
    }
    found
}

/// Long enough to be cancelled while it runs.
const LONG: u64 = 10_000_000;

#[test]
fn a_cancelled_job_leaves_cosched_and_the_other_gets_the_whole_node() {
    let Some((_serial, dir, cluster)) = start("") else {
        return;
    };
    let daemon = Daemon::start(dir.path());
    let a = submit(&cluster, &["-J", "a"], LONG, &daemon.socket);
    let b = submit(&cluster, &["-J", "b"], LONG, &daemon.socket);
    wait_attached(&daemon, &[a, b]);

    cluster.cancel(&[a]);
    assert!(
        cluster.wait_gone(&[a], Duration::from_secs(60)),
        "scancel did not end job {a}"
    );
    assert_eq!(cluster.completion(a).as_deref(), Some("CANCELLED"));
    let mut view = serde_json::Value::Null;
    let left =
        Wait::default()
            .every(Duration::from_millis(100))
            .until(Duration::from_secs(30), || {
                let jobs = daemon.jobs();
                view = attached(&jobs, a).expect("job a is still listed").clone();
                view["state"] != "running"
            });
    assert!(left, "cosched still runs the cancelled job: {view:#}");
    assert!(processes_of(a).is_empty(), "job {a} left processes");

    // Job b's program now runs on both CPUs and is never stopped again.
    let program = || {
        processes_of(b)
            .into_iter()
            .find(|&pid| comm(pid) == "stencil")
            .expect("job b's program runs")
    };
    let whole = |pid: i32| {
        let threads = threads(pid);
        !threads.is_empty() && threads.iter().all(|t| t.2 == "0-1" && t.1 != 'T')
    };
    let every = Wait::default().every(Duration::from_millis(100));
    assert!(
        every.until(Duration::from_secs(20), || whole(program())),
        "job b did not get the whole node: {:?}",
        threads(program())
    );
    // That it is never stopped again can only be watched for a while.
    assert!(
        every.stays_false_for(Duration::from_secs(1), || !whole(program())),
        "job b lost the node again: {:?}",
        threads(program())
    );
    let jobs = daemon.jobs();
    assert_eq!(attached(&jobs, b).unwrap()["cpu_list"], "0-1");
}

#[test]
fn restarting_slurmd_or_the_daemon_leaves_no_task_stopped_and_no_stray_cgroup() {
    let Some((_serial, dir, mut cluster)) = start("") else {
        return;
    };
    let mut daemon = Daemon::start(dir.path());
    let first_daemon = daemon.child.id();
    let ids: Vec<u64> = ["a", "b"]
        .iter()
        .map(|name| submit(&cluster, &["-J", name], ITERATIONS / 2, &daemon.socket))
        .collect();
    wait_attached(&daemon, &ids);

    cluster.restart_slurmd();
    assert_eq!(cluster.queued().len(), 2, "restarting slurmd ended a job");

    // A daemon killed while it has one of the jobs stopped (two 2-thread jobs on 2 CPUs take
    // turns): its watchdog resumes it.
    assert!(
        Wait::default()
            .every(Duration::from_millis(5))
            .until(Duration::from_secs(30), || !stopped(&ids).is_empty()),
        "cosched never stopped either job"
    );
    daemon.kill();
    assert!(
        wait::until(Duration::from_secs(5), || stopped(&ids).is_empty()),
        "tasks stay stopped without a daemon: {:?}",
        stopped(&ids)
    );
    // No daemon runs to stop them again: that none is can only be watched for a while.
    assert!(
        wait::stays_false_for(Duration::from_millis(500), || !stopped(&ids).is_empty()),
        "a task was stopped with no daemon running: {:?}",
        stopped(&ids)
    );

    let daemon = Daemon::start(dir.path());
    wait_attached(&daemon, &ids);
    assert!(
        cluster.wait_gone(&ids, Duration::from_secs(600)),
        "the jobs did not end"
    );
    for &id in &ids {
        assert_eq!(
            cluster.completion(id).as_deref(),
            Some("COMPLETED"),
            "job {id}"
        );
    }
    let (mut left, mut ours) = (Vec::new(), Vec::new());
    let swept =
        Wait::default()
            .every(Duration::from_millis(200))
            .until(Duration::from_secs(20), || {
                // Slurm's job cgroups, and cosched's own (`cosched-<daemon pid>-…`, none for in-place jobs).
                left = cgroup_dirs(|name| ids.iter().any(|id| name == format!("job_{id}")));
                let daemons = [first_daemon, daemon.child.id()];
                ours = cgroup_dirs(|name| {
                    daemons
                        .iter()
                        .any(|p| name.starts_with(&format!("cosched-{p}-")))
                });
                left.is_empty() && ours.is_empty()
            });
    assert!(swept, "stray cgroups: {left:?} {ours:?}");
    // The daemon notices an attached task's end by its pidfd, within its loop's next turn: Slurm may
    // report the job complete a moment before that.
    let mut still_running = Vec::new();
    let shown_ended =
        Wait::default()
            .every(Duration::from_millis(100))
            .until(Duration::from_secs(10), || {
                let jobs = daemon.jobs();
                still_running = ids
                    .iter()
                    .map(|&id| attached(&jobs, id).expect("listed").clone())
                    .filter(|view| matches!(view["state"].as_str(), Some("running" | "suspended")))
                    .collect();
                still_running.is_empty()
            });
    assert!(
        shown_ended,
        "ended tasks still shown running: {still_running:#?}"
    );
}

/// The cosched job attached for step `step` of Slurm job `job`.
fn step_job(jobs: &[serde_json::Value], job: u64, step: &str) -> Vec<serde_json::Value> {
    let step = format!("{job}.{step}");
    jobs.iter()
        .filter(|j| j["labels"]["slurm"] == step.as_str())
        .cloned()
        .collect()
}

/// Every pid a cosched job holds: its main process and the tasks that joined it.
fn job_pids(view: &serde_json::Value) -> Vec<i32> {
    let mut pids: Vec<i32> = std::iter::once(&view["pid"])
        .chain(view["tasks"].as_array().into_iter().flatten())
        .filter_map(|p| p.as_i64())
        .map(|p| p as i32)
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether any thread of `pid` is stopped.
fn is_stopped(pid: i32) -> bool {
    threads(pid).iter().any(|t| t.1 == 'T')
}

#[test]
fn the_tasks_of_a_two_task_step_run_as_one_job_stopped_and_cancelled_together() {
    let Some((_serial, dir, cluster)) = start("") else {
        return;
    };
    let mut daemon = Daemon::start(dir.path());
    // A 2-thread job beside the step, so that the node is shared and cosched takes turns.
    let other = submit(&cluster, &["-J", "other"], LONG, &daemon.socket);
    let env = prolog_env(&daemon.socket);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let stencil = cosched_native::benchmark("stencil");
    let step = cluster.sbatch(
        &["-J", "step", "-n", "2", "-c", "1"],
        &env,
        &format!(
            "unset OMP_PLACES OMP_PROC_BIND GOMP_CPU_AFFINITY; OMP_NUM_THREADS=1 \
OMP_WAIT_POLICY=active srun -n 2 -c 1 {} --size 200 --iterations {LONG}",
            stencil.display()
        ),
    );
    wait_attached(&daemon, &[other]);
    let tasks = || -> Vec<i32> {
        let mut pids: Vec<i32> = processes_of(step)
            .into_iter()
            .filter(|&pid| comm(pid) == "stencil")
            .collect();
        pids.sort_unstable();
        pids
    };
    // Both tasks attached (each by its own TaskProlog), as one job.
    let (mut jobs, mut pids) = (Vec::new(), Vec::new());
    let one_job =
        Wait::default()
            .every(Duration::from_millis(200))
            .until(Duration::from_secs(120), || {
                jobs = step_job(&daemon.jobs(), step, "0");
                pids = tasks();
                assert!(
                    jobs.len() <= 1,
                    "step {step}.0 became {} cosched jobs: {jobs:#?}",
                    jobs.len()
                );
                jobs.first().is_some_and(|view| {
                    pids.len() == 2
                        && job_pids(view) == pids
                        && matches!(view["state"].as_str(), Some("running" | "suspended"))
                })
            });
    assert!(
        one_job,
        "step {step}.0's two tasks {pids:?} did not become one running job: {jobs:#?}"
    );
    let view = jobs.remove(0);
    let pids = job_pids(&view);

    // The two tasks are stopped and resumed together: the job is one gang.
    let (mut together, mut apart) = (0, 0);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(8) {
        match (is_stopped(pids[0]), is_stopped(pids[1])) {
            (true, true) => together += 1,
            (true, false) | (false, true) => apart += 1,
            (false, false) => {}
        }
        // Counting samples for a stated time: no condition ends the watch.
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        together > 0,
        "the step's tasks were never stopped while sharing the node with job {other}"
    );
    assert!(
        apart * 10 <= together,
        "one task ran while the other was stopped: {apart} samples apart, {together} together"
    );

    // A daemon that restarts takes both tasks back as the one job, from its journal.
    daemon.kill();
    let daemon = Daemon::start(dir.path());
    let mut jobs = Vec::new();
    let adopted =
        Wait::default()
            .every(Duration::from_millis(200))
            .until(Duration::from_secs(30), || {
                jobs = step_job(&daemon.jobs(), step, "0");
                jobs.len() == 1
                    && matches!(jobs[0]["state"].as_str(), Some("running" | "suspended"))
                    && job_pids(&jobs[0]) == pids
            });
    assert!(
        adopted,
        "the restarted daemon did not adopt both tasks {pids:?} as one job: {jobs:#?}"
    );

    // Cancelling the job in cosched ends both tasks.
    let id = view["id"].as_u64().unwrap().to_string();
    daemon.client(&["cancel", &id]);
    let ended =
        Wait::default()
            .every(Duration::from_millis(100))
            .until(Duration::from_secs(30), || {
                !pids
                    .iter()
                    .any(|&pid| cosched_linux::procfs::stat(pid).is_ok_and(|s| s.state != 'Z'))
            });
    assert!(ended, "a task of the cancelled job still runs: {pids:?}");
    let jobs = daemon.jobs();
    assert_eq!(step_job(&jobs, step, "0")[0]["state"], "cancelled");
}

#[test]
fn a_job_record_reads_the_marks_the_job_script_prints() {
    let output = "start 100.5 cpu 1000 0 200 5000 0 0 0 30 0 0\n\
stencil size=200 iterations=10 seconds=0.1\n\
end 104.5 cpu 1900 0 220 5000 0 0 10 50 0 0 \
77 (slurm_script) S 76 77 77 0 -1 4194560 500 900 0 0 1 2 780 30 20 0 1 0 123 0 0\n";
    let record = JobRecord::parse(output).expect("parsed");
    assert_eq!((record.start, record.end), (100.5, 104.5));
    assert_eq!(record.node_at_start.busy, 1200);
    assert_eq!(record.node_at_end.busy, 2130);
    assert_eq!(record.node_at_end.steal, 50);
    assert_eq!(record.job_ticks, 810);
    assert!(JobRecord::parse("start 100.5 cpu 1 2 3\n").is_none());
    // 930 busy ticks in 4 s of 2 CPUs, 810 of them the job's; 20 ticks stolen.
    let seen = disturbance(&[record], 0.0);
    let tick = cosched_linux::procfs::clock_ticks_per_second();
    assert!((seen.others - 120.0 / tick / 8.0).abs() < 1e-9, "{seen:?}");
    assert!((seen.steal - 20.0 / tick / 8.0).abs() < 1e-9, "{seen:?}");
}
