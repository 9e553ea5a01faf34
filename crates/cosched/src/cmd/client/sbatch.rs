//! Slurm batch scripts: the `#SBATCH` directives of a script's leading comment block (and
//! `#COSCHED` ones, for cosched's own flags), read as sbatch reads them, and what each sbatch option
//! becomes in `cosched submit`. An option cosched cannot honour is refused by name and line, never
//! dropped: a job that ran without what its script asked for would be wrong without saying so.

use anyhow::Context as _;

/// One directive line (joined with its continuations), its words split as a shell splits them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// Where it starts, from 1.
    pub line: usize,
    /// `#SBATCH` or `#COSCHED`.
    pub prefix: &'static str,
    pub words: Vec<String>,
}

const PREFIXES: [&str; 2] = ["#SBATCH", "#COSCHED"];

/// The directives of `script`, as sbatch finds them: in the comment block at its top (after the
/// `#!` line), up to the first line that is neither blank nor a comment; later `#SBATCH` lines are
/// comments. A directive line ending in `\` goes on on the next line.
pub fn directives(script: &str) -> anyhow::Result<Vec<Directive>> {
    let mut found = Vec::new();
    let mut lines = script.lines().enumerate().peekable();
    if lines.peek().is_some_and(|(_, l)| l.starts_with("#!")) {
        lines.next();
    }
    while let Some((at, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        if !trimmed.starts_with('#') {
            break;
        }
        let Some((prefix, rest)) = PREFIXES.iter().find_map(|p| {
            let rest = trimmed.strip_prefix(p)?;
            (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some((*p, rest))
        }) else {
            continue;
        };
        let mut text = rest.to_string();
        while text.trim_end().ends_with('\\') {
            let cut = text.trim_end().len() - 1;
            text.truncate(cut);
            let Some((_, next)) = lines.next() else {
                break;
            };
            let next = next.trim_start();
            let next = PREFIXES
                .iter()
                .find_map(|p| next.strip_prefix(p))
                .unwrap_or(next);
            text.push(' ');
            text.push_str(next);
        }
        let words = split_words(&text)
            .with_context(|| format!("{prefix}{text} (line {}): {prefix}", at + 1))?;
        if !words.is_empty() {
            found.push(Directive {
                line: at + 1,
                prefix,
                words,
            });
        }
    }
    Ok(found)
}

/// `text` split into words as a shell splits them: quotes group, a backslash escapes the next
/// character, and a word that starts with `#` begins a comment that runs to the end.
fn split_words(text: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '#' if word.is_none() => break,
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => anyhow::bail!("a ' is not closed; close it or escape it with \\"),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => anyhow::bail!("a \" is not closed; close it or escape it with \\"),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// What `cosched submit` does with an sbatch option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handling {
    /// `cosched submit` has the same option.
    Same,
    /// Only this value (a count of nodes or tasks) can be honoured on one node.
    OnlyOne(&'static str),
    /// Kept as a label of the job, which does not change where or how it runs.
    Label,
    /// Accepted with a note on standard error: what it asks for does not exist here.
    Note(&'static str),
    /// Refused, with why.
    Refused(&'static str),
}

/// sbatch's options: long name, short letter, whether it takes a value, and cosched's handling.
/// Any option not listed is refused as unknown.
const OPTIONS: &[(&str, Option<char>, bool, Handling)] = {
    use Handling::*;
    const ONE_NODE: Handling = OnlyOne("cosched runs on one node");
    const ONE_TASK: Handling = OnlyOne(
        "cosched starts one process per job (a job that runs several tasks starts them itself, \
         with mpirun or threads)",
    );
    const NO_MAIL: Handling = Note("cosched sends no mail; `cosched wait ID` waits for a job");
    const PLACES: Handling =
        Refused("cosched's policy chooses the CPUs of each job on this one node");
    const NO_DEVICES: Handling = Refused("cosched schedules CPUs only, no GPUs or other devices");
    &[
        ("job-name", Some('J'), true, Same),
        ("cpus-per-task", Some('c'), true, Same),
        ("chdir", Some('D'), true, Same),
        ("time", Some('t'), true, Same),
        ("output", Some('o'), true, Same),
        ("error", Some('e'), true, Same),
        ("array", Some('a'), true, Same),
        ("dependency", Some('d'), true, Same),
        ("nice", None, true, Same),
        ("priority", None, true, Same),
        ("mem", None, true, Same),
        ("begin", Some('b'), true, Same),
        ("hold", Some('H'), false, Same),
        ("export", None, true, Same),
        ("exclusive", None, false, Same),
        ("parsable", None, false, Same),
        ("wait", Some('W'), false, Same),
        ("nodes", Some('N'), true, ONE_NODE),
        ("ntasks", Some('n'), true, ONE_TASK),
        ("ntasks-per-node", None, true, ONE_TASK),
        ("partition", Some('p'), true, Label),
        ("account", Some('A'), true, Label),
        ("qos", Some('q'), true, Label),
        ("comment", None, true, Label),
        ("mail-user", None, true, NO_MAIL),
        ("mail-type", None, true, NO_MAIL),
        ("nodelist", Some('w'), true, PLACES),
        ("exclude", Some('x'), true, PLACES),
        ("constraint", Some('C'), true, PLACES),
        ("cores-per-socket", None, true, PLACES),
        ("sockets-per-node", None, true, PLACES),
        ("threads-per-core", None, true, PLACES),
        ("gres", None, true, NO_DEVICES),
        ("gpus", Some('G'), true, NO_DEVICES),
        ("gpus-per-node", None, true, NO_DEVICES),
        ("gpus-per-task", None, true, NO_DEVICES),
        (
            "mem-per-cpu",
            None,
            true,
            Refused("cosched's CPUs per job change as it runs; ask for the job's whole memory with --mem"),
        ),
        (
            "requeue",
            None,
            false,
            Refused("cosched never requeues a job"),
        ),
        (
            "signal",
            None,
            true,
            Refused("cosched sends SIGTERM at the time limit, then SIGKILL after the daemon's grace"),
        ),
        (
            "input",
            Some('i'),
            true,
            Refused("a job's standard input is /dev/null; read the file in the script"),
        ),
        (
            "reservation",
            None,
            true,
            Refused("cosched has no reservations"),
        ),
    ]
};

/// One option of a directive: the name written (`--nodes`, `-N`), its long name, value and line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    written: String,
    long: &'static str,
    value: Option<String>,
    handling: Handling,
    line: usize,
}

/// The `cosched submit` arguments `directives` stand for, to put before the command line's (which
/// then override them); an error naming the directive and its line for one cosched cannot honour.
pub fn translate(directives: &[Directive]) -> anyhow::Result<Vec<String>> {
    let mut arguments = Vec::new();
    for directive in directives {
        if directive.prefix == "#COSCHED" {
            arguments.extend(directive.words.iter().cloned());
            continue;
        }
        for option in sbatch_options(directive)? {
            let shown = match (&option.value, option.written.starts_with("--")) {
                (Some(value), true) => format!("{}={value}", option.written),
                (Some(value), false) => format!("{} {value}", option.written),
                (None, _) => option.written.clone(),
            };
            let shown = format!("#SBATCH {shown} (line {})", option.line);
            check(
                option.long,
                option.handling,
                option.value.as_deref(),
                &shown,
            )?;
            arguments.push(format!("--{}", option.long));
            arguments.extend(option.value);
        }
    }
    Ok(arguments)
}

/// What `cosched submit` does with sbatch option `--long` given `value` (`shown` as the user wrote
/// it, for the message): an error if it cannot be honoured, else the note to print, if any.
fn check(
    long: &str,
    handling: Handling,
    value: Option<&str>,
    shown: &str,
) -> anyhow::Result<Option<String>> {
    match handling {
        Handling::Same | Handling::Label => Ok(None),
        Handling::OnlyOne(why) => {
            // sbatch's MIN-MAX counts: 1-1 is one too.
            let one = value
                .unwrap_or_default()
                .split('-')
                .all(|n| n.trim() == "1");
            anyhow::ensure!(
                one,
                "{why}: {shown} cannot be honoured; remove it or use --{long}=1"
            );
            Ok(None)
        }
        Handling::Note(note) => Ok(Some(format!("{shown}: {note}"))),
        Handling::Refused(why) => anyhow::bail!("{shown} cannot be honoured: {why}; remove it"),
    }
}

/// Labels of a job, KEY and VALUE.
type Labels = Vec<(String, String)>;

/// The labels and notes sbatch's options given to `cosched submit` (by the command line or
/// directives) stand for: `(option, value)` pairs, each of an option [`OPTIONS`] lists.
pub fn labels_and_notes(given: &[(&str, Option<&str>)]) -> anyhow::Result<(Labels, Vec<String>)> {
    let mut labels = Vec::new();
    let mut notes = Vec::new();
    for &(long, value) in given {
        let Some(&(_, _, _, handling)) = OPTIONS.iter().find(|o| o.0 == long) else {
            continue;
        };
        let Some(value) = value else { continue };
        let shown = format!("--{long}={value}");
        notes.extend(check(long, handling, Some(value), &shown)?);
        if handling == Handling::Label {
            labels.push((long.to_string(), value.to_string()));
        }
    }
    Ok((labels, notes))
}

/// The options of one `#SBATCH` line: `--name=value`, `--name value`, `-X value` or `-Xvalue`.
fn sbatch_options(directive: &Directive) -> anyhow::Result<Vec<Written>> {
    let line = directive.line;
    let mut options = Vec::new();
    let mut words = directive.words.iter();
    while let Some(word) = words.next() {
        let (written, long, inline) = if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (long, None),
            };
            (format!("--{name}"), name.to_string(), value)
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let letter = short.chars().next().expect("not empty");
            let rest = &short[letter.len_utf8()..];
            let long = OPTIONS
                .iter()
                .find(|o| o.1 == Some(letter))
                .map_or(format!("-{letter}"), |o| o.0.to_string());
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            (
                format!("-{letter}"),
                long,
                (!rest.is_empty()).then(|| rest.to_string()),
            )
        } else {
            anyhow::bail!(
                "#SBATCH {word} (line {line}): not an option; directives are written \
                 #SBATCH --option=value"
            )
        };
        let Some(&(name, _, takes_value, handling)) = OPTIONS.iter().find(|o| o.0 == long) else {
            anyhow::bail!(
                "#SBATCH {written} (line {line}): an sbatch option cosched does not know, so \
                 cannot honour; remove it (docs/slurm.md lists the options cosched reads)"
            )
        };
        let value = match (takes_value, inline) {
            (true, Some(value)) => Some(value),
            (true, None) => Some(words.next().cloned().with_context(|| {
                format!("#SBATCH {written} (line {line}): give it a value, {written}=VALUE")
            })?),
            // `--exclusive=user` and the like ask for more than the bare flag does.
            (false, Some(value)) => anyhow::bail!(
                "#SBATCH {written}={value} (line {line}) cannot be honoured; cosched knows \
                 {written} alone"
            ),
            (false, None) => None,
        };
        options.push(Written {
            written,
            long: name,
            value,
            handling,
            line,
        });
    }
    Ok(options)
}

/// The environment `--export` gives the job, from the submitter's `env` (as sbatch's `--export`):
/// `ALL` all of it, `NONE` none (Slurm's own `SLURM_*` variables excepted), or a list of
/// `NAME[=VALUE]` (with `ALL` first: added to all of it) of the variables named, each with the
/// value given or the submitter's.
pub fn export(
    spec: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let slurm = || {
        env.iter()
            .filter(|(k, _)| k.starts_with("SLURM_"))
            .map(|(k, v)| (k.clone(), v.clone()))
    };
    let mut items = spec.split(',').map(str::trim).peekable();
    let mut chosen: std::collections::BTreeMap<String, String> = match items.peek() {
        Some(&"ALL") => {
            items.next();
            env.clone()
        }
        Some(&"NONE") => {
            items.next();
            anyhow::ensure!(
                items.peek().is_none(),
                "--export {spec}: NONE stands alone; write NAME[=VALUE],… to pass some variables"
            );
            slurm().collect()
        }
        _ => slurm().collect(),
    };
    for item in items {
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (item, None),
        };
        anyhow::ensure!(
            !name.is_empty() && !name.contains(char::is_whitespace),
            "--export {spec}: {item:?} is not a variable; write ALL, NONE or [ALL,]NAME[=VALUE],…"
        );
        // A variable the submitter does not have is not set, as in Slurm.
        if let Some(value) = value.or_else(|| env.get(name).cloned()) {
            chosen.insert(name.to_string(), value);
        }
    }
    Ok(chosen)
}

/// The interpreter a script names on its `#!` line, with its one argument if any (as Linux reads
/// it); `/bin/sh` for a script without one, as sbatch needs one.
pub fn interpreter(script: &str) -> anyhow::Result<Vec<String>> {
    let first = script.lines().next().unwrap_or_default();
    let line = first.strip_prefix("#!").with_context(|| {
        "a batch script starts with a #! line naming its interpreter (#!/bin/sh, #!/bin/bash)"
    })?;
    let line = line.trim();
    let (program, argument) = match line.split_once(char::is_whitespace) {
        Some((program, argument)) => (program, Some(argument.trim())),
        None => (line, None),
    };
    anyhow::ensure!(
        !program.is_empty(),
        "the #! line names no interpreter; write #!/bin/sh or #!/bin/bash"
    );
    Ok(std::iter::once(program.to_string())
        .chain(argument.filter(|a| !a.is_empty()).map(str::to_string))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn words_of(script: &str) -> Vec<Vec<String>> {
        directives(script)
            .unwrap()
            .into_iter()
            .map(|d| d.words)
            .collect()
    }

    #[test]
    fn directives_come_only_from_the_leading_comment_block() {
        let script = "#!/bin/bash\n\
                      # a comment\n\
                      \n\
                      #SBATCH --job-name=first\n\
                      #SBATCHX --not-ours\n\
                      ##SBATCH --commented-out\n\
                      #COSCHED --kind rigid\n\
                      echo hello\n\
                      #SBATCH --job-name=ignored\n";
        assert_eq!(
            words_of(script),
            vec![vec!["--job-name=first"], vec!["--kind", "rigid"]]
        );
        let lines: Vec<usize> = directives(script).unwrap().iter().map(|d| d.line).collect();
        assert_eq!(lines, [4, 7]);
    }

    #[test]
    fn quotes_escapes_comments_and_continuations_split_as_a_shell_splits() {
        let script = "#!/bin/sh\n\
                      #SBATCH --job-name=\"my job\" -o 'out %j.txt' # where output goes\n\
                      #SBATCH --export=A=1\\ 2,B \\\n\
                      #SBATCH    --time 5\n\
                      true\n";
        assert_eq!(
            words_of(script),
            vec![
                vec!["--job-name=my job", "-o", "out %j.txt"],
                vec!["--export=A=1 2,B", "--time", "5"],
            ]
        );
        let unclosed = directives("#!/bin/sh\n#SBATCH --job-name=\"open\n").unwrap_err();
        assert!(format!("{unclosed:#}").contains("line 2"), "{unclosed:#}");
    }

    fn translated(script: &str) -> anyhow::Result<Vec<String>> {
        translate(&directives(script)?)
    }

    #[test]
    fn sbatch_options_become_submits_arguments() {
        let out = translated(
            "#!/bin/sh\n#SBATCH -J lu -c4 --time=10 -N 1 --ntasks=1\n\
             #SBATCH --partition debug -A proj --hold --mail-user=me@here\n",
        )
        .unwrap();
        assert_eq!(
            out,
            [
                "--job-name",
                "lu",
                "--cpus-per-task",
                "4",
                "--time",
                "10",
                "--nodes",
                "1",
                "--ntasks",
                "1",
                "--partition",
                "debug",
                "--account",
                "proj",
                "--hold",
                "--mail-user",
                "me@here",
            ]
        );
        let (labels, notes) = labels_and_notes(&[
            ("partition", Some("debug")),
            ("mail-user", Some("me@here")),
            ("nodes", Some("1")),
            ("account", None),
        ])
        .unwrap();
        assert_eq!(labels, [("partition".to_string(), "debug".to_string())]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("--mail-user") && notes[0].contains("no mail"));
        let nodes = labels_and_notes(&[("nodes", Some("2"))]).unwrap_err();
        assert!(format!("{nodes}").contains("--nodes=1"), "{nodes}");
    }

    #[test]
    fn options_that_cannot_be_honoured_are_refused_by_name_and_line() {
        let refused = |script: &str| format!("{:#}", translated(script).unwrap_err());
        let nodes = refused("#!/bin/sh\n#SBATCH -J x\n#SBATCH --nodes=4\n");
        assert!(
            nodes.contains("one node") && nodes.contains("#SBATCH --nodes=4 (line 3)"),
            "{nodes}"
        );
        assert!(nodes.contains("--nodes=1"), "{nodes}");
        let tasks = refused("#!/bin/sh\n#SBATCH -n 8\n");
        assert!(tasks.contains("#SBATCH -n 8 (line 2)"), "{tasks}");
        let gpu = refused("#!/bin/sh\n#SBATCH --gres=gpu:1\n");
        assert!(gpu.contains("--gres") && gpu.contains("GPUs"), "{gpu}");
        let unknown = refused("#!/bin/sh\n#SBATCH --frobnicate\n");
        assert!(
            unknown.contains("--frobnicate (line 2)") && unknown.contains("does not know"),
            "{unknown}"
        );
        let bare = refused("#!/bin/sh\n#SBATCH --time\n");
        assert!(bare.contains("give it a value"), "{bare}");
        assert!(translated("#!/bin/sh\n#SBATCH -N 1-1\n").is_ok());
    }

    #[test]
    fn export_passes_all_none_or_the_variables_named() {
        let env: BTreeMap<String, String> = [("HOME", "/h"), ("PATH", "/bin"), ("SLURM_X", "1")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(export("ALL", &env).unwrap(), env);
        let none = export("NONE", &env).unwrap();
        assert_eq!(none.keys().collect::<Vec<_>>(), ["SLURM_X"]);
        let some = export("PATH,NEW=v,MISSING", &env).unwrap();
        assert_eq!(
            some.into_iter().collect::<Vec<_>>(),
            [
                ("NEW".to_string(), "v".to_string()),
                ("PATH".into(), "/bin".into()),
                ("SLURM_X".into(), "1".into())
            ]
        );
        let added = export("ALL,HOME=/other", &env).unwrap();
        assert_eq!(added["HOME"], "/other");
        assert_eq!(added["PATH"], "/bin");
        assert!(export("NONE,PATH", &env).is_err());
    }

    #[test]
    fn the_interpreter_comes_from_the_shebang() {
        assert_eq!(
            interpreter("#!/bin/bash -l\necho").unwrap(),
            ["/bin/bash", "-l"]
        );
        assert_eq!(interpreter("#! /bin/sh\n").unwrap(), ["/bin/sh"]);
        assert!(interpreter("echo\n").is_err());
    }
}
