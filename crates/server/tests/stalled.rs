//! A client that sends requests and never reads the replies: the server
//! holds a bounded number of replies for it and stops reading its requests,
//! serves its other clients meanwhile, and catches up once it reads.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, Filesystem, Limits, Opened, Result, Server, User};
use ninep_transport::FrameCodec;
use ninep_wire::consts::dotl::{GETATTR_BASIC, O_RDONLY};
use ninep_wire::*;
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::codec::FramedRead;

const REQUESTS: usize = 8;
const PIECE: usize = 8192;
const SENT: u16 = 2000;

/// A tree that counts the reads it answers: one per reply made.
struct Counted {
    tree: Tree,
    reads: Arc<AtomicUsize>,
}

impl Filesystem for Counted {
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
}

fn encode(tag: u16, msg: impl Into<Msg>) -> Bytes {
    Fcall::new(tag, msg)
        .to_bytes(Dialect::L)
        .expect("a request within msize encodes")
}

/// A 9P2000.L client over an in-memory pipe that holds less than a reply.
struct Peer {
    frames: FramedRead<ReadHalf<DuplexStream>, FrameCodec>,
    writer: WriteHalf<DuplexStream>,
}

impl Peer {
    fn connect(server: &Server<Counted>) -> Peer {
        let (ours, theirs) = tokio::io::duplex(4096);
        let server = server.clone();
        tokio::spawn(async move {
            server
                .serve_stream(Box::new(theirs), std::future::pending())
                .await;
        });
        let (reader, writer) = tokio::io::split(ours);
        Peer {
            frames: FramedRead::new(reader, FrameCodec::new(u32::MAX, Dialect::L)),
            writer,
        }
    }

    async fn rpc(&mut self, tag: u16, msg: impl Into<Msg>) -> Msg {
        self.writer
            .write_all(&encode(tag, msg))
            .await
            .expect("the server reads requests");
        let reply = next(&mut self.frames).await;
        assert_eq!(reply.tag, tag, "{reply}");
        reply.msg
    }

    /// Version, attach as fid 0, and fid 1 open on `big`.
    async fn open_big(&mut self) {
        let version = Tversion {
            msize: (PIECE as u32) + IOHDRSZ,
            version: "9P2000.L".into(),
        };
        assert!(matches!(self.rpc(NOTAG, version).await, Msg::Rversion(_)));
        let attach = Tattach {
            fid: Fid(0),
            afid: Fid::NOFID,
            uname: "glenda".into(),
            aname: String::new(),
            n_uname: NONUNAME,
        };
        assert!(matches!(self.rpc(0, attach).await, Msg::Rattach(_)));
        let walk = Twalk {
            fid: Fid(0),
            newfid: Fid(1),
            wname: vec![Name::new("big").expect("a valid name")],
        };
        assert!(matches!(self.rpc(0, walk).await, Msg::Rwalk(_)));
        let open = Tlopen {
            fid: Fid(1),
            flags: O_RDONLY,
        };
        assert!(matches!(self.rpc(0, open).await, Msg::Rlopen(_)));
    }
}

async fn next(frames: &mut FramedRead<ReadHalf<DuplexStream>, FrameCodec>) -> Fcall {
    let frame = tokio::time::timeout(Duration::from_secs(10), frames.next())
        .await
        .expect("a reply within 10 s")
        .expect("connection open")
        .expect("a whole frame");
    Fcall::decode(frame, Dialect::L).expect("the server's replies decode")
}

/// Samples `count` until it has not moved for half a second (at most 20 s).
async fn settled(count: &AtomicUsize) -> usize {
    let (mut last, mut still) = (usize::MAX, 0);
    for _ in 0..1000 {
        let now = count.load(Ordering::SeqCst);
        if now == last {
            still += 1;
            if still == 25 {
                break;
            }
        } else {
            (last, still) = (now, 0);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_replies_holds_a_bounded_number() {
    let reads = Arc::new(AtomicUsize::new(0));
    let fs = Counted {
        tree: Tree::new(Dir::new().file("big", vec![7u8; PIECE])),
        reads: reads.clone(),
    };
    let limits = Limits {
        requests: REQUESTS,
        ..Limits::default()
    };
    let server = Server::with_limits(fs, limits);
    let mut stalled = Peer::connect(&server);
    stalled.open_big().await;
    let before = reads.load(Ordering::SeqCst);

    // Reads of a whole piece on tags 1 to SENT, written by a task of their
    // own: the server soon stops reading them, and the write waits.
    let mut requests = BytesMut::new();
    for tag in 1..=SENT {
        let read = Tread {
            fid: Fid(1),
            offset: 0,
            count: PIECE as u32,
        };
        requests.extend_from_slice(&encode(tag, read));
    }
    let mut writer = stalled.writer;
    let sending = tokio::spawn(async move { writer.write_all(&requests).await });

    // Replies waiting for the socket, and requests that finished and wait
    // for room to queue theirs: at most REQUESTS of each. Unbounded, the
    // server would have answered all SENT.
    let held = settled(&reads).await - before;
    assert!(
        (REQUESTS..=2 * REQUESTS).contains(&held),
        "{held} replies made for a client that reads none"
    );

    // Another client of the same server is served meanwhile.
    let mut other = Peer::connect(&server);
    other.open_big().await;
    let getattr = Tgetattr {
        fid: Fid(0),
        request_mask: GETATTR_BASIC,
    };
    assert!(matches!(other.rpc(1, getattr).await, Msg::Rgetattr(_)));

    // Once the client reads, every request is answered exactly once: the
    // read, or a refusal for those past the limit of requests in flight.
    let mut answered = HashSet::new();
    let mut read = 0;
    while answered.len() < SENT as usize {
        let reply = next(&mut stalled.frames).await;
        assert!(answered.insert(reply.tag), "second reply to {reply}");
        match reply.msg {
            Msg::Rread(r) => {
                assert_eq!(r.data.len(), PIECE);
                read += 1;
            }
            Msg::Rlerror(e) => assert_eq!(Errno(e.ecode), Errno::EAGAIN),
            other => panic!("unexpected {}", other.name()),
        }
    }
    assert!(answered.iter().all(|tag| (1..=SENT).contains(tag)));
    assert_eq!(reads.load(Ordering::SeqCst) - before, read);
    sending.await.unwrap().unwrap();
}
