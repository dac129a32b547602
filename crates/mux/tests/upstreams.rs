//! The mux and its servers: qids kept apart, Tflush passed on to where a
//! request waits, a client's hang-up clunking its fids upstream, a server's
//! death failing what waits on it and leaving the rest working, and many
//! clients sharing one server connection.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, DirEntry, Filesystem, Limits, Opened, Result, User};
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR};
use ninep_wire::{Dialect, Errno, Fcall, Fid, Msg, NONUNAME, Name, Qid};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a watched server has seen.
#[derive(Default)]
struct Seen {
    /// Files held by fids now.
    live: AtomicUsize,
    /// Reads of `block` given up on (their futures dropped).
    cancelled: AtomicUsize,
}

/// A small tree whose file `block` never answers a read, counting its
/// live files and cancelled reads.
struct Watched {
    tree: Tree,
    seen: Arc<Seen>,
}

/// A file, counted while held.
#[derive(Clone)]
struct Held {
    file: TreeFile,
    /// Counts the file while any clone of it lives.
    _live: Arc<Counted>,
}

struct Counted(Arc<Seen>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

struct OnDrop(Arc<Seen>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.cancelled.fetch_add(1, Ordering::SeqCst);
    }
}

impl Watched {
    fn new() -> (Watched, Arc<Seen>) {
        let root = Dir::new()
            .file("hello", "hello\n")
            .file("block", "")
            .dir("sub", Dir::new());
        let seen = Arc::new(Seen::default());
        let fs = Watched {
            tree: Tree::new(root),
            seen: seen.clone(),
        };
        (fs, seen)
    }

    fn held(&self, (file, qid): (TreeFile, Qid)) -> (Held, Qid) {
        self.seen.live.fetch_add(1, Ordering::SeqCst);
        (
            Held {
                file,
                _live: Arc::new(Counted(self.seen.clone())),
            },
            qid,
        )
    }
}

impl Filesystem for Watched {
    type File = Held;

    async fn attach(&self, user: &User) -> Result<(Held, Qid)> {
        Ok(self.held(self.tree.attach(user).await?))
    }
    async fn walk(&self, cx: &Cx, dir: &Held, name: &Name) -> Result<(Held, Qid)> {
        Ok(self.held(self.tree.walk(cx, &dir.file, name).await?))
    }
    async fn getattr(&self, cx: &Cx, file: &Held) -> Result<Attr> {
        self.tree.getattr(cx, &file.file).await
    }
    async fn open(&self, cx: &Cx, file: &mut Held, flags: u32) -> Result<Opened> {
        self.tree.open(cx, &mut file.file, flags).await
    }
    async fn read(&self, cx: &Cx, file: &Held, offset: u64, count: u32) -> Result<Bytes> {
        if self.tree.getattr(cx, &file.file).await?.name == "block" {
            let _cancelled = OnDrop(self.seen.clone());
            std::future::pending::<()>().await;
        }
        self.tree.read(cx, &file.file, offset, count).await
    }
    async fn read_dir(&self, cx: &Cx, dir: &Held) -> Result<Vec<DirEntry>> {
        self.tree.read_dir(cx, &dir.file).await
    }
}

/// Waits up to five seconds for `cond`.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 5 s: {what}");
}

#[tokio::test]
async fn qids_of_different_servers_never_collide() {
    let a = ramfs_with(&["x"]).await;
    let b = ramfs_with(&["x"]).await;
    let served = serve_mux(&format!("mount {} /n/a\nmount {} /n/b\n", a.addr, b.addr)).await;
    let fsys = attach(&served.addr, Dialect::L).await;
    let direct_a = attach(&a.addr, Dialect::L).await.stat("x").await.unwrap();
    let direct_b = attach(&b.addr, Dialect::L).await.stat("x").await.unwrap();
    assert_eq!(direct_a.qid, direct_b.qid, "the servers number alike");
    let mut paths = Vec::new();
    for path in ["", "n", "n/a", "n/b", "n/a/x", "n/b/x"] {
        paths.push(fsys.stat(path).await.unwrap().qid.path);
    }
    let mut unique = paths.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), paths.len(), "{paths:x?}");
    // And a file keeps its qid.
    assert_eq!(fsys.stat("n/a/x").await.unwrap().qid.path, paths[4]);
    // In listings too.
    let listed = fsys.read_dir("n/b").await.unwrap();
    assert_eq!(listed[0].qid.path, paths[5]);
}

#[tokio::test]
async fn flush_reaches_the_server_where_the_request_waits() {
    let (fs, seen) = Watched::new();
    let slow = serve(fs, Limits::default()).await;
    let ram = ramfs_with(&["f"]).await;
    let served = serve_mux(&format!(
        "mount {} /n/slow\nmount {} /n/ram\n",
        slow.addr, ram.addr
    ))
    .await;
    for dialect in Dialect::ALL {
        let fsys = attach(&served.addr, dialect).await;
        let file = fsys.open("n/slow/block", O_RDONLY).await.unwrap();
        let before = seen.cancelled.load(Ordering::SeqCst);
        // Our client flushes a read it gives up on.
        let read = tokio::time::timeout(Duration::from_millis(100), file.read_at(0, 10)).await;
        assert!(read.is_err(), "a read of block answered");
        eventually("the server's read cancelled", || {
            seen.cancelled.load(Ordering::SeqCst) > before
        })
        .await;
        // Meanwhile, and afterwards, the rest answers.
        assert_eq!(
            fsys.read_to_string("n/slow/hello").await.unwrap(),
            "hello\n"
        );
        assert_eq!(fsys.read_to_string("n/ram/f").await.unwrap(), "f");
        fsys.close().await;
    }
}

/// Frames on a raw connection, so that hanging up is all the client does.
async fn call(sock: &mut tokio::net::TcpStream, fcall: Fcall, dialect: Dialect) -> Msg {
    let mut buf = BytesMut::new();
    fcall.encode(dialect, &mut buf).unwrap();
    sock.write_all(&buf).await.unwrap();
    let size = sock.read_u32_le().await.unwrap() as usize;
    let mut frame = vec![0u8; size];
    frame[..4].copy_from_slice(&(size as u32).to_le_bytes());
    sock.read_exact(&mut frame[4..]).await.unwrap();
    Fcall::decode(Bytes::from(frame), dialect).unwrap().msg
}

/// A raw connection to the server at `addr` in 9P2000.L with `msize`,
/// attached as glenda on fid 0.
async fn raw_attach(addr: &str, msize: u32) -> tokio::net::TcpStream {
    let addr = addr.replace("tcp!", "").replace('!', ":");
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let version = ninep_wire::Tversion {
        msize,
        version: Dialect::L.version().into(),
    };
    call(
        &mut sock,
        Fcall::new(ninep_wire::NOTAG, version),
        Dialect::Base,
    )
    .await;
    let attach = ninep_wire::Tattach {
        fid: Fid(0),
        afid: Fid::NOFID,
        uname: "glenda".into(),
        aname: String::new(),
        n_uname: NONUNAME,
    };
    call(&mut sock, Fcall::new(1, attach), Dialect::L).await;
    sock
}

#[tokio::test]
async fn a_client_hanging_up_clunks_its_fids_upstream() {
    let (fs, seen) = Watched::new();
    let slow = serve(fs, Limits::default()).await;
    let served = serve_mux(&format!("mount {} /n/w\n", slow.addr)).await;
    // The mount's own root fid.
    let mounted = seen.live.load(Ordering::SeqCst);
    let mut sock = raw_attach(&served.addr, 8192).await;
    let d = Dialect::L;
    for (i, path) in ["n/w/hello", "n/w/sub", "n/w/block", "n/w"]
        .iter()
        .enumerate()
    {
        let wname = path.split('/').map(|n| Name::new(n).unwrap()).collect();
        let walk = ninep_wire::Twalk {
            fid: Fid(0),
            newfid: Fid(i as u32 + 1),
            wname,
        };
        let reply = call(&mut sock, Fcall::new(2, walk), d).await;
        assert!(matches!(reply, Msg::Rwalk(_)), "{path}: {reply:?}");
    }
    let open = ninep_wire::Tlopen {
        fid: Fid(1),
        flags: O_RDONLY,
    };
    assert!(matches!(
        call(&mut sock, Fcall::new(3, open), d).await,
        Msg::Rlopen(_)
    ));
    // n/w is the mount's own root fid: three more.
    assert_eq!(seen.live.load(Ordering::SeqCst), mounted + 3);
    drop(sock);
    eventually("the upstream fids clunked", || {
        seen.live.load(Ordering::SeqCst) == mounted
    })
    .await;
}

#[tokio::test]
async fn a_dead_server_fails_its_requests_and_can_be_remounted() {
    let (fs, _seen) = Watched::new();
    let slow = serve(fs, Limits::default()).await;
    let slow_addr = slow.addr.clone();
    let ram = ramfs_with(&["f"]).await;
    let served = serve_mux(&format!(
        "mount {} /n/slow\nmount {} /n/ram\n",
        slow.addr, ram.addr
    ))
    .await;
    let fsys = attach(&served.addr, Dialect::Base).await;
    let file = fsys.open("n/slow/block", O_RDONLY).await.unwrap();
    let pending = tokio::spawn(async move { file.read_at(0, 10).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.stop().await;
    let failed = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("the pending read was not failed")
        .unwrap()
        .unwrap_err();
    assert_eq!(failed.errno(), Errno::EIO, "{failed}");
    assert!(failed.to_string().contains("mount point gone"), "{failed}");
    // New requests to it fail at once; the rest of the name space works.
    let err = fsys.stat("n/slow/hello").await.unwrap_err();
    assert_eq!(err.errno(), Errno::EIO, "{err}");
    assert_eq!(fsys.read_to_string("n/ram/f").await.unwrap(), "f");
    // A client attaching while the server is away gets the rest.
    let meanwhile = attach(&served.addr, Dialect::L).await;
    assert!(meanwhile.stat("n/slow/hello").await.is_err());
    assert_eq!(meanwhile.read_to_string("n/ram/f").await.unwrap(), "f");
    // The server comes back at its address: a client remounts it in its own
    // name space...
    let (fs, _) = Watched::new();
    let again = serve_on(&slow_addr, fs, Limits::default()).await;
    fsys.write("#ns", format!("mount {} /n/slow\n", again.addr))
        .await
        .unwrap();
    assert_eq!(
        fsys.read_to_string("n/slow/hello").await.unwrap(),
        "hello\n"
    );
    // ...and the base name space is mended for clients attaching from now
    // on (at most once a second, so a new attach may need to wait for it).
    let mut tries = 0;
    let fresh = loop {
        let fresh = attach(&served.addr, Dialect::L).await;
        if fresh.read_to_string("n/slow/hello").await.ok().as_deref() == Some("hello\n") {
            break fresh;
        }
        tries += 1;
        assert!(tries < 50, "no new attach saw the server again within 5 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(fresh.read_to_string("n/ram/f").await.unwrap(), "f");
    // Its name space reads back as the base was written.
    let text = fresh.read_to_string("#ns").await.unwrap();
    assert!(
        text.contains(&format!("mount {slow_addr} /n/slow")),
        "{text}"
    );
    assert!(
        text.contains(&format!("mount {} /n/ram", ram.addr)),
        "{text}"
    );
}

#[tokio::test]
async fn many_clients_through_one_server_connection() {
    const CLIENTS: usize = 64;
    let ram = ramfs().await;
    let served = serve_mux(&format!("mount -c {} /n/ram\n", ram.addr)).await;
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let addr = served.addr.clone();
        tasks.push(tokio::spawn(async move {
            let dialect = Dialect::ALL[i % 3];
            let fsys = attach(&addr, dialect).await;
            let name = format!("n/ram/c{i}");
            let file = fsys.create(&name, 0o644, O_RDWR).await.unwrap();
            for round in 0..20u32 {
                let data = format!("client {i} round {round:02}");
                file.write_at(0, data.clone().into()).await.unwrap();
                let got = file.read_at(0, 100).await.unwrap();
                assert_eq!(got, data.as_bytes(), "client {i}");
                let info = fsys.stat(&name).await.unwrap();
                assert_eq!(info.size, data.len() as u64, "client {i}");
            }
            drop(file);
            fsys.remove(&name).await.unwrap();
            fsys.close().await;
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("a client did not finish")
            .unwrap();
    }
    let fsys = attach(&served.addr, Dialect::L).await;
    assert!(names(&fsys, "n/ram").await.is_empty());
}

/// With `attach_per_user`, each client's name space reaches the servers as
/// the client's own user; without it, as the mux's.
#[tokio::test]
async fn servers_see_each_client_or_the_mux_as_configured() {
    let whoami = Dir::new().read("whoami", |cx: &Cx| {
        Ok(format!("{} {}", cx.user.uname, cx.user.n_uname))
    });
    let server = serve(Tree::new(whoami), Limits::default()).await;
    let lines = format!("mount {} /", server.addr);
    for per_user in [true, false] {
        let config = ninep_mux::Config {
            uname: "mux".into(),
            n_uname: 500,
            attach_per_user: per_user,
            ..ninep_mux::Config::default()
        };
        let mux = serve(mux_with(config, &lines).await, Limits::default()).await;
        for (uname, n_uname) in [("alice", 1000), ("bob", 1001)] {
            let client = ninep_client::Client::connect(&mux.addr).await.unwrap();
            let fsys = client.attach_as(uname, n_uname, "").await.unwrap();
            let seen = fsys.read_to_string("whoami").await.unwrap();
            let expected = if per_user {
                format!("{uname} {n_uname}")
            } else {
                "mux 500".to_owned()
            };
            assert_eq!(seen, expected, "attach_per_user {per_user}");
        }
    }
}

/// A write larger than the server's messages (a client that writes up to
/// its msize, the mux's, whatever iounit it was told) is written whole, in
/// pieces the server takes: clients seldom write again what a short write
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_larger_than_the_servers_messages_is_written_whole() {
    let small = Limits {
        msize: 8192 + 24,
        ..Limits::default()
    };
    let ram = serve(ninep_ramfs::RamFs::new(), small).await;
    let served = serve_mux(&format!("mount -c {} /", ram.addr)).await;
    let direct = attach(&ram.addr, Dialect::L).await;
    direct.create("big", 0o644, O_RDWR).await.unwrap();

    let mut sock = raw_attach(&served.addr, 1 << 20).await;
    let d = Dialect::L;
    let walk = ninep_wire::Twalk {
        fid: Fid(0),
        newfid: Fid(1),
        wname: vec![Name::new("big").unwrap()],
    };
    call(&mut sock, Fcall::new(1, walk), d).await;
    let open = ninep_wire::Tlopen {
        fid: Fid(1),
        flags: O_RDWR,
    };
    call(&mut sock, Fcall::new(1, open), d).await;
    let data: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    let write = ninep_wire::Twrite {
        fid: Fid(1),
        offset: 100,
        data: Bytes::from(data.clone()),
    };
    match call(&mut sock, Fcall::new(1, write), d).await {
        Msg::Rwrite(r) => assert_eq!(r.count as usize, data.len()),
        other => panic!("{other:?}"),
    }
    // The server has it all, in place.
    let got = direct.read("big").await.unwrap();
    assert!(got[..100].iter().all(|&b| b == 0));
    assert!(got[100..] == data[..]);
}
