//! The export's confinement, attacked from the client side and raced from
//! the host side. Nothing outside the exported directory may be read,
//! written, listed or changed through it.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use ninep_client::{Client, Fsys, Options};
use ninep_export::{Export, Options as ExportOptions};
use ninep_server::Server;
use ninep_transport::Addr;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_WRONLY};
use ninep_wire::*;

/// A fresh directory laid out as: export/ (served) beside outside/ (secret).
struct Scene {
    base: PathBuf,
    export: PathBuf,
    outside: PathBuf,
}

impl Scene {
    fn new(name: &str) -> Scene {
        let base = std::env::temp_dir().join(format!("ninep-sec-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let export = base.join("export");
        let outside = base.join("outside");
        std::fs::create_dir_all(export.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "SECRET").unwrap();
        std::fs::write(export.join("sub/file"), "inside").unwrap();
        Scene {
            base,
            export,
            outside,
        }
    }

    async fn serve(&self, options: ExportOptions) -> String {
        let export = Export::new(&self.export, options).unwrap();
        let addr = Addr::Unix(self.base.join("sock"));
        let listener = addr.listen().await.unwrap();
        let server = Server::new(export);
        tokio::spawn(async move {
            server
                .serve_listener(listener, std::future::pending())
                .await
        });
        addr.to_string()
    }

    async fn attach(&self, addr: &str, dialect: Dialect) -> Fsys {
        let options = Options {
            dialect: Some(dialect),
            ..Options::default()
        };
        Client::connect_with(addr, options)
            .await
            .unwrap()
            .attach_as("root", 0, "")
            .await
            .unwrap()
    }

    fn secret_untouched(&self) {
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret")).unwrap(),
            "SECRET"
        );
        let names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret"], "something was made outside the export");
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn errno_of<T: std::fmt::Debug>(r: Result<T, ninep_client::Error>) -> Errno {
    r.expect_err("the request should have failed").errno()
}

#[tokio::test]
async fn dotdot_and_slashes_stay_inside() {
    let s = Scene::new("dotdot");
    let addr = s.serve(ExportOptions::default()).await;
    for dialect in Dialect::ALL {
        let fsys = s.attach(&addr, dialect).await;
        let root_qid = fsys.root().qid();
        // .. at the root is the root, however many times.
        let up = fsys.walk("../../../..").await.unwrap();
        assert_eq!(up.qid().path, root_qid.path);
        let up = fsys.walk("sub/../..").await.unwrap();
        assert_eq!(up.qid().path, root_qid.path);
        // Paths that would climb out name nothing outside.
        assert_eq!(
            errno_of(fsys.read("../outside/secret").await),
            Errno::ENOENT
        );
        assert_eq!(
            errno_of(fsys.read("sub/../../outside/secret").await),
            Errno::ENOENT
        );
        // A '/' inside one name never reaches the server: the wire layer
        // refuses to make such a name, and a server refuses to decode one.
        assert!(Name::new("../outside").is_err());
        let raw = {
            // Twalk whose one name is "../outside/secret".
            let name = b"../outside/secret";
            let mut body = vec![];
            body.extend_from_slice(&fsys.root().number().0.to_le_bytes());
            body.extend_from_slice(&999u32.to_le_bytes());
            body.extend_from_slice(&1u16.to_le_bytes());
            body.extend_from_slice(&(name.len() as u16).to_le_bytes());
            body.extend_from_slice(name);
            body
        };
        let mut frame = ((7 + raw.len()) as u32).to_le_bytes().to_vec();
        frame.push(110);
        frame.extend_from_slice(&1u16.to_le_bytes());
        frame.extend_from_slice(&raw);
        let err = Fcall::decode(Bytes::from(frame), dialect).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Slash);
        // Creating . or .. is refused.
        assert!(fsys.create("..", 0o644, O_RDWR).await.is_err());
        assert!(fsys.mkdir("sub/..", 0o755).await.is_err());
    }
    s.secret_untouched();
}

#[tokio::test]
async fn symlinks_are_served_as_links_and_never_followed() {
    let s = Scene::new("symlinks");
    symlink("/etc", s.export.join("abs")).unwrap();
    symlink("../outside", s.export.join("rel")).unwrap();
    symlink("../../outside/secret", s.export.join("sub/rel-file")).unwrap();
    symlink(s.outside.join("secret"), s.export.join("abs-file")).unwrap();
    let addr = s.serve(ExportOptions::default()).await;
    for dialect in Dialect::ALL {
        let fsys = s.attach(&addr, dialect).await;
        for link in ["abs-file", "sub/rel-file"] {
            // The link itself can be walked to and seen ...
            let fid = fsys.walk(link).await.unwrap();
            assert!(fid.qid().ty.contains(QidType::SYMLINK), "{link}");
            // ... but opening it never reaches its target.
            assert_eq!(
                errno_of(fsys.read(link).await),
                Errno::ELOOP,
                "{link} {dialect}"
            );
            assert!(fsys.open(link, O_WRONLY).await.is_err());
        }
        for dir in ["abs", "rel"] {
            assert!(
                fsys.read(&format!("{dir}/secret")).await.is_err(),
                "{dir} {dialect}"
            );
            assert!(
                fsys.read(&format!("{dir}/passwd")).await.is_err(),
                "{dir} {dialect}"
            );
            assert!(fsys.read_dir(dir).await.is_err(), "{dir} {dialect}");
            assert!(
                fsys.create(&format!("{dir}/planted"), 0o644, O_RDWR)
                    .await
                    .is_err()
            );
            assert!(fsys.mkdir(&format!("{dir}/planted"), 0o755).await.is_err());
        }
        if dialect == Dialect::L {
            let target = fsys.walk("rel").await.unwrap();
            let Msg::Rreadlink(r) = fsys
                .client()
                .rpc(Treadlink {
                    fid: target.number(),
                })
                .await
                .unwrap()
            else {
                panic!("not an Rreadlink");
            };
            assert_eq!(r.target, "../outside");
        }
    }
    s.secret_untouched();
}

#[tokio::test]
async fn links_inside_the_export_are_followed_for_9p2000_only() {
    let s = Scene::new("follow");
    // Leading inside, relative: a file, a directory, up and back down, and
    // a chain through another link.
    symlink("sub/file", s.export.join("file-link")).unwrap();
    symlink("sub", s.export.join("dir-link")).unwrap();
    symlink("../file", s.export.join("sub/deeper/up")).unwrap();
    symlink("../../dir-link/file", s.export.join("sub/deeper/via")).unwrap();
    // Leading outside, or nowhere: relative, absolute (even to a file in the
    // export, since an absolute target names a host path), a chain that
    // leaves, a directory outside, and loops.
    symlink("../../outside/secret", s.export.join("sub/out")).unwrap();
    symlink(s.outside.join("secret"), s.export.join("abs")).unwrap();
    symlink(s.export.join("sub/file"), s.export.join("abs-inside")).unwrap();
    symlink("sub/out", s.export.join("chain")).unwrap();
    symlink("../outside", s.export.join("out-dir")).unwrap();
    symlink("loop-b", s.export.join("loop-a")).unwrap();
    symlink("loop-a", s.export.join("loop-b")).unwrap();
    symlink("loop-self", s.export.join("loop-self")).unwrap();
    let refused = [
        "sub/out",
        "abs",
        "abs-inside",
        "chain",
        "out-dir",
        "loop-a",
        "loop-self",
    ];
    let addr = s.serve(ExportOptions::default()).await;

    let fsys = s.attach(&addr, Dialect::Base).await;
    for link in ["file-link", "sub/deeper/up", "sub/deeper/via"] {
        assert_eq!(fsys.read(link).await.unwrap(), b"inside", "{link}");
    }
    let dir = fsys.walk("dir-link").await.unwrap();
    assert!(dir.qid().ty.contains(QidType::DIR));
    let listed = fsys.read_dir("dir-link").await.unwrap();
    assert_eq!(listed.len(), 3);
    for name in ["deeper", "file", "out"] {
        assert!(listed.iter().any(|e| e.name == name), "{name}");
    }
    assert_eq!(fsys.read("dir-link/file").await.unwrap(), b"inside");
    assert!(fsys.stat("dir-link/deeper").await.unwrap().is_dir());
    // The followed file keeps the link's name, and .. leads back to where
    // the link is.
    assert_eq!(fsys.stat("file-link").await.unwrap().name, "file-link");
    let up = fsys.walk("dir-link/..").await.unwrap();
    assert_eq!(up.qid().path, fsys.root().qid().path);
    for link in refused {
        assert_eq!(errno_of(fsys.read(link).await), Errno::ELOOP, "{link}");
    }
    assert!(fsys.read("out-dir/secret").await.is_err());
    assert!(fsys.read_dir("out-dir").await.is_err());
    assert!(fsys.read("chain/secret").await.is_err());

    // 9P2000.u and .L have links of their own: served as links, unfollowed.
    for dialect in [Dialect::U, Dialect::L] {
        let fsys = s.attach(&addr, dialect).await;
        for link in ["file-link", "dir-link", "sub/deeper/up"]
            .iter()
            .chain(&refused)
        {
            let fid = fsys.walk(link).await.unwrap();
            assert!(fid.qid().ty.contains(QidType::SYMLINK), "{link} {dialect}");
            assert_eq!(errno_of(fsys.read(link).await), Errno::ELOOP, "{link}");
        }
        assert!(fsys.read("dir-link/file").await.is_err(), "{dialect}");
    }
    // Removing a 9P2000 walk's file by the link's name never removes the
    // file the link leads to.
    let _ = fsys.remove("file-link").await;
    assert_eq!(
        std::fs::read_to_string(s.export.join("sub/file")).unwrap(),
        "inside"
    );
    s.secret_untouched();
}

#[tokio::test]
async fn a_symlink_swapped_in_after_the_walk_is_not_followed() {
    let s = Scene::new("swap");
    std::fs::write(s.export.join("victim"), "original").unwrap();
    std::fs::create_dir(s.export.join("victim-dir")).unwrap();
    let addr = s.serve(ExportOptions::default()).await;
    let fsys = s.attach(&addr, Dialect::L).await;
    let file = fsys.walk("victim").await.unwrap();
    let dir = fsys.walk("victim-dir").await.unwrap();
    // The host replaces both with links pointing outside.
    std::fs::remove_file(s.export.join("victim")).unwrap();
    symlink(s.outside.join("secret"), s.export.join("victim")).unwrap();
    std::fs::remove_dir(s.export.join("victim-dir")).unwrap();
    symlink(&s.outside, s.export.join("victim-dir")).unwrap();
    // The walked fid still names the original file, never the secret.
    let opened = file.open(O_RDONLY).await.unwrap();
    assert_eq!(opened.read_at(0, 100).await.unwrap(), "original");
    // The walked directory is the original (now gone), not outside/.
    assert!(dir.walk_path("secret").await.is_err());
    // Walking the name afresh finds the link, which is not followed.
    assert_eq!(errno_of(fsys.read("victim").await), Errno::ELOOP);
    assert!(fsys.read("victim-dir/secret").await.is_err());
    // Removing through the stale fid does not remove the link instead.
    let stale = fsys.walk("sub/file").await.unwrap();
    std::fs::rename(s.export.join("sub/file"), s.export.join("sub/moved")).unwrap();
    std::fs::write(s.export.join("sub/file"), "a different file").unwrap();
    assert!(stale.remove().await.is_err());
    assert_eq!(
        std::fs::read_to_string(s.export.join("sub/file")).unwrap(),
        "a different file"
    );
    s.secret_untouched();
}

#[tokio::test]
async fn renamed_and_removed_files_keep_working_or_fail_cleanly() {
    let s = Scene::new("rename");
    let addr = s.serve(ExportOptions::default()).await;
    let fsys = s.attach(&addr, Dialect::L).await;
    let deeper = fsys.walk("sub/deeper").await.unwrap();
    let file = fsys.walk("sub/file").await.unwrap();
    // The host renames the walked directory: the fids still work.
    std::fs::rename(s.export.join("sub"), s.export.join("renamed")).unwrap();
    assert!(deeper.stat().await.unwrap().is_dir());
    let opened = file.open(O_RDONLY).await.unwrap();
    assert_eq!(opened.read_at(0, 100).await.unwrap(), "inside");
    // .. from the walked directory is still inside the export.
    let up = deeper.walk_path("../..").await.unwrap();
    assert_eq!(up.qid().path, fsys.root().qid().path);
    // Removed on the host: what the fid can still do, it does to the same
    // inode; what needs the name fails cleanly.
    let gone = fsys.walk("renamed/file").await.unwrap();
    std::fs::remove_file(s.export.join("renamed/file")).unwrap();
    assert_eq!(gone.stat().await.unwrap().nlink, 0);
    assert_eq!(errno_of(gone.remove().await), Errno::ENOENT);
    std::fs::remove_dir(s.export.join("renamed/deeper")).unwrap();
    assert!(deeper.walk_path("x").await.is_err());
    assert!(
        fsys.create("renamed/deeper/x", 0o644, O_RDWR)
            .await
            .is_err()
    );
    s.secret_untouched();
}

#[tokio::test]
async fn hard_links_and_special_files() {
    let s = Scene::new("special");
    // A client cannot link to a file it cannot walk to: 9P2000.u names the
    // target by fid, and an unknown fid is refused.
    let addr = s.serve(ExportOptions::default()).await;
    let fsys = s.attach(&addr, Dialect::U).await;
    let dir = fsys.walk("sub").await.unwrap();
    let link = Tcreate {
        fid: dir.number(),
        name: Name::new("stolen").unwrap(),
        perm: consts::mode::DMLINK | 0o644,
        mode: 0,
        extension: "4242\n".into(),
    };
    assert!(fsys.client().rpc(link).await.is_err());
    // Device nodes and fifos on the host are not opened.
    let fsys = s.attach(&addr, Dialect::L).await;
    std::process::Command::new("mknod")
        .arg(s.export.join("null"))
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    std::process::Command::new("mkfifo")
        .arg(s.export.join("fifo"))
        .status()
        .unwrap();
    assert_eq!(errno_of(fsys.open("null", O_RDONLY).await), Errno::EPERM);
    assert_eq!(errno_of(fsys.open("fifo", O_RDONLY).await), Errno::EPERM);
    // Nor made as devices by clients.
    let root = fsys.root();
    let mknod = Tmknod {
        dfid: root.number(),
        name: Name::new("disk").unwrap(),
        mode: consts::unix::S_IFBLK | 0o666,
        major: 8,
        minor: 0,
        gid: 0,
    };
    assert!(fsys.client().rpc(mknod).await.is_err());
    assert!(!s.export.join("disk").exists());
    s.secret_untouched();
}

#[tokio::test]
async fn huge_counts_offsets_and_long_names() {
    let s = Scene::new("huge");
    let addr = s.serve(ExportOptions::default()).await;
    let fsys = s.attach(&addr, Dialect::L).await;
    let file = fsys.open("sub/file", O_RDWR).await.unwrap();
    let client = fsys.client().clone();
    let fid = file.fid().number();
    // A count larger than msize is cut to fit.
    let Msg::Rread(r) = client
        .rpc(Tread {
            fid,
            offset: 0,
            count: u32::MAX,
        })
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(r.data, "inside");
    // Offsets at the end of the range fail cleanly or read nothing.
    for offset in [u64::MAX, u64::MAX / 2, i64::MAX as u64 + 1] {
        match client
            .rpc(Tread {
                fid,
                offset,
                count: 10,
            })
            .await
        {
            Ok(Msg::Rread(r)) => assert!(r.data.is_empty(), "{offset}: {:?}", r.data),
            Ok(other) => panic!("{other:?}"),
            Err(e) => assert!(e.is_remote()),
        }
        let write = client
            .rpc(Twrite {
                fid,
                offset,
                data: Bytes::from_static(b"x"),
            })
            .await;
        assert!(write.is_err(), "a write at {offset} succeeded");
    }
    // Names up to 255 bytes work; longer ones are refused before the host.
    let longest = "n".repeat(255);
    fsys.create(&longest, 0o644, O_RDWR).await.unwrap();
    assert!(s.export.join(&longest).exists());
    assert!(Name::new("n".repeat(256)).is_err());
    let mut frame = Vec::new();
    let name = "n".repeat(300);
    let body_len = 4 + 2 + name.len() + 4 + 4 + 4;
    frame.extend_from_slice(&((7 + body_len) as u32).to_le_bytes());
    frame.push(Tlcreate::TYPE);
    frame.extend_from_slice(&1u16.to_le_bytes());
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(&(name.len() as u16).to_le_bytes());
    frame.extend_from_slice(name.as_bytes());
    frame.extend_from_slice(&[0; 12]);
    let err = Fcall::decode(Bytes::from(frame), Dialect::L).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::NameTooLong(300));
    s.secret_untouched();
}

#[tokio::test]
async fn readonly_exports_refuse_every_change() {
    let s = Scene::new("readonly");
    let options = ExportOptions {
        readonly: true,
        ..ExportOptions::default()
    };
    let addr = s.serve(options).await;
    for dialect in Dialect::ALL {
        let fsys = s.attach(&addr, dialect).await;
        assert_eq!(fsys.read("sub/file").await.unwrap(), b"inside");
        assert!(fsys.open("sub/file", O_WRONLY).await.is_err());
        assert!(fsys.create("new", 0o644, O_RDWR).await.is_err());
        assert!(fsys.mkdir("newdir", 0o755).await.is_err());
        assert!(fsys.remove("sub/file").await.is_err());
        assert!(fsys.rename("sub/file", "other").await.is_err());
    }
    assert_eq!(
        std::fs::read_to_string(s.export.join("sub/file")).unwrap(),
        "inside"
    );
    assert!(!Path::new(&s.export.join("new")).exists());
}
