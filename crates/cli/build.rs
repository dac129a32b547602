//! Tells the binary the commit it was built from, for `ninep --version`:
//! `git describe` of the checkout, else NINEP_COMMIT from the environment
//! (for builds from a tarball, which has no repository), else "unknown
//! commit".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=NINEP_COMMIT");
    let commit = std::env::var("NINEP_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(describe)
        .unwrap_or_else(|| "unknown commit".to_owned());
    println!("cargo:rustc-env=NINEP_COMMIT={commit}");
}

/// The checkout's commit, as `git describe` names it (a tag and the commits
/// since, or the abbreviated hash), if this is a checkout.
fn describe() -> Option<String> {
    // Described again when HEAD moves: to another branch, or with a commit
    // on this one (its ref file, packed-refs once git packs it, and HEAD's
    // log, which every commit and checkout appends to).
    let mut watched = vec![
        "HEAD".to_owned(),
        "logs/HEAD".to_owned(),
        "packed-refs".to_owned(),
    ];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    // (Only files that exist: cargo takes a missing one as always changed.)
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && std::path::Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    git(&["describe", "--always", "--tags", "--abbrev=12"])
}

/// What git prints, trimmed, if it ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}
