//! One vocabulary across commands: walks clap's whole command tree and holds every subcommand's
//! arguments and `--help` to the same placeholders, list separator, policy names, `--kind` default and
//! `--json`.

use super::Cli;
use clap::CommandFactory;

/// Every command with its path (`cosched bench sim`), depth first.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(path: String, command: &clap::Command, all: &mut Vec<(String, clap::Command)>) {
        all.push((path.clone(), command.clone()));
        for sub in command.get_subcommands() {
            walk(format!("{path} {}", sub.get_name()), sub, all);
        }
    }
    let mut root = Cli::command();
    root.build();
    let mut all = Vec::new();
    walk("cosched".into(), &root, &mut all);
    all
}

fn value_names(arg: &clap::Arg) -> Vec<String> {
    arg.get_value_names()
        .map(|names| names.iter().map(|n| n.to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn placeholders_and_list_separators_are_uniform() {
    let mut lists = 0;
    for (path, command) in commands() {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let names = value_names(arg);
            if let Some(delimiter) = arg.get_value_delimiter() {
                assert_eq!(delimiter, ',', "{path} --{id}: lists are comma-separated");
                lists += 1;
                assert!(
                    names.iter().all(|n| n.ends_with(",...")),
                    "{path} --{id}: a comma-separated list is written NAME,... (is {names:?})"
                );
            }
            for name in &names {
                assert!(
                    !name.contains(['…', '[', ']', ';'])
                        && !name.chars().any(|c| c.is_ascii_digit()),
                    "{path} --{id}: placeholder {name:?}; write NAME, NAME,... or a|b"
                );
                assert!(
                    !name.contains(',') || name.ends_with(",..."),
                    "{path} --{id}: a list placeholder ends in ,... (is {name:?})"
                );
                assert!(
                    name.len() > 1 || name == "N",
                    "{path} --{id}: placeholder {name:?} says nothing; name what it is"
                );
            }
        }
    }
    assert!(lists >= 4, "only {lists} list arguments seen");
}

/// Every argument that names a policy says POLICY, points to `cosched policies` and offers the
/// policy names to completions.
#[test]
fn policy_arguments_share_one_placeholder_and_point_to_the_list() {
    let known = cosched_policies::names();
    let mut seen = 0;
    for (path, command) in commands() {
        for arg in command.get_arguments() {
            if arg.get_id() != "policy" {
                continue;
            }
            seen += 1;
            let names = value_names(arg);
            assert!(
                names == ["POLICY"] || names == ["POLICY,..."],
                "{path} --policy: placeholder {names:?}"
            );
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains("`cosched policies`"),
                "{path} --policy: help {help:?} does not point to `cosched policies`"
            );
            let offered: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            assert_eq!(offered, known, "{path} --policy: completions");
        }
        let long_help = command.clone().render_long_help().to_string();
        assert!(
            !long_help.contains("sim --help"),
            "{path}: policies are listed by `cosched policies`, not `sim --help`"
        );
    }
    // run, compare, sim, daemon, policy, bench sim, bench policy, bench daemon
    assert_eq!(seen, 8);
}

#[test]
fn kind_defaults_to_malleable_everywhere() {
    let mut seen = 0;
    for (path, command) in commands() {
        for arg in command.get_arguments().filter(|a| a.get_id() == "kind") {
            seen += 1;
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            assert_eq!(defaults, ["malleable"], "{path} --kind");
        }
    }
    // submit, attach, gen; workload files default to JobKind::default()
    assert_eq!(seen, 3);
    assert_eq!(
        cosched_core::JobKind::default(),
        cosched_core::JobKind::Malleable
    );
}

/// Commands that print results can print them as JSON; those that write files, shells' scripts or
/// manual pages, or serve, print none.
#[test]
fn every_command_that_prints_results_has_json() {
    let without = ["completions", "man", "gen", "daemon", "bench", "cosched"];
    for (path, command) in commands() {
        // clap's own `help` subcommands print help, not results; hidden ones serve the bench.
        if without.contains(&command.get_name())
            || path.split(' ').any(|w| w == "help")
            || command.is_hide_set()
        {
            continue;
        }
        assert!(
            command.get_arguments().any(|a| a.get_id() == "json"),
            "{path} has no --json"
        );
    }
}

/// `-o` names where output goes in every command (sbatch's `--output`, `compare -o DIR`), never
/// the fields of a listing, and `--state` names job states, never a directory (`--state-dir`).
#[test]
fn short_o_is_always_an_output_path_and_state_always_job_states() {
    let mut outputs = 0;
    for (path, command) in commands() {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let names = value_names(arg);
            if arg.get_short() == Some('o') {
                outputs += 1;
                assert!(
                    names
                        .iter()
                        .all(|n| ["DIR", "FILE", "DIR|FILE"].contains(&n.as_str())),
                    "{path} -o ({id}) takes {names:?}, not an output path"
                );
            }
            if arg.get_long() == Some("state") {
                assert_eq!(names, ["STATE,..."], "{path} --state names job states");
            }
        }
    }
    assert!(outputs >= 8, "only {outputs} commands have -o");
}
