//! Records the git revision the binary is built from, for `cosched --version`. Outside a git
//! checkout (a source tarball, a packaged build) or without git, the revision is "unknown"; nothing
//! here reaches the network.

use std::path::Path;
use std::process::Command;

fn main() {
    let revision = git(&["rev-parse", "--short", "HEAD"]);
    println!(
        "cargo:rustc-env=COSCHED_GIT_REVISION={}",
        revision.as_deref().unwrap_or("unknown")
    );
    // Build again when HEAD moves: HEAD itself (a checkout) and the branch it names (a commit).
    // Only files that exist are named, since cargo reruns on every build for a missing one.
    println!("cargo:rerun-if-changed=build.rs");
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    for path in watched.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

/// The trimmed output of a git command run in this crate's directory, or `None` where git is
/// missing or this is not a checkout.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
