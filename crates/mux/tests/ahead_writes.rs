//! What the mux reads ahead of an open file never outlives a write through
//! it or a change of its size through it (fsx through a mount of the mux
//! found reads answered from before them).

mod support;

use bytes::Bytes;
use ninep_client::{Client, Options, SetAttr};
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::O_RDWR;

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

#[tokio::test]
async fn reads_after_writes_and_truncations_through_the_mux_see_them() {
    let ram = support::ramfs().await;
    let mux = support::serve_mux(&format!("mount -c {} /", ram.addr)).await;
    let options = Options {
        dialect: Some(Dialect::L),
        msize: 16 * 1024 + 24,
    };
    let fsys = Client::connect_with(&mux.addr, options)
        .await
        .unwrap()
        .attach("glenda", "")
        .await
        .unwrap();
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
