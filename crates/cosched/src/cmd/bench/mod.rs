//! `cosched bench`: speed figures of cosched's parts, each against its target. Each subcommand
//! has its own module; what several of them use is in `common`.

mod barrier;
mod common;
mod daemon;
mod executor;
mod policy;
mod sim;

/// Measure how fast cosched's parts run, against their targets
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand, Debug)]
enum BenchCommand {
    Sim(sim::SimArgs),
    Barrier(barrier::BarrierArgs),
    Executor(executor::ExecutorArgs),
    Policy(policy::PolicyArgs),
    Daemon(daemon::DaemonArgs),
    /// One user's side of `bench daemon --attack`, run as that user
    #[command(hide = true)]
    DaemonUser(daemon::users::UserArgs),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Sim(args) => sim::run(args),
        BenchCommand::Barrier(args) => barrier::run(args),
        BenchCommand::Executor(args) => executor::run(args),
        BenchCommand::Policy(args) => policy::run(args),
        BenchCommand::Daemon(args) => daemon::run(args),
        BenchCommand::DaemonUser(args) => daemon::users::run_user(args),
    }
}
