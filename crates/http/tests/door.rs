//! The door in this process, on servers in this process, spoken to over
//! real sockets: synthetic files are sent chunked with no validators, a
//! file is sent again from memory only while its qid holds and it opens, and a
//! client that stops reading holds the door's reading to a bounded
//! amount, however large the file.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use ninep_client::{Client, Fid, Fsys, Mode, Options, SetAttr, SetTime, Transfer};
use ninep_http::Door;
use ninep_ramfs::RamFs;
use ninep_server::tree::{Dir, Tree};
use ninep_server::{Attr, Cx, Filesystem, Opened, Server, Time, User};
use ninep_wire::consts::dotl::{O_RDWR, O_TRUNC};
use ninep_wire::{Name, Qid, QidType};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// The client's end of an in-memory 9P connection, counting the bytes the
/// server sent.
struct Counted {
    stream: DuplexStream,
    received: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        self.received
            .fetch_add((buf.filled().len() - before) as u64, SeqCst);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// `fs` served in this process; the client's msize is 64 KiB.
async fn attach(fs: impl Filesystem) -> (Fsys, Arc<AtomicU64>) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        Server::new(fs)
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let received = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        stream: ours,
        received: received.clone(),
    };
    let options = Options {
        msize: 64 << 10,
        ..Options::default()
    };
    let client = Client::over(Box::new(counted), options).await.unwrap();
    (client.attach("glenda", "").await.unwrap(), received)
}

/// A door on `fsys` on a free loopback port; stopped when the test ends.
async fn open(fsys: Fsys, options: ninep_http::Options) -> std::net::SocketAddr {
    open_on(fsys.into_root(), options).await
}

/// A door on the tree under `root`, as [`open`].
async fn open_on(root: Fid, options: ninep_http::Options) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let door = Door::new(root, options);
    tokio::spawn(async move { door.serve(listener, std::future::pending()).await });
    addr
}

/// Sends `request` and reads the whole response, the server closing the
/// connection (`Connection: close`).
async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    conn.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn synthetic_files_are_chunked_without_validators() {
    let reads = Arc::new(AtomicU64::new(0));
    let counter = reads.clone();
    let root = Dir::new().read("counter", move |_| {
        Ok(format!("read {}\n", counter.fetch_add(1, SeqCst)))
    });
    let (fsys, _) = attach(Tree::new(root)).await;
    let addr = open(fsys, ninep_http::Options::default()).await;

    let get = "GET /counter HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nIf-None-Match: *\r\nConnection: close\r\n\r\n";
    let reply = exchange(addr, get).await;
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(
        !head.contains("etag")
            && !head.contains("last-modified")
            && !head.contains("accept-ranges"),
        "{head}"
    );
    assert!(body.contains("read 0\n"), "{body}");

    let head_only = exchange(
        addr,
        "HEAD /counter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        head_only.starts_with("HTTP/1.1 200 ") && head_only.ends_with("\r\n\r\n"),
        "{head_only}"
    );
    // HEAD read nothing: the next GET is the file's second read, a plain
    // GET (whose first read goes with the walk) its third.
    assert!(exchange(addr, get).await.contains("read 1\n"));
    let plain = exchange(
        addr,
        "GET /counter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        plain
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{plain}"
    );
    assert!(plain.contains("read 2\n"), "{plain}");
}

/// A GET whose open the server refuses is answered with the refusal,
/// in one round trip as any other, and the door serves on.
#[tokio::test]
async fn a_refused_open_is_forbidden() {
    let root = Dir::new()
        .write("sink", |_, _| Ok(()))
        .file("plain", "hello");
    let (fsys, _) = attach(Tree::new(root)).await;
    let addr = open(fsys, ninep_http::Options::default()).await;
    let get = |path: &str| format!("GET /{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let refused = exchange(addr, &get("sink")).await;
    assert!(refused.starts_with("HTTP/1.1 403 "), "{refused}");
    let plain = exchange(addr, &get("plain")).await;
    assert!(
        plain.starts_with("HTTP/1.1 200 ") && plain.contains("\r\nhello\r\n"),
        "{plain}"
    );
}

/// Writes `data` to `name` in `fsys`, dated an hour ago when `settled`.
async fn put(fsys: &Fsys, name: &str, data: &[u8], settled: bool) {
    let file = match fsys.open(name, O_RDWR | O_TRUNC).await {
        Ok(file) => file,
        Err(_) => fsys.create(name, 0o644, O_RDWR).await.unwrap(),
    };
    file.write_at(0, Bytes::copy_from_slice(data))
        .await
        .unwrap();
    if settled {
        let hour_ago = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - 3600;
        let set = SetAttr {
            mtime: Some(SetTime::At {
                sec: hour_ago,
                nsec: 0,
            }),
            ..SetAttr::default()
        };
        file.fid().setattr(&set).await.unwrap();
    }
}

/// A small file that has stood unmodified is sent again from memory, with
/// only a walk sent to the server, for as long as the walk gives the qid
/// it was read under; once it changes it is read again, once it has just
/// been modified it is not kept, and once it is gone it is not found.
#[tokio::test]
async fn small_files_are_sent_again_while_their_qid_holds() {
    const SIZE: usize = 8 << 10;
    let (fsys, received) = attach(RamFs::new()).await;
    let addr = open_on(
        fsys.root().clone_fid().await.unwrap(),
        ninep_http::Options::default(),
    )
    .await;
    // The body of a GET of `request`'s page, and the bytes the server
    // sent for it.
    let get = async |range: &str| {
        let before = received.load(SeqCst);
        let reply = exchange(
            addr,
            &format!("GET /page HTTP/1.1\r\nHost: x\r\n{range}Connection: close\r\n\r\n"),
        )
        .await;
        let (head, body) = reply.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().to_owned();
        (status, body.to_owned(), received.load(SeqCst) - before)
    };
    let a = "a".repeat(SIZE);
    let b = "b".repeat(SIZE);

    put(&fsys, "page", a.as_bytes(), true).await;
    let (status, body, sent) = get("").await;
    assert!(
        status == "200" && body == a && sent >= SIZE as u64,
        "{status} {sent}"
    );
    let (status, body, sent) = get("").await;
    assert!(
        status == "200" && body == a && sent < 1024,
        "kept: {status} {sent}"
    );
    let (status, body, sent) = get("Range: bytes=10-19\r\n").await;
    assert!(
        status == "206" && body == a[..10] && sent < 1024,
        "a range of it: {status} {body} {sent}"
    );

    put(&fsys, "page", b.as_bytes(), false).await;
    for _ in 0..2 {
        let (status, body, sent) = get("").await;
        assert!(
            status == "200" && body == b && sent >= SIZE as u64,
            "just written: {status} {sent}"
        );
    }

    put(&fsys, "page", b.as_bytes(), true).await;
    let (_, body, sent) = get("").await;
    assert!(body == b && sent >= SIZE as u64, "changed: {sent}");
    let (_, body, sent) = get("").await;
    assert!(body == b && sent < 1024, "kept again: {sent}");

    fsys.remove("page").await.unwrap();
    let (status, ..) = get("").await;
    assert_eq!(status, "404");
}

/// A root holding one file, `page`, whose qid never changes and whose
/// opens are refused while `refuse` is set: a permission taken away with
/// no new version, as chmod does on a server whose versions come from
/// modification times.
#[derive(Clone, Default)]
struct Guarded {
    refuse: Arc<AtomicBool>,
}

const GUARDED: &[u8] = b"read under a qid that never changes";

impl Guarded {
    fn qid(page: bool) -> Qid {
        if page {
            Qid {
                ty: QidType::FILE,
                version: 7,
                path: 1,
            }
        } else {
            Qid {
                ty: QidType::DIR,
                version: 1,
                path: 0,
            }
        }
    }
}

impl Filesystem for Guarded {
    /// True for the page, false for the root.
    type File = bool;

    async fn attach(&self, _: &User) -> ninep_server::Result<(bool, Qid)> {
        Ok((false, Guarded::qid(false)))
    }

    async fn walk(&self, _: &Cx, dir: &bool, name: &Name) -> ninep_server::Result<(bool, Qid)> {
        if *dir || name.as_str() != "page" {
            return Err(ninep_server::Error::not_found());
        }
        Ok((true, Guarded::qid(true)))
    }

    async fn getattr(&self, _: &Cx, file: &bool) -> ninep_server::Result<Attr> {
        let hour_ago = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - 3600;
        Ok(Attr {
            qid: Guarded::qid(*file),
            mode: if *file { 0o100644 } else { 0o40755 },
            size: if *file { GUARDED.len() as u64 } else { 0 },
            mtime: Time {
                sec: hour_ago,
                nsec: 0,
            },
            ..Attr::default()
        })
    }

    async fn open(&self, _: &Cx, file: &mut bool, _: u32) -> ninep_server::Result<Opened> {
        if *file && self.refuse.load(SeqCst) {
            return Err(ninep_server::Error::access());
        }
        Ok(Opened {
            qid: Guarded::qid(*file),
            iounit: 0,
        })
    }

    async fn read(&self, _: &Cx, _: &bool, offset: u64, count: u32) -> ninep_server::Result<Bytes> {
        let from = (offset as usize).min(GUARDED.len());
        let to = (from + count as usize).min(GUARDED.len());
        Ok(Bytes::from_static(&GUARDED[from..to]))
    }
}

/// A kept file whose open is refused, its qid unchanged, is refused as a
/// GET of a file not kept would be, and sent again once its open is
/// allowed.
#[tokio::test]
async fn a_kept_file_is_refused_once_its_open_is() {
    let fs = Guarded::default();
    let refuse = fs.refuse.clone();
    let (fsys, _) = attach(fs).await;
    let addr = open(fsys, ninep_http::Options::default()).await;
    let get = || {
        exchange(
            addr,
            "GET /page HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    };
    let body = String::from_utf8_lossy(GUARDED).into_owned();
    for _ in 0..2 {
        let reply = get().await;
        assert!(
            reply.starts_with("HTTP/1.1 200 ") && reply.ends_with(&body),
            "{reply}"
        );
    }
    refuse.store(true, SeqCst);
    let reply = get().await;
    assert!(reply.starts_with("HTTP/1.1 403 "), "{reply}");
    refuse.store(false, SeqCst);
    let reply = get().await;
    assert!(
        reply.starts_with("HTTP/1.1 200 ") && reply.ends_with(&body),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_holds_back_the_reading() {
    const SIZE: usize = 64 << 20;
    const WINDOW: u64 = 1 << 20;
    let (fsys, received) = attach(RamFs::new()).await;
    let data: Bytes = (0..SIZE)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    let mut w = file
        .write_range(0, Transfer::new(Mode::Auto))
        .await
        .unwrap();
    w.write(data.clone()).await.unwrap();
    w.finish().await.unwrap();
    drop(file);
    let options = ninep_http::Options {
        window: WINDOW,
        ..ninep_http::Options::default()
    };
    let addr = open(fsys, options).await;

    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 << 10).unwrap();
    let mut conn = socket.connect(addr).await.unwrap();
    let start = received.load(SeqCst);
    conn.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut first = vec![0; 1 << 10];
    conn.read_exact(&mut first).await.unwrap();

    // The client reads no more: the door's reading stops once the window,
    // the pipe and the sockets' buffers are full.
    let mut last = received.load(SeqCst);
    let mut still = 0;
    while still < 5 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = received.load(SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let held = last - start;
    assert!(
        held < 16 << 20,
        "read {held} bytes ahead of a stalled client"
    );

    // And the rest comes when the client reads again, byte for byte.
    let mut rest = Vec::new();
    let mut buf = vec![0; 1 << 20];
    let body_at = loop {
        if let Some(at) = first.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = conn.read(&mut buf).await.unwrap();
        first.extend_from_slice(&buf[..n]);
    };
    rest.extend_from_slice(&first[body_at..]);
    while rest.len() < SIZE {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed after {} bytes", rest.len());
        rest.extend_from_slice(&buf[..n]);
    }
    assert!(rest == data[..], "the body differs");
}
