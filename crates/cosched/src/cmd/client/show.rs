//! `cosched show`: everything the daemon knows of jobs.

use super::common::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};
use serde_json::Value;

/// Show jobs of the daemon, everything it knows of each
#[derive(clap::Args, Debug)]
#[command(
    after_help = "An array's id shows every element of it, ARRAY_INDEX one; jobs are \
shown one after another; --json prints {\"jobs\": [...]} as `cosched jobs --json` does.\n\n\
Examples:\n  cosched show 12\n  cosched show 12 --json\n  \
cosched show 20      # every element of array 20\n  cosched show 20_3"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    /// Job ids; an array's id shows every element, ARRAY_INDEX one
    #[arg(required = true)]
    ids: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ids = super::job_ids::resolve(&args.client, &args.ids, true)?;
    let mut jobs = Vec::with_capacity(ids.len());
    for id in ids {
        match args.client.request(Request::Show { id })? {
            Reply::Job { job } => jobs.push(*job),
            other => return Err(unexpected(other)),
        }
    }
    if args.client.json {
        return super::job_table::print_json(&jobs, None);
    }
    for (n, job) in jobs.into_iter().enumerate() {
        if n > 0 {
            println!();
        }
        let text = serde_json::to_value(&job).expect("views serialise");
        for (key, value) in text.as_object().expect("a view is an object") {
            println!("{key:>10}: {}", shown(value));
        }
    }
    Ok(())
}

/// `value` as JSON, but with its strings escaped for a terminal as `jobs` escapes them: JSON
/// leaves DEL and the C1 controls (a one-character CSI among them) as they are.
fn shown(value: &Value) -> String {
    let joined = |items: Vec<String>| items.join(",");
    match value {
        Value::String(s) => format!("\"{}\"", super::terminal::escaped(s)),
        Value::Array(items) => format!("[{}]", joined(items.iter().map(shown).collect())),
        Value::Object(fields) => {
            let fields = fields
                .iter()
                .map(|(k, v)| format!("\"{}\":{}", super::terminal::escaped(k), shown(v)));
            format!("{{{}}}", joined(fields.collect()))
        }
        other => other.to_string(),
    }
}
