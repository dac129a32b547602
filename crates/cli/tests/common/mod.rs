//! What the command-line tests share: starting `ninep` processes and
//! waiting for what they make.

#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
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

/// Starts `ninep serve ARGS...` on a free loopback TCP port (or, with
/// `scheme` "tls", a TLS one): see [`start_on_port`].
pub async fn serve_on_port(scheme: &str, args: &[&str]) -> (Child, String) {
    start_on_port(scheme, &[&["serve"], args].concat()).await
}

/// Starts `ninep ARGS...` (a server: serve, mux, ...) listening on a free
/// loopback port of `scheme` (tcp or tls), and returns it with the address
/// it serves on, as its first line on standard error tells; killed when
/// dropped.
pub async fn start_on_port(scheme: &str, args: &[&str]) -> (Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = Command::new(NINEP)
        .args(args)
        .args(["--listen", &format!("{scheme}!127.0.0.1!0")])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the server to say where it serves")
        .expect("its standard error")
        .unwrap_or_default();
    let addr = line
        .rsplit(" on ")
        .next()
        .filter(|a| a.starts_with(scheme))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    // The rest of what it says goes to ours.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    (child, addr)
}

/// The port of a `tcp!host!port` address.
pub fn port(addr: &str) -> u16 {
    addr.rsplit('!')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

/// A mount made with `ninep mount --background`: unmounted, and its process
/// stopped, when dropped.
pub struct Background {
    pub mnt: PathBuf,
    pid: i32,
}

impl Background {
    pub fn mount(addr: &str, mnt: &Path, flags: &[&str]) -> Background {
        std::fs::create_dir_all(mnt).unwrap();
        let out = std::process::Command::new(NINEP)
            .args(["mount", "--background", "-a", addr])
            .args(flags)
            .arg(mnt)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ninep mount --background: {said}");
        // Returned only once mounted.
        assert!(is_mounted(mnt), "not mounted on return: {said}");
        let pid = said
            .split("pid ")
            .nth(1)
            .and_then(|s| s.trim().trim_end_matches(')').parse().ok())
            .unwrap_or_else(|| panic!("no pid in {said:?}"));
        Background {
            mnt: mnt.to_owned(),
            pid,
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mnt)
            .status();
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}
