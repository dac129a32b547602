//! `ninep mount` as a process: a server's tree appears in the mount point,
//! and `fusermount3 -u` or SIGTERM end it cleanly, saying nothing but
//! where it mounted.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

mod common;
use common::{Background, NINEP, is_mounted, serve, serve_ramfs, until};

/// A fresh directory for test `name`: it, the mount point in it, and the
/// address of the server's socket beside that.
fn scene(name: &str) -> (PathBuf, PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("ninep-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let addr = format!("unix!{}", dir.join("sock").display());
    (dir, mnt, addr)
}

#[tokio::test]
async fn mount_serve_and_unmount() {
    let (dir, mnt, addr) = scene("mount");
    let bin = NINEP;
    let mut server = serve_ramfs(&dir.join("sock")).await;
    for how in ["fusermount3", "SIGTERM"] {
        let mut mount = Command::new(bin)
            .args(["mount", "-a", &addr, "--uname", "root", "--n-uname", "0"])
            .arg(&mnt)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        until("the mount", || is_mounted(&mnt)).await;
        let marker = mnt.join(format!("written-{how}"));
        std::fs::write(&marker, how).unwrap();
        let out = std::process::Command::new(bin)
            .args(["cat", "-a", &addr, &format!("written-{how}")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), how);
        if how == "fusermount3" {
            assert!(
                std::process::Command::new("fusermount3")
                    .arg("-u")
                    .arg(&mnt)
                    .status()
                    .unwrap()
                    .success()
            );
        } else {
            let pid = mount.id().unwrap().to_string();
            assert!(
                std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let status = tokio::time::timeout(Duration::from_secs(10), mount.wait())
            .await
            .expect("exit")
            .unwrap();
        assert!(status.success(), "{how}: {status}");
        let mut said = String::new();
        let mut stderr = mount.stderr.take().unwrap();
        stderr.read_to_string(&mut said).await.unwrap();
        assert_eq!(
            said,
            format!("ninep: {addr} mounted on {}\n", mnt.display()),
            "{how}"
        );
        assert_eq!(
            std::fs::read_dir(&mnt).unwrap().count(),
            0,
            "{how}: still mounted"
        );
    }
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_vanished_server_gives_errors_not_a_hang() {
    let (dir, mnt, addr) = scene("vanish");
    let bin = NINEP;
    let mut server = serve_ramfs(&dir.join("sock")).await;
    // Calls wait for the server's return as long as --recover says, then
    // fail.
    let mut mount = Command::new(bin)
        .args(["mount", "-a", &addr, "--uname", "root", "--n-uname", "0"])
        .args(["--recover", "1"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until("the mount", || is_mounted(&mnt)).await;
    std::fs::write(mnt.join("x"), "x").unwrap();
    server.kill().await.unwrap();
    let probe = mnt.join("x");
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::task::spawn_blocking(move || std::fs::read(&probe)),
    )
    .await
    .expect("the mount hung")
    .unwrap();
    assert!(result.is_err(), "read from a vanished server succeeded");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(10), mount.wait())
        .await
        .expect("exit")
        .unwrap();
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server alone checks permissions only on a mount of one attach: a
/// mount that attaches per user and asks for it is refused, mounting
/// nothing.
#[tokio::test]
async fn server_permissions_need_a_single_attach() {
    let (dir, mnt, addr) = scene("perms");
    let mut server = serve_ramfs(&dir.join("sock")).await;
    let out = Command::new(NINEP)
        .args([
            "mount",
            "-a",
            &addr,
            "--access",
            "user",
            "--permissions",
            "server",
        ])
        .arg(&mnt)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("only on a mount of one attach"), "{said}");
    assert!(!is_mounted(&mnt));
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scripts/fuse-latency` counts the requests the kernel sent the one
/// mount it is given, none of another mount's, and passes on how its
/// command ended.
#[tokio::test]
async fn fuse_latency_counts_its_mounts_requests_alone() {
    let (dir, mnt, addr) = scene("latency");
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut server = serve_ramfs(&dir.join("sock")).await;
    // Unmounted when dropped, even by a failed assertion.
    let flags = ["--uname", "root", "--n-uname", "0", "--cache", "loose"];
    let mounts = [&mnt, &other].map(|at| Background::mount(&addr, at, &flags));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/fuse-latency");
    // Files made through both mounts: only those through the first count.
    let work = format!(
        "for i in $(seq 20); do : > {0}/a$i; : > {1}/b$i; : > {1}/c$i; done",
        mnt.display(),
        other.display()
    );
    let out = Command::new(script)
        .arg(&mnt)
        .args(["sh", "-c", &work])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let count = |request: &str| {
        said.lines()
            .find(|line| line.split_whitespace().next() == Some(request))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    assert_eq!(count("CREATE"), Some(20), "{said}");
    assert!(count("all").is_some_and(|all| all >= 20), "{said}");
    let failed = Command::new(script)
        .arg(&mnt)
        .arg("false")
        .output()
        .await
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    drop(mounts);
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A loose mount keeps files open at the server after their close; a
/// server that runs out of descriptors gets them back when it says so,
/// and the open, create or lookup that met the shortage goes through.
/// Which of them meets it depends on how many descriptors the server
/// started with: two limits one apart have the walk of a name not yet
/// there meet it in one and the create in the other.
#[tokio::test]
async fn files_kept_open_are_given_back_to_a_server_out_of_descriptors() {
    for limit in [64, 65] {
        let (dir, mnt, addr) = scene(&format!("keep-open-{limit}"));
        let export = dir.join("export");
        std::fs::create_dir(&export).unwrap();
        let server = serve(&dir.join("sock"), &[export.to_str().unwrap()]).await;
        let limited = std::process::Command::new("prlimit")
            .arg(format!("--pid={}", server.id().unwrap()))
            .arg(format!("--nofile={limit}:{limit}"))
            .status()
            .expect("prlimit (util-linux)");
        assert!(limited.success());
        let flags = ["--uname", "root", "--n-uname", "0", "--cache", "loose"];
        let mount = Background::mount(&addr, &mnt, &flags);
        let at = mount.mnt.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..200 {
                let name = at.join(format!("f{i}"));
                std::fs::write(&name, format!("file {i}"))
                    .unwrap_or_else(|e| panic!("limit {limit}, f{i}: {e}"));
            }
            for i in 0..200 {
                let read = std::fs::read_to_string(at.join(format!("f{i}"))).unwrap();
                assert_eq!(read, format!("file {i}"));
            }
        })
        .await
        .unwrap();
        drop(mount);
        for i in 0..200 {
            let read = std::fs::read_to_string(export.join(format!("f{i}"))).unwrap();
            assert_eq!(read, format!("file {i}"));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
