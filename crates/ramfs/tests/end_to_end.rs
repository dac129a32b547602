//! Our client against ramfs and taskbag over real sockets, in every dialect.

use bytes::Bytes;
use ninep_client::{Client, Options};
use ninep_ramfs::{RamFs, Taskbag};
use ninep_server::Server;
use ninep_transport::Addr;
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};

/// Starts `fs` on a fresh unix socket and returns its address.
async fn start<F: ninep_server::Filesystem>(fs: F, name: &str) -> String {
    let path = std::env::temp_dir().join(format!("ninep-e2e-{}-{name}.sock", std::process::id()));
    let addr = Addr::Unix(path);
    let listener = addr.listen().await.unwrap();
    let server = Server::new(fs);
    tokio::spawn(async move {
        server
            .serve_listener(listener, std::future::pending())
            .await
    });
    addr.to_string()
}

async fn connect(addr: &str, dialect: Dialect) -> Client {
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    Client::connect_with(addr, options).await.unwrap()
}

/// A 9P2000.L client of `addr`, attached as glenda.
async fn attached(addr: &str) -> ninep_client::Fsys {
    let client = connect(addr, Dialect::L).await;
    client.attach("glenda", "").await.unwrap()
}

#[tokio::test]
async fn ramfs_in_every_dialect() {
    for dialect in Dialect::ALL {
        let addr = start(RamFs::new(), &format!("ram-{dialect}")).await;
        let client = connect(&addr, dialect).await;
        assert_eq!(client.dialect(), dialect);
        let fsys = client.attach("glenda", "").await.unwrap();

        fsys.mkdir("dir", 0o755).await.unwrap();
        let file = fsys.create("dir/notes", 0o644, O_RDWR).await.unwrap();
        file.write_all_at(0, "hello, world\n".into()).await.unwrap();
        drop(file);
        assert_eq!(
            fsys.read_to_string("dir/notes").await.unwrap(),
            "hello, world\n"
        );

        let info = fsys.stat("dir/notes").await.unwrap();
        assert_eq!(info.size, 13);
        assert!(!info.is_dir());
        assert!(fsys.stat("dir").await.unwrap().is_dir());

        fsys.rename("dir/notes", "renamed").await.unwrap();
        assert!(fsys.stat("dir/notes").await.unwrap_err().is_remote());
        let names: Vec<String> = fsys
            .read_dir("dir")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["renamed"]);

        // Truncating open, then a short rewrite.
        let file = fsys.open("dir/renamed", O_WRONLY | O_TRUNC).await.unwrap();
        file.write_all_at(0, "bye\n".into()).await.unwrap();
        file.close().await.unwrap();
        assert_eq!(fsys.read("dir/renamed").await.unwrap(), b"bye\n");

        fsys.remove("dir/renamed").await.unwrap();
        fsys.remove("dir").await.unwrap();
        assert!(fsys.read_dir("").await.unwrap().is_empty());
        let err = fsys.remove("nothing").await.unwrap_err();
        assert_eq!(err.errno(), ninep_wire::Errno::ENOENT, "{dialect}: {err}");
    }
}

#[tokio::test]
async fn large_files_and_many_entries() {
    let addr = start(RamFs::new(), "large").await;
    let fsys = attached(&addr).await;
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, data.clone().into()).await.unwrap();
    drop(file);
    assert_eq!(fsys.read("big").await.unwrap(), data);

    fsys.mkdir("many", 0o755).await.unwrap();
    let dir = fsys.walk("many").await.unwrap();
    for i in 0..2000 {
        dir.clone_fid()
            .await
            .unwrap()
            .create(&format!("f{i:05}"), 0o644, O_RDWR)
            .await
            .unwrap();
    }
    for dialect in Dialect::ALL {
        let fsys = connect(&addr, dialect)
            .await
            .attach("glenda", "")
            .await
            .unwrap();
        let names: Vec<String> = fsys
            .read_dir("many")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let want: Vec<String> = (0..2000).map(|i| format!("f{i:05}")).collect();
        assert_eq!(names, want, "{dialect}");
    }
}

#[tokio::test]
async fn taskbag_moves_questions_through_the_bag() {
    let addr = start(Taskbag::new(), "taskbag").await;
    let fsys = connect(&addr, Dialect::Base)
        .await
        .attach("glenda", "")
        .await
        .unwrap();
    let ls = |dir: &'static str| {
        let fsys = &fsys;
        async move {
            let mut names: Vec<String> = fsys
                .read_dir(dir)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            names.sort();
            names
        }
    };
    assert!(ls("questions").await.is_empty());

    // Ask two questions.
    for (name, q) in [("q1", "2+2?\n"), ("q2", "3+3?\n")] {
        let file = fsys
            .create(&format!("questions/{name}"), 0o666, O_WRONLY)
            .await
            .unwrap();
        file.write_all_at(0, q.into()).await.unwrap();
        file.close().await.unwrap();
    }
    assert_eq!(ls("questions").await, ["q1", "q2"]);
    // Questions are exclusive-use files.
    assert_ne!(
        fsys.stat("questions/q1").await.unwrap().plan9_mode & ninep_wire::consts::mode::DMEXCL,
        0
    );

    // A worker takes q1: it moves to working while open.
    let task = fsys.open("questions/q1", O_RDWR).await.unwrap();
    assert_eq!(ls("questions").await, ["q2"]);
    assert_eq!(ls("working").await, ["q1"]);
    assert_eq!(task.read_at(0, 100).await.unwrap(), "2+2?\n");
    task.write_all_at(5, "4\n".into()).await.unwrap();
    task.close().await.unwrap();
    assert_eq!(ls("answers").await, ["q1"]);
    assert_eq!(
        fsys.read_to_string("answers/q1").await.unwrap(),
        "2+2?\n4\n"
    );

    // A worker that gives up puts q2 back.
    let task = fsys.open("questions/q2", O_RDWR).await.unwrap();
    assert_eq!(ls("working").await, ["q2"]);
    // While it is held, nobody else can open it.
    assert!(fsys.open("working/q2", O_RDONLY).await.is_err());
    drop(task);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(ls("questions").await, ["q2"]);
    assert!(ls("working").await.is_empty());
}

/// A file grows no larger than the server allows: a write at a far offset
/// or a truncation past the limit is refused (EFBIG) without the server
/// asking for the memory, and the file stays as it was.
#[tokio::test]
async fn files_grow_no_larger_than_allowed() {
    let addr = start(
        RamFs::with_limits(ninep_ramfs::Limits {
            max_file_size: 1 << 20,
            ..ninep_ramfs::Limits::default()
        }),
        "ram-max-size",
    )
    .await;
    let fsys = attached(&addr).await;
    let file = fsys.create("f", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, "kept".into()).await.unwrap();
    let far = file.write_at(1 << 40, "x".into()).await.unwrap_err();
    assert_eq!(far.errno(), ninep_wire::Errno::EFBIG);
    let past = file.write_at((1 << 20) - 1, "xy".into()).await.unwrap_err();
    assert_eq!(past.errno(), ninep_wire::Errno::EFBIG);
    let grow = ninep_client::SetAttr {
        size: Some(1 << 21),
        ..ninep_client::SetAttr::default()
    };
    let err = file.fid().setattr(&grow).await.unwrap_err();
    assert_eq!(err.errno(), ninep_wire::Errno::EFBIG);
    assert_eq!(fsys.read_to_string("f").await.unwrap(), "kept");
    // Up to the limit is allowed.
    assert_eq!(file.write_at((1 << 20) - 1, "z".into()).await.unwrap(), 1);
    assert_eq!(fsys.stat("f").await.unwrap().size, 1 << 20);
}

/// All files together hold no more than the server allows: past it a
/// write or truncation is refused (ENOSPC), and what a removal, a
/// truncation or an overwrite gives back may be written again.
#[tokio::test]
async fn the_tree_holds_no_more_than_allowed() {
    const MAX: u64 = 1 << 20;
    let limits = ninep_ramfs::Limits {
        max_file_size: MAX,
        max_bytes: MAX,
    };
    let addr = start(RamFs::with_limits(limits), "ram-max-bytes").await;
    let fsys = attached(&addr).await;
    let half = Bytes::from(vec![7u8; (MAX / 2) as usize]);
    let one = fsys.create("one", 0o644, O_RDWR).await.unwrap();
    one.write_all_at(0, half.clone()).await.unwrap();
    let two = fsys.create("two", 0o644, O_RDWR).await.unwrap();
    two.write_all_at(0, half.clone()).await.unwrap();
    // Full: a third file can be made but holds nothing.
    let three = fsys.create("three", 0o644, O_RDWR).await.unwrap();
    let full = three.write_at(0, "x".into()).await.unwrap_err();
    assert_eq!(full.errno(), ninep_wire::Errno::ENOSPC);
    let grow = ninep_client::SetAttr {
        size: Some(1),
        mode: Some(0o600),
        ..ninep_client::SetAttr::default()
    };
    let err = three.fid().setattr(&grow).await.unwrap_err();
    assert_eq!(err.errno(), ninep_wire::Errno::ENOSPC);
    // Refused whole: neither the size nor the mode changed.
    let info = fsys.stat("three").await.unwrap();
    assert_eq!((info.size, info.mode & 0o777), (0, 0o644));

    // A removal gives its bytes back.
    drop(one);
    fsys.remove("one").await.unwrap();
    three.write_all_at(0, half.clone()).await.unwrap();
    // A truncation gives back, and an overwrite (O_TRUNC) too.
    let shrink = ninep_client::SetAttr {
        size: Some(MAX / 4),
        ..ninep_client::SetAttr::default()
    };
    two.fid().setattr(&shrink).await.unwrap();
    let quarter = Bytes::from(vec![1u8; (MAX / 4) as usize]);
    three.write_all_at(MAX / 2, quarter.clone()).await.unwrap();
    assert_eq!(
        three
            .write_at(3 * MAX / 4, "x".into())
            .await
            .unwrap_err()
            .errno(),
        ninep_wire::Errno::ENOSPC
    );
    drop(two);
    let two = fsys.open("two", O_RDWR | O_TRUNC).await.unwrap();
    two.write_all_at(0, quarter).await.unwrap();
    assert_eq!(fsys.stat("three").await.unwrap().size, 3 * MAX / 4);
}

/// A file's extended attributes hold at most 64 KiB together: past it a
/// set is refused (ENOSPC), and an attribute replaced counts once.
#[tokio::test]
async fn extended_attributes_hold_no_more_than_allowed() {
    let addr = start(RamFs::new(), "ram-xattrs").await;
    let fsys = attached(&addr).await;
    fsys.create("f", 0o644, O_RDWR).await.unwrap();
    let fid = fsys.walk("f").await.unwrap();
    let value = Bytes::from(vec![7u8; 30 * 1024]);
    fid.set_xattr("user.one", value.clone(), 0).await.unwrap();
    fid.set_xattr("user.two", value.clone(), 0).await.unwrap();
    // Replacing counts the new value only.
    fid.set_xattr("user.two", value.clone(), 0).await.unwrap();
    let full = fid.set_xattr("user.three", value, 0).await.unwrap_err();
    assert_eq!(full.errno(), ninep_wire::Errno::ENOSPC);
    assert!(fid.xattr("user.three").await.is_err());
    fid.remove_xattr("user.one").await.unwrap();
    assert!(fid.xattr("user.one").await.is_err(), "removed");
    let again = Bytes::from(vec![8u8; 30 * 1024]);
    fid.set_xattr("user.three", again.clone(), 0).await.unwrap();
    assert_eq!(fid.xattr("user.three").await.unwrap(), again);
}

/// The server's resident memory, in MiB.
fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        >> 10
}

/// What the limit counts is the memory held: files grown to 15 MiB and
/// then cut to a byte, ten of them under a 16 MiB limit, leave the
/// server holding about nothing more (a file's spare room was kept, and
/// uncounted, before).
#[tokio::test]
async fn the_memory_held_is_what_is_counted() {
    const MIB: u64 = 1 << 20;
    let limits = ninep_ramfs::Limits {
        max_file_size: 16 * MIB,
        max_bytes: 16 * MIB,
    };
    let addr = start(RamFs::with_limits(limits), "ram-held").await;
    let fsys = attached(&addr).await;
    let before = resident_mib();
    let chunk = Bytes::from(vec![1u8; MIB as usize]);
    for i in 0..10 {
        let file = fsys.create(&format!("f{i}"), 0o644, O_RDWR).await.unwrap();
        for k in 0..15 {
            file.write_all_at(k * MIB, chunk.clone()).await.unwrap();
        }
        let cut = ninep_client::SetAttr {
            size: Some(1),
            ..ninep_client::SetAttr::default()
        };
        file.fid().setattr(&cut).await.unwrap();
    }
    let grown = resident_mib().saturating_sub(before);
    assert!(grown < 48, "{grown} MiB more held under a 16 MiB limit");
}
