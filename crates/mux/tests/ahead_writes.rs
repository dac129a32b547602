//! What the mux reads ahead of an open file never outlives a write through
//! it or a change of its size through it (fsx through a mount of the mux
//! found reads answered from before them).

mod support;

use bytes::Bytes;
use ninep_client::{Client, Fsys, Options, SetAttr};
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::{O_RDWR, O_TRUNC};

const SIZE: usize = 256 * 1024;
const PIECE: u32 = 8192;

/// Reads `len` bytes at `offset` in pieces, in order: the mux reads ahead.
async fn read_in_order(file: &ninep_client::File, offset: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < len {
        let data = file
            .read_at(
                offset + out.len() as u64,
                PIECE.min((len - out.len()) as u32),
            )
            .await
            .unwrap();
        if data.is_empty() {
            break;
        }
        out.extend_from_slice(&data);
    }
    out
}

/// A client of the mux at `addr`, reading in pieces of a frame each.
async fn attach(addr: &str) -> Fsys {
    let options = Options {
        dialect: Some(Dialect::L),
        msize: 16 * 1024 + 24,
    };
    let client = Client::connect_with(addr, options).await.unwrap();
    client.attach("glenda", "").await.unwrap()
}

#[tokio::test]
async fn reads_after_writes_and_truncations_through_the_mux_see_them() {
    let ram = support::ramfs().await;
    let mux = support::serve_mux(&format!("mount -c {} /", ram.addr)).await;
    let fsys = attach(&mux.addr).await;
    let file = fsys.create("f", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, Bytes::from(vec![1; SIZE]))
        .await
        .unwrap();
    assert!(read_in_order(&file, 0, 4 * PIECE as usize).await == vec![1; 4 * PIECE as usize]);

    // A write ahead of the reader, then the reader gets there.
    let at = 8 * PIECE as u64;
    file.write_all_at(at, Bytes::from(vec![2; PIECE as usize]))
        .await
        .unwrap();
    let got = read_in_order(&file, 4 * PIECE as u64, 5 * PIECE as usize).await;
    assert!(
        got[4 * PIECE as usize..] == vec![2; PIECE as usize],
        "the write is read back"
    );

    // Read to the end, then the file grows: the end moved.
    let end = read_in_order(&file, 9 * PIECE as u64, SIZE).await;
    assert_eq!(end.len(), SIZE - 9 * PIECE as usize);
    let grown = SetAttr {
        size: Some(SIZE as u64 + 100),
        ..SetAttr::default()
    };
    file.fid().setattr(&grown).await.unwrap();
    let tail = file.read_at(SIZE as u64, 100).await.unwrap();
    assert!(tail == vec![0; 100], "the truncation up is read back");
}

/// What the mux reads ahead for one client's open file does not outlive a
/// write, a truncation or an overwriting open through another client's fid
/// of the same file: the first client reads each change back.
#[tokio::test]
async fn reads_after_writes_through_another_fid_see_them() {
    let ram = support::ramfs().await;
    let mux = support::serve_mux(&format!("mount -c {} /", ram.addr)).await;
    let (reader_fsys, writer_fsys) = (attach(&mux.addr).await, attach(&mux.addr).await);
    let reader = reader_fsys.create("f", 0o644, O_RDWR).await.unwrap();
    reader
        .write_all_at(0, Bytes::from(vec![1; SIZE]))
        .await
        .unwrap();
    assert!(read_in_order(&reader, 0, 4 * PIECE as usize).await == vec![1; 4 * PIECE as usize]);

    // Another client writes ahead of the reader, which then gets there.
    let writer = writer_fsys.open("f", O_RDWR).await.unwrap();
    let at = 8 * PIECE as u64;
    writer
        .write_all_at(at, Bytes::from(vec![2; PIECE as usize]))
        .await
        .unwrap();
    let got = read_in_order(&reader, 4 * PIECE as u64, 5 * PIECE as usize).await;
    assert!(
        got[4 * PIECE as usize..] == vec![2; PIECE as usize],
        "the other client's write is read back"
    );

    // The other client cuts the file short: the reader meets the new end.
    let cut = SetAttr {
        size: Some(10 * PIECE as u64),
        ..SetAttr::default()
    };
    writer.fid().setattr(&cut).await.unwrap();
    let rest = read_in_order(&reader, 9 * PIECE as u64, SIZE).await;
    assert_eq!(rest.len(), PIECE as usize, "the truncation is read back");

    // Filled again and read in order, then emptied by the other client's
    // overwriting open: the reader meets the end.
    writer
        .write_all_at(0, Bytes::from(vec![3; SIZE]))
        .await
        .unwrap();
    assert!(read_in_order(&reader, 0, 4 * PIECE as usize).await == vec![3; 4 * PIECE as usize]);
    let _emptied = writer_fsys.open("f", O_RDWR | O_TRUNC).await.unwrap();
    let after = read_in_order(&reader, 4 * PIECE as u64, PIECE as usize).await;
    assert!(
        after.is_empty(),
        "the file emptied by an open is read back empty"
    );
}
