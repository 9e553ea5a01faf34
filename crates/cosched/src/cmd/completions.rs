//! `cosched completions` and `cosched man`: shell completions and manual pages, generated from the
//! command line's own definition so they never fall out of date.

use anyhow::Context as _;
use std::path::PathBuf;

/// Print shell completions for cosched
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
cosched completions bash > ~/.local/share/bash-completion/completions/cosched\n  \
cosched completions zsh > ~/.zfunc/_cosched\n  \
cosched completions fish > ~/.config/fish/completions/cosched.fish\n\n\
`make install` installs them for bash, zsh and fish.")]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum, value_name = "SHELL")]
    shell: clap_complete::Shell,
}

pub fn completions(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<()> {
    let name = command.get_name().to_string();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    Ok(())
}

/// Write manual pages: cosched(1) and one per subcommand (cosched-run(1), ...)
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  cosched man -o /usr/local/share/man/man1\n  \
cosched man -o man && man -l man/cosched-compare.1"
)]
pub struct ManArgs {
    /// Directory for the pages
    #[arg(short, long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
}

pub fn man(args: ManArgs, command: clap::Command) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    clap_mangen::generate_to(command, &args.out)
        .with_context(|| format!("cannot write manual pages into {}", args.out.display()))?;
    println!("manual pages: {}", args.out.display());
    Ok(())
}
