//! `cosched policies`: every policy with its description and settings; and the `--policy` value
//! parser that offers those names to shell completions.

use clap::builder::{PossibleValue, TypedValueParser};
use cosched_policies::{DEFAULT_POLICY, POLICIES};

/// List every scheduling policy with its settings and a one-line description
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Every command that takes --policy (run, compare, sim, daemon, bench) and `cosched \
policy` take these names. TACO's variants and gang also take settings after a colon, KEY=VALUE \
separated by ':' (taco:hysteresis=0:sizes=1/6/24); the policy is then named by the whole string in \
traces and tables. Task-bag policies give every job one core: they suit single-threaded jobs only.\n\n\
Examples:\n  cosched policies\n  cosched policies --json | jq -r '.[].name'"
)]
pub struct Args {
    /// Print the list as JSON: name, description, default, task_bag and settings (key, values,
    /// default, example, about) per policy
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        let list: Vec<serde_json::Value> = POLICIES
            .iter()
            .map(|policy| {
                let settings: Vec<serde_json::Value> = policy
                    .settings()
                    .into_iter()
                    .map(|s| {
                        serde_json::json!({
                            "key": s.key,
                            "values": s.values,
                            "default": s.default,
                            "example": s.example,
                            "about": s.about,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "name": policy.name,
                    "description": policy.about,
                    "default": policy.name == DEFAULT_POLICY,
                    "task_bag": policy.task_bag,
                    "settings": settings,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    let width = cosched_policies::names()
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    for policy in POLICIES {
        let (name, about) = (policy.name, policy.about);
        let default = if name == DEFAULT_POLICY {
            " (the default)"
        } else {
            ""
        };
        println!("{name:width$}  {about}{default}");
        for s in policy.settings() {
            println!(
                "{:width$}    {name}:{}={}  {} [default: {}]",
                "", s.key, s.values, s.about, s.default
            );
        }
    }
    Ok(())
}

/// Accepts any text (settings after ':' included; the policy crate checks names and settings with
/// errors that list the valid ones) and offers the policy names to help and shell completions.
#[derive(Clone)]
pub struct PolicyName;

impl TypedValueParser for PolicyName {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        value
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidUtf8))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            cosched_policies::names()
                .into_iter()
                .map(PossibleValue::new),
        ))
    }
}
