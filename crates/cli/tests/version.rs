//! `ninep --version` names the commit built, and `ninep install-docs`
//! installs pages and completions where a prefix's tools look.

use std::process::Command;

const NINEP: &str = env!("CARGO_BIN_EXE_ninep");

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(NINEP).arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("ninep {} (", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&prefix), "{version}");
    // The binary is rebuilt when HEAD moves, so it names HEAD.
    if let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) {
        assert!(version.contains(&head), "{version} does not name {head}");
    }
}

#[test]
fn install_docs_fills_a_prefix() {
    let prefix = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-docs");
    let _ = std::fs::remove_dir_all(&prefix);
    let out = Command::new(NINEP)
        .arg("install-docs")
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [
        "share/man/man1/ninep.1",
        "share/man/man1/ninep-mux.1",
        "share/bash-completion/completions/ninep",
        "share/zsh/site-functions/_ninep",
        "share/fish/vendor_completions.d/ninep.fish",
    ] {
        let len = std::fs::metadata(prefix.join(file)).map_or(0, |m| m.len());
        assert!(len > 0, "{file} is missing or empty");
    }
}
