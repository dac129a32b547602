//! `ninep serve pipe`: two clients on two connections meet in a pipe.

mod common;

use std::time::Duration;

use bytes::Bytes;
use ninep_client::Fsys;
use ninep_devices::pipe::{Options, PipeFs};
use ninep_server::queue::Limits;
use ninep_wire::Errno;
use ninep_wire::consts::dotl::O_RDWR;

use common::{attach, names, start};

/// Two sessions with the default pipe, on two connections.
async fn two_clients(addr: &str) -> (Fsys, Fsys) {
    (
        attach(addr, "glenda", "").await,
        attach(addr, "glenda", "").await,
    )
}

#[tokio::test]
async fn what_one_end_writes_the_other_reads_write_by_write() {
    let (_server, addr) = start(PipeFs::new(Options::default())).await;
    let (one, two) = two_clients(&addr).await;
    assert_eq!(names(&one, "/").await, ["data", "data1"]);
    let data = one.open("data", O_RDWR).await.unwrap();
    let data1 = two.open("data1", O_RDWR).await.unwrap();
    data.write_at(0, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    data.write_at(0, Bytes::from_static(b"world"))
        .await
        .unwrap();
    data1
        .write_at(0, Bytes::from_static(b"back"))
        .await
        .unwrap();
    assert_eq!(data1.read_at(0, 8192).await.unwrap(), "hello");
    assert_eq!(data1.read_at(0, 8192).await.unwrap(), "world");
    assert_eq!(data.read_at(0, 8192).await.unwrap(), "back");

    // Another tree name is another pipe.
    let other = attach(&addr, "glenda", "other").await;
    let elsewhere = other.open("data1", O_RDWR).await.unwrap();
    data.write_at(0, Bytes::from_static(b"mine")).await.unwrap();
    assert_eq!(data1.read_at(0, 8192).await.unwrap(), "mine");
    let waiting = tokio::time::timeout(Duration::from_millis(50), elsewhere.read_at(0, 10)).await;
    assert!(waiting.is_err(), "nothing was written to pipe \"other\"");
}

#[tokio::test]
async fn closing_one_end_hangs_up_the_other() {
    let (_server, addr) = start(PipeFs::new(Options::default())).await;
    let (one, two) = two_clients(&addr).await;
    let data = one.open("data", O_RDWR).await.unwrap();
    let also_data = one.open("data", O_RDWR).await.unwrap();
    let data1 = two.open("data1", O_RDWR).await.unwrap();
    data.write_at(0, Bytes::from_static(b"last")).await.unwrap();
    data.close().await.unwrap();
    // One fid of the end is still open: not hung up yet.
    also_data
        .write_at(0, Bytes::from_static(b"words"))
        .await
        .unwrap();
    also_data.close().await.unwrap();
    assert_eq!(data1.read_at(0, 100).await.unwrap(), "last");
    assert_eq!(data1.read_at(0, 100).await.unwrap(), "words");
    assert_eq!(data1.read_at(0, 100).await.unwrap(), "", "end of file");
    let e = data1
        .write_at(0, Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EPIPE, "{e}");
    data1.close().await.unwrap();

    // Both ends closed: the next open is a new pipe.
    let data = one.open("data", O_RDWR).await.unwrap();
    let data1 = two.open("data1", O_RDWR).await.unwrap();
    data1
        .write_at(0, Bytes::from_static(b"again"))
        .await
        .unwrap();
    assert_eq!(data.read_at(0, 100).await.unwrap(), "again");
}

#[tokio::test]
async fn a_flushed_read_leaves_the_pipe_as_it_was() {
    let (_server, addr) = start(PipeFs::new(Options::default())).await;
    let (one, two) = two_clients(&addr).await;
    let data = one.open("data", O_RDWR).await.unwrap();
    let data1 = two.open("data1", O_RDWR).await.unwrap();
    // Given up on: the client flushes the read waiting on an empty pipe.
    let gave_up = tokio::time::timeout(Duration::from_millis(50), data1.read_at(0, 100)).await;
    assert!(gave_up.is_err());
    data.write_at(0, Bytes::from_static(b"kept")).await.unwrap();
    assert_eq!(data1.read_at(0, 100).await.unwrap(), "kept");
}

#[tokio::test]
async fn a_writer_past_the_high_water_mark_waits_for_the_reader() {
    let options = Options {
        queue: Limits {
            high_water: 4096,
            blocks: 64,
        },
        pipes: 1,
    };
    let (_server, addr) = start(PipeFs::new(options)).await;
    let (one, two) = two_clients(&addr).await;
    let data = one.open("data", O_RDWR).await.unwrap();
    let data1 = two.open("data1", O_RDWR).await.unwrap();
    let sent: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let writer = async {
        for piece in sent.chunks(3000) {
            data.write_at(0, Bytes::copy_from_slice(piece))
                .await
                .unwrap();
        }
    };
    let reader = async {
        let mut got = Vec::new();
        while got.len() < sent.len() {
            let piece = data1.read_at(0, 8192).await.unwrap();
            assert!(piece.len() <= 3000, "a read returns at most one write");
            got.extend_from_slice(&piece);
        }
        got
    };
    let ((), got) = tokio::join!(writer, reader);
    assert_eq!(got, sent);
    // The limit on pipes: one tree name only.
    let other = attach(&addr, "glenda", "other").await;
    let e = other.open("data", O_RDWR).await.unwrap_err();
    assert!(e.to_string().contains("no more pipes"), "{e}");
}
