//! A served file system and a mount of it, for the mount's tests.

use std::path::{Path, PathBuf};

use ninep_client::{Client, Options};
use ninep_fuse::Cache;
use ninep_server::{Filesystem, Server};
use ninep_transport::Addr;
use ninep_wire::Dialect;

/// Serves `fs` at `addr` for the rest of the test.
pub async fn serve(fs: impl Filesystem, addr: &Addr) {
    let listener = addr.listen().await.unwrap();
    let server = Server::new(fs);
    tokio::spawn(async move {
        server
            .serve_listener(listener, std::future::pending())
            .await
    });
}

/// A mount for a test: dropping it ends the session, and detaches the
/// mount if the session's own unmount left it (busy at that moment), so
/// that no test leaves a mount behind.
pub struct Mounted {
    session: Option<ninep_fuse::Mount>,
    mnt: PathBuf,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        drop(self.session.take());
        if is_mounted(&self.mnt) {
            eprintln!(
                "{}: still mounted after the session ended; detached",
                self.mnt.display()
            );
            detach(&self.mnt);
        }
    }
}

/// Whether something is mounted on `path`.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|point| Path::new(point) == path)
}

/// Detaches what is mounted on `path`, lazily (whatever still holds it
/// keeps it until it lets go).
pub fn detach(path: &Path) {
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(path)
        .status();
}

/// A test mount's options under `cache`.
pub fn options(cache: Cache) -> ninep_fuse::Options {
    ninep_fuse::Options {
        source: "ninep-test".into(),
        cache,
        ..Default::default()
    }
}

/// Mounts the tree served at `addr` on `mnt` with `options`, speaking
/// `dialect` as root; the mount goes when the result is dropped.
pub async fn mount(
    addr: &Addr,
    dialect: Dialect,
    options: &ninep_fuse::Options,
    mnt: &Path,
) -> Mounted {
    let client_options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    let client = Client::connect_with(&addr.to_string(), client_options)
        .await
        .unwrap();
    let fsys = client.attach_as("root", 0, "").await.unwrap();
    let session = ninep_fuse::mount(fsys, mnt, options)
        .expect("mount (is /dev/fuse there and fusermount3 installed?)");
    Mounted {
        session: Some(session),
        mnt: mnt.to_owned(),
    }
}
