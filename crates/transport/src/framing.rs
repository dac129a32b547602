//! Cutting a byte stream into 9P frames and writing frames to it.
//!
//! A frame is `size[4]` followed by `size - 4` more bytes. The decoder yields
//! each whole frame as [`Bytes`] (header included) without decoding the
//! message in it: the session above decodes it in the dialect it negotiated,
//! and can answer a bad body on its tag. A `size` below the 7-byte header or
//! above msize loses the framing, so it is an error that ends the stream.

use std::{fmt, io};

use bytes::{Buf, Bytes, BytesMut};
use ninep_wire::{Dialect, EncodeError, Fcall, HEADER_LEN};
use tokio_util::codec::{Decoder, Encoder};

/// Frames 9P messages: decodes whole frames, encodes [`Fcall`]s.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    msize: u32,
    dialect: Dialect,
}

/// Why a stream of frames cannot go on.
#[derive(Debug)]
pub enum FrameError {
    /// A frame's size is larger than msize.
    Oversize {
        /// The frame's size.
        size: u32,
        /// The most allowed.
        msize: u32,
    },
    /// A frame's size is smaller than the 7-byte header.
    Undersize(u32),
    /// A message to send is larger than msize.
    TooLargeToSend {
        /// The message's size.
        size: usize,
        /// The most allowed.
        msize: u32,
    },
    /// A message to send cannot be encoded.
    Encode(EncodeError),
    /// The connection failed.
    Io(io::Error),
}

impl FrameCodec {
    /// A codec accepting frames of at most `msize` bytes, encoding in `dialect`.
    pub fn new(msize: u32, dialect: Dialect) -> Self {
        FrameCodec { msize, dialect }
    }

    /// The largest frame accepted.
    pub fn msize(&self) -> u32 {
        self.msize
    }

    /// Changes msize, as Rversion settles it.
    pub fn set_msize(&mut self, msize: u32) {
        self.msize = msize;
    }

    /// The dialect messages are encoded in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Changes the dialect messages are encoded in.
    pub fn set_dialect(&mut self, dialect: Dialect) {
        self.dialect = dialect;
    }

    /// The size of the frame `buf` starts with, once its size field has
    /// come: an error if no frame can be that size.
    pub(crate) fn frame_size(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(size) = buf.get(..4) else {
            return Ok(None);
        };
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]);
        if (size as usize) < HEADER_LEN {
            return Err(FrameError::Undersize(size));
        }
        if size > self.msize {
            return Err(FrameError::Oversize {
                size,
                msize: self.msize,
            });
        }
        Ok(Some(size as usize))
    }
}

impl Decoder for FrameCodec {
    type Item = Bytes;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(size) = self.frame_size(src)? else {
            return Ok(None);
        };
        if src.len() < size {
            // Room for the rest of this frame, and no more: msize bounds it.
            src.reserve(size - src.len());
            return Ok(None);
        }
        Ok(Some(src.split_to(size).freeze()))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => {
                let partial = src.len();
                src.advance(partial);
                Err(ended_inside(partial))
            }
        }
    }
}

impl Encoder<&Fcall> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, fcall: &Fcall, dst: &mut BytesMut) -> Result<(), FrameError> {
        let start = dst.len();
        fcall
            .encode(self.dialect, dst)
            .map_err(FrameError::Encode)?;
        let size = dst.len() - start;
        if size > self.msize as usize {
            dst.truncate(start);
            return Err(FrameError::TooLargeToSend {
                size,
                msize: self.msize,
            });
        }
        Ok(())
    }
}

impl Encoder<Fcall> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, fcall: Fcall, dst: &mut BytesMut) -> Result<(), FrameError> {
        self.encode(&fcall, dst)
    }
}

/// A stream that ended `partial` bytes into a frame.
pub(crate) fn ended_inside(partial: usize) -> FrameError {
    FrameError::Io(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("stream ended inside a frame ({partial} bytes of it)"),
    ))
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError::Io(e)
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Oversize { size, msize } => {
                write!(f, "frame of {size} bytes is larger than msize {msize}")
            }
            FrameError::Undersize(size) => {
                write!(f, "frame size {size} is smaller than a 9P header")
            }
            FrameError::TooLargeToSend { size, msize } => {
                write!(f, "message of {size} bytes does not fit msize {msize}")
            }
            FrameError::Encode(e) => write!(f, "cannot encode message: {e}"),
            FrameError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrameError::Io(e) => Some(e),
            FrameError::Encode(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{SinkExt, StreamExt};
    use ninep_wire::{Msg, NOTAG, Rread, Tclunk, Tversion};
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::{FramedRead, FramedWrite};

    fn frame(size: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = size.to_le_bytes().to_vec();
        v.extend_from_slice(rest);
        v
    }

    #[test]
    fn waits_for_whole_frames() {
        let mut codec = FrameCodec::new(8192, Dialect::Base);
        let bytes = frame(11, &[120, 1, 0, 7, 0, 0, 0]);
        let mut buf = BytesMut::new();
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(codec.decode(&mut buf).unwrap(), None, "after {i} bytes");
            buf.extend_from_slice(&[*b]);
        }
        let got = codec.decode(&mut buf).unwrap().expect("a frame");
        assert_eq!(&got[..], &bytes[..]);
        assert!(buf.is_empty());
    }

    #[test]
    fn refuses_oversize_and_undersize_frames() {
        let mut codec = FrameCodec::new(8192, Dialect::Base);
        let mut buf = BytesMut::from(&frame(8193, &[])[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::Oversize {
                size: 8193,
                msize: 8192
            })
        ));
        for size in 0..7 {
            let mut buf = BytesMut::from(&frame(size, &[0; 8])[..]);
            assert!(matches!(codec.decode(&mut buf), Err(FrameError::Undersize(s)) if s == size));
        }
        // Exactly msize is fine.
        let mut buf = BytesMut::from(&frame(8192, &[0; 8188])[..]);
        assert_eq!(codec.decode(&mut buf).unwrap().map(|f| f.len()), Some(8192));
    }

    #[test]
    fn refuses_to_send_more_than_msize() {
        let mut codec = FrameCodec::new(100, Dialect::Base);
        let mut dst = BytesMut::new();
        let big = Fcall::new(
            1,
            Rread {
                data: Bytes::from(vec![0; 100]),
            },
        );
        assert!(matches!(
            codec.encode(&big, &mut dst),
            Err(FrameError::TooLargeToSend {
                size: 111,
                msize: 100
            })
        ));
        assert!(dst.is_empty());
    }

    #[tokio::test]
    async fn frames_travel_over_a_stream() {
        let (a, b) = tokio::io::duplex(64);
        let mut tx = FramedWrite::new(a, FrameCodec::new(8192, Dialect::L));
        let mut rx = FramedRead::new(b, FrameCodec::new(8192, Dialect::L));
        let sent = [
            Fcall::new(
                NOTAG,
                Tversion {
                    msize: 8192,
                    version: "9P2000.L".into(),
                },
            ),
            Fcall::new(
                3,
                Tclunk {
                    fid: ninep_wire::Fid(9),
                },
            ),
            Fcall::new(
                4,
                Rread {
                    data: Bytes::from(vec![7; 300]),
                },
            ),
        ];
        let writer = tokio::spawn(async move {
            for f in sent {
                tx.send(f).await.unwrap();
            }
            tx.into_inner().shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        while let Some(frame) = rx.next().await {
            got.push(Fcall::decode(frame.unwrap(), Dialect::L).unwrap());
        }
        writer.await.unwrap();
        assert_eq!(got.len(), 3);
        assert!(matches!(&got[2].msg, Msg::Rread(r) if r.data.len() == 300));
    }

    #[tokio::test]
    async fn a_stream_cut_inside_a_frame_is_an_error() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&frame(20, &[1, 2, 3])).await.unwrap();
        drop(a);
        let mut rx = FramedRead::new(b, FrameCodec::new(8192, Dialect::L));
        assert!(matches!(rx.next().await, Some(Err(FrameError::Io(_)))));
    }
}
