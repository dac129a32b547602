//! The host's file system failing under an export: a full disk, a
//! read-only remount, a directory removed under a fid, a device that
//! answers reads with EIO (a FUSE mount of a server made to), permissions
//! changed under a user's fids. Each fault reaches
//! the client as the errno the host gave, on the request it hit; the
//! session goes on, every write acknowledged is on disk, and the export
//! works again once the fault is gone.
//!
//! Run as root: each test mounts a small tmpfs (or a FUSE file system) of
//! its own, and unmounts it.

use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use ninep_client::{Client, Fsys};
use ninep_export::{Export, Options as ExportOptions};
use ninep_server::tree::{Dir, Tree};
use ninep_server::{Error, Server, Spawned};
use ninep_testkit::attach_root;
use ninep_transport::Addr;
use ninep_wire::Errno;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_WRONLY};

/// A tmpfs of `size` mounted for one test, exported and attached to;
/// unmounted and removed when dropped.
struct Disk {
    base: PathBuf,
    mnt: PathBuf,
}

impl Disk {
    fn new(name: &str, size: &str) -> Disk {
        let base = std::env::temp_dir().join(format!("ninep-faults-{}-{name}", std::process::id()));
        let mnt = base.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        mount(
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
            &mnt,
        );
        Disk { base, mnt }
    }

    /// Mounts it again with `options` (`ro`, `rw`).
    fn remount(&self, options: &str) {
        mount(&["-o", &format!("remount,{options}")], &self.mnt);
    }

    async fn serve(&self) -> (Spawned, Fsys) {
        let export = Export::new(&self.mnt, ExportOptions::default()).unwrap();
        serve_at(export, &self.base, "sock").await
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn mount(args: &[&str], at: &Path) {
    let out = Command::new("mount").args(args).arg(at).output().unwrap();
    assert!(out.status.success(), "mount {args:?}: {out:?}");
}

/// The session still serves: a walk and a stat of the root.
async fn still_serving(fsys: &Fsys) {
    fsys.stat("/").await.expect("the session goes on");
}

#[tokio::test]
async fn a_full_disk_fails_the_write_that_hit_it_and_keeps_what_was_acknowledged() {
    let disk = Disk::new("full", "1m");
    let (_server, fsys) = disk.serve().await;
    let file = fsys.create("big", 0o644, O_WRONLY).await.unwrap();
    let piece = Bytes::from(vec![7u8; 64 * 1024]);
    let mut acknowledged = 0u64;
    let refused = loop {
        assert!(acknowledged < 4 << 20, "a 1 MiB disk took 4 MiB");
        match file.write_at(acknowledged, piece.clone()).await {
            Ok(n) => acknowledged += u64::from(n),
            Err(e) => break e,
        }
    };
    assert_eq!(refused.errno(), Errno::ENOSPC, "{refused}");
    still_serving(&fsys).await;
    // What was acknowledged is on disk, byte for byte.
    let on_disk = std::fs::read(disk.mnt.join("big")).unwrap();
    assert_eq!(on_disk.len() as u64, acknowledged);
    assert!(on_disk.iter().all(|&b| b == 7));
    file.close().await.unwrap();
    // Room again once the file is gone: its pages are freed at the last
    // close of the host's file, which a process this test forks meanwhile
    // (another test's mount) may hold for an instant before its exec.
    fsys.remove("big").await.unwrap();
    for _ in 0..100 {
        let free = rustix::fs::statvfs(&disk.mnt).unwrap();
        if free.f_bavail * free.f_frsize >= 512 << 10 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let small = fsys.create("small", 0o644, O_RDWR).await.unwrap();
    small
        .write_at(0, Bytes::from_static(b"fits now"))
        .await
        .unwrap();
    assert_eq!(small.read_at(0, 100).await.unwrap(), "fits now");
}

#[tokio::test]
async fn a_read_only_remount_refuses_changes_and_keeps_reads() {
    let disk = Disk::new("ro", "4m");
    std::fs::write(disk.mnt.join("kept"), "still readable").unwrap();
    let (_server, fsys) = disk.serve().await;
    let reading = fsys.open("kept", O_RDONLY).await.unwrap();
    disk.remount("ro");
    for refused in [
        fsys.open("kept", O_RDWR).await.map(drop),
        fsys.create("new", 0o644, O_RDWR).await.map(drop),
        fsys.mkdir("dir", 0o755).await.map(drop),
        fsys.remove("kept").await,
    ] {
        let e = refused.expect_err("a read-only disk takes no change");
        assert_eq!(e.errno(), Errno::EROFS, "{e}");
    }
    assert_eq!(reading.read_at(0, 100).await.unwrap(), "still readable");
    still_serving(&fsys).await;
    disk.remount("rw");
    let made = fsys.create("new", 0o644, O_RDWR).await.unwrap();
    made.write_at(0, Bytes::from_static(b"writable again"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(disk.mnt.join("new")).unwrap(),
        "writable again"
    );
}

#[tokio::test]
async fn a_directory_removed_under_a_fid_fails_its_requests_clearly() {
    let disk = Disk::new("gone", "4m");
    std::fs::create_dir_all(disk.mnt.join("dir/sub")).unwrap();
    std::fs::write(disk.mnt.join("dir/sub/file"), "soon gone").unwrap();
    let (_server, fsys) = disk.serve().await;
    let dir = fsys.walk("dir/sub").await.unwrap();
    let file = fsys.open("dir/sub/file", O_RDONLY).await.unwrap();
    std::fs::remove_dir_all(disk.mnt.join("dir")).unwrap();

    // The open file reads on (the host keeps an unlinked file's data).
    assert_eq!(file.read_at(0, 100).await.unwrap(), "soon gone");
    // Nothing can be made in the removed directory, or walked to.
    let e = dir
        .clone_fid()
        .await
        .unwrap()
        .create("new", 0o644, O_RDWR)
        .await
        .expect_err("create in a removed directory");
    assert_eq!(e.errno(), Errno::ENOENT, "{e}");
    let e = fsys
        .walk("dir")
        .await
        .expect_err("walk to a removed directory");
    assert_eq!(e.errno(), Errno::ENOENT, "{e}");
    still_serving(&fsys).await;
    // A directory of the same name made again is reached.
    std::fs::create_dir(disk.mnt.join("dir")).unwrap();
    fsys.walk("dir").await.unwrap();
}

/// Serves `fs` on a fresh unix socket in `dir` and attaches to it: the
/// server (stopped when dropped) and the attach.
async fn serve_at<F: ninep_server::Filesystem>(fs: F, dir: &Path, name: &str) -> (Spawned, Fsys) {
    let addr = Addr::Unix(dir.join(name));
    let listener = addr.listen().await.unwrap();
    let server = Server::new(fs).spawn(listener);
    let fsys = attach_root(&addr.to_string()).await;
    (server, fsys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_io_error_of_the_host_reaches_the_client_as_eio() {
    let base = std::env::temp_dir().join(format!("ninep-faults-{}-eio", std::process::id()));
    let mnt = base.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // The host's "device": a FUSE mount of a server whose file `bad`
    // fails every read with EIO.
    let device = Dir::new().file("good", "readable\n").read("bad", |_| {
        Err::<Bytes, _>(Error::with_errno(Errno::EIO, "bad sector"))
    });
    let (_device_server, device) = serve_at(Tree::new(device), &base, "device.sock").await;
    let options = ninep_fuse::Options {
        cache: ninep_fuse::Cache::None,
        ..ninep_fuse::Options::default()
    };
    let session = ninep_fuse::mount(device, &mnt, &options).expect("FUSE mount");

    let export = Export::new(&mnt, ExportOptions::default()).unwrap();
    let (export_server, fsys) = serve_at(export, &base, "export.sock").await;
    // (The device's synthetic file fails as its open makes its contents.)
    let e = fsys.read("bad").await.expect_err("a read of a bad sector");
    assert_eq!(e.errno(), Errno::EIO, "{e}");
    assert_eq!(fsys.read("good").await.unwrap(), b"readable\n");
    still_serving(&fsys).await;
    // The export holds the mount point open: it goes first, so that the
    // unmount is not refused as busy.
    fsys.close().await;
    export_server.stop().await;
    drop(session);
    assert!(
        !std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .contains(mnt.to_str().unwrap()),
        "the device is still mounted"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// Permissions changed on the host while a user (nobody, through a
/// multi-user export) holds fids: a file made read-only still takes writes
/// through the fid opened before (Unix checks at open) and refuses new
/// opens for writing; a directory closed to everyone refuses walks and
/// listings into it while files open below it go on; a file given to
/// another owner refuses opens; each with EACCES, the session going on,
/// and every acknowledged write on disk.
#[tokio::test]
async fn permissions_changed_mid_session_refuse_what_they_forbid_and_nothing_else() {
    use std::os::unix::fs::{PermissionsExt, chown};
    let base = std::env::temp_dir().join(format!("ninep-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("export");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    let nobody = 65534;
    chown(root.join("dir"), Some(nobody), Some(nobody)).unwrap();
    let (path, dir) = (root.join("dir/f"), root.join("dir"));
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let options = ExportOptions {
        identity: ninep_export::Identity::Multiuser,
        ..ExportOptions::default()
    };
    let export = Export::new(&root, options).unwrap();
    let (server, _root_fsys) = serve_at(export, &base, "sock").await;
    let addr = format!("unix!{}", base.join("sock").display());
    let fsys = Client::connect(&addr)
        .await
        .unwrap()
        .attach_as("nobody", nobody, "")
        .await
        .unwrap();
    let refused = |e: ninep_client::Error, what: &str| {
        assert_eq!(e.errno(), Errno::EACCES, "{what}: {e}");
    };

    let file = fsys.create("dir/f", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, Bytes::from_static(b"one "))
        .await
        .unwrap();

    // Read-only on the host: the open fid writes on; new opens for writing
    // are refused, opens for reading are not.
    chmod(&path, 0o444);
    file.write_all_at(4, Bytes::from_static(b"two "))
        .await
        .unwrap();
    refused(
        fsys.open("dir/f", O_WRONLY)
            .await
            .expect_err("open for writing"),
        "a read-only file opened for writing",
    );
    let reader = fsys.open("dir/f", O_RDONLY).await.unwrap();
    assert_eq!(reader.read_at(0, 100).await.unwrap(), "one two ");

    // The directory closed to everyone: walks and listings into it are
    // refused; the files open below it read and write on.
    chmod(&dir, 0o000);
    // (One name at a time: a walk of several that stops short says only
    // how far it got, which the client reports as ENOENT.)
    let closed = fsys.walk("dir").await.unwrap();
    refused(
        closed.walk_path("f").await.expect_err("walk"),
        "a walk through a closed directory",
    );
    refused(
        fsys.open("dir", O_RDONLY).await.expect_err("listing"),
        "a listing of a closed directory",
    );
    file.write_all_at(8, Bytes::from_static(b"three"))
        .await
        .unwrap();
    assert_eq!(reader.read_at(0, 100).await.unwrap(), "one two three");
    still_serving(&fsys).await;

    // The file given to root, readable by its owner only: nobody's opens
    // are refused.
    chmod(&dir, 0o755);
    chown(&path, Some(0), Some(0)).unwrap();
    chmod(&path, 0o600);
    refused(
        fsys.open("dir/f", O_RDONLY)
            .await
            .expect_err("open of root's file"),
        "an open of another user's private file",
    );

    // Given back: opens work again, and every acknowledged write is there.
    chown(&path, Some(nobody), Some(nobody)).unwrap();
    chmod(&path, 0o644);
    let again = fsys.open("dir/f", O_RDWR).await.unwrap();
    again
        .write_all_at(13, Bytes::from_static(b" four"))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"one two three four");
    drop(server);
    let _ = std::fs::remove_dir_all(&base);
}
