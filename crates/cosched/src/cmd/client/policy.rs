//! `cosched policy`: the daemon's running policy, shown or switched while jobs run.

use super::common::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// Show the daemon's policy, or switch it live
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Switching needs root (system daemon) or the daemon's own user (user \
daemon). The new policy takes over every job at once: running jobs keep running and are placed \
again under it. The journal keeps the choice, so a restarted daemon comes back with it.\n\n\
Examples:\n  cosched policy\n  sudo cosched policy gang\n  sudo cosched policy taco:sizes=1/6/24"
)]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    /// Switch to this policy (`cosched policies` lists them)
    #[arg(
        value_name = "POLICY",
        value_parser = crate::cmd::policies::PolicyName,
        hide_possible_values = true
    )]
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
