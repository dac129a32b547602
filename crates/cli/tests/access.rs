//! `ninep mount` of a host directory exported by `ninep serve`: per-user
//! attaches (the server, not the mount, decides who may do what), record
//! locks and extended attributes carried to the server, background mode.
//!
//! Run as root: the tests act as other users with setpriv and export with
//! --multiuser, which only root may serve.

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

use rustix::fs::FlockOperation;

mod common;
use common::{Background, NINEP, serve};

/// The mounts here attach as root, as the export's owner.
const ROOT: &[&str] = &["--uname", "root", "--n-uname", "0"];

/// A scratch directory with an exported tree `x` and mount points.
struct Scene {
    dir: PathBuf,
}

impl Scene {
    fn new(name: &str) -> Scene {
        let dir = std::env::temp_dir().join(format!("ninep-access-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("x")).unwrap();
        // Everyone may pass through and create in the export, as in /tmp.
        for (path, mode) in [(&dir, 0o755), (&dir.join("x"), 0o1777)] {
            rustix::fs::chmod(path, rustix::fs::Mode::from_raw_mode(mode)).unwrap();
        }
        Scene { dir }
    }

    fn export(&self) -> PathBuf {
        self.dir.join("x")
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("sock")
    }

    fn addr(&self) -> String {
        format!("unix!{}", self.sock().display())
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh scene's export served by `ninep serve --multiuser` and mounted
/// with `--access user`: unmounted, stopped and removed, in that order,
/// when dropped.
struct UserMount {
    mount: Background,
    _server: tokio::process::Child,
    scene: Scene,
}

impl UserMount {
    async fn start(name: &str) -> UserMount {
        let scene = Scene::new(name);
        let export = scene.export();
        let server = serve(&scene.sock(), &[export.to_str().unwrap(), "--multiuser"]).await;
        let mount = Background::mount(
            &scene.addr(),
            &scene.dir.join("mnt"),
            &[ROOT, &["--access", "user"]].concat(),
        );
        UserMount {
            mount,
            _server: server,
            scene,
        }
    }
}

/// Runs `sh -c script` as uid and gid `id` (no supplementary groups).
fn sh_as(id: u32, script: &str) -> std::process::Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={id}"),
            &format!("--regid={id}"),
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap()
}

#[tokio::test]
async fn each_user_acts_as_themselves() {
    let um = UserMount::start("users").await;
    let (scene, m) = (&um.scene, &um.mount);
    let mnt = m.mnt.display();

    // Files a user makes are theirs on the host.
    let out = sh_as(
        4242,
        &format!("echo one > {mnt}/mine && mkdir {mnt}/private && chmod 700 {mnt}/private"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["mine", "private"] {
        let meta = std::fs::metadata(scene.export().join(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4242), "{name}");
    }

    // Another user may read but not write the first one's file, may not
    // enter their private directory, and may not remove their file from a
    // sticky directory; the refusals come from the server.
    let other = |script: &str| sh_as(4343, &format!("cd {mnt} && {script}"));
    assert_eq!(String::from_utf8_lossy(&other("cat mine").stdout), "one\n");
    for script in ["echo two >> mine", "ls private", "rm -f mine"] {
        let out = other(script);
        assert!(!out.status.success(), "{script} succeeded as another user");
    }
    assert!(other("echo theirs > own").status.success());
    assert_eq!(
        std::fs::metadata(scene.export().join("own")).unwrap().uid(),
        4343
    );
    assert_eq!(
        std::fs::read_to_string(scene.export().join("mine")).unwrap(),
        "one\n"
    );

    // Root is root.
    std::fs::write(m.mnt.join("private/root-was-here"), "").unwrap();
    let meta = std::fs::metadata(scene.export().join("private/root-was-here")).unwrap();
    assert_eq!(meta.uid(), 0);
}

#[tokio::test]
async fn record_locks_and_xattrs_reach_the_server() {
    let scene = Scene::new("locks");
    let _server = serve(&scene.sock(), &[scene.export().to_str().unwrap()]).await;
    // Two mounts, two connections: only the server can see both sides.
    let a = Background::mount(&scene.addr(), &scene.dir.join("a"), ROOT);
    let b = Background::mount(&scene.addr(), &scene.dir.join("b"), ROOT);
    std::fs::write(a.mnt.join("shared"), "data").unwrap();

    let open = |m: &Background| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(m.mnt.join("shared"))
            .unwrap()
    };
    let (fa, fb) = (open(&a), open(&b));
    rustix::fs::fcntl_lock(fa.as_fd(), FlockOperation::NonBlockingLockExclusive).unwrap();
    assert_eq!(
        rustix::fs::fcntl_lock(fb.as_fd(), FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::AGAIN),
        "a lock held through one mount must stop the other"
    );
    // Closing the holder's file drops its locks.
    drop(fa);
    rustix::fs::fcntl_lock(fb.as_fd(), FlockOperation::NonBlockingLockExclusive).unwrap();
    rustix::fs::fcntl_lock(fb.as_fd(), FlockOperation::NonBlockingUnlock).unwrap();
    drop(fb);

    // Attributes set through one mount are on the host and seen by the other.
    let at_a = a.mnt.join("shared");
    rustix::fs::setxattr(
        &at_a,
        "user.colour",
        b"blue",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut buf = [0u8; 64];
    let n = rustix::fs::getxattr(scene.export().join("shared"), "user.colour", &mut buf).unwrap();
    assert_eq!(&buf[..n], b"blue");
    let n = rustix::fs::getxattr(b.mnt.join("shared"), "user.colour", &mut buf).unwrap();
    assert_eq!(&buf[..n], b"blue");
    let n = rustix::fs::listxattr(b.mnt.join("shared"), &mut buf).unwrap();
    assert!(
        buf[..n]
            .split(|&c| c == 0)
            .any(|name| name == b"user.colour")
    );
    // A buffer too small is ERANGE; a missing name ENODATA.
    assert_eq!(
        rustix::fs::getxattr(&at_a, "user.colour", &mut buf[..2]),
        Err(rustix::io::Errno::RANGE)
    );
    rustix::fs::removexattr(&at_a, "user.colour").unwrap();
    assert_eq!(
        rustix::fs::getxattr(scene.export().join("shared"), "user.colour", &mut buf),
        Err(rustix::io::Errno::NODATA)
    );
}

/// POSIX details as the host sees them through a per-user mount: new files
/// get the modes their user asked for (the user's umask applies, not the
/// server's), an owner's chmod keeps the set-group-id bit of their own
/// group, a file open for writing truncates whatever its mode says, and a
/// symbolic link's own times can be set.
#[tokio::test]
async fn modes_sizes_and_times_are_as_asked() {
    let um = UserMount::start("posix").await;
    let (scene, m) = (&um.scene, &um.mount);
    let mnt = m.mnt.display();

    let truncate = "import os; os.ftruncate(os.open('shut', os.O_CREAT | os.O_RDWR, 0), 3)";
    let out = sh_as(
        4242,
        &format!(
            "cd {mnt} && umask 0 && touch file && mkdir dir && mkfifo fifo \
             && chmod 2755 file && python3 -c \"{truncate}\""
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let host = |name: &str| std::fs::symlink_metadata(scene.export().join(name)).unwrap();
    for (name, mode) in [
        ("dir", 0o777),
        ("fifo", 0o666),
        ("file", 0o2755),
        ("shut", 0),
    ] {
        assert_eq!(host(name).mode() & 0o7777, mode, "mode of {name}");
    }
    assert_eq!(host("shut").len(), 3);

    std::os::unix::fs::symlink("file", m.mnt.join("link")).unwrap();
    let at = |sec, nsec| rustix::fs::Timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    let times = rustix::fs::Timestamps {
        last_access: at(1_900_000_000, 0),
        last_modification: at(1_950_000_000, 5),
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        m.mnt.join("link"),
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
    let link = host("link");
    assert_eq!((link.mtime(), link.mtime_nsec()), (1_950_000_000, 5));
    assert_ne!(host("file").mtime(), 1_950_000_000, "the link was followed");
}

#[tokio::test]
async fn peer_credentials_prove_each_local_user() {
    let scene = Scene::new("peercred");
    let export = scene.export();
    let _server = serve(
        &scene.sock(),
        &[
            export.to_str().unwrap(),
            "--multiuser",
            "--auth",
            "peercred",
        ],
    )
    .await;
    // Every local user may connect; the kernel tells the server who did.
    rustix::fs::chmod(scene.sock(), rustix::fs::Mode::from_raw_mode(0o666)).unwrap();
    let as_user = |id: u32, claim: u32, path: &str| {
        let script = format!(
            "echo hi | {NINEP} create -a {} --uname '' --n-uname {claim} {path}",
            scene.addr()
        );
        sh_as(id, &script)
    };
    // A user, as themselves: the file is theirs on the host.
    let out = as_user(4242, 4242, "mine");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(export.join("mine")).unwrap().uid(), 4242);
    // Claiming to be another (root, or a neighbour): refused, nothing made.
    for claim in [0, 4343] {
        let out = as_user(4242, claim, "theirs");
        assert!(!out.status.success(), "served as {claim}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not permitted"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!export.join("theirs").exists());
    // Root vouches for anyone: a mount with an attach per user works.
    let mount = Background::mount(
        &scene.addr(),
        &scene.dir.join("mnt"),
        &[ROOT, &["--access", "user"]].concat(),
    );
    let mnt = mount.mnt.display();
    let out = sh_as(4343, &format!("echo two > {mnt}/neighbour"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::metadata(export.join("neighbour")).unwrap().uid(),
        4343
    );
}
