//! Bulk transfers of a range of a file (`File::read_range`,
//! `File::write_range`): byte-exact in every mode, with short reads and
//! writes, errors part-way, and dropped transfers; pipelined only where
//! that keeps the meaning of every request; and streams held to the
//! credit the client granted, whatever the server sends.

#[path = "support/flaky.rs"]
mod flaky;
#[path = "support/pattern.rs"]
mod pattern;
#[path = "support/stream_peer.rs"]
mod stream_peer;

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use bytes::Bytes;
use flaky::Flaky;
use ninep_client::{Client, Error, File, Fsys, Mode, Options, RangeRead, Transfer};
use ninep_server::{Limits, Server, StreamLimits};
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_WRONLY};
use ninep_wire::consts::mode::DMAPPEND;
use ninep_wire::{Dialect, Errno, Fcall, Msg};
use pattern::pattern;

/// A client of `fs` over an in-memory stream, with a small msize so that a
/// few MiB take hundreds of requests.
async fn serve(fs: Flaky, dialect: Dialect) -> Fsys {
    serve_with(fs, dialect, StreamLimits::default()).await
}

async fn serve_with(fs: Flaky, dialect: Dialect, streams: StreamLimits) -> Fsys {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let server = Server::with_stream_limits(fs, Limits::default(), streams);
    tokio::spawn(async move {
        server
            .serve_stream(Box::new(theirs), std::future::pending())
            .await
    });
    let options = Options {
        dialect: Some(dialect),
        msize: 16 * 1024 + 24,
    };
    let client = Client::over(Box::new(ours), options)
        .await
        .expect("connect");
    client.attach("glenda", "").await.expect("attach")
}

async fn write_file(fsys: &Fsys, path: &str, data: &[u8]) {
    let file = fsys.create(path, 0o644, O_RDWR).await.expect("create");
    let mut w = file
        .write_range(0, Transfer::new(Mode::OneAtATime))
        .await
        .expect("start");
    w.write(Bytes::copy_from_slice(data)).await.expect("write");
    assert_eq!(w.finish().await.expect("finish"), data.len() as u64);
}

/// Everything a range read hands out, and how it ended.
async fn read_range(
    file: &File,
    offset: u64,
    len: Option<u64>,
    how: Transfer,
) -> (Vec<u8>, Result<(), Error>) {
    let mut r = file.read_range(offset, len, how).await.expect("start");
    let (pieces, end) = drain(&mut r).await;
    (pieces.concat(), end)
}

/// The pieces a range read hands out from here on, and how it ended.
async fn drain(r: &mut RangeRead<'_>) -> (Vec<Bytes>, Result<(), Error>) {
    let mut pieces = Vec::new();
    loop {
        match r.next().await {
            Ok(Some(piece)) => {
                assert!(!piece.is_empty());
                pieces.push(piece);
            }
            Ok(None) => return (pieces, Ok(())),
            Err(e) => return (pieces, Err(e)),
        }
    }
}

const MODES: [Mode; 4] = [
    Mode::OneAtATime,
    Mode::Pipelined,
    Mode::Streamed,
    Mode::Auto,
];

/// The mode a transfer asked to run in `mode` runs in against a server that
/// speaks the stream extension, for a regular file.
fn expected(mode: Mode) -> Mode {
    match mode {
        Mode::Auto => Mode::Streamed,
        mode => mode,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_arrive_byte_exact_in_every_mode() {
    let data = pattern(5 << 20 | 12345);
    for dialect in Dialect::ALL {
        let fsys = serve(Flaky::new(), dialect).await;
        for mode in MODES {
            let path = format!("big-{mode:?}");
            let file = fsys.create(&path, 0o644, O_RDWR).await.expect("create");
            let mut w = file.write_range(0, Transfer::new(mode)).await.unwrap();
            assert_eq!(w.mode(), expected(mode), "{dialect} {mode:?}");
            // Uneven pieces, so that writes straddle iounits.
            for piece in data.chunks(100_003) {
                w.write(Bytes::copy_from_slice(piece)).await.expect("write");
            }
            assert_eq!(w.finish().await.unwrap(), data.len() as u64);
            drop(file);
            let file = fsys.open(&path, O_RDONLY).await.expect("open");
            let (got, end) = read_range(&file, 0, None, Transfer::new(mode)).await;
            end.expect("read");
            assert!(got == data, "{dialect} {mode:?}: read back differs");
            // A range in the middle, and one running past the end.
            let (got, end) =
                read_range(&file, 1_000_001, Some(2_000_000), Transfer::new(mode)).await;
            end.expect("read");
            assert!(
                got == data[1_000_001..3_000_001],
                "{dialect} {mode:?}: middle range"
            );
            let (got, end) = read_range(
                &file,
                data.len() as u64 - 10,
                Some(1000),
                Transfer::new(mode),
            )
            .await;
            end.expect("read");
            assert_eq!(got, data[data.len() - 10..], "{dialect} {mode:?}: tail");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelining_keeps_requests_in_flight_and_one_at_a_time_does_not() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(2 << 20);
    write_file(&fsys, "f", &data).await;
    knobs.delay_us.store(500, SeqCst);
    let file = fsys.open("f", O_RDONLY).await.unwrap();
    for (mode, at_once) in [(Mode::OneAtATime, 1..=1), (Mode::Pipelined, 4..=u64::MAX)] {
        knobs.most_at_once.store(0, SeqCst);
        let (got, end) = read_range(&file, 0, None, Transfer::new(mode)).await;
        end.unwrap();
        assert!(got == data);
        let seen = knobs.most_at_once.load(SeqCst);
        assert!(at_once.contains(&seen), "{mode:?}: {seen} reads at once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_reads_and_writes_lose_nothing() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(3 << 20 | 777);
    knobs.short_writes.store(true, SeqCst);
    for mode in MODES {
        let path = format!("short-{mode:?}");
        write_file(&fsys, &path, &[]).await;
        let file = fsys.open(&path, O_WRONLY).await.unwrap();
        let mut w = file.write_range(0, Transfer::new(mode)).await.unwrap();
        w.write(Bytes::from(data.clone())).await.unwrap();
        assert_eq!(w.finish().await.unwrap(), data.len() as u64);
    }
    knobs.short_writes.store(false, SeqCst);
    knobs.short_reads.store(true, SeqCst);
    for mode in MODES {
        let file = fsys
            .open(&format!("short-{mode:?}"), O_RDONLY)
            .await
            .unwrap();
        let (got, end) = read_range(&file, 0, None, Transfer::new(mode)).await;
        end.unwrap();
        assert!(got == data, "{mode:?}: read back differs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_part_way_ends_the_read_exactly_there() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(4 << 20);
    write_file(&fsys, "f", &data).await;
    let fail_at = 1_234_567;
    knobs.fail_at.store(fail_at, SeqCst);
    let file = fsys.open("f", O_RDONLY).await.unwrap();
    for mode in MODES {
        let (got, end) = read_range(&file, 0, None, Transfer::new(mode)).await;
        let err = end.expect_err("the read should fail");
        assert_eq!(err.errno(), Errno::EIO, "{mode:?}: {err}");
        assert_eq!(got.len() as u64, fail_at, "{mode:?}");
        assert!(got == data[..fail_at as usize]);
    }
    // The connection is fine afterwards.
    knobs.fail_at.store(u64::MAX, SeqCst);
    let (got, end) = read_range(&file, 0, None, Transfer::default()).await;
    end.unwrap();
    assert!(got == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_transfer_flushes_what_it_had_in_flight() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(4 << 20);
    write_file(&fsys, "f", &data).await;
    knobs.delay_us.store(2000, SeqCst);
    let file = fsys.open("f", O_RDONLY).await.unwrap();
    let mut r = file
        .read_range(0, None, Transfer::new(Mode::Pipelined))
        .await
        .unwrap();
    let first = r.next().await.unwrap().unwrap();
    assert!(first[..] == data[..first.len()]);
    drop(r);
    // Every request is answered or flushed, and the connection goes on.
    tokio::time::timeout(Duration::from_secs(10), fsys.client().idle())
        .await
        .expect("requests left hanging");
    knobs.delay_us.store(0, SeqCst);
    let (got, end) = read_range(&file, 0, None, Transfer::new(Mode::Pipelined)).await;
    end.unwrap();
    assert!(got == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_only_files_are_never_pipelined() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    // Only 9P2000 can make an append-only file; ramfs shows it in every dialect.
    let maker = serve(fs.clone(), Dialect::Base).await;
    drop(maker.create("log", DMAPPEND | 0o644, O_RDWR).await.unwrap());
    let data = pattern(300_000);
    for dialect in [Dialect::Base, Dialect::L] {
        let fsys = serve(fs.clone(), dialect).await;
        let log = fsys.open("log", O_RDWR).await.unwrap();
        knobs.delay_us.store(300, SeqCst);
        knobs.most_at_once.store(0, SeqCst);
        let mut w = log
            .write_range(0, Transfer::new(Mode::Pipelined))
            .await
            .unwrap();
        assert_eq!(w.mode(), Mode::OneAtATime, "{dialect}");
        for piece in data.chunks(10_000) {
            w.write(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        w.finish().await.unwrap();
        assert_eq!(knobs.most_at_once.load(SeqCst), 1, "{dialect}");
        let (got, end) = read_range(&log, 0, None, Transfer::new(Mode::Pipelined)).await;
        end.unwrap();
        assert_eq!(knobs.most_at_once.load(SeqCst), 1, "{dialect}");
        let want: Vec<u8> = match dialect {
            Dialect::Base => data.clone(),
            _ => [&data[..], &data[..]].concat(),
        };
        assert!(got == want, "{dialect}: the log is out of order");
        knobs.delay_us.store(0, SeqCst);
    }
}

#[tokio::test]
async fn synthetic_files_are_never_pipelined() {
    use ninep_server::tree::{Dir, Tree};
    for dialect in Dialect::ALL {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let root = Dir::new().read("counter", |_| Ok("0123456789".repeat(5000)));
        let server = Server::new(Tree::new(root));
        tokio::spawn(async move {
            server
                .serve_stream(Box::new(theirs), std::future::pending())
                .await
        });
        let options = Options {
            dialect: Some(dialect),
            msize: 4096 + 24,
        };
        let client = Client::over(Box::new(ours), options).await.unwrap();
        let fsys = client.attach("glenda", "").await.unwrap();
        let file = fsys.open("counter", O_RDONLY).await.unwrap();
        // Version 0: synthetic. A stream keeps the order of reads; a
        // window of Treads would not.
        assert_eq!(file.qid().version, 0);
        let r = file.read_range(0, None, Transfer::default()).await.unwrap();
        assert_ne!(r.mode(), Mode::Pipelined, "{dialect:?}");
        drop(r);
        let (got, end) = read_range(&file, 0, None, Transfer::default()).await;
        end.unwrap();
        assert_eq!(got, "0123456789".repeat(5000).into_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_extension_streams_fall_back_to_pipelining() {
    let off = StreamLimits {
        streams: 0,
        ..StreamLimits::default()
    };
    let fsys = serve_with(Flaky::new(), Dialect::L, off).await;
    assert!(!fsys.client().streams());
    let data = pattern(3 << 20 | 99);
    let file = fsys.create("f", 0o644, O_RDWR).await.unwrap();
    let mut w = file
        .write_range(0, Transfer::new(Mode::Streamed))
        .await
        .unwrap();
    assert_eq!(w.mode(), Mode::Pipelined);
    w.write(Bytes::from(data.clone())).await.unwrap();
    w.finish().await.unwrap();
    for mode in [Mode::Streamed, Mode::Auto] {
        let r = file.read_range(0, None, Transfer::new(mode)).await.unwrap();
        assert_eq!(r.mode(), Mode::Pipelined);
        drop(r);
        let (got, end) = read_range(&file, 0, None, Transfer::new(mode)).await;
        end.unwrap();
        assert!(got == data);
    }
}

/// A server with one stream to spare refuses a second at once (EAGAIN);
/// the read that asked goes on without one, byte-exact, while the first
/// stream still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_server_cannot_spare_falls_back_to_pipelining() {
    // A small read window keeps the first stream open until it is read.
    let one = StreamLimits {
        streams: 1,
        read_window: 64 * 1024,
        ..StreamLimits::default()
    };
    let fsys = serve_with(Flaky::new(), Dialect::L, one).await;
    let data = pattern(2 << 20 | 7);
    write_file(&fsys, "f", &data).await;
    let first = fsys.open("f", O_RDONLY).await.unwrap();
    let second = fsys.open("f", O_RDONLY).await.unwrap();
    let mut streaming = first
        .read_range(0, None, Transfer::new(Mode::Auto))
        .await
        .unwrap();
    // The first stream holds the server's only one.
    let head = streaming.next().await.unwrap().unwrap();
    let mut refused = second
        .read_range(0, None, Transfer::new(Mode::Auto))
        .await
        .unwrap();
    let (got, end) = drain(&mut refused).await;
    end.unwrap();
    assert_eq!(refused.mode(), Mode::Pipelined);
    assert!(got.concat() == data);
    let (rest, end) = drain(&mut streaming).await;
    end.unwrap();
    assert_eq!(streaming.mode(), Mode::Streamed);
    assert!([head, rest.concat().into()].concat() == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_holds_the_server_to_its_window() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(4 << 20);
    write_file(&fsys, "f", &data).await;
    let before = knobs.bytes_read.load(SeqCst);
    let window = 256 * 1024;
    let how = Transfer {
        mode: Mode::Streamed,
        max_window: window,
    };
    let file = fsys.open("f", O_RDONLY).await.unwrap();
    let mut r = file.read_range(0, None, how).await.unwrap();
    assert_eq!(r.mode(), Mode::Streamed);
    let (mut consumed, mut most_ahead) = (0u64, 0u64);
    let mut got = Vec::new();
    while let Some(piece) = r.next().await.unwrap() {
        consumed += piece.len() as u64;
        got.extend_from_slice(&piece);
        // Give the server every chance to run ahead.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let read = knobs.bytes_read.load(SeqCst) - before;
        let ahead = read - consumed;
        most_ahead = most_ahead.max(ahead);
        assert!(
            ahead <= window,
            "the server read {read} bytes when {consumed} were consumed, window {window}"
        );
    }
    assert!(got == data);
    // The server did read ahead, as far as the window allowed.
    assert!(most_ahead >= window / 2, "at most {most_ahead} bytes ahead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_dropped_midway_is_flushed() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let fsys = serve(fs, Dialect::L).await;
    let data = pattern(4 << 20);
    write_file(&fsys, "f", &data).await;
    knobs.delay_us.store(1000, SeqCst);
    let file = fsys.open("f", O_RDONLY).await.unwrap();
    let mut r = file
        .read_range(0, None, Transfer::new(Mode::Streamed))
        .await
        .unwrap();
    assert_eq!(r.mode(), Mode::Streamed);
    let first = r.next().await.unwrap().unwrap();
    assert!(first[..] == data[..first.len()]);
    drop(r);
    tokio::time::timeout(Duration::from_secs(10), fsys.client().idle())
        .await
        .expect("the stream was not flushed");
    knobs.delay_us.store(0, SeqCst);
    let (got, end) = read_range(&file, 0, None, Transfer::new(Mode::Streamed)).await;
    end.unwrap();
    assert!(got == data);
}

/// A client of a [`stream_peer`] serving `streams`, and the file it opened
/// there. Its msize makes pieces of 16 KiB.
async fn stream_peer_file(streams: Vec<stream_peer::Stream>) -> (stream_peer::Peer, Client, File) {
    let peer = stream_peer::start(streams).await;
    let options = Options {
        dialect: Some(Dialect::L),
        msize: 16 * 1024 + 24,
    };
    let client = Client::connect_with(&peer.addr, options)
        .await
        .expect("connect");
    assert!(client.streams());
    let fsys = client.attach("glenda", "").await.expect("attach");
    let file = fsys.open("f", O_RDONLY).await.expect("open");
    (peer, client, file)
}

/// Waits for the next message the peer got that `want` picks.
async fn next_seen(peer: &mut stream_peer::Peer, want: impl Fn(&Fcall) -> bool) -> Fcall {
    let wait = async {
        loop {
            let fcall = peer.seen.recv().await.expect("the peer hung up");
            if want(&fcall) {
                return fcall;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the peer never got it")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_past_its_read_credit_ends_the_stream_not_the_connection() {
    let credit = 64 * 1024;
    let flood = Bytes::from(pattern(64 * credit as usize));
    let streams = vec![
        stream_peer::Stream {
            data: flood.clone(),
            piece: 16 * 1024,
        },
        stream_peer::Stream {
            data: Bytes::from_static(b"within the credit"),
            piece: 5,
        },
    ];
    let (mut peer, client, file) = stream_peer_file(streams).await;
    let how = Transfer {
        mode: Mode::Streamed,
        max_window: credit,
    };
    let mut r = file.read_range(0, None, how).await.expect("start");
    let tsread = next_seen(&mut peer, |f| matches!(f.msg, Msg::Tsread(_))).await;
    let Msg::Tsread(m) = &tsread.msg else {
        unreachable!()
    };
    assert_eq!(m.credit as u64, credit);
    // The peer answers this after the whole stream: once the reply is here,
    // so is all of the stream, and nothing of it was consumed yet.
    let data = file.read_at(0, 100).await.expect("read");
    assert_eq!(data, stream_peer::READ_DATA);
    let (pieces, end) = drain(&mut r).await;
    let got = pieces.concat();
    let err = end.expect_err(&format!(
        "a stream of {} bytes past a credit of {credit} ended without an error",
        got.len()
    ));
    assert!(
        matches!(err, Error::Protocol(_)) && err.to_string().contains("credit"),
        "{err}"
    );
    assert!(
        got.len() as u64 <= credit,
        "{} bytes handed out from a credit of {credit}",
        got.len()
    );
    assert!(got == flood[..got.len()], "the stream's data differs");
    drop(r);
    // The stream was flushed and its tag given back...
    let flush = next_seen(&mut peer, |f| matches!(f.msg, Msg::Tflush(_))).await;
    assert!(matches!(flush.msg, Msg::Tflush(f) if f.oldtag == tsread.tag));
    tokio::time::timeout(Duration::from_secs(10), client.idle())
        .await
        .expect("requests left hanging");
    // ...and the connection serves other requests, streams among them.
    let data = file.read_at(0, 100).await.expect("read after the stream");
    assert_eq!(data, stream_peer::READ_DATA);
    let (got, end) = read_range(&file, 0, None, how).await;
    end.expect("a stream within its credit");
    assert_eq!(got, b"within the credit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_one_byte_pieces_is_held_as_a_few_pieces() {
    let credit = 64 * 1024;
    let data = Bytes::from(pattern(credit as usize));
    let streams = vec![stream_peer::Stream {
        data: data.clone(),
        piece: 1,
    }];
    let (_peer, _client, file) = stream_peer_file(streams).await;
    let how = Transfer {
        mode: Mode::Streamed,
        max_window: credit,
    };
    let mut r = file.read_range(0, None, how).await.expect("start");
    // As above: after this reply, every piece of the stream is held.
    file.read_at(0, 100).await.expect("read");
    let (pieces, end) = drain(&mut r).await;
    end.expect("a stream within its credit");
    assert!(pieces.concat() == data, "the stream's data differs");
    // Not one piece (and its bookkeeping) per byte.
    assert!(
        pieces.len() <= 64,
        "{credit} bytes held as {} pieces",
        pieces.len()
    );
}

/// The kernel's read-ahead sends several reads at once, each starting
/// where the one before it ends, and they may be answered in any order: a
/// read that starts where the last one asked for ends is in order too, and
/// starts reading ahead, whichever of those before it was answered last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_where_the_last_one_asked_ended_reads_ahead() {
    let fsys = serve(Flaky::new(), Dialect::L).await;
    let piece = 8192u32;
    let data = pattern(64 * piece as usize);
    write_file(&fsys, "f", &data).await;
    let file = std::sync::Arc::new(fsys.open("f", O_RDONLY).await.unwrap());
    let ahead = ninep_client::ReadAhead::new(1 << 20);
    let at = |i: u32| u64::from(i * piece);
    let expect = |i: u32| &data[at(i) as usize..at(i + 1) as usize];
    let before = fsys.client().requests();
    // Two reads at a time, asked for in order; while they are plain reads
    // (one request each, the state not held), answered in reverse.
    for i in (0..64).step_by(2) {
        let mut first = std::pin::pin!(ahead.read(&file, at(i), piece, false));
        let asked_before = fsys.client().requests();
        let answered = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match first.as_mut().poll(cx) {
                std::task::Poll::Ready(got) => Some(got),
                std::task::Poll::Pending => None,
            })
        })
        .await;
        let plain = answered.is_none() && fsys.client().requests() - asked_before == 1;
        // A first read the transfer serves holds the state until polled
        // again: the second is then asked after it (the transfer's own
        // request may have made it look plain).
        let second_first = if plain {
            let second = ahead.read(&file, at(i + 1), piece, false);
            tokio::time::timeout(Duration::from_secs(1), second)
                .await
                .ok()
        } else {
            None
        };
        let (first, second) = if let Some(second) = second_first {
            (first.await, second)
        } else {
            let first = match answered {
                Some(got) => got,
                None => first.await,
            };
            (first, ahead.read(&file, at(i + 1), piece, false).await)
        };
        assert_eq!(first.unwrap(), expect(i), "piece {i}");
        assert_eq!(second.unwrap(), expect(i + 1), "piece {}", i + 1);
    }
    // Two plain reads, then the stat that finds the file may be read ahead,
    // the read beside it and the stream: not a read for each piece.
    let requests = fsys.client().requests() - before;
    assert!(requests < 16, "{requests} requests for 64 reads");
}

/// An opener that knows the file's qid and type spares the stat: reading
/// in order, the transfer starts at the second read instead of after a
/// stat and a read beside it. One that knows the file is no regular file
/// never reads ahead: a plain read for each read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_ahead_that_knows_the_file_starts_without_a_stat() {
    let fsys = serve(Flaky::new(), Dialect::L).await;
    let piece = 8192u32;
    let data = pattern(64 * piece as usize);
    write_file(&fsys, "f", &data).await;
    let file = std::sync::Arc::new(fsys.open("f", O_RDONLY).await.unwrap());
    // The requests that reading the file in order, a piece at a time,
    // takes through `ahead`.
    let requests = async |ahead: ninep_client::ReadAhead| {
        let before = fsys.client().requests();
        for i in 0..64u32 {
            let got = ahead.read(&file, u64::from(i * piece), piece, false).await;
            let at = (i * piece) as usize;
            assert_eq!(got.unwrap(), data[at..at + piece as usize], "piece {i}");
        }
        ahead.stop().await;
        fsys.client().requests() - before
    };
    let learnt = requests(ninep_client::ReadAhead::new(1 << 20)).await;
    let qid = file.fid().qid();
    let known = requests(ninep_client::ReadAhead::knowing(1 << 20, qid, true)).await;
    assert!(
        known + 2 <= learnt,
        "{known} requests knowing the file, {learnt} learning it"
    );
    let refused = requests(ninep_client::ReadAhead::knowing(1 << 20, qid, false)).await;
    assert_eq!(refused, 64);
}

/// Two files, f and g, far longer than a window (a transfer cannot end,
/// and give its window back, while the other file is read), for reading
/// ahead through read-aheads that share a budget.
struct TwoFiles {
    fsys: Fsys,
    data: Vec<u8>,
    f: std::sync::Arc<File>,
    g: std::sync::Arc<File>,
}

/// The pieces the files of [`TwoFiles`] are read in.
const PIECE: u32 = 8192;

impl TwoFiles {
    async fn new() -> TwoFiles {
        let fsys = serve(Flaky::new(), Dialect::L).await;
        let data = pattern(512 * PIECE as usize);
        for name in ["f", "g"] {
            write_file(&fsys, name, &data).await;
        }
        let f = std::sync::Arc::new(fsys.open("f", O_RDONLY).await.unwrap());
        let g = std::sync::Arc::new(fsys.open("g", O_RDONLY).await.unwrap());
        TwoFiles { fsys, data, f, g }
    }

    /// A read-ahead of one window, which is all of `budget`.
    fn ahead(&self, budget: &ninep_client::ReadAheadBudget) -> ninep_client::ReadAhead {
        ninep_client::ReadAhead::knowing(WINDOW, self.f.fid().qid(), true).sharing(budget)
    }

    /// The requests made while `pieces` of `file` are read in order, each
    /// checked.
    async fn requests(
        &self,
        ahead: &ninep_client::ReadAhead,
        file: &std::sync::Arc<File>,
        pieces: std::ops::Range<u32>,
    ) -> u64 {
        let before = self.fsys.client().requests();
        for i in pieces {
            let got = ahead.read(file, u64::from(i * PIECE), PIECE, false).await;
            let at = (i * PIECE) as usize;
            assert_eq!(
                got.unwrap(),
                self.data[at..at + PIECE as usize],
                "piece {i}"
            );
        }
        self.fsys.client().requests() - before
    }
}

/// The window of [`TwoFiles::ahead`].
const WINDOW: u64 = 256 << 10;

/// Files read ahead at once share a budget: while one file's transfer
/// holds all of it, another file read in order is read a request at a
/// time; once the first gives it back, the other reads ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_read_ahead_at_once_share_a_budget() {
    let files = TwoFiles::new().await;
    let budget = ninep_client::ReadAheadBudget::new(WINDOW);
    let first = files.ahead(&budget);
    let started = files.requests(&first, &files.f, 0..8).await;
    assert!(
        started < 8,
        "{started} requests for 8 reads with the budget free"
    );
    // Each read of g a request of its own (f's transfer may add a few).
    let second = files.ahead(&budget);
    let refused = files.requests(&second, &files.g, 0..64).await;
    assert!(
        refused >= 64,
        "{refused} requests for 64 reads of g, the budget spent"
    );
    second.stop().await;
    first.stop().await;
    let third = files.ahead(&budget);
    let given_back = files.requests(&third, &files.g, 0..64).await;
    assert!(
        given_back < 16,
        "{given_back} requests for 64 reads once it came back"
    );
}

/// A reader that stops reading, its file left open, gives its window back
/// once it has taken nothing for the budget's idle time: another file read
/// in order then reads ahead, and the first reads on, exactly, when back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_reader_gives_its_window_back() {
    let files = TwoFiles::new().await;
    let idle = Duration::from_millis(200);
    let budget = ninep_client::ReadAheadBudget::new(WINDOW).idle_after(idle);
    let first = files.ahead(&budget);
    let started = files.requests(&first, &files.f, 0..8).await;
    assert!(started < 8, "{started} requests for 8 reads of f");
    tokio::time::sleep(idle * 3).await;
    let second = files.ahead(&budget);
    let g_reads = files.requests(&second, &files.g, 0..64).await;
    assert!(
        g_reads < 16,
        "{g_reads} requests for 64 reads of g, f's reader paused"
    );
    // f's reader is back: on from where it stopped, to the end.
    files.requests(&first, &files.f, 8..512).await;
    let end = first
        .read(&files.f, u64::from(512 * PIECE), PIECE, false)
        .await;
    assert!(end.unwrap().is_empty(), "f ends where it ends");
    second.stop().await;
    first.stop().await;
}
