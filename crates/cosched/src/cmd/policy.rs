//! `cosched policy`: the daemon's running policy.

use super::client::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// Show the daemon's policy (switching needs a daemon restart with --policy)
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  cosched policy")]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    /// Switch to this policy
    policy: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.client.request(Request::Policy { set: args.policy })? {
        Reply::Policy { name } => {
            if !args
                .client
                .print_json(&serde_json::json!({ "policy": name }))
            {
                println!("{name}");
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
