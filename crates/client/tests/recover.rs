//! A client that recovers its lost connection (`Client::dial_recovering`):
//! its connections to a server on loopback are cut for real, the server
//! refuses new ones for a while or comes back with a file replaced, and
//! the client's fids, open files and requests in flight carry on, fail
//! clearly, or never run twice. The servers that must be recovered from as
//! a stock server is (its session lost with the connection) have the resume
//! extension turned off; tests/resume.rs has it on.

#[path = "support/cuttable.rs"]
mod cuttable;
#[path = "support/flaky.rs"]
mod flaky;
#[path = "support/pattern.rs"]
mod pattern;

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cuttable::{Cuttable, stock};
use flaky::Flaky;
use ninep_client::{Client, Dialer, Error, Fsys, Mode, Options, Recovery, Transfer};
use ninep_ramfs::RamFs;
use ninep_server::Server;
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::{O_APPEND, O_RDONLY, O_RDWR, O_WRONLY};
use pattern::pattern;

fn recovery() -> Recovery {
    Recovery {
        deadline: Duration::from_secs(10),
        ..Recovery::default()
    }
}

async fn attach(addr: &str, dialect: Dialect, recovery: Recovery) -> Fsys {
    let options = Options {
        dialect: Some(dialect),
        msize: 64 * 1024 + 24,
    };
    let client = Client::dial_recovering(addr, &Dialer::default(), options, recovery)
        .await
        .unwrap();
    client.attach("glenda", "").await.unwrap()
}

#[tokio::test]
async fn open_files_read_and_write_on_across_cuts() {
    for dialect in Dialect::ALL {
        let server = Cuttable::start(Server::new(RamFs::new())).await;
        let fsys = attach(&server.addr, dialect, recovery()).await;
        fsys.mkdir("d", 0o755).await.unwrap();
        let file = fsys.create("d/f", 0o644, O_RDWR).await.unwrap();
        file.write_all_at(0, Bytes::from_static(b"hello, world"))
            .await
            .unwrap();
        let dir = fsys.walk("d").await.unwrap();

        server.cut();
        assert_eq!(
            &file.read_at(0, 5).await.unwrap()[..],
            b"hello",
            "{dialect}"
        );
        server.cut();
        assert_eq!(
            file.write_at(7, Bytes::from_static(b"there"))
                .await
                .unwrap(),
            5
        );
        server.cut();
        assert_eq!(
            dir.walk_path("f").await.unwrap().stat().await.unwrap().size,
            12
        );
        assert_eq!(fsys.read("d/f").await.unwrap(), b"hello, there");
        assert!(!fsys.client().is_closed());
        assert_eq!(
            server.served.load(SeqCst),
            4,
            "one connection, then one per cut"
        );
    }
}

#[tokio::test]
async fn pipelined_and_streamed_transfers_end_byte_exact_across_cuts() {
    let fs = Flaky::new();
    // Each read and write takes a while, so that many are in flight at a cut.
    fs.knobs.delay_us.store(2_000, SeqCst);
    let server = Cuttable::start(Server::new(fs)).await;
    let fsys = attach(&server.addr, Dialect::L, recovery()).await;
    let data = pattern(4 << 20);
    for mode in [Mode::Pipelined, Mode::Streamed, Mode::Auto] {
        let file = fsys
            .create(&format!("{mode:?}"), 0o644, O_RDWR)
            .await
            .unwrap();
        let how = Transfer::new(mode);
        let mut w = file.write_range(0, how).await.unwrap();
        for (i, piece) in data.chunks(256 * 1024).enumerate() {
            if i % 5 == 2 {
                server.cut();
            }
            w.write(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        assert_eq!(w.finish().await.unwrap(), data.len() as u64, "{mode:?}");

        let mut r = file.read_range(0, None, how).await.unwrap();
        let mut got = Vec::new();
        let mut pieces = 0;
        while let Some(piece) = r.next().await.unwrap() {
            got.extend_from_slice(&piece);
            pieces += 1;
            if pieces % 20 == 5 {
                server.cut();
            }
        }
        assert!(got == data, "{mode:?}: {} bytes back", got.len());
    }
    let served = server.served.load(SeqCst);
    assert!(served >= 10, "{served} connections");
}

#[tokio::test]
async fn an_append_cut_off_fails_and_is_never_applied_twice() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let server = Cuttable::start(stock(Server::new(fs))).await;
    let fsys = attach(&server.addr, Dialect::L, recovery()).await;
    drop(fsys.create("log", 0o644, O_WRONLY).await.unwrap());
    let log = fsys.open("log", O_WRONLY | O_APPEND).await.unwrap();
    knobs.delay_us.store(200_000, SeqCst);
    let write = log.write_at(0, Bytes::from_static(b"line\n"));
    let cut = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.cut();
    };
    let (written, ()) = tokio::join!(write, cut);
    let err = written.unwrap_err();
    assert!(matches!(err, Error::Interrupted(_)), "{err}");
    assert!(err.to_string().contains("append"), "{err}");
    knobs.delay_us.store(0, SeqCst);
    let after = fsys.read("log").await.unwrap();
    assert!(after.is_empty() || after == b"line\n", "{after:?}");
    // The file stays usable.
    log.write_at(0, Bytes::from_static(b"more\n"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_file_replaced_while_away_is_not_reopened() {
    let ramfs = stock(Server::new(RamFs::new()));
    let server = Cuttable::start(ramfs.clone()).await;
    let fsys = attach(&server.addr, Dialect::L, recovery()).await;
    drop(fsys.create("f", 0o644, O_WRONLY).await.unwrap());
    let kept = fsys.open("f", O_RDONLY).await.unwrap();
    let other = fsys.open("f", O_RDONLY).await.unwrap();
    drop(other);

    server.down();
    // Another client replaces the file while this one is away.
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        ramfs
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let meddler = Client::over(Box::new(ours), Options::default())
        .await
        .unwrap()
        .attach("glenda", "")
        .await
        .unwrap();
    meddler.remove("f").await.unwrap();
    drop(meddler.create("f", 0o644, O_WRONLY).await.unwrap());
    server.up();

    let err = kept.read_at(0, 10).await.unwrap_err();
    assert!(matches!(err, Error::Lost(_)), "{err}");
    assert!(err.to_string().contains("another file"), "{err}");
    // The tree itself is fine.
    assert_eq!(fsys.read("f").await.unwrap(), b"");
}

#[tokio::test]
async fn recovers_within_a_second_of_the_servers_return() {
    let server = Cuttable::start(Server::new(RamFs::new())).await;
    let fsys = attach(&server.addr, Dialect::L, recovery()).await;
    server.down();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.up();
    let back = Instant::now();
    fsys.stat("/").await.unwrap();
    let took = back.elapsed();
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[tokio::test]
async fn requests_fail_once_the_deadline_passes() {
    let server = Cuttable::start(Server::new(RamFs::new())).await;
    let quick = Recovery {
        deadline: Duration::from_millis(300),
        ..Recovery::default()
    };
    let fsys = attach(&server.addr, Dialect::L, quick).await;
    server.down();
    let err = fsys.stat("/").await.unwrap_err();
    assert!(err.is_closed(), "{err}");
    assert!(fsys.client().is_closed());
}

#[tokio::test]
async fn a_client_with_nothing_to_send_again_is_idle_while_it_recovers() {
    let server = Cuttable::start(stock(Server::new(RamFs::new()))).await;
    let fsys = attach(&server.addr, Dialect::L, recovery()).await;
    let fid = fsys.walk("/").await.unwrap();
    server.down();
    drop(fid);
    let client = fsys.client().clone();
    tokio::time::timeout(Duration::from_secs(1), client.idle())
        .await
        .expect("idle while recovering");
    server.up();
    fsys.stat("/").await.unwrap();
}
