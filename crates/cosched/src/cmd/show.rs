//! `cosched show`: everything the daemon knows of one job.

use super::client::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// Show one job of the daemon
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  cosched show 12\n  cosched show 12 --json")]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    id: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let job = match args.client.request(Request::Show { id: args.id })? {
        Reply::Job { job } => *job,
        other => return Err(unexpected(other)),
    };
    if !args.client.print_json(&job) {
        let text = serde_json::to_value(&job).expect("views serialise");
        for (key, value) in text.as_object().expect("a view is an object") {
            println!("{key:>10}: {value}");
        }
    }
    Ok(())
}
