//! A file read in order through the mux is read ahead upstream, so a
//! client's stream (or plain reads in order) through the mux keeps several
//! upstream requests in flight; files whose reads must not run early are
//! read only as asked.

#[path = "../../client/tests/support/flaky.rs"]
mod flaky;
#[path = "../../client/tests/support/pattern.rs"]
mod pattern;
mod support;

use std::sync::atomic::Ordering::SeqCst;

use flaky::Flaky;
use ninep_client::{Client, Mode, Options, Transfer};
use ninep_mux::Config;
use ninep_server::{Limits, Server, Spawned, StreamLimits};
use ninep_transport::Addr;
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR};
use ninep_wire::consts::mode::DMAPPEND;
use pattern::pattern;

/// A mux over `fs`, and a client of the mux with a small msize (so a few
/// MiB take hundreds of reads) in `dialect`. The upstream offers no
/// streams, so reading ahead shows as reads running there at once.
async fn through_mux(
    fs: Flaky,
    dialect: Dialect,
    limits: Limits,
) -> ((Spawned, String), support::Running, ninep_client::Fsys) {
    through_mux_with(Config::default(), fs, dialect, limits).await
}

async fn through_mux_with(
    config: Config,
    fs: Flaky,
    dialect: Dialect,
    limits: Limits,
) -> ((Spawned, String), support::Running, ninep_client::Fsys) {
    let listener = "tcp!127.0.0.1!0"
        .parse::<Addr>()
        .unwrap()
        .listen()
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let no_streams = StreamLimits {
        streams: 0,
        ..StreamLimits::default()
    };
    let upstream = Server::with_stream_limits(fs, limits, no_streams).spawn(listener);
    let mux = support::mux_with(config, &format!("mount -c {addr} /")).await;
    let mux = support::serve(mux, Limits::default()).await;
    let options = Options {
        dialect: Some(dialect),
        msize: 16 * 1024 + 24,
    };
    let client = Client::connect_with(&mux.addr, options).await.unwrap();
    let fsys = client.attach("glenda", "").await.unwrap();
    ((upstream, addr), mux, fsys)
}

async fn read_all(fsys: &ninep_client::Fsys, path: &str, mode: Mode) -> Vec<u8> {
    let file = fsys.open(path, O_RDONLY).await.unwrap();
    let mut range = file.read_range(0, None, Transfer::new(mode)).await.unwrap();
    assert_eq!(range.mode(), mode);
    let mut got = Vec::new();
    while let Some(piece) = range.next().await.unwrap() {
        got.extend_from_slice(&piece);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_in_order_are_read_ahead_upstream() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let (_upstream, _mux, fsys) = through_mux(fs, Dialect::L, Limits::default()).await;
    let data = pattern(3 << 20 | 777);
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, data.clone().into()).await.unwrap();
    drop(file);
    // The client asks one read at a time and streams; either way the
    // upstream sees several reads at once, and the bytes are exact.
    for mode in [Mode::OneAtATime, Mode::Streamed] {
        knobs.delay_us.store(200, SeqCst);
        knobs.most_at_once.store(0, SeqCst);
        let got = read_all(&fsys, "big", mode).await;
        assert!(got == data, "{mode:?}: bytes differ");
        let at_once = knobs.most_at_once.load(SeqCst);
        assert!(at_once > 1, "{mode:?}: {at_once} upstream reads at once");
    }
    // Reads out of order are answered as asked.
    let file = fsys.open("big", O_RDONLY).await.unwrap();
    for offset in [2 << 20, 5, 1 << 20, 1 << 20, 3 << 20 | 700] {
        let got = file.read_at(offset, 100).await.unwrap();
        let end = (offset as usize + 100).min(data.len());
        assert_eq!(&got[..], &data[offset as usize..end], "at {offset}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_read_ahead_from_its_first_read() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let (_upstream, _mux, fsys) = through_mux(fs, Dialect::L, Limits::default()).await;
    let data = pattern(1 << 20);
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, data.clone().into()).await.unwrap();
    drop(file);
    // The client reads 16 KiB at a time; the mux's transfer reads the
    // upstream's iounit. A stream's first read is read as asked (beside a
    // stat that tells whether the file may be read ahead) and the transfer
    // starts after it; plain reads wait for a second read in order.
    let piece = 16 * 1024;
    for (mode, ahead_from) in [(Mode::Streamed, 1), (Mode::OneAtATime, 2)] {
        knobs.reads.lock().unwrap().clear();
        let got = read_all(&fsys, "big", mode).await;
        assert!(got == data, "{mode:?}: bytes differ");
        let reads = knobs.reads.lock().unwrap().clone();
        for (i, &(offset, count)) in reads.iter().take(ahead_from + 1).enumerate() {
            assert_eq!(offset, i as u64 * piece as u64, "{mode:?}: {reads:?}");
            assert_eq!(count > piece, i == ahead_from, "{mode:?}: {reads:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_ahead_when_it_is_turned_off() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let off = Config {
        read_ahead: 0,
        ..Config::default()
    };
    let (_upstream, _mux, fsys) = through_mux_with(off, fs, Dialect::L, Limits::default()).await;
    let data = pattern(1 << 20);
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, data.clone().into()).await.unwrap();
    drop(file);
    knobs.delay_us.store(200, SeqCst);
    knobs.most_at_once.store(0, SeqCst);
    let got = read_all(&fsys, "big", Mode::OneAtATime).await;
    assert!(got == data);
    assert_eq!(knobs.most_at_once.load(SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_only_files_are_not_read_ahead() {
    let fs = Flaky::new();
    let knobs = fs.knobs.clone();
    let ((_upstream, addr), _mux, fsys) = through_mux(fs, Dialect::L, Limits::default()).await;
    // Only 9P2000 can make an append-only file (straight on the server: the
    // mux speaks 9P2000.L to it); ramfs keeps it.
    let maker = support::attach(&addr, Dialect::Base).await;
    let log = maker.create("log", DMAPPEND | 0o644, O_RDWR).await.unwrap();
    let data = pattern(200_000);
    log.write_all_at(0, data.clone().into()).await.unwrap();
    drop(log);
    knobs.delay_us.store(200, SeqCst);
    knobs.most_at_once.store(0, SeqCst);
    // Plain reads in order, one at a time.
    let log = fsys.open("log", O_RDONLY).await.unwrap();
    let mut got = Vec::new();
    loop {
        let piece = log.read_at(got.len() as u64, 16 * 1024).await.unwrap();
        if piece.is_empty() {
            break;
        }
        got.extend_from_slice(&piece);
    }
    assert!(got == data);
    assert_eq!(knobs.most_at_once.load(SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clunk_stops_reading_ahead() {
    // Few fids upstream: a read-ahead that outlived its file would keep the
    // upstream fid open, and opens would soon fail. Small messages, so that
    // the transfer is far from the end of the file when it is stopped.
    let limits = Limits {
        fids: 8,
        msize: 8192 + 24,
        ..Limits::default()
    };
    let (_upstream, _mux, fsys) = through_mux(Flaky::new(), Dialect::L, limits).await;
    let data = pattern(2 << 20);
    let file = fsys.create("big", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, data.clone().into()).await.unwrap();
    drop(file);
    for round in 0..20 {
        let file = fsys.open("big", O_RDONLY).await.unwrap();
        // Three reads in order start the read-ahead; then stop early.
        for i in 0..3u64 {
            let got = file.read_at(i * 1000, 1000).await.unwrap();
            assert_eq!(&got[..], &data[i as usize * 1000..(i as usize + 1) * 1000]);
        }
        file.close()
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
}
