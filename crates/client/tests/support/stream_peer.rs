//! A hand-written 9P2000.L peer with the stream extension, on a loopback
//! TCP port, for the tests of what a client does with a server that breaks
//! the rules of a stream. It answers what opening a file takes, answers
//! every Tread with the same few bytes, and serves each Tsread from a list
//! the test gives: some data cut into pieces of a given size, sent whatever
//! the credit, then the empty Rsread that ends the stream. It reads nothing
//! while it sends a stream, so a reply to a request sent after a Tsread
//! comes after all of that stream. Every message it gets is reported.

// Each including test uses only part of this.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_transport::FrameCodec;
use ninep_wire::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

/// What the peer sends for one Tsread.
#[derive(Debug, Clone)]
pub struct Stream {
    pub data: Bytes,
    /// The size of each Rsread but perhaps the last.
    pub piece: usize,
}

/// A peer waiting for its one client.
#[derive(Debug)]
pub struct Peer {
    /// The dial string to reach it.
    pub addr: String,
    /// Every message the client sent, in order.
    pub seen: mpsc::UnboundedReceiver<Fcall>,
}

/// The data of every Rread.
pub const READ_DATA: &[u8] = b"hello";

/// Starts a peer that serves the Tsreads it gets with `streams`, in order.
pub async fn start(streams: Vec<Stream>) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local address").port();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("accept");
        serve(socket, streams, seen_tx).await;
    });
    Peer {
        addr: format!("tcp!127.0.0.1!{port}"),
        seen,
    }
}

async fn serve(
    socket: tokio::net::TcpStream,
    streams: Vec<Stream>,
    seen: mpsc::UnboundedSender<Fcall>,
) {
    let protocol = Protocol {
        dialect: Dialect::L,
        streams: true,
        resume: false,
    };
    let (r, mut w) = socket.into_split();
    let mut frames = FramedRead::new(r, FrameCodec::new(u32::MAX, Dialect::L));
    let mut streams = streams.into_iter();
    while let Some(Ok(frame)) = frames.next().await {
        let fcall = Fcall::decode(frame, protocol).expect("the client sent a valid message");
        let qid = Qid::default();
        let replies: Vec<Msg> = match &fcall.msg {
            Msg::Tversion(v) => vec![
                Rversion {
                    msize: v.msize,
                    version: protocol.version(),
                }
                .into(),
            ],
            Msg::Tattach(_) => vec![Rattach { qid }.into()],
            Msg::Twalk(w) => vec![
                Rwalk {
                    wqid: vec![qid; w.wname.len()],
                }
                .into(),
            ],
            Msg::Tlopen(_) => vec![Rlopen { qid, iounit: 0 }.into()],
            Msg::Tread(_) => vec![
                Rread {
                    data: Bytes::from_static(READ_DATA),
                }
                .into(),
            ],
            Msg::Tsread(_) => {
                let stream = streams.next().expect("a stream for every Tsread");
                let mut pieces: Vec<Msg> = stream
                    .data
                    .chunks(stream.piece)
                    .map(|piece| {
                        Rsread {
                            data: stream.data.slice_ref(piece),
                        }
                        .into()
                    })
                    .collect();
                pieces.push(Rsread { data: Bytes::new() }.into());
                pieces
            }
            Msg::Tscredit(_) => vec![],
            Msg::Tflush(_) => vec![Rflush {}.into()],
            Msg::Tclunk(_) => vec![Rclunk {}.into()],
            _ => vec![
                Rlerror {
                    ecode: Errno::EOPNOTSUPP.0,
                }
                .into(),
            ],
        };
        // Written at once, so that the client gets a long stream as fast
        // as its socket takes it.
        let mut out = BytesMut::new();
        for reply in replies {
            Fcall::new(fcall.tag, reply)
                .encode(protocol, &mut out)
                .expect("encode");
        }
        if w.write_all(&out).await.is_err() {
            return;
        }
        let _ = seen.send(fcall);
    }
}
