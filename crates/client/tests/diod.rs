//! Our client against diod, an independent 9P2000.L server (Debian's `diod`
//! package), over TCP on the loopback interface.
//!
//! Each test starts its own diod in the foreground, exporting a fresh
//! directory, and kills it by PID when done (even on panic). diod must be
//! installed: without it these tests fail, they do not skip.

#[path = "support/diod.rs"]
mod diod_server;
#[path = "support/pattern.rs"]
mod pattern;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ninep_client::{Client, Error, Fsys, Mode, Options, Transfer};
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};
use ninep_wire::{Dialect, Errno, Name, Trename};

use diod_server::{Diod, start as start_diod};
use pattern::pattern;

async fn connect(diod: &Diod, dialect: Option<Dialect>) -> Result<Client, Error> {
    let options = Options {
        dialect,
        ..Options::default()
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        Client::connect_with(&diod.addr(), options),
    )
    .await
    .expect("connecting to diod timed out")
}

async fn attach(diod: &Diod, client: &Client) -> Fsys {
    client
        .attach_as("root", 0, diod.aname())
        .await
        .unwrap_or_else(|e| panic!("attach to {}: {e}; {}", diod.aname(), diod.log_text()))
}

fn assert_errno(result: Result<impl std::fmt::Debug, Error>, want: Errno, what: &str) {
    match result {
        Ok(v) => panic!("{what}: succeeded ({v:?}), expected {want}"),
        Err(e) => {
            assert!(e.is_remote(), "{what}: not a server error: {e}");
            assert_eq!(e.errno(), want, "{what}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diod_file_operations() {
    let diod = start_diod("ops");
    let client = connect(&diod, Some(Dialect::L)).await.unwrap();
    assert_eq!(client.dialect(), Dialect::L);
    let msize = client.msize();
    assert!(
        (256..=Options::default().msize).contains(&msize),
        "msize {msize}"
    );
    let fsys = attach(&diod, &client).await;

    // The root is the exported directory, empty.
    let root = fsys.stat("").await.unwrap();
    assert!(root.is_dir(), "{root:?}");
    assert!(fsys.read_dir("").await.unwrap().is_empty());

    // mkdir.
    fsys.mkdir("d", 0o755).await.unwrap();
    let meta = std::fs::metadata(diod.on_disk("d")).unwrap();
    assert!(meta.is_dir());
    assert!(fsys.stat("d").await.unwrap().is_dir());
    assert_errno(fsys.mkdir("d", 0o755).await, Errno::EEXIST, "mkdir d again");

    // A small file: create, write, read back.
    let file = fsys.create("d/small", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, Bytes::from_static(b"hello, diod\n"))
        .await
        .unwrap();
    assert_eq!(&file.read_at(0, 100).await.unwrap()[..], b"hello, diod\n");
    file.close().await.unwrap();
    assert_eq!(fsys.read("d/small").await.unwrap(), b"hello, diod\n");
    assert_eq!(
        std::fs::read(diod.on_disk("d/small")).unwrap(),
        b"hello, diod\n"
    );
    let info = fsys.stat("d/small").await.unwrap();
    assert_eq!(info.size, 12);
    assert!(!info.is_dir());
    assert_eq!(info.mode & 0o777, 0o644, "mode {:o}", info.mode);
    assert_eq!(info.name, "small");

    // A file of more than 1 MiB, written in several messages.
    let big = pattern(1024 * 1024 + 12_345);
    let file = fsys.create("d/big", 0o600, O_RDWR).await.unwrap();
    let iounit = file.iounit() as usize;
    assert!(
        big.len() / iounit >= 2,
        "iounit {iounit} (msize {msize}) would not split {} bytes",
        big.len()
    );
    file.write_all_at(0, Bytes::from(big.clone()))
        .await
        .unwrap();
    file.fsync(false).await.unwrap();
    assert_eq!(file.stat().await.unwrap().size, big.len() as u64);
    // A read in the middle, straddling no particular boundary.
    let mid = file.read_at(500_001, 4096).await.unwrap();
    assert_eq!(&mid[..], &big[500_001..500_001 + mid.len()]);
    assert!(!mid.is_empty());
    // Past the end: nothing.
    assert!(file.read_at(big.len() as u64, 10).await.unwrap().is_empty());
    file.close().await.unwrap();
    let back = fsys.read("d/big").await.unwrap();
    assert!(back == big, "read back {} bytes, differ", back.len());
    let on_disk = std::fs::read(diod.on_disk("d/big")).unwrap();
    assert!(on_disk == big, "on disk {} bytes, differ", on_disk.len());
    assert_eq!(fsys.stat("d/big").await.unwrap().size, 1024 * 1024 + 12_345);

    // A write at an offset inside the file, then a truncating open.
    let file = fsys.open("d/big", O_WRONLY).await.unwrap();
    file.write_all_at(1_000_000, Bytes::from_static(b"XYZ"))
        .await
        .unwrap();
    file.close().await.unwrap();
    let on_disk = std::fs::read(diod.on_disk("d/big")).unwrap();
    assert_eq!(&on_disk[1_000_000..1_000_003], b"XYZ");
    assert_eq!(on_disk.len(), big.len());
    let file = fsys.open("d/big", O_WRONLY | O_TRUNC).await.unwrap();
    file.write_all_at(0, Bytes::from_static(b"short"))
        .await
        .unwrap();
    file.fsync(false).await.unwrap();
    file.close().await.unwrap();
    assert_eq!(fsys.stat("d/big").await.unwrap().size, 5);
    assert_eq!(fsys.read("d/big").await.unwrap(), b"short");

    // Rename within the directory. Fsys::rename sends Trenameat, which diod
    // 1.0.24 refuses (see diod_rename); here the older Trename, which it has.
    let small = fsys.walk("d/small").await.unwrap();
    let dir = fsys.walk("d").await.unwrap();
    client
        .rpc(Trename {
            fid: small.number(),
            dfid: dir.number(),
            name: Name::new("renamed").unwrap(),
        })
        .await
        .unwrap();
    drop((small, dir));
    assert_errno(fsys.stat("d/small").await, Errno::ENOENT, "stat old name");
    assert!(!diod.on_disk("d/small").exists());
    assert_eq!(
        std::fs::read(diod.on_disk("d/renamed")).unwrap(),
        b"hello, diod\n"
    );
    assert_eq!(fsys.read("d/renamed").await.unwrap(), b"hello, diod\n");
    let mut names: Vec<String> = fsys
        .read_dir("d")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["big", "renamed"]);

    // A directory of 1000 entries, made 50 at a time concurrently.
    fsys.mkdir("many", 0o755).await.unwrap();
    // Long names, so that the listing (about 115 bytes an entry in Rreaddir)
    // takes more than one message.
    let pad = "n".repeat(80);
    let all: Vec<String> = (0..1000).map(|i| format!("entry-{i:04}-{pad}")).collect();
    let listing: usize = all.iter().map(|n| 13 + 8 + 1 + 2 + n.len()).sum();
    assert!(
        listing > msize as usize,
        "listing of {listing} bytes fits one message"
    );
    for chunk in all.chunks(50) {
        let made = futures::future::join_all(chunk.iter().map(|name| {
            let fsys = &fsys;
            async move {
                let file = fsys
                    .create(&format!("many/{name}"), 0o644, O_WRONLY)
                    .await?;
                file.write_all_at(0, Bytes::from(name.clone().into_bytes()))
                    .await?;
                file.close().await
            }
        }))
        .await;
        for (name, result) in chunk.iter().zip(made) {
            result.unwrap_or_else(|e| panic!("create many/{name}: {e}"));
        }
    }
    assert_eq!(
        std::fs::read_dir(diod.on_disk("many")).unwrap().count(),
        1000
    );
    let entries = fsys.read_dir("many").await.unwrap();
    let mut names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "read_dir gave some names twice");
    assert_eq!(names, all, "read_dir of 1000 entries");
    assert_eq!(
        fsys.read(&format!("many/{}", all[577])).await.unwrap(),
        all[577].as_bytes()
    );

    // Remove: a non-empty directory fails; files and then the directory go.
    assert_errno(
        fsys.remove("many").await,
        Errno::ENOTEMPTY,
        "remove non-empty dir",
    );
    for chunk in all.chunks(50) {
        let removed = futures::future::join_all(chunk.iter().map(|name| {
            let fsys = &fsys;
            async move { fsys.remove(&format!("many/{name}")).await }
        }))
        .await;
        for (name, result) in chunk.iter().zip(removed) {
            result.unwrap_or_else(|e| panic!("remove many/{name}: {e}"));
        }
    }
    assert!(fsys.read_dir("many").await.unwrap().is_empty());
    fsys.remove("many").await.unwrap();
    assert!(!diod.on_disk("many").exists());
    fsys.remove("d/renamed").await.unwrap();
    fsys.remove("d/big").await.unwrap();
    fsys.remove("d").await.unwrap();
    assert!(fsys.read_dir("").await.unwrap().is_empty());
    assert_eq!(std::fs::read_dir(&diod.dir).unwrap().count(), 0);

    // Errors for missing files carry ENOENT.
    assert_errno(fsys.stat("missing").await, Errno::ENOENT, "stat missing");
    assert_errno(
        fsys.open("missing", O_RDONLY).await,
        Errno::ENOENT,
        "open missing",
    );
    assert_errno(fsys.read("d/missing").await, Errno::ENOENT, "read missing");
    assert_errno(
        fsys.remove("missing").await,
        Errno::ENOENT,
        "remove missing",
    );

    // The connection is still good after all that.
    assert!(fsys.stat("").await.unwrap().is_dir());
    drop(fsys);
    drop(client);
    diod.check_log();
}

/// Bulk transfers against diod, which knows no streams and reports qid
/// version 0 for every file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diod_pipelined_transfers_are_byte_exact() {
    let diod = start_diod("pipeline");
    let client = connect(&diod, Some(Dialect::L)).await.unwrap();
    // diod does not know the stream extension: it was offered, and declined.
    assert!(!client.streams());
    let fsys = attach(&diod, &client).await;
    let data = pattern(24 << 20 | 4321);
    for mode in [Mode::Pipelined, Mode::OneAtATime, Mode::Streamed] {
        let path = format!("big-{mode:?}");
        let file = fsys.create(&path, 0o644, O_RDWR).await.unwrap();
        let mut w = file.write_range(0, Transfer::new(mode)).await.unwrap();
        // A stream asked for falls back to what suits a file of version
        // 0 (synthetic, as far as the client can tell): one at a time.
        // Pipelining asked for by name is taken at its word.
        let mode = if mode == Mode::Streamed {
            Mode::OneAtATime
        } else {
            mode
        };
        assert_eq!(w.mode(), mode);
        w.write(Bytes::from(data.clone())).await.unwrap();
        assert_eq!(w.finish().await.unwrap(), data.len() as u64);
        drop(file);
        assert!(
            std::fs::read(diod.on_disk(&path)).unwrap() == data,
            "{mode:?}: on disk"
        );
        let file = fsys.open(&path, O_RDONLY).await.unwrap();
        let mut r = file.read_range(0, None, Transfer::new(mode)).await.unwrap();
        assert_eq!(r.mode(), mode);
        let mut got = Vec::with_capacity(data.len());
        while let Some(piece) = r.next().await.unwrap() {
            got.extend_from_slice(&piece);
        }
        assert!(got == data, "{mode:?}: read back differs");
    }
    drop(fsys);
    client.idle().await;
    diod.check_log();
}

/// Fsys::rename against diod. diod 1.0.24 answers Trenameat with Rlerror
/// EOPNOTSUPP (it implements only Trename); Linux's v9fs falls back to Trename
/// then, and so must a client that is to rename files on diod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diod_rename() {
    let diod = start_diod("rename");
    let client = connect(&diod, Some(Dialect::L)).await.unwrap();
    let fsys = attach(&diod, &client).await;
    fsys.mkdir("d", 0o755).await.unwrap();
    let file = fsys.create("d/old", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, Bytes::from_static(b"contents\n"))
        .await
        .unwrap();
    file.close().await.unwrap();

    let renamed = fsys.rename("d/old", "new").await;
    assert!(
        renamed.is_ok(),
        "Fsys::rename(\"d/old\", \"new\") on diod: {renamed:?} (diod refuses \
         Trenameat with EOPNOTSUPP; the client does not fall back to Trename)"
    );
    assert!(!diod.on_disk("d/old").exists());
    assert_eq!(std::fs::read(diod.on_disk("d/new")).unwrap(), b"contents\n");
    assert_eq!(fsys.read("d/new").await.unwrap(), b"contents\n");
    assert_errno(fsys.stat("d/old").await, Errno::ENOENT, "stat old name");
    assert_errno(
        fsys.rename("d/missing", "other").await,
        Errno::ENOENT,
        "rename missing",
    );
}

/// Fid::walk_open_read, Fid::walk_stat and Fid::walk_open_clunk against diod, whose threads may
/// run requests side by side: nothing goes behind a walk or an open there
/// (a stat behind a walk of `d/f` got `d`'s attributes, and a read behind
/// an open an unknown fid), and each file and directory comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diod_walk_open_read() {
    let diod = start_diod("openread");
    let client = connect(&diod, Some(Dialect::L)).await.unwrap();
    let fsys = attach(&diod, &client).await;
    fsys.mkdir("d", 0o755).await.unwrap();
    std::fs::write(diod.on_disk("d/f"), b"contents\n").unwrap();
    for _ in 0..50 {
        let names = [Name::new("d").unwrap(), Name::new("f").unwrap()];
        let (file, info, data) = fsys
            .root()
            .walk_open_read(&names, O_RDONLY, 1000)
            .await
            .unwrap();
        assert_eq!(&data[..], b"contents\n");
        assert_eq!(info.size, 9);
        assert!(!file.fid().qid().ty.is_dir());
        let (fid, info) = fsys.root().walk_stat(&names).await.unwrap();
        assert_eq!(info.size, 9);
        assert!(!info.is_dir() && info.qid.path == fid.qid().path);
        let qid = fsys.root().walk_open_clunk(&names, O_RDONLY).await.unwrap();
        assert_eq!(qid.path, fid.qid().path);
        let names = [Name::new("d").unwrap()];
        let (dir, info, _) = fsys
            .root()
            .walk_open_read(&names, O_RDONLY, 1000)
            .await
            .unwrap();
        assert!(info.is_dir() && dir.fid().qid().ty.is_dir());
    }
    let names = [Name::new("missing").unwrap()];
    assert_errno(
        fsys.root().walk_open_read(&names, O_RDONLY, 1000).await,
        Errno::ENOENT,
        "walk_open_read of a missing file",
    );
    assert_errno(
        fsys.root().walk_stat(&names).await,
        Errno::ENOENT,
        "walk_stat of a missing file",
    );
    assert!(!client.runs_in_order());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diod_version_negotiation() {
    let diod = start_diod("version");

    // No dialect forced: the client must end up with 9P2000.L.
    let client = connect(&diod, None).await.unwrap();
    assert_eq!(client.dialect(), Dialect::L, "negotiated with diod");
    let fsys = attach(&diod, &client).await;
    fsys.mkdir("x", 0o700).await.unwrap();
    assert!(Path::new(&diod.on_disk("x")).is_dir());
    fsys.remove("x").await.unwrap();
    drop(fsys);
    drop(client);

    // diod speaks only 9P2000.L: insisting on another dialect fails cleanly
    // (diod answers Rlerror), with neither a hang nor a panic.
    for dialect in [Dialect::U, Dialect::Base] {
        match connect(&diod, Some(dialect)).await {
            Ok(c) => panic!("{dialect}: diod agreed to {}", c.dialect()),
            Err(e) => assert!(!e.is_remote(), "{dialect}: {e}"),
        }
    }

    // diod is still serving after those refusals.
    let client = connect(&diod, Some(Dialect::L)).await.unwrap();
    let fsys = attach(&diod, &client).await;
    assert!(fsys.read_dir("").await.unwrap().is_empty());
    diod.check_log();
}

#[test]
fn diod_is_installed() {
    // Named for the failure it gives: a missing diod fails here, plainly.
    let path = diod_server::binary();
    assert!(path.is_file());
}
