//! `cosched`: run parallel jobs under a co-scheduling policy, really or in simulation, and compare
//! policies. Each subcommand lives in `cmd/`.

mod cmd;
mod exit;
#[cfg(test)]
mod help_tests;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cosched",
    version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("COSCHED_GIT_REVISION"), ")"),
    about = "Co-schedule parallel applications on multicore and NUMA machines",
    long_about = "cosched decides which CPUs each parallel job gets (partitions aligned to packages, \
NUMA nodes, shared caches and cores), when it runs (coordinated time slices for all its threads) and how \
many threads it should use. The same policies run real processes on this machine or are simulated on \
machines of any size.",
    after_help = "Start with `cosched compare`: it runs the bundled workload under the main policies on \
this machine and prints how they compare (about 2 minutes on 2 CPUs). `cosched topo` shows how cosched \
sees this machine."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Topo(cmd::topo::Args),
    Report(cmd::report::Args),
    Compare(cmd::compare::Args),
    Sim(cmd::sim::Args),
    Replay(cmd::replay::Args),
    Gen(cmd::gen::Args),
    Bench(cmd::bench::Args),
    Run(cmd::run::Args),
    Calibrate(cmd::calibrate::Args),
    Completions(cmd::completions::CompletionsArgs),
    Man(cmd::completions::ManArgs),
    Daemon(cmd::daemon::Args),
    // Boxed: sbatch's many options make it much the largest.
    Submit(Box<cmd::client::submit::Args>),
    Attach(cmd::client::attach::Args),
    Jobs(cmd::client::jobs::Args),
    Show(cmd::client::show::Args),
    Cancel(cmd::client::cancel::Args),
    Hold(cmd::client::hold::Args),
    Release(cmd::client::hold::ReleaseArgs),
    Wait(cmd::client::wait::Args),
    Logs(cmd::client::logs::Args),
    Policy(cmd::client::policy::Args),
    Policies(cmd::policies::Args),
}

fn main() -> ExitCode {
    exit::die_quietly_on_closed_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topo(args) => cmd::topo::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Replay(args) => cmd::replay::run(args),
        Command::Gen(args) => cmd::gen::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Calibrate(args) => cmd::calibrate::run(args),
        Command::Completions(args) => cmd::completions::completions(args, Cli::command()),
        Command::Man(args) => cmd::completions::man(args, Cli::command()),
        Command::Daemon(args) => cmd::daemon::run(args),
        Command::Submit(args) => cmd::client::submit::run(*args),
        Command::Attach(args) => cmd::client::attach::run(args),
        Command::Jobs(args) => cmd::client::jobs::run(args),
        Command::Show(args) => cmd::client::show::run(args),
        Command::Cancel(args) => cmd::client::cancel::run(args),
        Command::Hold(args) => cmd::client::hold::hold(args),
        Command::Release(args) => cmd::client::hold::release(args),
        Command::Wait(args) => cmd::client::wait::run(args),
        Command::Logs(args) => cmd::client::logs::run(args),
        Command::Policy(args) => cmd::client::policy::run(args),
        Command::Policies(args) => cmd::policies::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => exit::report(&error),
    }
}
