//! An export whose process has run out of descriptors. A directory, link
//! or node it makes needs one more for its fid once made; the refusal then
//! leaves nothing behind, so a client that gives descriptors back (a mount
//! keeping files open does) and asks again has it made, not EEXIST. A test
//! binary of its own: it uses up its process's descriptors.

use ninep_client::{Client, Node, Options};
use ninep_export::{Export, Options as ExportOptions};
use ninep_server::Server;
use ninep_testkit::attach_root;
use ninep_transport::Addr;
use ninep_wire::{Dialect, Errno};

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
    // 9P2000.u makes them with a Tcreate, which walks the fid to what it made.
    let options = Options {
        dialect: Some(Dialect::U),
        ..Options::default()
    };
    let u = Client::connect_with(&addr.to_string(), options)
        .await
        .expect("connect")
        .attach_as("root", 0, "")
        .await
        .expect("attach");
    std::fs::write(export_dir.join("f"), "f").unwrap();
    let f = u.walk("f").await.expect("walk to f");

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
    let u_dir = u.mkdir("ud", 0o755).await;
    let u_symlink = u.root().symlink("us", "f", 0).await;
    let u_link = u.root().link("ul", &f).await.map(|()| f.qid());
    let u_node = u.root().mknod("up", fifo, 0).await;
    drop(taken);

    let made = [
        ("mkdir", "d", dir),
        ("mknod", "p", node),
        (".u mkdir", "ud", u_dir),
        (".u symlink", "us", u_symlink),
        (".u link", "ul", u_link),
        (".u mknod", "up", u_node),
    ];
    for (what, name, made) in made {
        let refused = made
            .err()
            .unwrap_or_else(|| panic!("{what} succeeded without descriptors"));
        assert_eq!(refused.errno(), Errno::EMFILE, "{what}: {refused}");
        let left = export_dir.join(name).symlink_metadata().is_ok();
        assert!(!left, "the refused {what} left {name}");
    }
    fsys.mkdir("d", 0o755).await.unwrap();
    fsys.root().mknod("p", fifo, 0).await.unwrap();
    u.mkdir("ud", 0o755).await.unwrap();
    u.root().symlink("us", "f", 0).await.unwrap();
    u.root().link("ul", &f).await.unwrap();
    u.root().mknod("up", fifo, 0).await.unwrap();
    assert!(export_dir.join("d").is_dir());
    assert!(export_dir.join("ud").is_dir());
    assert_eq!(
        std::fs::read_link(export_dir.join("us")).unwrap(),
        std::path::Path::new("f")
    );
    assert_eq!(std::fs::read_to_string(export_dir.join("ul")).unwrap(), "f");
    let _ = std::fs::remove_dir_all(&base);
}
