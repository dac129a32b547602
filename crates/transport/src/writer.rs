//! Writing encoded frames to a stream from a queue, as both ends of a
//! connection do: frames queued together go out in one write, and a large
//! payload goes out from its own buffer beside its header, uncopied.

use std::io::IoSlice;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// An encoded frame: everything but a trailing payload, and the payload
/// (as `ninep_wire::Fcall::encode_head` splits them).
#[derive(Debug, Clone)]
pub struct Frame {
    pub head: Bytes,
    pub payload: Option<Bytes>,
}

/// Payloads at least this large are written in place, not copied.
const COPY_LIMIT: usize = 16 * 1024;

/// Batches are written once they reach this size.
const BATCH: usize = 64 * 1024;

/// Writes frames from `queue` until it closes or the stream fails, then
/// shuts the stream down.
pub async fn write_frames(
    mut out: impl AsyncWrite + Unpin,
    mut queue: mpsc::UnboundedReceiver<Frame>,
) {
    let mut buf = BytesMut::with_capacity(BATCH);
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(frame) = next {
            buf.extend_from_slice(&frame.head);
            match frame.payload {
                Some(payload) if payload.len() >= COPY_LIMIT => {
                    if write_both(&mut out, &buf, &payload).await.is_err() {
                        return;
                    }
                    buf.clear();
                }
                Some(payload) => buf.extend_from_slice(&payload),
                None => {}
            }
            if buf.len() >= BATCH {
                break;
            }
            next = queue.try_recv().ok();
        }
        if !buf.is_empty() {
            if out.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}

/// Writes `head` then `payload` with as few system calls as the kernel allows.
async fn write_both(
    out: &mut (impl AsyncWrite + Unpin),
    head: &[u8],
    payload: &[u8],
) -> std::io::Result<()> {
    let (mut head, mut payload) = (head, payload);
    while !head.is_empty() {
        let n = out
            .write_vectored(&[IoSlice::new(head), IoSlice::new(payload)])
            .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        payload = &payload[n - from_head..];
    }
    out.write_all(payload).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_arrive_whole_and_in_order() {
        let (a, mut b) = tokio::io::duplex(4096);
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_frames(a, rx));
        let big = Bytes::from(vec![9u8; 100_000]);
        let mut want = Vec::new();
        for i in 0..50u8 {
            let head = Bytes::from(vec![i; 7]);
            let payload = match i % 3 {
                0 => None,
                1 => Some(Bytes::from(vec![i; 10])),
                _ => Some(big.clone()),
            };
            want.extend_from_slice(&head);
            if let Some(p) = &payload {
                want.extend_from_slice(p);
            }
            tx.send(Frame { head, payload }).unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got, want);
    }
}
