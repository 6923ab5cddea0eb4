//! Records the git commit lockwise is built from, for `lockwise --version`: `git rev-parse
//! --short HEAD`, or `LOCKWISE_GIT_COMMIT` when set (a build from a source archive), or
//! `unknown` when there is no git or no repository. Never fails the build.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LOCKWISE_GIT_COMMIT");
    let commit = std::env::var("LOCKWISE_GIT_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]).filter(|c| is_hex(c)))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LOCKWISE_GIT_COMMIT={commit}");
    // Build again when HEAD moves: HEAD itself, the branch it names, the packed refs. Only
    // files that exist: cargo would rebuild every time for a missing one.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]).map(PathBuf::from)
            && path.exists()
        {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// The trimmed output of a successful `git ARGS`, if any.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn is_hex(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_hexdigit())
}
