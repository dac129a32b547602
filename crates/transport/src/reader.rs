//! Reading whole frames from a byte stream, with the memory of large ones
//! used again.
//!
//! A small frame is cut from the reader's buffer, as [`FrameCodec`] cuts it.
//! A large one (a Twrite's or an Rread's data, most often) is read into a
//! buffer of its own, and that buffer goes back to a pool when the last
//! piece of the frame is dropped. A transfer that receives one megabyte
//! after another then writes into memory that is already mapped and likely
//! still in the cache; fresh memory for every frame cost a stream its page
//! faults (tens of thousands per GiB) and a third of its rate.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::Decoder;
use tokio_util::io::poll_read_buf;

use crate::framing::{FrameCodec, FrameError, ended_inside};

/// Frames at least this long get a buffer of their own from the pool.
const LARGE_FRAME: usize = 64 * 1024;

/// What the reader asks of the stream at a time while no large frame is
/// being read: small frames, and the heads of large ones.
const READ_CHUNK: usize = 16 * 1024;

/// Spare room below which the reader's buffer grows before a read: enough
/// for the head of any frame.
const HEAD_ROOM: usize = 512;

/// The most memory the pool keeps for reuse, over all connections of the
/// process; buffers returned beyond it are freed.
const POOL_KEEPS: usize = 32 << 20;

/// Reads the frames of one byte stream (see the module's comment).
#[derive(Debug)]
pub struct FrameReader<R> {
    io: R,
    codec: FrameCodec,
    /// Bytes read and not yet cut into frames.
    buf: BytesMut,
    /// A large frame being read: its buffer and how much of it has come.
    large: Option<(Pooled, usize)>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Reads frames from `io`, within the limits of `codec`.
    pub fn new(io: R, codec: FrameCodec) -> Self {
        FrameReader {
            io,
            codec,
            buf: BytesMut::new(),
            large: None,
        }
    }

    /// The codec, to change msize or the dialect once they are settled.
    pub fn codec_mut(&mut self) -> &mut FrameCodec {
        &mut self.codec
    }

    /// True if bytes have been read that no frame handed out holds yet.
    pub fn has_buffered(&self) -> bool {
        !self.buf.is_empty() || self.large.is_some()
    }

    /// The next frame, header included; `None` once the stream ends
    /// between frames. Cancel-safe: what was read stays for the next call.
    pub async fn next(&mut self) -> Option<Result<Bytes, FrameError>> {
        poll_fn(|cx| self.poll_frame(cx)).await.transpose()
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, FrameError>> {
        loop {
            if let Some((data, filled)) = &mut self.large {
                while *filled < data.len {
                    let mut into = ReadBuf::new(&mut data.bytes[*filled..data.len]);
                    ready!(Pin::new(&mut self.io).poll_read(cx, &mut into))?;
                    match into.filled().len() {
                        0 => return Poll::Ready(Err(ended_inside(*filled))),
                        n => *filled += n,
                    }
                }
                let (data, _) = self.large.take().expect("a large frame is being read");
                return Poll::Ready(Ok(Some(Bytes::from_owner(data))));
            }
            if let Some(size) = self.codec.frame_size(&self.buf)?
                && size >= LARGE_FRAME
            {
                let mut data = Pooled::take(size);
                let have = self.buf.len().min(size);
                data.bytes[..have].copy_from_slice(&self.buf[..have]);
                self.buf.advance(have);
                self.large = Some((data, have));
                continue;
            }
            if let Some(frame) = self.codec.decode(&mut self.buf)? {
                return Poll::Ready(Ok(Some(frame)));
            }
            if self.buf.capacity() - self.buf.len() < HEAD_ROOM {
                self.buf.reserve(READ_CHUNK);
            }
            if ready!(poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buf))? == 0 {
                return Poll::Ready(match self.buf.len() {
                    0 => Ok(None),
                    partial => Err(ended_inside(partial)),
                });
            }
        }
    }
}

/// Buffers kept for reuse, and the bytes they hold.
static POOL: Mutex<(Vec<Vec<u8>>, usize)> = Mutex::new((Vec::new(), 0));

/// A buffer of the pool holding one frame of `len` bytes; back to the
/// pool when dropped.
struct Pooled {
    bytes: Vec<u8>,
    len: usize,
}

impl Pooled {
    /// A buffer of at least `len` initialised bytes: one the pool kept, or
    /// a new one, rounded up so that frames of about one size share them.
    fn take(len: usize) -> Pooled {
        let kept = {
            let mut pool = POOL.lock();
            let (buffers, bytes) = &mut *pool;
            // The smallest that holds it, so that small frames leave the
            // large buffers to large ones.
            let found = (buffers.iter().enumerate())
                .filter(|(_, b)| b.len() >= len)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            found.map(|i| {
                let buffer = buffers.swap_remove(i);
                *bytes -= buffer.len();
                buffer
            })
        };
        let bytes = kept.unwrap_or_else(|| vec![0; len.next_multiple_of(LARGE_FRAME)]);
        Pooled { bytes, len }
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.bytes);
        // Buffers the pool lets go are freed after its lock is.
        let mut evicted = Vec::new();
        let mut pool = POOL.lock();
        let (buffers, bytes) = &mut *pool;
        // A full pool gives up smaller buffers for a larger one, so that a
        // burst of smaller frames does not keep the larger ones out.
        while *bytes + buffer.len() > POOL_KEEPS {
            let smallest = (buffers.iter().enumerate())
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            match smallest {
                Some(i) if buffers[i].len() < buffer.len() => {
                    let small = buffers.swap_remove(i);
                    *bytes -= small.len();
                    evicted.push(small);
                }
                _ => return,
            }
        }
        *bytes += buffer.len();
        buffers.push(buffer);
    }
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pooled({} of {} bytes)", self.len, self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ninep_wire::Dialect;
    use tokio::io::AsyncWriteExt;

    fn frame(size: usize, fill: u8) -> Vec<u8> {
        let mut v = (size as u32).to_le_bytes().to_vec();
        v.resize(size, fill);
        v
    }

    /// Writes `bytes` into a pipe in pieces of `piece` bytes, then ends it.
    fn feed(bytes: Vec<u8>, piece: usize) -> tokio::io::DuplexStream {
        let (mut tx, rx) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            for chunk in bytes.chunks(piece) {
                tx.write_all(chunk).await.unwrap();
            }
        });
        rx
    }

    fn reader(io: tokio::io::DuplexStream) -> FrameReader<tokio::io::DuplexStream> {
        FrameReader::new(io, FrameCodec::new(4 << 20, Dialect::L))
    }

    #[tokio::test]
    async fn large_frames_come_whole_survive_a_cancelled_read_and_are_pooled() {
        // Large and small frames mixed, cut at sizes that never line up
        // with them.
        let sizes = [7, 70_000, 11, 1 << 20, 64 * 1024, 64 * 1024 - 1, 300_001, 9];
        let mut wire = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            wire.extend(frame(size, i as u8));
        }
        for piece in [1, 4093, 65_536, 1 << 21] {
            let mut frames = reader(feed(wire.clone(), piece));
            for (i, &size) in sizes.iter().enumerate() {
                let got = frames.next().await.unwrap().unwrap();
                assert_eq!(got, frame(size, i as u8), "frame {i} in pieces of {piece}");
            }
            assert!(frames.next().await.is_none(), "pieces of {piece}");
            assert!(!frames.has_buffered());
        }

        // A large frame dropped gives its memory to the pool, and the next
        // takes it from there. (The one test here of large frames: the
        // pool is the process's.)
        let mut frames = reader(feed([frame(200_000, 1), frame(200_000, 2)].concat(), 4096));
        let first = frames.next().await.unwrap().unwrap();
        let at = first.as_ptr();
        drop(first);
        let pooled = |at| POOL.lock().0.iter().any(|b| b.as_ptr() == at);
        assert!(pooled(at), "a dropped frame's memory is not in the pool");
        let second = frames.next().await.unwrap().unwrap();
        assert_eq!(second.as_ptr(), at, "the second frame got new memory");
        assert!(!pooled(at));
        assert_eq!(second, frame(200_000, 2));

        // What the pool keeps is bounded, however many frames go back; and
        // a pool full of smaller buffers gives them up for a larger one.
        let small: Vec<Pooled> = (0..600).map(|_| Pooled::take(LARGE_FRAME)).collect();
        drop(small);
        assert!(POOL.lock().1 <= POOL_KEEPS);
        let large = Pooled::take(1 << 20);
        let at = large.bytes.as_ptr();
        drop(large);
        assert!(pooled(at), "a full pool refused a larger buffer");
        assert!(POOL.lock().1 <= POOL_KEEPS);

        // A stream that ends inside a large frame is an error.
        let cut = frame(100_000, 3)[..50_000].to_vec();
        let err = reader(feed(cut, 4096)).next().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("inside a frame"), "{err}");

        // A read cancelled inside a large frame keeps what came for the next.
        // Room for the whole frame, so that writing it never waits.
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut frames = reader(rx);
        let whole = frame(100_000, 5);
        tx.write_all(&whole[..30_000]).await.unwrap();
        let early = tokio::time::timeout(std::time::Duration::from_millis(50), frames.next()).await;
        assert!(early.is_err(), "a frame came before all of it had");
        assert!(frames.has_buffered());
        tx.write_all(&whole[30_000..]).await.unwrap();
        assert_eq!(frames.next().await.unwrap().unwrap(), whole);
    }

    #[tokio::test]
    async fn sizes_no_frame_can_have_end_the_stream() {
        let mut under = reader(feed(vec![0; 4], 4));
        let err = under.next().await.unwrap().unwrap_err();
        assert!(matches!(err, FrameError::Undersize(0)), "{err}");

        let mut over = reader(feed((5u32 << 20).to_le_bytes().to_vec(), 4));
        let err = over.next().await.unwrap().unwrap_err();
        assert!(matches!(err, FrameError::Oversize { .. }), "{err}");

        let mut short = reader(feed(frame(20, 1)[..10].to_vec(), 3));
        let err = short.next().await.unwrap().unwrap_err();
        assert!(
            err.to_string().contains("inside a frame (10 bytes"),
            "{err}"
        );
    }
}
