//! Reading and writing the primitive wire fields: little-endian integers,
//! `len[2]` strings, `count[4]` payloads, qids, walk lists and stats.
//!
//! Every read is checked against the bytes that remain in the frame, so a
//! lying length field ends in a [`DecodeError`], never a panic or an
//! allocation larger than the frame.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::{Dialect, Fid, MAXWELEM, Name, NameError, Qid, QidType, Stat};

/// A cursor over one frame.
#[derive(Debug)]
pub(crate) struct Reader {
    buf: Bytes,
    pos: usize,
    pub(crate) dialect: Dialect,
    /// The stream extension was negotiated: its messages decode.
    pub(crate) streams: bool,
    /// The resume extension was negotiated: its messages decode.
    pub(crate) resume: bool,
}

impl Reader {
    pub(crate) fn new(buf: Bytes, pos: usize, dialect: Dialect) -> Self {
        Reader {
            buf,
            pos,
            dialect,
            streams: false,
            resume: false,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError::new(kind, self.pos)
    }

    /// Gives up on the rest of the buffer (after an error in a list).
    pub(crate) fn skip_rest(&mut self) {
        self.pos = self.buf.len();
    }

    /// Fails unless every byte of the frame was used.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.error(DecodeErrorKind::TrailingBytes))
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.remaining() < n {
            return Err(self.error(DecodeErrorKind::Truncated));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// The next `n` bytes as a slice of the frame, without copying.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        if self.remaining() < n {
            return Err(self.error(DecodeErrorKind::Truncated));
        }
        let start = self.pos;
        self.pos += n;
        Ok(self.buf.slice(start..self.pos))
    }

    /// A sub-reader over the next `n` bytes (for a stat inside a message).
    /// Offsets in the sub-reader's errors are relative to it; [`rebase`]
    /// moves them back into the frame.
    pub(crate) fn sub(&mut self, n: usize) -> Result<Reader, DecodeError> {
        let bytes = self.bytes(n)?;
        Ok(Reader::new(bytes, 0, self.dialect))
    }

    /// A `len[2]` string: UTF-8 with no NUL.
    /// Errors point at the string's `len[2]`.
    fn str(&mut self) -> Result<(usize, &str), DecodeError> {
        let at = self.pos;
        let len = u16::decode(self)? as usize;
        let raw = self.take(len)?;
        let s = std::str::from_utf8(raw)
            .map_err(|_| DecodeError::new(DecodeErrorKind::InvalidUtf8, at))?;
        if s.contains('\0') {
            return Err(DecodeError::new(DecodeErrorKind::Nul, at));
        }
        Ok((at, s))
    }
}

/// Collects one encoded message. Everything is written to `head` except a
/// trailing data payload, which is kept aside as `tail` so that the caller can
/// hand it to the socket without copying (a vectored write).
pub(crate) struct Writer<'a> {
    pub(crate) head: &'a mut BytesMut,
    pub(crate) tail: Option<Bytes>,
    pub(crate) dialect: Dialect,
}

/// A value with a fixed wire encoding.
pub(crate) trait Field: Sized {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError>;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
                Ok(<$t>::from_le_bytes(r.array()?))
            }
            fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
                w.head.put_slice(&self.to_le_bytes());
                Ok(())
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for Fid {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Fid(u32::decode(r)?))
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        self.0.encode(w)
    }
}

pub(crate) fn put_str(buf: &mut BytesMut, s: &str) -> Result<(), EncodeError> {
    let len = u16::try_from(s.len()).map_err(|_| EncodeError::StringTooLong(s.len()))?;
    buf.put_u16_le(len);
    buf.put_slice(s.as_bytes());
    Ok(())
}

impl Field for String {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(r.str()?.1.to_owned())
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        put_str(w.head, self)
    }
}

impl Field for Name {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (at, s) = r.str()?;
        Name::check(s).map_err(|e| {
            let kind = match e {
                NameError::Slash => DecodeErrorKind::Slash,
                NameError::Nul => DecodeErrorKind::Nul,
                NameError::TooLong(n) => DecodeErrorKind::NameTooLong(n),
                NameError::NotAnEntry => unreachable!("check admits the names a walk carries"),
            };
            DecodeError::new(kind, at)
        })?;
        Ok(Name::new(s).expect("checked just above"))
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        put_str(w.head, self)
    }
}

impl Field for Qid {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Qid {
            ty: QidType(u8::decode(r)?),
            version: u32::decode(r)?,
            path: u64::decode(r)?,
        })
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        self.ty.0.encode(w)?;
        self.version.encode(w)?;
        self.path.encode(w)
    }
}

/// The 16 bytes of a resume token, as they are.
impl Field for crate::Token {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(crate::Token(r.array()?))
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.head.put_slice(&self.0);
        Ok(())
    }
}

/// `count[4] data[count]`, always the last field of its message; the data is
/// a slice of the frame on decode and goes out as the writer's tail on encode.
impl Field for Bytes {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let count = u32::decode(r)? as usize;
        r.bytes(count)
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let count = u32::try_from(self.len()).map_err(|_| EncodeError::DataTooLarge(self.len()))?;
        w.head.put_u32_le(count);
        debug_assert!(w.tail.is_none(), "a message has at most one payload");
        w.tail = Some(self.clone());
        Ok(())
    }
}

/// `n[2]` then n elements, at most MAXWELEM: Twalk's names, Rwalk's qids.
fn decode_walk_list<T: Field>(r: &mut Reader) -> Result<Vec<T>, DecodeError> {
    let at = r.pos();
    let n = u16::decode(r)?;
    if n as usize > MAXWELEM {
        return Err(DecodeError::new(
            DecodeErrorKind::TooManyWalkElements(n),
            at,
        ));
    }
    (0..n).map(|_| T::decode(r)).collect()
}

fn encode_walk_list<T: Field>(list: &[T], w: &mut Writer<'_>) -> Result<(), EncodeError> {
    if list.len() > MAXWELEM {
        return Err(EncodeError::TooManyWalkElements(list.len()));
    }
    (list.len() as u16).encode(w)?;
    list.iter().try_for_each(|x| x.encode(w))
}

impl Field for Vec<Name> {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        decode_walk_list(r)
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        encode_walk_list(self, w)
    }
}

impl Field for Vec<Qid> {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        decode_walk_list(r)
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        encode_walk_list(self, w)
    }
}

/// Rstat and Twstat wrap the stat in an extra `n[2]`, which must equal the
/// stat's own `size[2]` plus two (stat(5) calls the repetition a wart).
impl Field for Stat {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let at = r.pos();
        let n = u16::decode(r)? as usize;
        let base = r.pos();
        let mut sub = r.sub(n)?;
        let stat = Stat::decode_entry(&mut sub).map_err(|e| rebase(e, base))?;
        if sub.remaining() != 0 {
            return Err(DecodeError::new(DecodeErrorKind::BadStatSize, at));
        }
        Ok(stat)
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        // n counts the stat's own size[2] too.
        let len = self.encoded_len(w.dialect) + 2;
        let n = u16::try_from(len).map_err(|_| EncodeError::StatTooLarge(len))?;
        w.head.put_u16_le(n);
        self.encode_entry(w.head, w.dialect)
    }
}

/// Moves an error found by a sub-reader to its place in the whole frame.
pub(crate) fn rebase(mut e: DecodeError, base: usize) -> DecodeError {
    e.offset += base;
    e
}

/// A trailing field that some peers omit (Tfsync's `datasync`, §12 of the
/// spec): absent when the frame ends before it.
impl Field for Option<u32> {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        if r.remaining() == 0 {
            Ok(None)
        } else {
            u32::decode(r).map(Some)
        }
    }
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        match self {
            Some(v) => v.encode(w),
            None => Ok(()),
        }
    }
}
