//! What the command-line tests share: starting `ninep` processes and
//! waiting for what they make.

#![allow(dead_code)] // each test file uses a part

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// The binary under test.
pub const NINEP: &str = env!("CARGO_BIN_EXE_ninep");

/// Waits (at most five seconds) until `ok` holds.
pub async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..100 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// True while `dir` is a mount point in this process's name space.
pub fn is_mounted(dir: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = dir.to_string_lossy();
    table
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.as_ref()))
}

/// Starts `ninep serve ramfs` on the unix socket `sock` and waits until
/// it listens; the server is killed when the handle drops.
pub async fn serve_ramfs(sock: &Path) -> Child {
    serve(sock, &["ramfs"]).await
}

/// Starts `ninep serve ARGS...` (a tree and its flags) on the unix socket
/// `sock` and waits until it listens; killed when the handle drops.
pub async fn serve(sock: &Path, args: &[&str]) -> Child {
    let addr = format!("unix!{}", sock.display());
    let child = Command::new(NINEP)
        .arg("serve")
        .args(args)
        .args(["--listen", &addr])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep serve");
    until("the server", || sock.exists()).await;
    child
}

/// `len` bytes of reproducible noise, for checking data byte for byte.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 7;
            x ^= x >> 9;
            x as u8
        })
        .collect()
}
