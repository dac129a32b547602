//! An export whose process has run out of descriptors. A directory or node
//! it makes needs one more for its fid once made; the refusal then leaves
//! nothing behind, so a client that gives descriptors back (a mount
//! keeping files open does) and asks again has its directory made, not
//! EEXIST. A test binary of its own: it uses up its process's descriptors.

use ninep_client::Node;
use ninep_export::{Export, Options as ExportOptions};
use ninep_server::Server;
use ninep_testkit::attach_root;
use ninep_transport::Addr;
use ninep_wire::Errno;

#[tokio::test]
async fn a_directory_or_node_refused_for_want_of_descriptors_is_not_left_made() {
    let base = std::env::temp_dir().join(format!("ninep-descriptors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let export_dir = base.join("export");
    std::fs::create_dir_all(&export_dir).unwrap();
    let export = Export::new(&export_dir, ExportOptions::default()).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    let _server = Server::new(export).spawn(addr.listen().await.unwrap());
    let fsys = attach_root(&addr.to_string()).await;

    // A limit low enough to reach, then every descriptor under it taken.
    let lowered = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg("--nofile=512:")
        .status()
        .expect("prlimit (util-linux)");
    assert!(lowered.success());
    let mut taken = Vec::new();
    let shortage = loop {
        match std::fs::File::open("/dev/null") {
            Ok(file) => taken.push(file),
            Err(e) => break e,
        }
    };
    assert_eq!(shortage.raw_os_error(), Some(Errno::EMFILE.0 as i32));

    let dir = fsys.mkdir("d", 0o755).await;
    let fifo = Node {
        mode: 0o010644,
        rdev: 0,
    };
    let node = fsys.root().mknod("p", fifo, 0).await;
    drop(taken);

    for (what, refused) in [("mkdir", dir.err()), ("mknod", node.err())] {
        let refused = refused.unwrap_or_else(|| panic!("{what} succeeded without descriptors"));
        assert_eq!(refused.errno(), Errno::EMFILE, "{what}: {refused}");
    }
    assert!(!export_dir.join("d").exists(), "the refused mkdir left d");
    assert!(!export_dir.join("p").exists(), "the refused mknod left p");
    fsys.mkdir("d", 0o755).await.unwrap();
    fsys.root().mknod("p", fifo, 0).await.unwrap();
    assert!(export_dir.join("d").is_dir());
    let _ = std::fs::remove_dir_all(&base);
}
