//! Large reads of a file that lives on the host go from the file's pages
//! into the socket (splice), uncopied: the bytes arrive exactly as a read
//! would give them, in order with every other reply, to a client that
//! reads slowly too; and where splicing cannot be done (a stream that is
//! no socket, a small read, a file that cannot be spliced, more reads at
//! once than the limit on pipes) the file server's own read answers; a
//! read stream waits for its session's pipes instead.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, Filesystem, Limits, Opened, Result, Server, User};
use ninep_transport::{Addr, FrameCodec, Stream};
use ninep_wire::consts::dotl::{GETATTR_BASIC, O_RDONLY};
use ninep_wire::*;
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio_util::codec::FramedRead;

const SIZE: usize = 3 * 1024 * 1024 + 12_345;
/// The least a read brings to be spliced (the server's own rule).
const SPLICE_MIN: usize = 64 * 1024;

/// One test at a time: one counts the pipes of the process.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const MSIZE: u32 = 1024 * 1024 + IOHDRSZ;

fn contents() -> Vec<u8> {
    (0..SIZE).map(|i| (i * 13 % 251) as u8).collect()
}

/// A tree whose file `big` is also a host file (the same bytes), offered
/// for splicing; it counts the reads its own `read` answers.
struct HostBacked {
    tree: Tree,
    host: Arc<OwnedFd>,
    reads: Arc<AtomicUsize>,
}

impl Filesystem for HostBacked {
    type File = TreeFile;

    async fn attach(&self, user: &User) -> Result<(TreeFile, Qid)> {
        self.tree.attach(user).await
    }
    async fn walk(&self, cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        self.tree.walk(cx, dir, name).await
    }
    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        self.tree.getattr(cx, file).await
    }
    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        self.tree.open(cx, file, flags).await
    }
    async fn read(&self, cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.tree.read(cx, file, offset, count).await
    }
    fn host_file(&self, _file: &TreeFile) -> Option<Arc<OwnedFd>> {
        Some(self.host.clone())
    }
}

/// A server of `big` backed by a host file holding `host` (or, when
/// `host` is None, by a directory, which cannot be spliced from).
fn host_backed(host: Option<&[u8]>, name: &str) -> (Server<HostBacked>, Arc<AtomicUsize>) {
    host_backed_within(host, name, Limits::default())
}

fn host_backed_within(
    host: Option<&[u8]>,
    name: &str,
    limits: Limits,
) -> (Server<HostBacked>, Arc<AtomicUsize>) {
    let dir = std::env::temp_dir().join(format!("ninep-splice-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fd: OwnedFd = match host {
        Some(data) => {
            std::fs::write(dir.join("big"), data).unwrap();
            std::fs::File::open(dir.join("big")).unwrap().into()
        }
        None => std::fs::File::open(&dir).unwrap().into(),
    };
    // The open descriptor keeps what it names; nothing stays in /tmp.
    std::fs::remove_dir_all(&dir).unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let fs = HostBacked {
        tree: Tree::new(Dir::new().file("big", contents())),
        host: Arc::new(fd),
        reads: reads.clone(),
    };
    (Server::with_limits(fs, limits), reads)
}

/// A 9P2000.L client speaking raw frames, so that it can send many
/// requests before reading any reply.
struct Peer {
    frames: FramedRead<ReadHalf<Box<dyn Stream>>, FrameCodec>,
    writer: WriteHalf<Box<dyn Stream>>,
    protocol: Protocol,
}

impl Peer {
    /// Version, attach as fid 0, fid 1 open on `big`.
    async fn over(link: Box<dyn Stream>) -> Peer {
        Peer::with_version(link, "9P2000.L").await
    }

    /// The same, with the stream extension.
    async fn with_streams(link: Box<dyn Stream>) -> Peer {
        let mut peer = Peer::with_version(link, "9P2000.L.stream").await;
        peer.protocol.streams = true;
        peer
    }

    async fn with_version(link: Box<dyn Stream>, version: &str) -> Peer {
        let (reader, writer) = tokio::io::split(link);
        let mut peer = Peer {
            frames: FramedRead::new(reader, FrameCodec::new(MSIZE, Dialect::L)),
            writer,
            protocol: Dialect::L.into(),
        };
        let asked = Tversion {
            msize: MSIZE,
            version: version.into(),
        };
        match peer.rpc(NOTAG, asked).await {
            Msg::Rversion(r) => assert_eq!(r.version, version),
            other => panic!("{other:?}"),
        }
        let attach = Tattach {
            fid: Fid(0),
            afid: Fid::NOFID,
            uname: "glenda".into(),
            aname: String::new(),
            n_uname: NONUNAME,
        };
        assert!(matches!(peer.rpc(0, attach).await, Msg::Rattach(_)));
        let walk = Twalk {
            fid: Fid(0),
            newfid: Fid(1),
            wname: vec![Name::new("big").unwrap()],
        };
        assert!(matches!(peer.rpc(0, walk).await, Msg::Rwalk(_)));
        let open = Tlopen {
            fid: Fid(1),
            flags: O_RDONLY,
        };
        assert!(matches!(peer.rpc(0, open).await, Msg::Rlopen(_)));
        peer
    }

    async fn send(&mut self, tag: u16, msg: impl Into<Msg>) {
        let frame = Fcall::new(tag, msg).to_bytes(self.protocol).unwrap();
        self.writer.write_all(&frame).await.unwrap();
    }

    async fn next(&mut self) -> Fcall {
        let frame = tokio::time::timeout(Duration::from_secs(20), self.frames.next())
            .await
            .expect("a reply within 20 s")
            .expect("the connection stays up")
            .unwrap();
        Fcall::decode(frame, self.protocol).unwrap()
    }

    async fn rpc(&mut self, tag: u16, msg: impl Into<Msg>) -> Msg {
        self.send(tag, msg).await;
        let reply = self.next().await;
        assert_eq!(reply.tag, tag, "{reply}");
        reply.msg
    }

    async fn read(&mut self, offset: u64, count: u32) -> Bytes {
        match self
            .rpc(
                1,
                Tread {
                    fid: Fid(1),
                    offset,
                    count,
                },
            )
            .await
        {
            Msg::Rread(r) => r.data,
            other => panic!("{other:?}"),
        }
    }
}

fn read_of(offset: usize, count: usize) -> Tread {
    Tread {
        fid: Fid(1),
        offset: offset as u64,
        count: count as u32,
    }
}

async fn tcp(server: &Server<HostBacked>) -> Box<dyn Stream> {
    let listener = Addr::Tcp {
        host: "127.0.0.1".into(),
        port: 0,
    }
    .listen()
    .await
    .unwrap();
    let addr: Addr = listener.local_addr().unwrap().to_string().parse().unwrap();
    let server = server.clone();
    tokio::spawn(async move {
        server
            .serve_listener(listener, std::future::pending())
            .await
    });
    addr.dial().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_reads_go_from_the_host_file_into_the_socket() {
    let _alone = ALONE.lock().await;
    let want = contents();
    let (server, reads) = host_backed(Some(&want), "tcp");
    let mut peer = Peer::over(tcp(&server).await).await;

    // The whole file in reads of a whole msize: those that bring a whole
    // one spliced; the last, which brings what is left (less than the
    // least worth a pipe), and the read at the end by the server's read.
    let mut got = Vec::new();
    loop {
        let piece = peer.read(got.len() as u64, MSIZE - IOHDRSZ).await;
        if piece.is_empty() {
            break;
        }
        got.extend_from_slice(&piece);
    }
    assert!(got == want, "{} bytes read, unlike the file", got.len());
    const { assert!(SIZE % (1 << 20) < SPLICE_MIN) };
    assert_eq!(reads.load(Ordering::SeqCst), 2, "reads not spliced");

    // Across the end, bringing enough: spliced.
    let tail = peer.read(SIZE as u64 - 100_000, 1 << 20).await;
    assert!(tail[..] == want[SIZE - 100_000..]);
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    // A large read that brings little, or nothing, costs less copied.
    let tail = peer.read(SIZE as u64 - 1000, 1 << 20).await;
    assert!(tail[..] == want[SIZE - 1000..]);
    assert!(peer.read(SIZE as u64 + 10, 1 << 20).await.is_empty());
    assert_eq!(reads.load(Ordering::SeqCst), 4);

    // Whole, wherever a read starts (off a page boundary, a pipe may
    // not hold a whole msize, and the server's read answers).
    let read = peer.read(4095, 1 << 20).await;
    assert!(read[..] == want[4095..4095 + (1 << 20)]);

    // A small read costs less copied: the server's read answers it.
    let before = reads.load(Ordering::SeqCst);
    assert!(peer.read(5, 100).await[..] == want[5..105]);
    assert_eq!(reads.load(Ordering::SeqCst), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_stream_sends_its_pieces_from_the_host_file() {
    let _alone = ALONE.lock().await;
    let want = contents();
    let (server, reads) = host_backed(Some(&want), "stream");
    let mut peer = Peer::with_streams(tcp(&server).await).await;
    let stream = Tsread {
        fid: Fid(1),
        offset: 1000,
        count: u64::MAX,
        credit: 4 << 20,
    };
    peer.send(1, stream).await;
    let got = stream_to_end(&mut peer).await;
    assert!(got[..] == want[1000..], "{} bytes streamed", got.len());
    // Off a page boundary, the first piece stops short at one, so that it
    // and the rest fit their pipes: none copied but those that bring too
    // little to be worth a pipe (the last, and the end's empty one).
    assert_eq!(reads.load(Ordering::SeqCst), 2, "pieces copied");
}

/// The bytes of the read stream of tag 1, to its end.
async fn stream_to_end(peer: &mut Peer) -> Vec<u8> {
    let mut got = Vec::new();
    loop {
        let reply = peer.next().await;
        assert_eq!(reply.tag, 1);
        match reply.msg {
            Msg::Rsread(r) if r.data.is_empty() => return got,
            Msg::Rsread(r) => got.extend_from_slice(&r.data),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_stream_that_outruns_its_socket_waits_for_a_pipe() {
    let _alone = ALONE.lock().await;
    let want = contents();
    // One pipe for the session: the next piece is ready while the last
    // still waits in its pipe for room in the socket.
    let limits = Limits {
        spliced_reads: 4,
        ..Limits::default()
    };
    let (server, reads) = host_backed_within(Some(&want), "outrun", limits);
    let mut peer = Peer::with_streams(tcp(&server).await).await;
    let stream = Tsread {
        fid: Fid(1),
        offset: 0,
        count: u64::MAX,
        credit: 64 << 20,
    };
    peer.send(1, stream).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = stream_to_end(&mut peer).await;
    assert!(got[..] == want[..], "{} bytes streamed", got.len());
    // The pieces waited for the pipe rather than being copied: only the
    // last, too small for a pipe, and the end's empty one were read.
    assert_eq!(reads.load(Ordering::SeqCst), 2, "pieces copied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spliced_replies_keep_their_order_for_a_client_that_reads_late() {
    let _alone = ALONE.lock().await;
    let want = contents();
    // Pipes enough for every read at once.
    let limits = Limits {
        spliced_reads: 1024,
        ..Limits::default()
    };
    let (server, reads) = host_backed_within(Some(&want), "late", limits);
    let mut peer = Peer::over(tcp(&server).await).await;

    // Reads of every size and other requests between them, all sent
    // before any reply is read: the socket fills, and the rest of each
    // reply waits for room.
    let mut expected = Vec::new();
    let mut requests = BytesMut::new();
    for tag in 1..=40u16 {
        let count = [1 << 20, 65_536, 300_000, 100][usize::from(tag) % 4];
        // Whole msizes from page boundaries (a pipe of at most 1 MiB holds
        // no more), the others from anywhere.
        let offset = match count {
            0x10_0000 => usize::from(tag) * 4096 * 7,
            _ => usize::from(tag) * 77_777 % SIZE,
        };
        let msg: Msg = if tag % 5 == 0 {
            Tgetattr {
                fid: Fid(1),
                request_mask: GETATTR_BASIC,
            }
            .into()
        } else {
            read_of(offset, count).into()
        };
        let end = (offset + count).min(SIZE);
        expected.push((tag, tag % 5 != 0, &want[offset..end]));
        requests.extend_from_slice(&Fcall::new(tag, msg).to_bytes(Dialect::L).unwrap());
    }
    peer.writer.write_all(&requests).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut answered = std::collections::HashMap::new();
    for _ in 0..expected.len() {
        let reply = peer.next().await;
        answered.insert(reply.tag, reply.msg);
    }
    for (tag, is_read, data) in expected {
        match answered.remove(&tag) {
            Some(Msg::Rread(r)) if is_read => {
                assert!(r.data[..] == *data, "tag {tag}: {} bytes", r.data.len());
            }
            Some(Msg::Rgetattr(_)) if !is_read => {}
            other => panic!("tag {tag}: {other:?}"),
        }
    }
    // Only the 100-byte reads went through the server's read.
    assert_eq!(reads.load(Ordering::SeqCst), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_socket_or_a_spliceable_file_the_server_reads() {
    let _alone = ALONE.lock().await;
    let want = contents();
    // A stream that is no socket.
    let (server, reads) = host_backed(Some(&want), "duplex");
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let mut peer = Peer::over(Box::new(ours)).await;
    assert!(peer.read(1000, 1 << 20).await[..] == want[1000..1000 + (1 << 20)]);
    assert_eq!(reads.load(Ordering::SeqCst), 1);

    // A socket, but a host file that cannot be spliced from.
    let (server, reads) = host_backed(None, "unspliceable");
    let mut peer = Peer::over(tcp(&server).await).await;
    assert!(peer.read(1000, 1 << 20).await[..] == want[1000..1000 + (1 << 20)]);
    assert_eq!(reads.load(Ordering::SeqCst), 1);
}

/// The pipes this process holds (the server runs in it).
fn pipes() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("pipe:"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_holds_only_its_share_of_pipes() {
    let _alone = ALONE.lock().await;
    let want = contents();
    // One spliced read at a time for a connection, of four for the server.
    let limits = Limits {
        spliced_reads: 4,
        ..Limits::default()
    };
    let (server, reads) = host_backed_within(Some(&want), "share", limits);
    let mut peer = Peer::over(tcp(&server).await).await;
    let before = pipes();

    // Forty whole-msize reads, and no reply read until all are answered:
    // the socket fills; the replies wait in the server.
    let mut requests = BytesMut::new();
    for tag in 1..=40u16 {
        let read = read_of(usize::from(tag % 3) << 20, 1 << 20);
        requests.extend_from_slice(&Fcall::new(tag, read).to_bytes(Dialect::L).unwrap());
    }
    peer.writer.write_all(&requests).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while reads.load(Ordering::SeqCst) < 39 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every read answered: one spliced, still holding its pipe (its read
    // end) until the client takes it; the others copied.
    assert_eq!(reads.load(Ordering::SeqCst), 39);
    let held = pipes().saturating_sub(before);
    assert!(held <= 1, "{held} pipes held for one client");

    for _ in 1..=40u16 {
        let reply = peer.next().await;
        let offset = usize::from(reply.tag % 3) << 20;
        match reply.msg {
            Msg::Rread(r) => assert!(r.data[..] == want[offset..offset + (1 << 20)]),
            other => panic!("{other:?}"),
        }
    }
    // The last frame goes once its bytes are in the socket, which may be
    // after the client read them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while pipes() > before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pipes(), before, "pipes left once every reply was read");
}
