//! The client verbs against a served ramfs, in each dialect.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

mod common;
use common::{NINEP, serve_ramfs};

/// Runs `ninep VERB ARGS...` against `addr` with `input` on standard
/// input; returns its standard output, failing the test if it failed.
async fn run(addr: &str, dialect: &str, verb: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(NINEP)
        .arg(verb)
        .args(["--addr", addr, "--dialect", dialect])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "ninep {verb} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[tokio::test]
async fn write_replaces_what_the_file_held() {
    let dir = std::env::temp_dir().join(format!("ninep-verbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ramfs");
    let _server = serve_ramfs(&sock).await;
    let addr = format!("unix!{}", sock.display());
    for dialect in ["9P2000", "9P2000.u", "9P2000.L"] {
        let name = format!("f-{dialect}");
        run(
            &addr,
            dialect,
            "create",
            &[&name],
            b"a much longer first text",
        )
        .await;
        run(&addr, dialect, "write", &[&name], b"short").await;
        assert_eq!(
            run(&addr, dialect, "cat", &[&name], b"").await,
            b"short",
            "{dialect}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
