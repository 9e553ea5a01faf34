//! `cosched gen`: a Poisson workload (TACO §4.1) as a workload file.

use anyhow::Context as _;
use cosched_core::JobKind;
use cosched_sim::generate::Poisson;
use std::path::PathBuf;

/// Generate a workload with Poisson arrivals from a mix of job profiles
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The same seed always gives the same workload, so every policy can replay it.\n\
Mix entries are profiles (docs/workload-format.md); `nas` and `polybench` stand for every benchmark of \
that table.\n\nExamples:\n  cosched gen --jobs 40 --rate 9 --mix nas --seed 1 -o set-b.toml\n  \
cosched gen --jobs 40 --rate 9 --mix nas --exclude nas/lu.A -o set-c.toml      # TACO set C\n  \
cosched gen --jobs 100 --rate 30 --mix 'amdahl(serial=0.05, runtime=60)' --kind moldable"
)]
pub struct Args {
    /// Number of jobs
    #[arg(long, default_value_t = 40)]
    jobs: usize,
    /// Mean arrivals per minute
    #[arg(long, value_name = "PER_MINUTE", default_value_t = 9.0)]
    rate: f64,
    /// Profiles to draw from uniformly, separated by ';' or given several times
    #[arg(long, value_delimiter = ';', default_value = "nas")]
    mix: Vec<String>,
    /// Profiles to leave out of the mix, separated by ';'
    #[arg(long, value_delimiter = ';')]
    exclude: Vec<String>,
    /// Kind of every job
    #[arg(long, value_enum, default_value = "malleable")]
    kind: Kind,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the workload here instead of to stdout
    #[arg(short, long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Kind {
    Rigid,
    Moldable,
    Malleable,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let poisson = Poisson {
        jobs: args.jobs,
        rate_per_min: args.rate,
        mix: args.mix,
        exclude: args.exclude,
        kind: match args.kind {
            Kind::Rigid => JobKind::Rigid,
            Kind::Moldable => JobKind::Moldable,
            Kind::Malleable => JobKind::Malleable,
        },
        seed: args.seed,
    };
    let toml = poisson.generate()?.to_toml();
    match &args.out {
        Some(path) => std::fs::write(path, toml)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{toml}"),
    }
    Ok(())
}
