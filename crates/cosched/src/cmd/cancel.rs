//! `cosched cancel`: stop jobs (your own; root may stop any).

use super::client::{unexpected, ClientArgs};
use cosched_service::protocol::{Reply, Request};

/// Cancel jobs: queued ones never start, running ones are killed
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  cosched cancel 12\n  cosched cancel 12 13 14")]
pub struct Args {
    #[command(flatten)]
    client: ClientArgs,
    #[arg(required = true)]
    ids: Vec<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.client.request(Request::Cancel { ids: args.ids })? {
        Reply::Cancelled { ids } => {
            if !args
                .client
                .print_json(&serde_json::json!({ "cancelled": ids }))
            {
                ids.iter().for_each(|id| println!("cancelled {id}"));
            }
            Ok(())
        }
        other => Err(unexpected(other)),
    }
}
