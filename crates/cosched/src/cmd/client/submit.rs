//! `cosched submit`: hand a command, or a whole workload file, to the daemon.

use super::common::{exit_with_first_failure, unexpected, wait_for, ClientArgs};
use super::job_args::{JobArgs, Labels};
use anyhow::Context as _;
use cosched_core::workload::Workload;
use cosched_service::protocol::{After, ArrayElement, Dependency, Reply, Request, Submission};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Submit a job (a command, a workload or a Slurm batch script) to the daemon and print its id
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The job runs as you, in the current directory, with your environment, \
without a shell (write `sh -c '…'` yourself if you want one).\n\n\
A batch script (a file starting with #!, given without `--`) runs as sbatch runs it: its #SBATCH \
lines before its first command are read as these flags (#COSCHED lines as cosched's own), the \
command line's flags win over them, an option cosched cannot honour is refused by name, and \
`Submitted batch job ID` is printed (only the id with --parsable).\n\n\
Examples:\n  cosched submit job.sh   # #SBATCH lines read, as sbatch job.sh\n  \
cosched submit --parsable -J post -d afterok:12 post.sh\n  \
cosched submit -- ./solver --size 4096\n  \
cosched submit --name lu --threads 2:16 --kind moldable -- ./lu\n  \
cosched submit --wait -- make -j8\n  cosched submit -t 1:30:00 -- ./simulate\n  \
cosched submit -o out-%j.txt -e err-%j.txt -- ./solver\n  \
cosched submit --array 1-100:2 -o run-%A_%a.out -- ./sweep\n  \
cosched submit --array 0-999%8 -- ./sweep   # at most 8 at once\n  \
cosched submit --nice 100 -- ./background   # after your other pending jobs\n  \
cosched submit -d afterok:12:13 -- ./postprocess\n  \
cosched submit --each-line inputs.txt -- sh -c './solve \"$COSCHED_ENTRY\"'\n  \
cosched submit --mem 4G -- ./solver\n  \
cosched submit examples/default.toml"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    job: JobArgs,
    /// Time limit (as sbatch): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS; at it the job
    /// gets SIGTERM, then SIGKILL after the daemon's grace (30 s unless configured), and is
    /// `timeout`
    #[arg(short = 't', long, value_name = "TIME")]
    time: Option<String>,
    /// Standard output to FILE instead of the daemon's log (as sbatch): relative to the job's
    /// directory (-D, else the current one), opened as you; %j job id, %x name, %u user, %A array id, %a array index, %% a %
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<String>,
    /// Standard error to FILE, with -o's symbols [default: -o's file when -o is given]
    #[arg(short = 'e', long, value_name = "FILE")]
    error: Option<String>,
    /// A job array (as sbatch): one job per index of FIRST-LAST[:STEP], comma-separated, each
    /// with COSCHED_ARRAY_TASK_ID set; the array's id is its first job's. A final %MAX runs at
    /// most MAX of them at once
    #[arg(
        short = 'a',
        long,
        value_name = "INDEXES",
        conflicts_with = "each_line"
    )]
    array: Option<String>,
    /// One job per line of FILE (as HyperQueue), with COSCHED_ENTRY set to the line and
    /// COSCHED_ARRAY_TASK_ID to its number from 0
    #[arg(long, value_name = "FILE")]
    each_line: Option<PathBuf>,
    /// Start only after other jobs (as sbatch): after:ID[+MINUTES][:ID…] (started, MINUTES
    /// ago), afterok:ID (ended
    /// done), afterany:ID (ended however), afternotok:ID (ended failed, cancelled or timed out),
    /// aftercorr:ARRAY (each element after the same index of ARRAY ended done), singleton (after
    /// your earlier jobs of the same name); joined by `,` (all) or `?` (any). One that can no
    /// longer be met leaves the job pending, reason dependency_never_satisfied (the daemon's
    /// jobs.kill_invalid_depend cancels it instead)
    #[arg(short = 'd', long, value_name = "DEPENDENCY,...")]
    dependency: Option<String>,
    /// CPUs per task (as sbatch): the job runs N threads, as --threads N (which wins if given)
    #[arg(short = 'c', long, value_name = "N")]
    cpus_per_task: Option<u32>,
    /// Run the job in DIR (as sbatch), relative to the current directory; -o and -e are then
    /// relative to DIR [default: the current directory]
    #[arg(short = 'D', long, value_name = "DIR")]
    chdir: Option<PathBuf>,
    /// Start no earlier than TIME (as sbatch): now+COUNT[seconds|minutes|hours|days|weeks],
    /// HH:MM[:SS] (its next coming), YYYY-MM-DD[THH:MM[:SS]], midnight, noon, teatime, today,
    /// tomorrow; pending, reason begin_time, until then. E.g. --begin now+1hour
    #[arg(short = 'b', long, value_name = "TIME")]
    begin: Option<String>,
    /// Submit the job held (as sbatch): pending, reason job_held_user, until `cosched release ID`
    #[arg(short = 'H', long)]
    hold: bool,
    /// The job's environment (as sbatch): ALL (yours, the default), NONE (none but cosched's
    /// own variables and SLURM_*), or NAME[=VALUE],… (only those, each with the value given or
    /// yours; ALL,NAME=VALUE adds to yours). E.g. --export=NONE, --export=PATH,OMP_PLACES=cores
    #[arg(long, value_name = "ALL|NONE|VARIABLE,...")]
    export: Option<String>,
    /// Share the node with no other job (as sbatch): it starts once no job runs (none starts
    /// while it waits for that), and none starts beside it until it ends
    #[arg(long)]
    exclusive: bool,
    /// Print only the job's id, or the array's (as sbatch --parsable)
    #[arg(long)]
    parsable: bool,
    /// Nodes (as sbatch): cosched runs on one node, so only 1 is accepted
    #[arg(short = 'N', long, value_name = "N")]
    nodes: Option<String>,
    /// Tasks (as sbatch): cosched starts one process per job, so only 1 is accepted
    #[arg(short = 'n', long, value_name = "N")]
    ntasks: Option<String>,
    /// Tasks per node (as sbatch): only 1 is accepted
    #[arg(long, value_name = "N")]
    ntasks_per_node: Option<String>,
    /// Slurm's partition: kept as the job's label partition=NAME; it changes nothing here
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// Slurm's account: kept as the job's label account=NAME; it changes nothing here
    #[arg(short = 'A', long, value_name = "NAME")]
    account: Option<String>,
    /// Slurm's quality of service: kept as the job's label qos=NAME; it changes nothing here
    #[arg(short = 'q', long, value_name = "NAME")]
    qos: Option<String>,
    /// Slurm's comment: kept as the job's label comment=TEXT
    #[arg(long, value_name = "TEXT")]
    comment: Option<String>,
    /// Accepted for sbatch's sake with a note: cosched sends no mail (`cosched wait ID` waits)
    #[arg(long, value_name = "ADDRESS")]
    mail_user: Option<String>,
    /// Accepted for sbatch's sake with a note: cosched sends no mail
    #[arg(long, value_name = "TYPE")]
    mail_type: Option<String>,
    /// Lower the job's priority among your pending jobs by N (as sbatch) [default: 100 when
    /// given without N]; below 0 (root only) raises it
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "100",
          allow_negative_numbers = true, value_parser = nice_value)]
    nice: Option<i32>,
    /// The job's priority among its user's pending jobs, highest first (as sbatch; root only)
    /// [default: 0]
    #[arg(long, value_name = "N")]
    priority: Option<u32>,
    /// Memory the job may hold (as sbatch): SIZE with K, M, G or T (megabytes without a unit),
    /// 0 for all of the node's memory for jobs;
    /// beyond it the kernel kills its processes and it ends `oom`. It starts only once it fits
    /// beside the running jobs' requests. Needs a daemon run as root (memory cgroups)
    /// [default: a workload job's `mem`, else no limit]
    #[arg(long, value_name = "SIZE", value_parser = job_memory)]
    mem: Option<u64>,
    /// Wait for the job(s) to end and exit with the status of the first that failed; their ids
    /// are printed on standard error first
    #[arg(short = 'W', long)]
    wait: bool,
    /// The command and its arguments after `--`, one workload file (.toml), or a batch script
    /// (starting with #!) and its arguments
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    command: Vec<String>,
}

/// A batch script given to `submit`: its path, made absolute, and its text.
struct Script {
    path: PathBuf,
    text: String,
}

/// The batch script `args` submit, if they do: a file that starts with `#!`, given without `--`
/// (`--` runs a program as it is, directives unread).
fn batch_script(args: &Args, raw: &[std::ffi::OsString]) -> anyhow::Result<Option<Script>> {
    let Some(first) = args.command.first() else {
        return Ok(None);
    };
    if raw.iter().any(|a| a == "--") || first.ends_with(".toml") {
        return Ok(None);
    }
    let path = PathBuf::from(first);
    // Two bytes first: a program named without `--` may be a large binary.
    let mut start = [0u8; 2];
    let opened = std::fs::File::open(&path).and_then(|mut f| {
        use std::io::Read as _;
        f.read_exact(&mut start)
    });
    if opened.is_err() || &start != b"#!" {
        return Ok(None);
    }
    let bytes = std::fs::read(&path).with_context(|| format!("{first}: cannot read"))?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("{first}: a batch script must be UTF-8 text"))?;
    let path = std::path::absolute(&path).with_context(|| format!("{first}: cannot resolve"))?;
    Ok(Some(Script { path, text }))
}

/// `args` with `script`'s directives before the command line's arguments `raw` (which win).
fn with_directives(script: &Script, raw: &[std::ffi::OsString]) -> anyhow::Result<Args> {
    use clap::{Args as _, FromArgMatches as _};
    let shown = script.path.display();
    let directives = super::sbatch::directives(&script.text).with_context(|| shown.to_string())?;
    let arguments = super::sbatch::translate(&directives).with_context(|| shown.to_string())?;
    let argv = std::iter::once("submit".into())
        .chain(arguments.into_iter().map(Into::into))
        .chain(raw.iter().cloned());
    let command = Args::augment_args(clap::Command::new("submit")).args_override_self(true);
    let matches = command.try_get_matches_from(argv).map_err(|e| {
        let message = e.to_string();
        let message = message.trim_start_matches("error: ").trim_end().to_string();
        anyhow::anyhow!(
            "{shown} (its #SBATCH and #COSCHED lines, then the command line): {message}"
        )
    })?;
    Ok(Args::from_arg_matches(&matches)?)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // What followed `submit`, to read again after a script's directives.
    let raw: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .skip_while(|a| a != "submit")
        .skip(1)
        .collect();
    let script = batch_script(&args, &raw)?;
    let args = match &script {
        Some(script) => with_directives(script, &raw)?,
        None => args,
    };
    let submissions = submissions(&args, script.as_ref())?;
    let ids = send(&args.client, submissions)?;
    if !args.wait {
        if args.client.print_json(&serde_json::json!({ "ids": ids })) {
            return Ok(());
        }
        // An array is named by its first element's id, as sbatch names it.
        match (args.parsable, &script, ids.first()) {
            (true, _, Some(first)) => println!("{first}"),
            (false, Some(_), Some(first)) => println!("Submitted batch job {first}"),
            _ => ids.iter().for_each(|id| println!("{id}")),
        }
        return Ok(());
    }
    // First, so that a user who interrupts the wait still knows which jobs are theirs.
    let listed: Vec<String> = ids.iter().map(u64::to_string).collect();
    eprintln!("submitted {}", listed.join(" "));
    let jobs = wait_for(&args.client, ids)?;
    if args.client.json {
        super::job_table::print_json(&jobs, None)?;
    }
    exit_with_first_failure(&jobs)
}

/// Every job `args` submit: one job, a workload's jobs, or the elements of an array.
fn submissions(args: &Args, script: Option<&Script>) -> anyhow::Result<Vec<Submission>> {
    let (labels, notes) = super::sbatch::labels_and_notes(&[
        ("nodes", args.nodes.as_deref()),
        ("ntasks", args.ntasks.as_deref()),
        ("ntasks-per-node", args.ntasks_per_node.as_deref()),
        ("partition", args.partition.as_deref()),
        ("account", args.account.as_deref()),
        ("qos", args.qos.as_deref()),
        ("comment", args.comment.as_deref()),
        ("mail-user", args.mail_user.as_deref()),
        ("mail-type", args.mail_type.as_deref()),
    ])?;
    notes.iter().for_each(|note| eprintln!("note: {note}"));
    let cwd = job_dir(args.chdir.as_deref())?;
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(spec) = &args.export {
        env = super::sbatch::export(spec, &env)?;
    }
    let time_limit = match &args.time {
        Some(text) => super::slurm_time::parse_time_limit(text)?,
        None => None,
    };
    let begin = match &args.begin {
        Some(text) => Some(super::slurm_time::parse_begin(
            text,
            cosched_service::protocol::now_unix(),
            &jiff::tz::TimeZone::system(),
        )?),
        None => None,
    };
    let mut job_labels = args.job.labels()?;
    job_labels.extend(labels);
    let threads = match (args.job.threads()?, args.cpus_per_task) {
        ((None, None), Some(cpus)) => {
            anyhow::ensure!(cpus > 0, "--cpus-per-task 0: give 1 or more");
            (Some(cpus), Some(cpus))
        }
        (threads, _) => threads,
    };
    let mut submissions = match (args.command.as_slice(), script) {
        ([file], None) if file.ends_with(".toml") => from_workload(file, &cwd, &env, &job_labels)?,
        (_, script) => vec![command_job(args, script, cwd, env, threads, job_labels)?],
    };
    let dependency = match &args.dependency {
        Some(text) => dependencies(text)?,
        None => Dependencies::default(),
    };
    for submission in &mut submissions {
        submission.dependency = dependency.jobs.clone();
        submission.dependency_any = dependency.any;
        submission.singleton = dependency.singleton;
        submission.begin = begin;
        submission.hold = args.hold;
        submission.exclusive = args.exclusive;
        submission.time_limit = time_limit;
        submission.output = args.output.clone();
        submission.error = args.error.clone();
        submission.nice = args.nice.unwrap_or(0);
        submission.priority = args.priority;
        submission.mem = args.mem.or(submission.mem);
        submission.umask = Some(own_umask());
    }
    array_elements(args, submissions)
}

/// The directory the job runs in: `--chdir` from the current one, else the current one.
fn job_dir(chdir: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let Some(dir) = chdir else {
        return Ok(here);
    };
    let dir = here.join(dir);
    anyhow::ensure!(
        dir.is_dir(),
        "--chdir {}: no such directory; create it first or name another",
        dir.display()
    );
    Ok(dir)
}

/// The one job a command line (or a batch script, run by its interpreter) makes.
fn command_job(
    args: &Args,
    script: Option<&Script>,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    (min_threads, max_threads): (Option<u32>, Option<u32>),
    labels: Labels,
) -> anyhow::Result<Submission> {
    let command = &args.command;
    let (program, command) = match script {
        // Run by its interpreter: sbatch needs no execute permission on it either.
        Some(script) => {
            let mut argv = super::sbatch::interpreter(&script.text)
                .with_context(|| script.path.display().to_string())?;
            argv.push(script.path.display().to_string());
            argv.extend(command[1..].iter().cloned());
            (script.path.clone(), argv)
        }
        None => (PathBuf::from(&command[0]), command.to_vec()),
    };
    Ok(Submission {
        name: args.job.name.clone().unwrap_or_else(|| {
            program
                .file_name()
                .map_or(command[0].clone(), |n| n.to_string_lossy().into_owned())
        }),
        command,
        cwd,
        env,
        min_threads,
        max_threads,
        kind: args.job.kind()?,
        weight: args.job.weight,
        coschedule: !args.job.no_coschedule,
        hints: args.job.hints()?,
        labels,
        ..Submission::of("")
    })
}

/// `submissions` as they are, or with `--array` or `--each-line` the one job made an element
/// per index or line.
fn array_elements(args: &Args, submissions: Vec<Submission>) -> anyhow::Result<Vec<Submission>> {
    let (indexes, limit) = match &args.array {
        Some(spec) => array_spec(spec)?,
        None => (Vec::new(), None),
    };
    let elements: Vec<(u64, Option<String>)> = match (&args.array, &args.each_line) {
        (Some(_), _) => indexes.into_iter().map(|i| (i, None)).collect(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("--each-line {}", file.display()))?
            .lines()
            // A blank line (a trailing one, say) is no task.
            .filter(|line| !line.trim().is_empty())
            .enumerate()
            .map(|(i, line)| (i as u64, Some(line.to_string())))
            .collect(),
        (None, None) => Vec::new(),
    };
    if elements.is_empty() {
        return Ok(submissions);
    }
    let [single] = <[Submission; 1]>::try_from(submissions)
        .map_err(|_| anyhow::anyhow!("--array and --each-line take a command, not a workload"))?;
    Ok(elements
        .into_iter()
        .map(|(index, entry)| array_element(&single, index, entry, limit))
        .collect())
}

/// Submits each of `submissions` in turn; their ids, in that order.
fn send(client: &ClientArgs, submissions: Vec<Submission>) -> anyhow::Result<Vec<u64>> {
    let mut ids: Vec<u64> = Vec::new();
    for mut submission in submissions {
        // The array is named by its first job's id, known once that one is in.
        if let (Some(element), Some(&first)) = (submission.array.as_mut(), ids.first()) {
            element.of = Some(first);
        }
        match client.request(Request::Submit(submission))? {
            Reply::Submitted { id } => ids.push(id),
            other => return Err(unexpected(other)),
        }
    }
    Ok(ids)
}

/// What a `--dependency` asks for.
#[derive(Debug, Default, PartialEq)]
struct Dependencies {
    jobs: Vec<Dependency>,
    /// Joined by `?`: any one is enough.
    any: bool,
    singleton: bool,
}

/// sbatch's `--dependency`: `TYPE:ID[:ID…]` (TYPE after, afterok, afterany, afternotok or
/// aftercorr) or `singleton`, joined by `,` (all) or `?` (any), not both.
fn dependencies(text: &str) -> anyhow::Result<Dependencies> {
    let hint = "write after:ID[+MINUTES], afterok:ID[:ID…], afterany:ID, afternotok:ID, \
                aftercorr:ARRAY or singleton, joined by , (all) or ? (any)";
    anyhow::ensure!(
        !(text.contains(',') && text.contains('?')),
        "--dependency {text}: join with , (all must hold) or ? (any may), not both, as in Slurm"
    );
    let mut all = Dependencies {
        any: text.contains('?'),
        ..Dependencies::default()
    };
    for part in text.split([',', '?']) {
        let mut fields = part.trim().split(':');
        let after = match fields.next().unwrap_or_default() {
            "singleton" => {
                all.singleton = true;
                anyhow::ensure!(
                    fields.next().is_none(),
                    "--dependency {text}: singleton takes no id; {hint}"
                );
                continue;
            }
            "after" => After::Start,
            "afterok" => After::Ok,
            "afterany" => After::Any,
            "afternotok" => After::NotOk,
            "aftercorr" => After::Corr,
            other => {
                anyhow::bail!("--dependency {text}: {other:?} is not a kind cosched knows; {hint}")
            }
        };
        let ids: Vec<&str> = fields.collect();
        anyhow::ensure!(!ids.is_empty(), "--dependency {text}: no job id; {hint}");
        for id in ids {
            let (id, minutes) = match id.split_once('+') {
                Some((id, minutes)) => {
                    anyhow::ensure!(
                        after == After::Start,
                        "--dependency {text}: only after takes +MINUTES, as in Slurm; write \
                         after:{id}+{minutes}, or --begin for a later start"
                    );
                    let minutes = minutes.parse::<u64>().with_context(|| {
                        format!("--dependency {text}: {minutes:?} is not a number of minutes")
                    })?;
                    (id, minutes)
                }
                None => (id, 0),
            };
            let id = id
                .parse::<u64>()
                .with_context(|| format!("--dependency {text}: {id:?} is not a job id; {hint}"))?;
            all.jobs.push(Dependency { after, id, minutes });
        }
    }
    Ok(all)
}

/// The most elements one array may have.
const MAX_ARRAY: usize = 10_000;

/// The indexes of an sbatch `--array`, `FIRST-LAST[:STEP]` or `N`, comma-separated, and the most
/// elements to run at once, its final `%MAX`.
fn array_spec(spec: &str) -> anyhow::Result<(Vec<u64>, Option<u32>)> {
    let hint = "write FIRST-LAST[:STEP] or N, comma-separated, then %MAX if you like \
                (1-100, 0-30:10, 1,5,9, 1-100%4)";
    let (ranges, limit) = match spec.split_once('%') {
        Some((ranges, max)) => {
            let max = max.trim().parse::<u32>().ok().filter(|&m| m > 0);
            let max = max.with_context(|| {
                format!("--array {spec}: %MAX must be a whole number from 1; {hint}")
            })?;
            (ranges, Some(max))
        }
        None => (spec, None),
    };
    Ok((array_indexes(spec, ranges, hint)?, limit))
}

/// The indexes `ranges` names (`FIRST-LAST[:STEP]` or `N`, comma-separated) in `--array spec`.
fn array_indexes(spec: &str, ranges: &str, hint: &str) -> anyhow::Result<Vec<u64>> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .with_context(|| format!("--array {spec}: {s:?} is not a whole number; {hint}"))
    };
    let mut indexes = Vec::new();
    for part in ranges.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((range, step)) => (range, number(step)?),
            None => (part, 1),
        };
        anyhow::ensure!(step > 0, "--array {spec}: a STEP of 0; {hint}");
        let (first, last) = match range.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => (number(range)?, number(range)?),
        };
        anyhow::ensure!(
            first <= last,
            "--array {spec}: {first} is after {last}; {hint}"
        );
        let mut index = first;
        while index <= last {
            indexes.push(index);
            anyhow::ensure!(
                indexes.len() <= MAX_ARRAY,
                "--array {spec}: more than {MAX_ARRAY} elements"
            );
            index += step;
        }
    }
    Ok(indexes)
}

/// Element `index` of an array of `job`: its index (and line) in its environment, and Slurm's
/// own array variables gone, so that a program that reads them does not take Slurm's for cosched's;
/// at most `limit` elements of the array run at once.
fn array_element(
    job: &Submission,
    index: u64,
    entry: Option<String>,
    limit: Option<u32>,
) -> Submission {
    let mut element = job.clone();
    element
        .env
        .retain(|key, _| !key.starts_with("SLURM_ARRAY_"));
    element
        .env
        .insert("COSCHED_ARRAY_TASK_ID".into(), index.to_string());
    if let Some(line) = entry {
        element.env.insert("COSCHED_ENTRY".into(), line);
    }
    element.array = Some(ArrayElement {
        index,
        of: None,
        limit,
    });
    element
}

/// The umask this process runs with, for the job to start with: files it makes get the modes
/// they would get if the user ran it here.
fn own_umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    // Reading it means setting it; it is put back at once, before anything is created.
    let mask = umask(Mode::from_bits_truncate(0o022));
    umask(mask);
    mask.bits()
}

/// A workload's jobs, arrivals ignored (each is submitted now), commands with `{threads}` etc. as
/// the executor expands them.
fn from_workload(
    file: &str,
    cwd: &std::path::Path,
    env: &BTreeMap<String, String>,
    labels: &Labels,
) -> anyhow::Result<Vec<Submission>> {
    let workload = Workload::load(file.as_ref())?;
    let dir = std::path::absolute(workload.dir.join(".")).unwrap_or_else(|_| cwd.to_path_buf());
    Ok(workload
        .jobs
        .iter()
        .map(|job| {
            let mut job_env = env.clone();
            job_env.extend(job.env.clone());
            Submission {
                name: job.name.clone(),
                command: job.command.clone(),
                cwd: dir.clone(),
                env: job_env,
                min_threads: Some(job.min_threads),
                max_threads: job.max_threads,
                kind: job.kind,
                weight: job.weight,
                coschedule: job.coschedule,
                hints: job.hints.clone(),
                labels: labels.clone(),
                mem: job.mem,
                ..Submission::of("")
            }
        })
        .collect())
}

/// A job's `--mem`: a size, or 0 (with or without a unit) for all of the node's memory for jobs,
/// as sbatch's `--mem=0`; the daemon, which knows the node, makes it so.
fn job_memory(text: &str) -> Result<u64, String> {
    let digits = text
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if !digits.is_empty() && digits.bytes().all(|b| b == b'0') {
        return Ok(0);
    }
    cosched_core::memory::parse_size(text).map_err(|e| e.to_string())
}

/// `--nice N`, with an error that says what N may be.
fn nice_value(text: &str) -> Result<i32, String> {
    text.trim().parse::<i32>().map_err(|_| {
        format!(
            "{text:?} is not a whole number: write --nice N, such as --nice 100 to start after \
             your other pending jobs, or (root only) --nice=-10 to start before them"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::JobKind;

    #[test]
    fn dependencies_read_as_sbatch_reads_them() {
        let all = dependencies("afterok:3:4,after:5+10,singleton").unwrap();
        assert_eq!(
            all,
            Dependencies {
                jobs: vec![
                    Dependency {
                        after: After::Ok,
                        id: 3,
                        minutes: 0
                    },
                    Dependency {
                        after: After::Ok,
                        id: 4,
                        minutes: 0
                    },
                    Dependency {
                        after: After::Start,
                        id: 5,
                        minutes: 10
                    },
                ],
                any: false,
                singleton: true,
            }
        );
        let any = dependencies("afternotok:3?aftercorr:7").unwrap();
        assert!(any.any);
        assert_eq!(any.jobs[1].after, After::Corr);
        for (bad, says) in [
            ("afterok:1,afterany:2?afterok:3", "not both"),
            ("afterok:1+5", "only after takes +MINUTES"),
            ("after:1+soon", "not a number of minutes"),
            ("afterburstbuffer:1", "not a kind"),
            ("afterok", "no job id"),
            ("singleton:3", "no id"),
            ("afterok:x", "not a job id"),
        ] {
            let message = dependencies(bad).unwrap_err().to_string();
            assert!(message.contains(says), "{bad}: {message}");
        }
    }

    #[test]
    fn the_command_line_overrides_a_scripts_directives() {
        let script = Script {
            path: "/tmp/job.sh".into(),
            text: "#!/bin/sh\n#SBATCH -J from-script --time=5 -o out-%j.txt\n#SBATCH --hold\n\
                   #COSCHED --kind rigid\nsleep 1\n"
                .into(),
        };
        let raw: Vec<std::ffi::OsString> = ["-J", "from-cli", "--time", "7", "/tmp/job.sh", "x"]
            .map(Into::into)
            .into();
        let args = with_directives(&script, &raw).unwrap();
        assert_eq!(args.job.name.as_deref(), Some("from-cli"));
        assert_eq!(args.time.as_deref(), Some("7"));
        assert_eq!(args.output.as_deref(), Some("out-%j.txt"));
        assert!(args.hold);
        assert_eq!(args.job.kind().unwrap(), JobKind::Rigid);
        assert_eq!(args.command, ["/tmp/job.sh", "x"]);
        let refused = Script {
            text: "#!/bin/sh\n#SBATCH --nodes=4\n".into(),
            ..script
        };
        let message = format!("{:#}", with_directives(&refused, &raw).unwrap_err());
        assert!(message.contains("#SBATCH --nodes=4 (line 2)"), "{message}");
    }
}
