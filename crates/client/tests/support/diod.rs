//! A diod child process for tests: diod is an independent 9P2000.L server
//! (Debian's `diod` package). Shared by crates/client/tests/diod.rs and
//! crates/fuse/tests/diod.rs, each of which includes this file with
//! `#[path = "..."] mod diod_server;`.
//!
//! [`start`] runs diod in the foreground on a free loopback port, exporting a
//! fresh directory, and returns once it accepts connections. Dropping the
//! [`Diod`] kills the process by PID (even on panic), prints diod's log if the
//! test is panicking, and removes the directory. diod must be installed:
//! without it tests fail, they do not skip.

// Each including test uses only part of this.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running diod; dropping it kills the process and removes its directory.
#[derive(Debug)]
pub struct Diod {
    child: Child,
    /// The exported directory, also the aname to attach to.
    pub dir: PathBuf,
    log: PathBuf,
    pub port: u16,
}

impl Drop for Diod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("diod's log ({}):\n{}", self.log.display(), self.log_text());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Diod {
    /// The address to dial, as `tcp!127.0.0.1!PORT`.
    pub fn addr(&self) -> String {
        format!("tcp!127.0.0.1!{}", self.port)
    }

    /// The tree to attach to: the exported directory.
    pub fn aname(&self) -> &str {
        self.dir.to_str().expect("temp dir path is UTF-8")
    }

    /// Everything diod has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The path on disk of `path` in the exported tree.
    pub fn on_disk(&self, path: &str) -> PathBuf {
        self.dir.join(path)
    }

    /// diod logs protocol trouble it sees; fails on it.
    pub fn check_log(&self) {
        let log = self.log_text();
        for bad in ["protocol", "malformed", "bad msg", "invalid", "deserialize"] {
            assert!(
                !log.to_lowercase().contains(bad),
                "diod's log mentions {bad:?}:\n{log}"
            );
        }
    }
}

/// Where diod is, or a failure telling how to install it.
pub fn binary() -> PathBuf {
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("diod"))
            .find(|p| p.is_file())
    });
    let found = from_path.or_else(|| {
        ["/usr/sbin/diod", "/usr/bin/diod", "/sbin/diod"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    });
    match found {
        Some(path) => path,
        None => panic!(
            "diod is not installed (not in PATH nor /usr/sbin/diod): run scripts/setup \
             (or scripts/interop-diod, which installs Debian's diod package) first"
        ),
    }
}

/// A loopback port for diod, free when asked. It lies below the host's
/// ephemeral ports (ip_local_port_range), so nothing bound to port 0
/// meanwhile (another test's diod, a client's socket) is given it before
/// diod binds it; a counter keeps the tests of one process apart, and the
/// pid most likely those of others.
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let first = (ephemeral / 2).max(1024);
    let ports = ephemeral.saturating_sub(first).max(1);
    for _ in 0..ports {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (first + std::process::id().wrapping_mul(97).wrapping_add(n) % ports) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {first}..{}", first + ports);
}

/// Starts diod exporting a fresh directory named after `tag` (unique within
/// the test process), and waits until it accepts connections.
pub fn start(tag: &str) -> Diod {
    let mut diod = Command::new(binary());
    // -n: no auth.
    diod.arg("-n");
    start_with(tag, diod)
}

/// Starts `diod`, a command that runs diod (in a name space of its own,
/// say) with the arguments it has so far, as [`start`] does.
pub fn start_with(tag: &str, mut diod: Command) -> Diod {
    let base = std::env::temp_dir();
    let dir = base.join(format!("ninep-diod-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = base.join(format!("ninep-diod-{}-{tag}.log", std::process::id()));
    let port = free_port();
    // -f: foreground; -N: no password file lookups (any uid may attach; we
    // attach as uid 0, so the files are root's, as on disk); -c /dev/null:
    // ignore /etc/diod.conf; -t 4: fewer worker threads.
    let child = diod
        .args(["-f", "-N", "-c", "/dev/null", "-t", "4", "-L", "stderr"])
        .arg("-l")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-e")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("starting diod: {e}"));
    let mut diod = Diod {
        child,
        dir,
        log,
        port,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = diod.child.try_wait().unwrap() {
            panic!("diod exited early ({status}): {}", diod.log_text());
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return diod;
        }
        assert!(
            Instant::now() < deadline,
            "diod did not listen on 127.0.0.1:{port} within 10 s: {}",
            diod.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
