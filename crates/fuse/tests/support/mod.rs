//! A served file system and a mount of it, for the mount's tests.

use std::path::Path;

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

/// Mounts the tree served at `addr` on `mnt`, speaking `dialect` as root;
/// the session unmounts when dropped.
pub async fn mount(
    addr: &Addr,
    dialect: Dialect,
    cache: Cache,
    mnt: &Path,
) -> fuser::BackgroundSession {
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    let client = Client::connect_with(&addr.to_string(), options)
        .await
        .unwrap();
    let fsys = client.attach_as("root", 0, "").await.unwrap();
    ninep_fuse::mount(
        fsys,
        mnt,
        &ninep_fuse::Options {
            source: "ninep-test".into(),
            cache,
            ..Default::default()
        },
    )
    .expect("mount (is /dev/fuse there and fusermount3 installed?)")
}
