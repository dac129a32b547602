//! A munged of a test's own: MUNGE's daemon, with a key made for it in a
//! fresh directory and its socket there. Shared by the tests that prove
//! users with MUNGE (crates/client/tests/munge.rs, crates/cli/tests/munge.rs),
//! each of which includes this file with `#[path = "..."] mod munged;`.
//!
//! diod and its tools know only MUNGE's default socket,
//! /run/munge/munge.socket.2: [`Munged::command`] runs a program in a mount
//! namespace of its own in which this munged's directory is /run. Dropping
//! the [`Munged`] kills the daemon by PID and removes the directory. munge
//! and util-linux's unshare must be installed (scripts/setup), and the
//! tests run as root.

// Each including test uses only part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ninep_client::{AuthFid, BoxFuture, Error, Prover};
use ninep_wire::Errno;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running munged; dropping it kills it and removes its directory.
#[derive(Debug)]
pub struct Munged {
    child: Child,
    /// The directory that stands for /run: the socket is in munge/.
    run: PathBuf,
    dir: PathBuf,
}

impl Drop for Munged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("munged's log:\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Munged {
    /// Starts munged with a new key, named after `tag` (unique within the
    /// test process), and waits until it takes connections.
    pub fn start(tag: &str) -> Munged {
        let dir = std::env::temp_dir().join(format!("ninep-munged-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let run = dir.join("run");
        std::fs::create_dir_all(run.join("munge")).unwrap();
        let key = dir.join("munge.key");
        let made = Command::new("mungekey")
            .arg("--create")
            .arg("--bits=256")
            .arg(format!("--keyfile={}", key.display()))
            .status()
            .unwrap_or_else(|e| panic!("mungekey: {e} (run scripts/setup to install munge)"));
        assert!(made.success(), "mungekey failed");
        let socket = run.join("munge/munge.socket.2");
        let child = Command::new("munged")
            .args(["--foreground", "--force"])
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--log-file={}", dir.join("munged.log").display()))
            .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
            .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("munged.err")).unwrap(),
            ))
            .spawn()
            .unwrap_or_else(|e| panic!("munged: {e} (run scripts/setup to install munge)"));
        let mut munged = Munged { child, run, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if let Some(status) = munged.child.try_wait().unwrap() {
                panic!("munged exited early ({status}): {}", munged.log());
            }
            assert!(
                Instant::now() < deadline,
                "munged did not start: {}",
                munged.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        munged
    }

    /// The daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.run.join("munge/munge.socket.2")
    }

    /// What the daemon said.
    pub fn log(&self) -> String {
        let read = |name| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        read("munged.err") + &read("munged.log")
    }

    /// `program` run where MUNGE's default socket is this munged's, in a
    /// mount namespace of its own.
    pub fn command(&self, program: impl AsRef<Path>) -> Command {
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind "$0" /run && exec "$@""#)
            .arg(&self.run)
            .arg(program.as_ref());
        command
    }

    /// A credential for `uid` (we are root, who may ask for anyone's),
    /// living `ttl` seconds.
    pub fn credential(&self, uid: u32, ttl: u32) -> String {
        let out = Command::new("munge")
            .arg("--no-input")
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--uid={uid}"))
            .arg(format!("--ttl={ttl}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "munge: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

/// Proves with a credential made beforehand: replays it, if used before.
#[derive(Debug)]
pub struct Written(pub String);

impl Prover for Written {
    fn prove<'a>(&'a self, afid: &'a AuthFid, _: u32) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            afid.write(0, Bytes::from(self.0.clone())).await?;
            Ok(())
        })
    }
}

/// Fails unless the attach was refused for want of proof (EPERM).
pub fn assert_refused(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    match result {
        Ok(v) => panic!("{what}: served ({v:?})"),
        Err(e) => assert_eq!(e.errno(), Errno::EPERM, "{what}: {e}"),
    }
}
