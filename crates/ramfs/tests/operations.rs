//! The client's dialect-neutral operations against ramfs in every dialect:
//! each does what it says where the dialect can express it, and is refused
//! with the errno Linux gives where it cannot.

use ninep_client::{Client, Fid, Node, Options, SetAttr, SetTime};
use ninep_ramfs::RamFs;
use ninep_server::Server;
use ninep_transport::Addr;
use ninep_wire::consts::dotl::{O_RDWR, O_WRONLY};
use ninep_wire::consts::unix::*;
use ninep_wire::{Dialect, Errno, Name, QidType, convert};

async fn attach(dialect: Dialect, test: &str) -> (Client, Fid) {
    let path = std::env::temp_dir().join(format!(
        "ninep-ops-{}-{test}-{dialect}.sock",
        std::process::id()
    ));
    let addr = Addr::Unix(path);
    let listener = addr.listen().await.unwrap();
    let server = Server::new(RamFs::new());
    tokio::spawn(async move {
        server
            .serve_listener(listener, std::future::pending())
            .await
    });
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    let client = Client::connect_with(&addr.to_string(), options)
        .await
        .unwrap();
    let root = client.attach("glenda", "").await.unwrap().into_root();
    (client, root)
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

#[tokio::test]
async fn special_files_where_the_dialect_has_them() {
    for dialect in Dialect::ALL {
        let (_client, root) = attach(dialect, "special").await;
        let has_special_files = dialect != Dialect::Base;

        let symlink = root.symlink("link", "some/target", u32::MAX).await;
        let fifo = Node {
            mode: S_IFIFO | 0o640,
            rdev: 0,
        };
        let made_fifo = root.mknod("fifo", fifo, u32::MAX).await;
        let null = Node {
            mode: S_IFCHR | 0o666,
            rdev: convert::makedev(1, 3),
        };
        let made_null = root.mknod("null", null, u32::MAX).await;
        if !has_special_files {
            for result in [symlink, made_fifo, made_null] {
                assert_eq!(result.unwrap_err().errno(), Errno::EPERM, "{dialect}");
            }
            continue;
        }
        assert!(symlink.unwrap().ty.contains(QidType::SYMLINK), "{dialect}");
        let link = root.walk(&[name("link")]).await.unwrap();
        assert_eq!(link.readlink().await.unwrap(), "some/target", "{dialect}");
        made_fifo.unwrap();
        let info = root
            .walk(&[name("fifo")])
            .await
            .unwrap()
            .stat()
            .await
            .unwrap();
        assert_eq!(info.mode, S_IFIFO | 0o640, "{dialect}");
        made_null.unwrap();
        let info = root
            .walk(&[name("null")])
            .await
            .unwrap()
            .stat()
            .await
            .unwrap();
        assert_eq!(info.mode & S_IFMT, S_IFCHR, "{dialect}");
        assert_eq!(info.rdev, convert::makedev(1, 3), "{dialect}");
        let file = root.walk(&[name("fifo")]).await.unwrap();
        assert_eq!(
            file.readlink().await.unwrap_err().errno(),
            Errno::EINVAL,
            "{dialect}"
        );
    }
}

#[tokio::test]
async fn hard_links_renames_and_removals() {
    for dialect in Dialect::ALL {
        let (_client, root) = attach(dialect, "names").await;
        root.mkdir("a", 0o755).await.unwrap();
        root.mkdir("b", 0o755).await.unwrap();
        let a = root.walk(&[name("a")]).await.unwrap();
        let b = root.walk(&[name("b")]).await.unwrap();
        let file = a.clone_fid().await.unwrap();
        let file = file.create("f", 0o644, O_RDWR).await.unwrap();
        file.write_all_at(0, "data".into()).await.unwrap();
        let f = a.walk(&[name("f")]).await.unwrap();

        let linked = b.link("hard", &f).await;
        if dialect == Dialect::Base {
            assert_eq!(linked.unwrap_err().errno(), Errno::EPERM);
        } else {
            linked.unwrap();
            let hard = b.walk(&[name("hard")]).await.unwrap();
            assert_eq!(hard.stat().await.unwrap().size, 4, "{dialect}");
        }

        // Within a directory every dialect renames; across, only .L.
        a.rename_at(&name("f"), &a, &name("g")).await.unwrap();
        let across = a.rename_at(&name("g"), &b, &name("h")).await;
        let (dir, left) = if dialect == Dialect::L {
            across.unwrap();
            (&b, "h")
        } else {
            assert_eq!(across.unwrap_err().errno(), Errno::EXDEV, "{dialect}");
            (&a, "g")
        };
        let refused = a.rename_at(&name("g"), &a, &name("..")).await;
        assert_eq!(refused.unwrap_err().errno(), Errno::EINVAL, "{dialect}");

        assert_eq!(
            dir.unlink_at(left, true).await.unwrap_err().errno(),
            Errno::ENOTDIR,
            "{dialect}"
        );
        assert_eq!(
            root.unlink_at("b", false).await.unwrap_err().errno(),
            Errno::EISDIR,
            "{dialect}"
        );
        dir.unlink_at(left, false).await.unwrap();
        assert!(dir.walk(&[name(left)]).await.is_err(), "{dialect}");
        drop((a, b, f, file));
        root.unlink_at("a", true).await.unwrap();
    }
}

#[tokio::test]
async fn attributes_and_sync() {
    for dialect in Dialect::ALL {
        let (_client, root) = attach(dialect, "attrs").await;
        let dir = root.clone_fid().await.unwrap();
        let file = dir.create("f", 0o644, O_WRONLY).await.unwrap();
        file.write_all_at(0, "0123456789".into()).await.unwrap();
        file.fsync(false).await.unwrap();
        file.fsync(true).await.unwrap();
        let f = root.walk(&[name("f")]).await.unwrap();

        let set = SetAttr {
            mode: Some(0o600),
            size: Some(4),
            mtime: Some(SetTime::At { sec: 1000, nsec: 0 }),
            ..SetAttr::default()
        };
        f.setattr(&set).await.unwrap();
        let info = f.stat().await.unwrap();
        assert_eq!(info.mode, S_IFREG | 0o600, "{dialect}");
        assert_eq!(info.size, 4, "{dialect}");
        assert_eq!(info.mtime, 1000, "{dialect}");

        let chown = SetAttr {
            uid: Some(1000),
            ..SetAttr::default()
        };
        let chowned = f.setattr(&chown).await;
        if dialect == Dialect::Base {
            assert_eq!(chowned.unwrap_err().errno(), Errno::EPERM);
        } else {
            chowned.unwrap();
            assert_eq!(f.stat().await.unwrap().n_uid, 1000, "{dialect}");
        }

        // 9P2000 and .u cannot ask: a tree that counts nothing.
        let statfs = root.statfs().await.unwrap();
        assert!(statfs.namelen > 0, "{dialect}");
        if dialect != Dialect::L {
            assert_eq!(statfs, ninep_wire::Rstatfs::uncounted(), "{dialect}");
        }
    }
}
