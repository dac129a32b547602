//! The client's operations through the mux, in every dialect on either
//! side: what both dialects can express passes through to the server, and
//! what either cannot is refused with the errno the refusing client gives.

mod support;

use std::sync::Arc;

use ninep_client::{Fid, File, Fsys, Node, Options, SetAttr, SetTime};
use ninep_mux::Config;
use ninep_server::Limits;
use ninep_wire::consts::dotl::O_RDWR;
use ninep_wire::consts::unix::*;
use ninep_wire::{Dialect, Errno, NONUNAME, Name, QidType};
use support::*;

/// A client of `dialect` through a mux that speaks `up` to ramfs, with
/// a fresh directory of its own there holding `f`.
struct Case {
    /// Names the case in assertions.
    at: String,
    up: Dialect,
    dialect: Dialect,
    fsys: Fsys,
    dir: Fid,
    /// The file `f`, opened for reading and writing.
    file: File,
    _servers: Arc<(Running, Running)>,
}

impl Case {
    /// Whether both dialects can express what only 9P2000.u and .L have.
    fn both_extended(&self) -> bool {
        self.dialect != Dialect::Base && self.up != Dialect::Base
    }
}

/// Every pair of dialects on either side of the mux.
async fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for up in Dialect::ALL {
        let ram = ramfs().await;
        let config = Config {
            client: Options {
                dialect: Some(up),
                ..Options::default()
            },
            ..Config::default()
        };
        let mux = mux_with(config, &format!("mount -c {} /n/ram", ram.addr)).await;
        let served = serve(mux, Limits::default()).await;
        let addr = served.addr.clone();
        let servers = Arc::new((ram, served));
        for dialect in Dialect::ALL {
            let fsys = attach(&addr, dialect).await;
            let path = format!("n/ram/{dialect}");
            fsys.mkdir(&path, 0o755).await.unwrap();
            let dir = fsys.walk(&path).await.unwrap();
            let file = dir.clone_fid().await.unwrap();
            let file = file.create("f", 0o644, O_RDWR).await.unwrap();
            cases.push(Case {
                at: format!("{dialect} client, {up} server"),
                up,
                dialect,
                fsys,
                dir,
                file,
                _servers: servers.clone(),
            });
        }
    }
    cases
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

#[tokio::test]
async fn special_files_pass_through_where_both_dialects_have_them() {
    for case in cases().await {
        let Case { at, dir, file, .. } = &case;
        file.write_all_at(0, "data".into()).await.unwrap();
        let f = dir.walk(&[name("f")]).await.unwrap();

        let symlink = dir.symlink("link", "some/target", NONUNAME).await;
        let fifo = Node {
            mode: S_IFIFO | 0o640,
            rdev: 0,
        };
        let made_fifo = dir.mknod("fifo", fifo, NONUNAME).await;
        let linked = dir.link("hard", &f).await;
        if !case.both_extended() {
            for result in [symlink.map(drop), made_fifo.map(drop), linked] {
                assert_eq!(result.unwrap_err().errno(), Errno::EPERM, "{at}");
            }
            continue;
        }
        let qid = symlink.unwrap_or_else(|e| panic!("{at}: symlink: {e}"));
        assert!(qid.ty.contains(QidType::SYMLINK), "{at}");
        let link = dir.walk(&[name("link")]).await.unwrap();
        assert_eq!(link.readlink().await.unwrap(), "some/target", "{at}");
        assert_eq!(f.readlink().await.unwrap_err().errno(), Errno::EINVAL);

        made_fifo.unwrap_or_else(|e| panic!("{at}: mknod: {e}"));
        let info = dir.walk(&[name("fifo")]).await.unwrap().stat().await;
        assert_eq!(info.unwrap().mode, S_IFIFO | 0o640, "{at}");

        linked.unwrap_or_else(|e| panic!("{at}: link: {e}"));
        let hard = dir.walk(&[name("hard")]).await.unwrap();
        assert_eq!(hard.stat().await.unwrap().size, 4, "{at}");
    }
}

#[tokio::test]
async fn attributes_and_sync_pass_through() {
    for case in cases().await {
        let Case { at, dir, file, .. } = &case;
        file.write_all_at(0, "0123456789".into()).await.unwrap();
        file.fsync(false).await.unwrap();
        file.fsync(true).await.unwrap();
        let f = dir.walk(&[name("f")]).await.unwrap();

        let set = SetAttr {
            mode: Some(0o600),
            size: Some(4),
            mtime: Some(SetTime::At { sec: 1000, nsec: 0 }),
            ..SetAttr::default()
        };
        f.setattr(&set)
            .await
            .unwrap_or_else(|e| panic!("{at}: setattr: {e}"));
        let info = f.stat().await.unwrap();
        assert_eq!(info.mode, S_IFREG | 0o600, "{at}");
        assert_eq!((info.size, info.mtime), (4, 1000), "{at}");

        let chown = SetAttr {
            uid: Some(1000),
            ..SetAttr::default()
        };
        let chowned = f.setattr(&chown).await;
        if case.both_extended() {
            chowned.unwrap_or_else(|e| panic!("{at}: chown: {e}"));
            assert_eq!(f.stat().await.unwrap().n_uid, 1000, "{at}");
        } else {
            assert_eq!(chowned.unwrap_err().errno(), Errno::EPERM, "{at}");
        }

        // The mux answers statfs for every server, with empty figures
        // where the server's dialect has no way to ask.
        let figures = dir
            .statfs()
            .await
            .unwrap_or_else(|e| panic!("{at}: statfs: {e}"));
        assert!(figures.namelen > 0, "{at}");
    }
}

#[tokio::test]
async fn renames_cross_directories_only_where_both_dialects_can() {
    for case in cases().await {
        let Case { at, fsys, dir, .. } = &case;
        let other = format!("n/ram/{}-other", case.dialect);
        fsys.mkdir(&other, 0o755).await.unwrap();
        let other = fsys.walk(&other).await.unwrap();
        dir.rename_at(&name("f"), dir, &name("g"))
            .await
            .unwrap_or_else(|e| panic!("{at}: rename: {e}"));
        let across = dir.rename_at(&name("g"), &other, &name("h")).await;
        let (left_in, left) = if case.dialect == Dialect::L && case.up == Dialect::L {
            across.unwrap_or_else(|e| panic!("{at}: rename across: {e}"));
            (&other, "h")
        } else {
            assert_eq!(across.unwrap_err().errno(), Errno::EXDEV, "{at}");
            (dir, "g")
        };
        left_in.unlink_at(left, false).await.unwrap();
        assert!(left_in.walk(&[name(left)]).await.is_err(), "{at}");
    }
}

#[tokio::test]
async fn a_9p2000l_servers_attributes_reach_a_9p2000l_client_whole() {
    let ram = ramfs().await;
    let mux = serve_mux(&format!("mount -c {} /n/ram", ram.addr)).await;
    let through = attach(&mux.addr, Dialect::L).await;
    let direct = attach(&ram.addr, Dialect::L).await;
    let file = through.create("n/ram/f", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, vec![7u8; 5000].into()).await.unwrap();
    let set = SetAttr {
        atime: Some(SetTime::At {
            sec: 1_000_000,
            nsec: 123_456_789,
        }),
        ..SetAttr::default()
    };
    file.fid().setattr(&set).await.unwrap();
    let seen = through.stat("n/ram/f").await.unwrap();
    let there = direct.stat("f").await.unwrap();
    // Only the qid is the mux's own; the rest is the server's, to the
    // nanosecond and block.
    assert_eq!(
        (seen.blocks, seen.blksize, seen.nlink),
        (there.blocks, there.blksize, there.nlink)
    );
    assert_eq!((seen.atime, seen.atime_nsec), (1_000_000, 123_456_789));
    assert_eq!(
        (seen.ctime, seen.ctime_nsec, seen.mtime_nsec),
        (there.ctime, there.ctime_nsec, there.mtime_nsec)
    );
}
