//! The client verbs against a served ramfs, in each dialect.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

mod common;
use common::{NINEP, serve, serve_ramfs};

/// Runs `ninep VERB ARGS...` against `addr` with `input` on standard
/// input; returns its standard output, failing the test if it failed.
async fn run(addr: &str, dialect: &str, verb: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let out = attempt(addr, dialect, verb, args, input).await;
    assert!(
        out.status.success(),
        "ninep {verb} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The same, returning what became of it.
async fn attempt(
    addr: &str,
    dialect: &str,
    verb: &str,
    args: &[&str],
    input: &[u8],
) -> std::process::Output {
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
    child.wait_with_output().await.unwrap()
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

#[tokio::test]
async fn a_ramfs_and_a_taskbag_hold_files_to_their_limits() {
    let dir = std::env::temp_dir().join(format!("ninep-verbs-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ramfs");
    let limits = [
        "ramfs",
        "--ramfs-max-file-size",
        "1000",
        "--ramfs-max-bytes",
        "1500",
    ];
    let _server = serve(&sock, &limits).await;
    let addr = format!("unix!{}", sock.display());
    run(&addr, "9P2000.L", "create", &["a"], &[1; 1000]).await;
    let too_big = attempt(&addr, "9P2000.L", "create", &["b"], &[2; 1001]).await;
    assert!(!too_big.status.success());
    let stderr = String::from_utf8_lossy(&too_big.stderr);
    assert!(stderr.contains("too large"), "{stderr}");
    let no_room = attempt(&addr, "9P2000.L", "create", &["c"], &[3; 600]).await;
    assert!(!no_room.status.success());
    let stderr = String::from_utf8_lossy(&no_room.stderr);
    assert!(stderr.contains("no space left"), "{stderr}");
    run(&addr, "9P2000.L", "create", &["d"], &[4; 500]).await;

    // A taskbag's questions and answers are held to the same limits.
    let sock = dir.join("taskbag");
    let _taskbag = serve(&sock, &["taskbag", "--ramfs-max-file-size", "100"]).await;
    let addr = format!("unix!{}", sock.display());
    let question = ["questions/q"];
    let too_big = attempt(&addr, "9P2000.L", "create", &question, &[5; 101]).await;
    let stderr = String::from_utf8_lossy(&too_big.stderr);
    assert!(stderr.contains("too large"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
