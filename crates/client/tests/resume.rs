//! The resume extension (docs/resume.md): a client whose connection to a
//! ninep server is cut takes its session over on a new connection, so
//! requests in flight run exactly once and the session's state (open
//! files, locks, ORCLOSE) lives on; tokens that are not the session's are
//! refused; a session not taken over ends after the grace period, and the
//! oldest of too many detached sessions ends first.

#[path = "support/cuttable.rs"]
mod cuttable;
#[path = "support/flaky.rs"]
mod flaky;

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use cuttable::Cuttable;
use flaky::Flaky;
use ninep_client::{Client, Dialer, Error, Fsys, Options, Recovery};
use ninep_ramfs::RamFs;
use ninep_server::{ResumeLimits, Server};
use ninep_wire::consts::dotl::{
    LOCK_BLOCKED, LOCK_SUCCESS, LOCK_TYPE_UNLCK, LOCK_TYPE_WRLCK, O_APPEND, O_RDWR, O_WRONLY,
};
use ninep_wire::consts::open::{ORCLOSE, OREAD};
use ninep_wire::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

async fn attach(addr: &str, dialect: Dialect) -> Fsys {
    let options = Options {
        dialect: Some(dialect),
        msize: 64 * 1024 + 24,
    };
    let recovery = Recovery {
        deadline: Duration::from_secs(10),
        ..Recovery::default()
    };
    let client = Client::dial_recovering(addr, &Dialer::default(), options, recovery)
        .await
        .unwrap();
    client.attach("glenda", "").await.unwrap()
}

/// A client of `server` over a pipe, beside the proxy.
async fn beside<F: ninep_server::Filesystem>(server: &Server<F>) -> Fsys {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let server = server.clone();
    tokio::spawn(async move {
        server
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let client = Client::over(Box::new(ours), Options::default())
        .await
        .unwrap();
    client.attach("glenda", "").await.unwrap()
}

/// Waits until `path` is gone from the tree `fsys` sees.
async fn until_gone(fsys: &Fsys, path: &str) {
    let began = Instant::now();
    while fsys.stat(path).await.is_ok() {
        assert!(began.elapsed() < Duration::from_secs(10), "{path} stays");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn requests_in_flight_at_a_cut_run_exactly_once() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let server = Server::new(fs);
    let proxy = Cuttable::start(server.clone()).await;
    let fsys = attach(&proxy.addr, Dialect::L).await;
    for (path, data) in [("gone", "x"), ("old", "y")] {
        let file = fsys.create(path, 0o644, O_WRONLY).await.unwrap();
        file.write_all_at(0, Bytes::from(data)).await.unwrap();
    }
    drop(fsys.create("log", 0o644, O_WRONLY).await.unwrap());
    let log = fsys.open("log", O_WRONLY | O_APPEND).await.unwrap();
    let plain = fsys.create("plain", 0o644, O_RDWR).await.unwrap();
    // Writes take a while: they are running at the cut.
    knobs.delay_us.store(200_000, SeqCst);
    let cut = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy.cut();
    };
    let (created, appended, written, removed, renamed, ()) = tokio::join!(
        fsys.create("new", 0o644, O_RDWR),
        log.write_at(0, Bytes::from_static(b"line\n")),
        plain.write_at(0, Bytes::from_static(b"once")),
        fsys.remove("gone"),
        fsys.rename("old", "renamed"),
        cut,
    );
    drop(created.unwrap());
    assert_eq!(appended.unwrap(), 5);
    assert_eq!(written.unwrap(), 4);
    removed.unwrap();
    renamed.unwrap();
    knobs.delay_us.store(0, SeqCst);
    // Then a cut with nothing in flight but quick requests.
    let (created, ()) = tokio::join!(fsys.create("quick", 0o644, O_RDWR), async {
        tokio::task::yield_now().await;
        proxy.cut();
    });
    drop(created.unwrap());
    let tree = beside(&server).await;
    assert_eq!(tree.read("log").await.unwrap(), b"line\n");
    assert_eq!(tree.read("plain").await.unwrap(), b"once");
    assert!(tree.stat("new").await.is_ok());
    assert!(tree.stat("quick").await.is_ok());
    assert!(tree.stat("gone").await.is_err());
    assert!(tree.stat("old").await.is_err());
    assert_eq!(tree.read("renamed").await.unwrap(), b"y");
    assert_eq!(
        proxy.served.load(SeqCst),
        3,
        "one connection, then one per cut"
    );
}

/// Opens `path` in 9P2000 with ORCLOSE: the file goes when the fid does.
async fn open_rclose(fsys: &Fsys, path: &str) -> ninep_client::Fid {
    drop(fsys.create(path, 0o644, O_WRONLY).await.unwrap());
    let fid = fsys.walk(path).await.unwrap();
    let open = Topen {
        fid: fid.number(),
        mode: OREAD | ORCLOSE,
    };
    fsys.client().rpc(open).await.unwrap();
    fid
}

#[tokio::test]
async fn an_orclose_file_lives_on_across_a_cut_until_its_clunk() {
    let server = Server::new(RamFs::new());
    let proxy = Cuttable::start(server.clone()).await;
    let fsys = attach(&proxy.addr, Dialect::Base).await;
    let fid = open_rclose(&fsys, "tmp").await;
    proxy.cut();
    fsys.stat("/").await.unwrap();
    let tree = beside(&server).await;
    assert!(tree.stat("tmp").await.is_ok(), "removed at the cut");
    fid.clunk().await.unwrap();
    assert!(tree.stat("tmp").await.is_err(), "not removed at the clunk");
    assert_eq!(proxy.served.load(SeqCst), 2);
}

/// Tlock of the whole of `file` as lock owner `owner`: the Rlock status.
async fn lock(file: &ninep_client::File, ty: u8, owner: &str) -> u8 {
    let request = Tlock {
        fid: file.fid().number(),
        ty,
        flags: 0,
        start: 0,
        length: 0,
        proc_id: 1,
        client_id: owner.into(),
    };
    file.fid().client().call(request).await.unwrap().status
}

/// A lock held through the session lives on across a cut, the session
/// being taken over rather than ended: another client is refused it until
/// its holder lets it go.
#[tokio::test]
async fn a_lock_lives_on_across_a_cut() {
    let dir = std::env::temp_dir().join(format!("ninep-resume-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let export = ninep_export::Export::new(&dir, ninep_export::Options::default()).unwrap();
    let server = Server::new(export);
    let proxy = Cuttable::start(server.clone()).await;
    let fsys = attach(&proxy.addr, Dialect::L).await;
    let ours = fsys.create("locked", 0o644, O_RDWR).await.unwrap();
    assert_eq!(lock(&ours, LOCK_TYPE_WRLCK, "holder").await, LOCK_SUCCESS);
    proxy.cut();
    fsys.stat("/").await.unwrap();
    let theirs = beside(&server).await.open("locked", O_RDWR).await.unwrap();
    let status = lock(&theirs, LOCK_TYPE_WRLCK, "other").await;
    assert_eq!(status, LOCK_BLOCKED, "the lock was let go at the cut");
    assert_eq!(lock(&ours, LOCK_TYPE_UNLCK, "holder").await, LOCK_SUCCESS);
    assert_eq!(lock(&theirs, LOCK_TYPE_WRLCK, "other").await, LOCK_SUCCESS);
    assert_eq!(proxy.served.load(SeqCst), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_session_not_taken_over_ends_after_the_grace_period() {
    let server = Server::new(RamFs::new());
    server.set_resume_limits(ResumeLimits {
        sessions: 64,
        grace: Duration::from_secs(1),
    });
    let proxy = Cuttable::start(server.clone()).await;
    let fsys = attach(&proxy.addr, Dialect::Base).await;
    let fid = open_rclose(&fsys, "tmp").await;
    let tree = beside(&server).await;
    let cut = Instant::now();
    proxy.down();
    // Kept for the grace period, then clunked as a hang-up would.
    until_gone(&tree, "tmp").await;
    assert!(
        cut.elapsed() >= Duration::from_millis(900),
        "{:?}",
        cut.elapsed()
    );
    // The expired token is refused; the client makes its fids again.
    proxy.up();
    fsys.stat("/").await.unwrap();
    let err = fid.stat().await.unwrap_err();
    assert!(matches!(err, Error::Lost(_)), "{err}");
}

#[tokio::test]
async fn the_oldest_of_too_many_detached_sessions_ends() {
    let server = Server::new(RamFs::new());
    server.set_resume_limits(ResumeLimits {
        sessions: 1,
        grace: Duration::from_secs(60),
    });
    let (one, two) = (
        Cuttable::start(server.clone()).await,
        Cuttable::start(server.clone()).await,
    );
    let first = attach(&one.addr, Dialect::Base).await;
    let second = attach(&two.addr, Dialect::Base).await;
    let _a = open_rclose(&first, "a").await;
    let _b = open_rclose(&second, "b").await;
    let tree = beside(&server).await;
    one.down();
    // The first detachment is the older once the server has seen it.
    until(|| server.resumable_sessions().detached == 1).await;
    two.down();
    until_gone(&tree, "a").await;
    assert!(tree.stat("b").await.is_ok(), "the newer session ended");
}

/// A client dropped for good ends its session with a Tversion rather than
/// leave it detached for the grace period, where it would take the place
/// of another client's session kept for a take-over.
#[tokio::test]
async fn a_client_that_goes_away_ends_its_session_at_once() {
    let server = Server::new(RamFs::new());
    let proxy = Cuttable::start(server.clone()).await;
    let fsys = attach(&proxy.addr, Dialect::L).await;
    fsys.stat("/").await.unwrap();
    assert_eq!(server.resumable_sessions().total, 1);
    drop(fsys);
    until(|| server.resumable_sessions().total == 0).await;
    assert_eq!(server.resumable_sessions().detached, 0);
}

/// Waits until `done` holds.
async fn until(done: impl Fn() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "never came to be"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A raw connection to `server`, for what the client library never sends.
struct Raw {
    link: DuplexStream,
    protocol: Protocol,
}

impl Raw {
    async fn open<F: ninep_server::Filesystem>(
        server: &Server<F>,
        version: &str,
        msize: u32,
    ) -> Raw {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let server = server.clone();
        tokio::spawn(async move {
            server
                .serve_stream(Box::new(theirs), std::future::pending())
                .await
        });
        let mut raw = Raw {
            link: ours,
            protocol: Dialect::L.into(),
        };
        let r = raw
            .rpc(
                NOTAG,
                Tversion {
                    msize,
                    version: version.into(),
                },
            )
            .await;
        let Msg::Rversion(r) = r else { panic!("{r:?}") };
        raw.protocol = Protocol::from_version(&r.version).unwrap();
        raw
    }

    async fn rpc(&mut self, tag: u16, msg: impl Into<Msg>) -> Msg {
        let bytes = Fcall::new(tag, msg).to_bytes(self.protocol).unwrap();
        self.link.write_all(&bytes).await.unwrap();
        self.next().await.expect("a reply").msg
    }

    async fn next(&mut self) -> Option<Fcall> {
        let mut size = [0; 4];
        self.link.read_exact(&mut size).await.ok()?;
        let mut frame = BytesMut::from(&size[..]);
        frame.resize(u32::from_le_bytes(size) as usize, 0);
        self.link.read_exact(&mut frame[4..]).await.ok()?;
        Some(Fcall::decode(frame.freeze(), self.protocol).unwrap())
    }

    async fn token(&mut self) -> Token {
        match self.rpc(1, Tsession {}).await {
            Msg::Rsession(r) => r.token,
            other => panic!("{other:?}"),
        }
    }
}

fn refused(msg: &Msg) -> bool {
    matches!(msg, Msg::Rlerror(_))
}

#[tokio::test]
async fn tokens_that_are_not_the_sessions_are_refused() {
    let server = Server::new(RamFs::new());
    let version = "9P2000.L.resume";
    let mut a = Raw::open(&server, version, 8192).await;
    assert!(a.protocol.resume);
    let token = a.token().await;
    // A token no session has.
    let mut b = Raw::open(&server, version, 8192).await;
    assert!(refused(
        &b.rpc(
            2,
            Tresume {
                token: Token([7; 16])
            }
        )
        .await
    ));
    // Another msize than the session's.
    let mut c = Raw::open(&server, version, 4096).await;
    let r = c.rpc(2, Tresume { token }).await;
    assert!(refused(&r), "{r:?}");
    // A connection that did something first.
    let mut d = Raw::open(&server, version, 8192).await;
    let _ = d.token().await;
    assert!(refused(&d.rpc(2, Tresume { token }).await));
    // The session's own token takes it over, cutting its connection, and
    // is spent: the next take-over needs the token Rresume gave.
    let r = b.rpc(3, Tresume { token }).await;
    let Msg::Rresume(Rresume {
        received: 0,
        token: next,
        ..
    }) = r
    else {
        panic!("{r:?}")
    };
    assert!(a.next().await.is_none(), "the first connection lives on");
    let mut replayed = Raw::open(&server, version, 8192).await;
    let r = replayed.rpc(2, Tresume { token }).await;
    assert!(refused(&r), "a spent token: {r:?}");
    let mut f = Raw::open(&server, version, 8192).await;
    let r = f.rpc(2, Tresume { token: next }).await;
    assert!(matches!(r, Msg::Rresume(_)), "the next token: {r:?}");
    assert!(b.next().await.is_none(), "the second connection lives on");
    let mut b = f;
    // A session ended by Tversion keeps no token.
    assert!(matches!(
        b.rpc(
            NOTAG,
            Tversion {
                msize: 8192,
                version: version.into()
            }
        )
        .await,
        Msg::Rversion(_)
    ));
    let mut e = Raw::open(&server, version, 8192).await;
    assert!(refused(&e.rpc(2, Tresume { token: next }).await));
    // The server serves on.
    beside(&server).await.stat("/").await.unwrap();
}

#[tokio::test]
async fn a_stock_server_answers_the_plain_dialect() {
    let server = cuttable::stock(Server::new(RamFs::new()));
    let raw = Raw::open(&server, "9P2000.L.stream.resume", 8192).await;
    assert_eq!(raw.protocol.version(), "9P2000.L.stream");
}
