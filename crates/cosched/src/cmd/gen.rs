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
cosched gen --jobs 100 --rate 30 --mix 'nas/lu.A,amdahl(serial=0.05, runtime=60)' --kind moldable"
)]
pub struct Args {
    /// Number of jobs
    #[arg(long, default_value_t = 40)]
    jobs: usize,
    /// Mean arrivals per minute
    #[arg(long, value_name = "PER_MINUTE", default_value_t = 9.0)]
    rate: f64,
    /// Profiles to draw from uniformly, comma-separated or given several times; a profile's own
    /// commas, inside its parentheses, stay with it
    #[arg(long, value_name = "PROFILE,...", default_value = "nas")]
    mix: Vec<String>,
    /// Profiles to leave out of the mix, comma-separated
    #[arg(long, value_name = "PROFILE,...")]
    exclude: Vec<String>,
    /// Kind of every job (malleable: follows the advised thread count at its next parallel region,
    /// the default everywhere)
    #[arg(long, value_name = "KIND", value_enum, default_value = "malleable")]
    kind: Kind,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the workload here instead of to stdout
    #[arg(short, long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Profiles from every `--mix` (or `--exclude`) given, split at commas outside parentheses, where a
/// parametric profile keeps its own (`amdahl(serial=0.05, runtime=60)`); `;` separates too.
fn profile_list(given: &[String]) -> Vec<String> {
    let mut profiles = Vec::new();
    for text in given {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                ',' | ';' if depth == 0 => {
                    profiles.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        profiles.push(current);
    }
    profiles
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
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
        mix: profile_list(&args.mix),
        exclude: profile_list(&args.exclude),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_split_at_commas_outside_parentheses_and_at_semicolons() {
        let given = [
            "nas/lu.A, amdahl(serial=0.05, runtime=60)".to_string(),
            "polybench/adi;nas/cg.A".to_string(),
        ];
        assert_eq!(
            profile_list(&given),
            [
                "nas/lu.A",
                "amdahl(serial=0.05, runtime=60)",
                "polybench/adi",
                "nas/cg.A"
            ]
        );
    }
}
