//! The mux over real sockets: our client through the mux to ramfs, in
//! every dialect on either side.

mod support;

use ninep_client::{Client, Options};
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_WRONLY};
use support::*;

/// One server mounted alone: every operation passes through, and each
/// dialect a client speaks works whatever the server speaks.
#[tokio::test]
async fn single_mount_passes_everything_through() {
    for up_dialect in Dialect::ALL {
        let ram = ramfs().await;
        // ramfs speaks every dialect; make the mux use the one under test.
        let mux = ninep_mux::Mux::new(ninep_mux::Config {
            client: Options {
                dialect: Some(up_dialect),
                ..Options::default()
            },
            ..ninep_mux::Config::default()
        });
        mux.apply(ninep_mux::nsfile::parse(&format!("mount -c {} /n/ram", ram.addr)).unwrap())
            .await
            .unwrap();
        let served = serve(mux, ninep_server::Limits::default()).await;
        for dialect in Dialect::ALL {
            let at = format!("{dialect} client, {up_dialect} server");
            let fsys = attach(&served.addr, dialect).await;
            assert_eq!(names(&fsys, "").await, ["n"], "{at}");
            assert_eq!(names(&fsys, "n").await, ["ram"], "{at}");
            let dir = format!("n/ram/{dialect}");
            fsys.mkdir(&dir, 0o755)
                .await
                .unwrap_or_else(|e| panic!("{at}: mkdir: {e}"));
            let file = fsys
                .create(&format!("{dir}/f"), 0o644, O_RDWR)
                .await
                .unwrap_or_else(|e| panic!("{at}: create: {e}"));
            file.write_all_at(0, "hello, mux".into()).await.unwrap();
            drop(file);
            let text = fsys.read_to_string(&format!("{dir}/f")).await.unwrap();
            assert_eq!(text, "hello, mux", "{at}");
            let info = fsys.stat(&format!("{dir}/f")).await.unwrap();
            assert_eq!((info.name.as_str(), info.size), ("f", 10), "{at}");
            assert!(!info.is_dir());
            let info = fsys.stat(&dir).await.unwrap();
            assert!(info.is_dir(), "{at}");
            // A 9P2000 listing carries stats; one of a 9P2000.L server must
            // be completed by the mux.
            let listing = fsys.read_dir(&dir).await.unwrap();
            assert_eq!(listing.len(), 1, "{at}");
            assert_eq!(listing[0].name, "f");
            if dialect != Dialect::L {
                let info = listing[0].info.as_ref().unwrap();
                assert_eq!(info.size, 10, "{at}");
            }
            fsys.rename(&format!("{dir}/f"), "g")
                .await
                .unwrap_or_else(|e| panic!("{at}: rename: {e}"));
            assert_eq!(names(&fsys, &dir).await, ["g"], "{at}");
            fsys.write(&format!("{dir}/g"), "HELLO").await.unwrap();
            let got = fsys.read_to_string(&format!("{dir}/g")).await.unwrap();
            assert_eq!(got, "HELLO, mux", "{at}");
            let missing = fsys
                .open(&format!("{dir}/nothing"), O_RDONLY)
                .await
                .unwrap_err();
            assert_eq!(
                missing.errno(),
                ninep_wire::Errno::ENOENT,
                "{at}: {missing}"
            );
            fsys.remove(&format!("{dir}/g")).await.unwrap();
            fsys.remove(&dir).await.unwrap();
            assert!(names(&fsys, "n/ram").await.is_empty(), "{at}");
            // The mux's own directories refuse changes.
            let refused = fsys.create("n/x", 0o644, O_WRONLY).await.unwrap_err();
            assert!(refused.is_remote(), "{at}");
            fsys.close().await;
        }
        served.stop().await;
        ram.stop().await;
    }
}

/// Every client attaching gets the base name space; the mux's servers are
/// reached once each, however many clients there are.
#[tokio::test]
async fn clients_share_one_connection_per_server() {
    let ram = ramfs().await;
    let served = serve_mux(&format!("mount -c {} /", ram.addr)).await;
    let client = Client::connect(&served.addr).await.unwrap();
    let a = client.attach("a", "").await.unwrap();
    let b = client.attach("b", "").await.unwrap();
    a.create("shared", 0o644, O_WRONLY).await.unwrap();
    assert_eq!(names(&b, "").await, ["shared"]);
    served.stop().await;
    ram.stop().await;
}

/// A union directory lists its members in order, each name once (the first
/// member's wins), and a listing read in small pieces resumes where it
/// stopped, in both kinds of directory read.
#[tokio::test]
async fn union_listings_merge_in_order_and_resume() {
    let a = ramfs_with(&["bin/", "bin/ls", "bin/cat"]).await;
    let b = ramfs_with(&["bin/", "bin/rc", "bin/ls", "bin/sub/"]).await;
    let served = serve_mux(&format!(
        "mount {} /n/a\nmount {} /n/b\nbind /n/a/bin /bin\nbind -a /n/b/bin /bin\n",
        a.addr, b.addr
    ))
    .await;
    let direct_a = attach(&a.addr, Dialect::L).await;
    let direct_b = attach(&b.addr, Dialect::L).await;
    let mut want: Vec<String> = Vec::new();
    for fsys in [&direct_a, &direct_b] {
        for e in fsys.read_dir("bin").await.unwrap() {
            if !want.contains(&e.name) {
                want.push(e.name);
            }
        }
    }
    assert_eq!(want.len(), 4, "{want:?}");
    for dialect in Dialect::ALL {
        let fsys = attach(&served.addr, dialect).await;
        let listing = fsys.read_dir("bin").await.unwrap();
        let got: Vec<String> = listing.iter().map(|e| e.name.clone()).collect();
        assert_eq!(got, want, "{dialect}");
        // ls is A's: the first member's entry wins.
        let ls = listing.iter().find(|e| e.name == "ls").unwrap();
        let via_a = fsys.stat("n/a/bin/ls").await.unwrap();
        assert_eq!(ls.qid.path, via_a.qid.path, "{dialect}");
        // One entry per read.
        let flags = if dialect == Dialect::L {
            O_RDONLY | ninep_wire::consts::dotl::O_DIRECTORY
        } else {
            O_RDONLY
        };
        let dir = fsys.open("bin", flags).await.unwrap();
        let client = fsys.client();
        let fid = dir.fid().number();
        let mut names = Vec::new();
        let mut offset = 0;
        for _ in 0..20 {
            if dialect == Dialect::L {
                let msg = ninep_wire::Treaddir {
                    fid,
                    offset,
                    count: 40,
                };
                let r = client.call(msg).await.unwrap();
                if r.data.is_empty() {
                    break;
                }
                for d in ninep_wire::Dirent::entries(&r.data) {
                    let d = d.unwrap();
                    offset = d.offset;
                    if !d.name.is_dot_or_dotdot() {
                        names.push(d.name.to_string());
                    }
                }
            } else {
                let msg = ninep_wire::Tread {
                    fid,
                    offset,
                    count: 80,
                };
                let r = client.call(msg).await.unwrap();
                if r.data.is_empty() {
                    break;
                }
                offset += r.data.len() as u64;
                for s in ninep_wire::Stat::entries(&r.data, dialect) {
                    names.push(s.unwrap().name);
                }
            }
        }
        assert_eq!(names, want, "{dialect}: read in pieces");
    }
    served.stop().await;
}
