//! The client's own behaviour on the wire: long walks, tokio I/O traits,
//! Tflush when a request is dropped (and only then), and negotiating down
//! the dialects.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_client::{Client, Options};
use ninep_ramfs::RamFs;
use ninep_server::tree::{Dir, Tree};
use ninep_server::{Filesystem, Server};
use ninep_transport::FrameCodec;
use ninep_wire::consts::dotl::{O_EXCL, O_RDONLY, O_RDWR};
use ninep_wire::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_util::codec::FramedRead;

/// A client connected to a ramfs over an in-memory stream.
async fn ramfs(dialect: Dialect) -> Client {
    serving(RamFs::new(), dialect).await
}

/// A client connected to `fs` over an in-memory stream.
async fn serving(fs: impl Filesystem, dialect: Dialect) -> Client {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let server = Server::new(fs);
    tokio::spawn(async move {
        server
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    Client::over(Box::new(ours), options)
        .await
        .expect("connect")
}

#[tokio::test]
async fn walks_longer_than_sixteen_names() {
    for dialect in Dialect::ALL {
        let fsys = ramfs(dialect)
            .await
            .attach("glenda", "")
            .await
            .expect("attach");
        let mut path = String::new();
        for i in 0..40 {
            path.push_str(&format!("/d{i}"));
            fsys.mkdir(&path, 0o755).await.expect("mkdir");
        }
        let file = fsys
            .create(&format!("{path}/deep"), 0o644, O_RDWR)
            .await
            .expect("create");
        file.write_all_at(0, "bottom".into()).await.expect("write");
        drop(file);
        assert_eq!(
            fsys.read_to_string(&format!("{path}/deep"))
                .await
                .expect("read"),
            "bottom"
        );
        // A walk that fails after the first sixteen names leaves no fid behind.
        let err = fsys
            .walk(&format!("{path}/nothing/x"))
            .await
            .expect_err("walk");
        assert_eq!(err.errno(), Errno::ENOENT);
    }
}

/// create_beside makes the file on a fid of its own (the directory's stays
/// the directory's) and stats the new file, not the directory, in every
/// dialect; a name taken is refused and leaves nothing open.
#[tokio::test]
async fn a_file_created_beside_its_directory_is_stat_ed() {
    for dialect in Dialect::ALL {
        let client = ramfs(dialect).await;
        assert!(client.runs_in_order(), "{dialect}");
        let fsys = client.attach("glenda", "").await.expect("attach");
        let root = fsys.root();
        let (file, info) = root
            .create_beside("new", 0o644, O_RDWR | O_EXCL, NONUNAME)
            .await
            .expect("create");
        let info = info.expect("stat");
        assert_eq!(info.qid, file.fid().qid(), "{dialect}");
        assert!(!info.is_dir() && info.size == 0, "{dialect}: {info:?}");
        assert!(root.qid().ty.is_dir());
        file.write_all_at(0, "made".into()).await.expect("write");
        drop(file);
        assert_eq!(fsys.read_to_string("new").await.expect("read"), "made");
        let err = root
            .create_beside("new", 0o644, O_RDWR | O_EXCL, NONUNAME)
            .await
            .expect_err("the name is taken");
        assert_eq!(err.errno(), Errno::EEXIST, "{dialect}: {err}");
        assert_eq!(fsys.read_dir("").await.expect("list").len(), 1);
    }
}

#[tokio::test]
async fn files_are_tokio_readers_and_writers() {
    let client = ramfs(Dialect::L).await;
    let msize_payload = (client.msize() - IOHDRSZ) as usize;
    let fsys = client.attach("glenda", "").await.expect("attach");
    let data: Vec<u8> = (0..3 * msize_payload + 123)
        .map(|i| (i % 251) as u8)
        .collect();
    let mut file = fsys.create("copy", 0o644, O_RDWR).await.expect("create");
    let mut source = &data[..];
    let n = tokio::io::copy(&mut source, &mut file)
        .await
        .expect("copy in");
    assert_eq!(n as usize, data.len());
    drop(file);
    let mut file = fsys.open("copy", O_RDONLY).await.expect("open");
    let mut back = Vec::new();
    file.read_to_end(&mut back).await.expect("copy out");
    assert_eq!(back, data);
}

/// A hand-written peer: answers version, attach, walk and open, never
/// answers reads, and reports every message it gets. A walk to `broken`
/// it answers with one qid more than the names, as a broken server would.
async fn silent_reader(stream: DuplexStream, seen: tokio::sync::mpsc::UnboundedSender<Fcall>) {
    let (r, mut w) = tokio::io::split(stream);
    let mut frames = FramedRead::new(r, FrameCodec::new(1 << 20, Dialect::L));
    while let Some(Ok(frame)) = frames.next().await {
        let fcall = Fcall::decode(frame, Dialect::L).expect("client sent a valid message");
        let qid = Qid::default();
        let reply: Option<Msg> = match &fcall.msg {
            Msg::Tversion(v) => Some(
                Rversion {
                    msize: v.msize,
                    version: "9P2000.L".into(),
                }
                .into(),
            ),
            Msg::Tattach(_) => Some(Rattach { qid }.into()),
            Msg::Twalk(w) => {
                let broken = w.wname.first().is_some_and(|n| n.as_str() == "broken");
                let wqid = vec![qid; w.wname.len() + usize::from(broken)];
                Some(Rwalk { wqid }.into())
            }
            Msg::Tlopen(_) => Some(Rlopen { qid, iounit: 0 }.into()),
            Msg::Tflush(_) | Msg::Tclunk(_) => Some(match fcall.msg {
                Msg::Tflush(_) => Rflush {}.into(),
                _ => Rclunk {}.into(),
            }),
            _ => None,
        };
        if let Some(reply) = reply {
            let mut buf = BytesMut::new();
            Fcall::new(fcall.tag, reply)
                .encode(Dialect::L, &mut buf)
                .expect("encode");
            w.write_all(&buf).await.expect("write");
        }
        let _ = seen.send(fcall);
    }
}

/// A client of [`silent_reader`], and what the peer is sent.
async fn silent_peer() -> (Client, tokio::sync::mpsc::UnboundedReceiver<Fcall>) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(silent_reader(theirs, tx));
    (dotl_client(ours).await, seen)
}

/// A 9P2000.L client over `stream`, to a hand-written peer.
async fn dotl_client(stream: DuplexStream) -> Client {
    let options = Options {
        dialect: Some(Dialect::L),
        ..Options::default()
    };
    Client::over(Box::new(stream), options)
        .await
        .expect("connect")
}

/// A peer that answers version (with the extensions asked for where
/// `ordered`, as ninep's server, which runs requests in order) and attach
/// at once, and the first `answered` requests after them, then holds the
/// next `hold` requests unanswered until all have come, and answers them in
/// order: walks, opens and creates as asked, stats refused, reads with
/// `hello`. It reports every request's name.
async fn holding_peer(
    stream: DuplexStream,
    ordered: bool,
    (mut answered, hold): (usize, usize),
    seen: tokio::sync::mpsc::UnboundedSender<&'static str>,
) {
    let (r, mut w) = tokio::io::split(stream);
    let mut frames = FramedRead::new(r, FrameCodec::new(1 << 20, Dialect::L));
    let mut held = Vec::new();
    let mut holding = true;
    while let Some(Ok(frame)) = frames.next().await {
        let fcall = Fcall::decode(frame, Dialect::L).expect("client sent a valid message");
        let _ = seen.send(fcall.msg.name());
        let answer = |msg: &Msg| -> Msg {
            let qid = Qid::default();
            match msg {
                Msg::Tversion(v) => Rversion {
                    msize: v.msize,
                    version: if ordered {
                        v.version.clone()
                    } else {
                        "9P2000.L".into()
                    },
                }
                .into(),
                Msg::Tattach(_) => Rattach { qid }.into(),
                Msg::Twalk(m) => Rwalk {
                    wqid: vec![qid; m.wname.len()],
                }
                .into(),
                Msg::Tlopen(_) => Rlopen { qid, iounit: 0 }.into(),
                Msg::Tlcreate(_) => Rlcreate { qid, iounit: 0 }.into(),
                Msg::Tread(_) => Rread {
                    data: Bytes::from_static(b"hello"),
                }
                .into(),
                Msg::Tclunk(_) => Rclunk {}.into(),
                _ => Rlerror {
                    ecode: Errno::EIO.0,
                }
                .into(),
            }
        };
        let mut replies = Vec::new();
        match &fcall.msg {
            Msg::Tversion(_) | Msg::Tattach(_) | Msg::Tclunk(_) => replies.push(fcall),
            _ if answered > 0 => {
                answered -= 1;
                replies.push(fcall);
            }
            _ if holding => {
                held.push(fcall);
                if held.len() == hold {
                    holding = false;
                    replies.append(&mut held);
                }
            }
            _ => replies.push(fcall),
        }
        for fcall in replies {
            let mut buf = BytesMut::new();
            Fcall::new(fcall.tag, answer(&fcall.msg))
                .encode(Dialect::L, &mut buf)
                .expect("encode");
            w.write_all(&buf).await.expect("write");
        }
    }
}

/// walk_open_read sends the walk, the open, the stat and the read before
/// any reply comes to a server that runs requests in order, and nothing
/// behind the walk to one that does not say so (which might run the open
/// on the fid while the walk is still making it).
#[tokio::test]
async fn a_walk_open_read_goes_in_one_round_trip_where_the_server_keeps_order() {
    for ordered in [true, false] {
        let (got, sent) = against_holding_peer(ordered, (0, 4), |fsys| async move {
            let names = [Name::new("file").expect("a name")];
            fsys.root().walk_open_read(&names, O_RDONLY, 100).await
        })
        .await;
        if ordered {
            let err = got
                .expect("all four were sent before any reply")
                .expect_err("the stat is refused");
            assert_eq!(err.errno(), Errno::EIO, "{err}");
            assert_eq!(sent, ["Twalk", "Tlopen", "Tgetattr", "Tread"]);
        } else {
            assert!(got.is_none(), "the peer holds the walk: nothing came back");
            assert_eq!(sent, ["Twalk"]);
        }
    }
}

/// The head of a file is read behind its open only from a server that runs
/// requests in order: all its requests (the walk, the open and the read, or
/// for a fid walked before, the open and the read) go before any reply.
/// To a server that does not say so, nothing more than the walk and the
/// open is sent, and nothing is read.
#[tokio::test]
async fn a_head_is_read_behind_an_open_only_where_the_server_keeps_order() {
    for ordered in [true, false] {
        let hold = if ordered { (0, 3) } else { (0, 1) };
        let (got, sent) = against_holding_peer(ordered, hold, |fsys| async move {
            let names = [Name::new("file").expect("a name")];
            fsys.root().walk_open_head(&names, O_RDONLY, 100).await
        })
        .await;
        let (_, head) = got.expect("answered").expect("opened");
        // The walk before is answered at once.
        let hold = if ordered { (1, 2) } else { (1, 1) };
        let (got, walked) = against_holding_peer(ordered, hold, |fsys| async move {
            let fid = fsys.root().walk(&[]).await?;
            fid.open_head(O_RDONLY, 100).await
        })
        .await;
        let (_, head_walked) = got.expect("answered").expect("opened");
        if ordered {
            assert_eq!(head.as_deref(), Some(&b"hello"[..]));
            assert_eq!(head_walked.as_deref(), Some(&b"hello"[..]));
            assert_eq!(sent, ["Twalk", "Tlopen", "Tread"]);
            assert_eq!(walked, ["Twalk", "Tlopen", "Tread"]);
        } else {
            assert_eq!((head, head_walked), (None, None));
            assert_eq!(sent, ["Twalk", "Tlopen"]);
            assert_eq!(walked, ["Twalk", "Tlopen"]);
        }
    }
}

/// create_beside sends the clone's walk, the create and the stat before
/// any reply to a server that runs requests in order, and only the walk
/// to one that does not say so; a stat refused beside a create that was
/// made is asked again, and a stat refused again leaves the file made in
/// the caller's hands.
#[tokio::test]
async fn a_create_beside_goes_in_one_round_trip_where_the_server_keeps_order() {
    for ordered in [true, false] {
        let (got, sent) = against_holding_peer(ordered, (0, 3), |fsys| async move {
            let root = fsys.root();
            let (file, info) = root.create_beside("new", 0o644, O_RDWR, NONUNAME).await?;
            Ok::<_, ninep_client::Error>((file.fid().qid(), info))
        })
        .await;
        if ordered {
            let (qid, info) = got
                .expect("all three were sent before any reply")
                .expect("the file is made");
            assert!(!qid.ty.is_dir());
            let err = info.expect_err("the peer refuses every stat");
            assert_eq!(err.errno(), Errno::EIO, "{err}");
            // (The Tclunk of the file let go may follow.)
            assert_eq!(sent[..4], ["Twalk", "Tlcreate", "Tgetattr", "Tgetattr"]);
        } else {
            assert!(got.is_none(), "the peer holds the walk: nothing came back");
            assert_eq!(sent, ["Twalk"]);
        }
    }
}

/// walk_stat sends the walk and the stat before any reply to a server
/// that runs requests in order, and only the walk to one that does not
/// say so; a stat refused beside a walk that was made is asked again.
#[tokio::test]
async fn a_walk_stat_goes_in_one_round_trip_where_the_server_keeps_order() {
    for ordered in [true, false] {
        let (got, sent) = against_holding_peer(ordered, (0, 2), |fsys| async move {
            let names = [Name::new("file").expect("a name")];
            fsys.root().walk_stat(&names).await
        })
        .await;
        if ordered {
            let err = got
                .expect("both were sent before any reply")
                .expect_err("the peer refuses every stat");
            assert_eq!(err.errno(), Errno::EIO, "{err}");
            // (The Tclunk of the fid let go may follow.)
            assert_eq!(sent[..3], ["Twalk", "Tgetattr", "Tgetattr"]);
        } else {
            assert!(got.is_none(), "the peer holds the walk: nothing came back");
            assert_eq!(sent, ["Twalk"]);
        }
    }
}

/// walk_open_clunk sends the walk, the open and the clunk of the fid the
/// walk makes before any reply to a server that runs requests in order
/// (the peer answers the clunk and holds the rest), and only the walk to
/// one that does not say so.
#[tokio::test]
async fn a_walk_open_clunk_goes_in_one_round_trip_where_the_server_keeps_order() {
    for ordered in [true, false] {
        let (got, sent) = against_holding_peer(ordered, (0, 3), |fsys| async move {
            let names = [Name::new("file").expect("a name")];
            fsys.root().walk_open_clunk(&names, O_RDONLY).await
        })
        .await;
        assert!(got.is_none(), "the peer holds the walk: nothing came back");
        if ordered {
            assert_eq!(sent, ["Twalk", "Tlopen", "Tclunk"]);
        } else {
            assert_eq!(sent, ["Twalk"]);
        }
    }
}

/// walk_open_clunk gives the qid an open gives, refuses what an open
/// refuses, and leaves no fid behind on the server: the fid number it
/// used is free again, and taken by the next walk without complaint.
#[tokio::test]
async fn a_walk_open_clunk_leaves_no_fid() {
    for dialect in [Dialect::L, Dialect::U, Dialect::Base] {
        let fsys = ramfs(dialect)
            .await
            .attach("glenda", "")
            .await
            .expect("attach");
        fsys.create("file", 0o644, O_RDWR).await.expect("create");
        let names = [Name::new("file").expect("a name")];
        let opened = fsys.open("file", O_RDONLY).await.expect("open").fid().qid();
        for _ in 0..3 {
            let qid = fsys.root().walk_open_clunk(&names, O_RDONLY).await;
            assert_eq!(qid.expect("walk_open_clunk"), opened, "{dialect:?}");
        }
        let missing = [Name::new("missing").expect("a name")];
        let err = fsys.root().walk_open_clunk(&missing, O_RDONLY).await;
        assert_eq!(
            err.expect_err("no such file").errno(),
            Errno::ENOENT,
            "{dialect:?}"
        );
        let again = fsys.root().walk(&names).await.expect("walk after");
        assert_eq!(again.qid().path, opened.path);

        // A file that is written only: its open for reading is refused.
        let sink = Tree::new(Dir::new().write("sink", |_, _| Ok(())));
        let fsys = serving(sink, dialect)
            .await
            .attach("glenda", "")
            .await
            .expect("attach");
        let names = [Name::new("sink").expect("a name")];
        let err = fsys.root().walk_open_clunk(&names, O_RDONLY).await;
        assert!(err.expect_err("not readable").is_remote(), "{dialect:?}");
        fsys.root().walk(&names).await.expect("walk after");
    }
}

/// What `call` gives on a client of a [`holding_peer`] that answers
/// `hold.0` requests and then holds `hold.1` (none if it waited past the
/// peer's patience), and the names of the requests the peer got after
/// version and attach.
async fn against_holding_peer<T, F: std::future::Future<Output = T>>(
    ordered: bool,
    hold: (usize, usize),
    call: impl FnOnce(ninep_client::Fsys) -> F,
) -> (Option<T>, Vec<&'static str>) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(holding_peer(theirs, ordered, hold, tx));
    let client = dotl_client(ours).await;
    assert_eq!(client.runs_in_order(), ordered);
    let fsys = client.attach("glenda", "").await.expect("attach");
    let patience = Duration::from_millis(if ordered { 5000 } else { 300 });
    let got = tokio::time::timeout(patience, call(fsys)).await.ok();
    let mut sent = Vec::new();
    while let Ok(name) = seen.try_recv() {
        sent.push(name);
    }
    assert_eq!(sent[..2], ["Tversion", "Tattach"], "{sent:?}");
    (got, sent.split_off(2))
}

/// A walk answered with more qids than names fails (the reply cannot be
/// trusted) rather than handing out a fid, and the connection goes on.
#[tokio::test]
async fn a_walk_past_its_names_is_refused() {
    let (client, _seen) = silent_peer().await;
    let fsys = client.attach("glenda", "").await.expect("attach");
    let err = fsys
        .walk("broken")
        .await
        .expect_err("a walk past its names");
    assert_eq!(err.errno(), Errno::EPROTO, "{err}");
    fsys.walk("fine").await.expect("a walk after it");
}

/// Nothing is read or written past the largest offset 9P can name: a read
/// there is cut to what lies before it (a server may answer any read in
/// full, and where the data ends must be an offset too), and a write is
/// refused with EFBIG before it is sent.
#[tokio::test]
async fn nothing_is_read_or_written_past_the_largest_offset() {
    let (client, mut seen) = silent_peer().await;
    let fsys = client.attach("glenda", "").await.expect("attach");
    let file = fsys.open("file", O_RDWR).await.expect("open");
    let written = file.write_at(u64::MAX - 1, Bytes::from_static(b"xy")).await;
    assert_eq!(
        written.expect_err("a write past the end").errno(),
        Errno::EFBIG
    );
    let read = tokio::time::timeout(Duration::from_millis(200), file.read_at(u64::MAX - 3, 4096));
    assert!(read.await.is_err(), "the silent peer answered a read");
    let sent = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(fcall) = seen.recv().await {
            match fcall.msg {
                Msg::Twrite(w) => panic!("a Twrite at {} was sent", w.offset),
                Msg::Tread(r) => return r,
                _ => {}
            }
        }
        panic!("connection ended without a Tread");
    })
    .await
    .expect("no Tread within 5 s");
    assert_eq!((sent.offset, sent.count), (u64::MAX - 3, 3));
}

#[tokio::test]
async fn dropping_a_pending_read_sends_tflush() {
    let (client, mut seen) = silent_peer().await;
    let fsys = client.attach("glenda", "").await.expect("attach");
    let file = fsys.open("pipe", O_RDONLY).await.expect("open");
    let read = tokio::time::timeout(Duration::from_millis(200), file.read_at(0, 10)).await;
    assert!(read.is_err(), "the silent peer answered a read");
    let mut read_tag = None;
    let flush = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(fcall) = seen.recv().await {
            match fcall.msg {
                Msg::Tread(_) => read_tag = Some(fcall.tag),
                Msg::Tflush(f) => return f.oldtag,
                _ => {}
            }
        }
        panic!("connection ended without a Tflush");
    })
    .await
    .expect("no Tflush within 5 s");
    assert_eq!(Some(flush), read_tag, "Tflush names the read's tag");
    // The connection still works after the flush.
    let info = client
        .rpc(Tclunk {
            fid: file.fid().number(),
        })
        .await;
    assert!(info.is_ok());
    std::mem::forget(file); // already clunked by hand above
}

#[tokio::test]
async fn negotiates_down_to_what_the_server_speaks() {
    for (offered, expect) in [("9P2000.u", Dialect::U), ("9P2000", Dialect::Base)] {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let (r, mut w) = tokio::io::split(theirs);
            let mut frames = FramedRead::new(r, FrameCodec::new(1 << 20, Dialect::Base));
            while let Some(Ok(frame)) = frames.next().await {
                let fcall = Fcall::decode(frame, Dialect::Base).expect("Tversion");
                let Msg::Tversion(v) = fcall.msg else { return };
                // A server of one dialect drops any suffix it does not
                // know, as version(5) says: 9P2000.L becomes 9P2000.
                let version = if v.version == offered {
                    offered
                } else {
                    "9P2000"
                };
                let reply = Fcall::new(
                    NOTAG,
                    Rversion {
                        msize: 8192,
                        version: version.into(),
                    },
                );
                let bytes: Bytes = reply.to_bytes(Dialect::Base).expect("encode");
                w.write_all(&bytes).await.expect("write");
            }
        });
        let client = Client::over(Box::new(ours), Options::default())
            .await
            .expect("connect");
        assert_eq!(client.dialect(), expect);
        assert_eq!(client.msize(), 8192);
    }
}

#[tokio::test]
async fn a_reply_come_and_dropped_flushes_nothing_on_its_reused_tag() {
    let (client, mut seen) = silent_peer().await;
    // A request is answered, but its caller never looks at the reply...
    let mut answered = Box::pin(client.rpc(Tclunk { fid: Fid(100) }));
    assert!(futures::poll!(answered.as_mut()).is_pending());
    client.idle().await;
    // ...while a request the peer never answers takes the freed tag...
    let mut waiting = Box::pin(client.rpc(Tread {
        fid: Fid(101),
        offset: 0,
        count: 10,
    }));
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    // ...and then the answered one is dropped: that must not flush the other.
    drop(answered);
    client
        .rpc(Tclunk { fid: Fid(102) })
        .await
        .expect("the peer answers clunks");
    let mut order = Vec::new();
    while let Some(fcall) = seen.recv().await {
        let last = matches!(&fcall.msg, Msg::Tclunk(c) if c.fid == Fid(102));
        order.push(fcall);
        if last {
            break;
        }
    }
    let tag_of = |want: fn(&Msg) -> bool| order.iter().find(|f| want(&f.msg)).map(|f| f.tag);
    let clunk_tag = tag_of(|m| matches!(m, Msg::Tclunk(c) if c.fid == Fid(100)));
    let read_tag = tag_of(|m| matches!(m, Msg::Tread(_)));
    assert!(
        clunk_tag.is_some() && clunk_tag == read_tag,
        "the tag was not reused: {order:?}"
    );
    let flushes: Vec<_> = order
        .iter()
        .filter(|f| matches!(f.msg, Msg::Tflush(_)))
        .collect();
    assert!(flushes.is_empty(), "flushed the wrong request: {flushes:?}");
    // Dropping the unanswered request does flush it.
    drop(waiting);
    let flushed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match seen.recv().await.map(|f| f.msg) {
                Some(Msg::Tflush(f)) => return f.oldtag,
                Some(_) => continue,
                None => panic!("connection ended without a Tflush"),
            }
        }
    })
    .await
    .expect("no Tflush within 5 s");
    assert_eq!(Some(flushed), read_tag);
}
