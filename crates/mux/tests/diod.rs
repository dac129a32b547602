//! diod, an independent 9P2000.L server, through the mux: clients of every
//! dialect see and change its files, checked against the directory it
//! exports.

#[path = "../../client/tests/support/diod.rs"]
mod diod_server;
mod support;

use std::os::unix::fs::PermissionsExt;

use ninep_client::SetAttr;
use ninep_mux::{Config, Mux, nsfile};
use ninep_wire::consts::dotl::O_RDWR;
use ninep_wire::{Dialect, Errno, NONUNAME, Name};
use support::*;

#[tokio::test]
async fn every_dialect_reaches_diod_through_the_mux() {
    let diod = diod_server::start("mux");
    // diod keeps files of the uid attached as: root's, as on disk.
    let mux = Mux::new(Config {
        uname: "root".into(),
        n_uname: 0,
        ..Config::default()
    });
    let lines = format!("mount -c {} /n/diod {}", diod.addr(), diod.aname());
    mux.apply(nsfile::parse(&lines).unwrap()).await.unwrap();
    let served = serve(mux, ninep_server::Limits::default()).await;
    for dialect in Dialect::ALL {
        let fsys = attach(&served.addr, dialect).await;
        let dir = format!("n/diod/{dialect}");
        fsys.mkdir(&dir, 0o755).await.unwrap();
        let path = format!("{dir}/f");
        let file = fsys.create(&path, 0o640, O_RDWR).await.unwrap();
        file.write_all_at(0, "through the mux".into())
            .await
            .unwrap();
        drop(file);
        let on_disk = diod.on_disk(&format!("{dialect}/f"));
        assert_eq!(
            std::fs::read_to_string(&on_disk).unwrap(),
            "through the mux"
        );
        assert_eq!(fsys.read_to_string(&path).await.unwrap(), "through the mux");
        let info = fsys.stat(&path).await.unwrap();
        assert_eq!((info.size, info.mode & 0o777), (15, 0o640), "{dialect}");
        let f = fsys.walk(&path).await.unwrap();
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        f.setattr(&chmod).await.unwrap();
        let on_disk = std::fs::metadata(diod.on_disk(&format!("{dialect}/f"))).unwrap();
        assert_eq!(on_disk.permissions().mode() & 0o777, 0o600, "{dialect}");
        let file = f.clone_fid().await.unwrap().open(O_RDWR).await.unwrap();
        file.fsync(false).await.unwrap();
        // Symbolic links and statfs reach diod from every client that has
        // them.
        let d = fsys.walk(&dir).await.unwrap();
        let linked = d.symlink("link", "f", NONUNAME).await;
        let statfs = d.statfs().await;
        if dialect == Dialect::Base {
            assert_eq!(linked.unwrap_err().errno(), Errno::EPERM);
        } else {
            linked.unwrap();
            let target = std::fs::read_link(diod.on_disk(&format!("{dialect}/link")));
            assert_eq!(target.unwrap().to_str(), Some("f"), "{dialect}");
            let link = d.walk(&[Name::new("link").unwrap()]).await.unwrap();
            assert_eq!(link.readlink().await.unwrap(), "f", "{dialect}");
            d.unlink_at("link", false).await.unwrap();
        }
        let statfs = statfs.unwrap();
        if dialect == Dialect::L {
            assert!(statfs.blocks > 0, "diod's figures");
        } else {
            // 9P2000 and .u cannot ask: a tree that counts nothing.
            assert_eq!(statfs, ninep_wire::Rstatfs::uncounted(), "{dialect}");
        }
        drop((file, f, d));
        // A 9P2000 client's listing of a .L directory comes with stats.
        let listing = fsys.read_dir(&dir).await.unwrap();
        assert_eq!(listing.len(), 1, "{dialect}");
        if dialect != Dialect::L {
            assert_eq!(listing[0].info.as_ref().unwrap().size, 15, "{dialect}");
        }
        fsys.rename(&path, "g").await.unwrap();
        assert!(diod.on_disk(&format!("{dialect}/g")).exists());
        fsys.remove(&format!("{dir}/g")).await.unwrap();
        fsys.remove(&dir).await.unwrap();
        fsys.close().await;
    }
    assert_eq!(std::fs::read_dir(&diod.dir).unwrap().count(), 0);
    diod.check_log();
    served.stop().await;
}
