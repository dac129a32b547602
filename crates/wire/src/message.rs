//! Every message of 9P2000, 9P2000.u and 9P2000.L, and the frame around it.
//!
//! Each message is a struct named as the manual names it (`Twalk`, `Rlopen`),
//! with its fields in wire order; [`Msg`] is the sum of them all and [`Fcall`]
//! adds the tag. Lengths and counts that the wire derives from contents (the
//! `count` of Rread, `nwname` of Twalk, the stat sizes) are not stored.

use bytes::{BufMut, Bytes, BytesMut};

use crate::dialect::{DialectSet, Protocol};
use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::field::{Field, Reader, Writer};
use crate::{Fid, HEADER_LEN, NONUNAME, Name, Qid, Stat, Token};

/// Defines the message structs, [`Msg`], and their encoders and decoders from
/// one table, so that a layout is written once.
///
/// A field marked `[if COND else DEFAULT]` is on the wire only in dialects
/// where `Dialect::COND()` holds; elsewhere it decodes as DEFAULT.
macro_rules! messages {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $ty:literal in $dialects:ident {
            $( $field:ident : $fty:ty $([if $cond:ident else $default:expr])? ),* $(,)?
        }
    )*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`, message type ", $ty, ".")]
            #[doc = ""]
            $(#[doc = $doc])*
            #[derive(Debug, Clone, PartialEq, Eq)]
            // Fields are named as in the manual's (or Linux's 9p.h's)
            // layout of the message, in wire order.
            #[allow(missing_docs)]
            pub struct $name { $( pub $field: $fty, )* }

            impl $name {
                /// The message's type number.
                pub const TYPE: u8 = $ty;

                #[allow(unused_variables)]
                fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
                    Ok($name { $( $field: messages!(@decode r $fty $(, $cond, $default)?), )* })
                }

                #[allow(unused_variables)]
                fn encode_body(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
                    $( messages!(@encode w self.$field $(, $cond)?); )*
                    Ok(())
                }
            }

            impl From<$name> for Msg {
                fn from(m: $name) -> Msg {
                    Msg::$name(m)
                }
            }
        )*

        /// Any 9P message, without its tag.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Msg {
            $( #[doc = concat!("`", stringify!($name), "`.")] $name($name), )*
        }

        impl Msg {
            /// The message's type number.
            pub fn ty(&self) -> u8 {
                match self { $( Msg::$name(_) => $ty, )* }
            }

            /// The message's name as the manual spells it, e.g. `Twalk`.
            pub fn name(&self) -> &'static str {
                match self { $( Msg::$name(_) => stringify!($name), )* }
            }

            /// The name of type number `ty` in `protocol` (a [`crate::Dialect`], or
            /// one with the stream extension), if it has one there.
            pub fn type_name(ty: u8, protocol: impl Into<Protocol>) -> Option<&'static str> {
                let p = protocol.into();
                match ty {
                    $( $ty if DialectSet::$dialects.admits(p) => Some(stringify!($name)), )*
                    _ => None,
                }
            }

            /// True for the messages of the stream extension (`docs/streams.md`).
            pub fn is_stream_extension(&self) -> bool {
                match self { $( Msg::$name(_) => DialectSet::$dialects.is_stream_extension(), )* }
            }

            /// True for the messages of an extension, which exist only once
            /// Tversion agreed to it.
            pub fn is_extension(&self) -> bool {
                match self { $( Msg::$name(_) => DialectSet::$dialects.is_extension(), )* }
            }

            fn admitted_by(&self, p: Protocol) -> bool {
                match self { $( Msg::$name(_) => DialectSet::$dialects.admits(p), )* }
            }

            fn decode_body(ty: u8, r: &mut Reader) -> Result<Msg, DecodeError> {
                let p = Protocol { dialect: r.dialect, streams: r.streams, resume: r.resume };
                match ty {
                    $( $ty if DialectSet::$dialects.admits(p) =>
                        $name::decode_body(r).map(Msg::$name), )*
                    _ => Err(DecodeError::new(DecodeErrorKind::UnknownType(ty), 4)),
                }
            }

            fn encode_body(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
                match self { $( Msg::$name(m) => m.encode_body(w), )* }
            }
        }
    };

    (@decode $r:ident $fty:ty) => { <$fty as Field>::decode($r)? };
    (@decode $r:ident $fty:ty, $cond:ident, $default:expr) => {
        if $r.dialect.$cond() { <$fty as Field>::decode($r)? } else { $default }
    };
    (@encode $w:ident $val:expr) => { $val.encode($w)? };
    (@encode $w:ident $val:expr, $cond:ident) => {
        if $w.dialect.$cond() { $val.encode($w)?; }
    };
}

messages! {
    /// Negotiates msize and dialect; must be the first message.
    Tversion = 100 in ALL { msize: u32, version: String }
    /// The server's msize (at most the client's) and the dialect it chose.
    Rversion = 101 in ALL { msize: u32, version: String }
    /// Asks for an authentication fid `afid` for a later attach.
    Tauth = 102 in ALL {
        afid: Fid, uname: String, aname: String,
        n_uname: u32 [if has_n_uname else NONUNAME],
    }
    Rauth = 103 in ALL { aqid: Qid }
    /// Makes `fid` the root of the tree named `aname`, for user `uname`.
    Tattach = 104 in ALL {
        fid: Fid, afid: Fid, uname: String, aname: String,
        n_uname: u32 [if has_n_uname else NONUNAME],
    }
    Rattach = 105 in ALL { qid: Qid }
    /// A failed request (9P2000, 9P2000.u); .u adds a Unix errno.
    Rerror = 107 in BASE_U { ename: String, errno: u32 [if is_u else 0] }
    /// Abandons the request tagged `oldtag`.
    Tflush = 108 in ALL { oldtag: u16 }
    Rflush = 109 in ALL {}
    /// Walks `fid` along `wname` (at most 16 names) and makes `newfid` the result.
    Twalk = 110 in ALL { fid: Fid, newfid: Fid, wname: Vec<Name> }
    /// One qid per element walked; fewer than asked means the walk stopped.
    Rwalk = 111 in ALL { wqid: Vec<Qid> }
    Topen = 112 in BASE_U { fid: Fid, mode: u8 }
    Ropen = 113 in BASE_U { qid: Qid, iounit: u32 }
    /// Creates `name` in directory `fid` and opens it; .u adds an extension
    /// string for special files.
    Tcreate = 114 in BASE_U {
        fid: Fid, name: Name, perm: u32, mode: u8,
        extension: String [if is_u else String::new()],
    }
    Rcreate = 115 in BASE_U { qid: Qid, iounit: u32 }
    Tread = 116 in ALL { fid: Fid, offset: u64, count: u32 }
    Rread = 117 in ALL { data: Bytes }
    Twrite = 118 in ALL { fid: Fid, offset: u64, data: Bytes }
    Rwrite = 119 in ALL { count: u32 }
    Tclunk = 120 in ALL { fid: Fid }
    Rclunk = 121 in ALL {}
    Tremove = 122 in ALL { fid: Fid }
    Rremove = 123 in ALL {}
    Tstat = 124 in BASE_U { fid: Fid }
    Rstat = 125 in BASE_U { stat: Stat }
    Twstat = 126 in BASE_U { fid: Fid, stat: Stat }
    Rwstat = 127 in BASE_U {}

    /// A failed request in 9P2000.L: a Linux errno and no string.
    Rlerror = 7 in L { ecode: u32 }
    Tstatfs = 8 in L { fid: Fid }
    Rstatfs = 9 in L {
        ty: u32, bsize: u32, blocks: u64, bfree: u64, bavail: u64,
        files: u64, ffree: u64, fsid: u64, namelen: u32,
    }
    /// Opens `fid` with Linux open(2) flags.
    Tlopen = 12 in L { fid: Fid, flags: u32 }
    Rlopen = 13 in L { qid: Qid, iounit: u32 }
    /// Creates regular file `name` in directory `fid`, which then refers to it, open.
    Tlcreate = 14 in L { fid: Fid, name: Name, flags: u32, mode: u32, gid: u32 }
    Rlcreate = 15 in L { qid: Qid, iounit: u32 }
    Tsymlink = 16 in L { fid: Fid, name: Name, symtgt: String, gid: u32 }
    Rsymlink = 17 in L { qid: Qid }
    Tmknod = 18 in L { dfid: Fid, name: Name, mode: u32, major: u32, minor: u32, gid: u32 }
    Rmknod = 19 in L { qid: Qid }
    /// Moves the file `fid` to `name` in directory `dfid`.
    Trename = 20 in L { fid: Fid, dfid: Fid, name: Name }
    Rrename = 21 in L {}
    Treadlink = 22 in L { fid: Fid }
    Rreadlink = 23 in L { target: String }
    Tgetattr = 24 in L { fid: Fid, request_mask: u64 }
    /// Attributes; `valid` says which fields hold meaningful values.
    Rgetattr = 25 in L {
        valid: u64, qid: Qid, mode: u32, uid: u32, gid: u32, nlink: u64,
        rdev: u64, size: u64, blksize: u64, blocks: u64,
        atime_sec: u64, atime_nsec: u64, mtime_sec: u64, mtime_nsec: u64,
        ctime_sec: u64, ctime_nsec: u64, btime_sec: u64, btime_nsec: u64,
        generation: u64, data_version: u64,
    }
    /// Changes the attributes that `valid` selects.
    Tsetattr = 26 in L {
        fid: Fid, valid: u32, mode: u32, uid: u32, gid: u32, size: u64,
        atime_sec: u64, atime_nsec: u64, mtime_sec: u64, mtime_nsec: u64,
    }
    Rsetattr = 27 in L {}
    /// Makes `newfid` a handle for reading extended attribute `name` of `fid`
    /// (all names, if empty).
    Txattrwalk = 30 in L { fid: Fid, newfid: Fid, name: String }
    Rxattrwalk = 31 in L { size: u64 }
    /// Turns `fid` into a handle for writing extended attribute `name`.
    Txattrcreate = 32 in L { fid: Fid, name: String, attr_size: u64, flags: u32 }
    Rxattrcreate = 33 in L {}
    Treaddir = 40 in L { fid: Fid, offset: u64, count: u32 }
    /// Packed [`crate::Dirent`]s.
    Rreaddir = 41 in L { data: Bytes }
    /// Flushes `fid` to stable storage. Some peers send no `datasync`.
    Tfsync = 50 in L { fid: Fid, datasync: Option<u32> }
    Rfsync = 51 in L {}
    Tlock = 52 in L {
        fid: Fid, ty: u8, flags: u32, start: u64, length: u64, proc_id: u32, client_id: String,
    }
    Rlock = 53 in L { status: u8 }
    Tgetlock = 54 in L {
        fid: Fid, ty: u8, start: u64, length: u64, proc_id: u32, client_id: String,
    }
    Rgetlock = 55 in L { ty: u8, start: u64, length: u64, proc_id: u32, client_id: String }
    /// Makes `name` in directory `dfid` a hard link to `fid`.
    Tlink = 70 in L { dfid: Fid, fid: Fid, name: Name }
    Rlink = 71 in L {}
    Tmkdir = 72 in L { dfid: Fid, name: Name, mode: u32, gid: u32 }
    Rmkdir = 73 in L { qid: Qid }
    Trenameat = 74 in L { olddirfid: Fid, oldname: Name, newdirfid: Fid, newname: Name }
    Rrenameat = 75 in L {}
    Tunlinkat = 76 in L { dirfid: Fid, name: Name, flags: u32 }
    Runlinkat = 77 in L {}

    // The stream extension (docs/streams.md), in any dialect once Tversion
    // and Rversion agreed to it.

    /// Asks for `count` bytes of open `fid` from `offset` on (`count` all
    /// ones: to the end) as a stream of Rsread on this tag; the server may
    /// send `credit` bytes of data before it is granted more by Tscredit.
    Tsread = 160 in STREAMS { fid: Fid, offset: u64, count: u64, credit: u32 }
    /// One piece of a read stream; an empty one ends it.
    Rsread = 161 in STREAMS { data: Bytes }
    /// Opens a write stream to open `fid` from `offset` on: Tsdata on this
    /// tag carry the data, as far as Rscredit allows.
    Tswrite = 162 in STREAMS { fid: Fid, offset: u64 }
    /// Ends a write stream: every byte was written, `count` in all.
    Rswrite = 163 in STREAMS { count: u64 }
    /// One piece of a write stream, on the Tswrite's tag; an empty one ends
    /// it. Not answered by itself.
    Tsdata = 164 in STREAMS { data: Bytes }
    /// The server grants `credit` more bytes of Tsdata to the write stream
    /// on this tag.
    Rscredit = 165 in STREAMS { credit: u32 }
    /// The client grants `credit` more bytes of Rsread to the read stream on
    /// this tag. Not answered by itself.
    Tscredit = 166 in STREAMS { credit: u32 }

    // The resume extension (docs/resume.md), in any dialect once Tversion
    // and Rversion agreed to it.

    /// Asks for the session's resume token. The server counts the requests
    /// it receives from Rsession on.
    Tsession = 170 in RESUME {}
    /// The secret that takes the session over on a new connection.
    Rsession = 171 in RESUME { token: Token }
    /// Takes over the session of `token`, kept since its connection was lost.
    Tresume = 172 in RESUME { token: Token }
    /// The session is this connection's. The server received `received`
    /// requests since Rsession; the `held` replies that follow are the last
    /// on each tag that the client may not have received. `token` takes
    /// the session over next time: the one presented is spent.
    Rresume = 173 in RESUME { received: u64, held: u32, token: Token }
}

/// A request of a known reply: what a successful answer to it holds.
pub trait Request: Into<Msg> {
    /// The message that answers this request when it succeeds.
    type Reply;

    /// `msg` as this request's reply.
    fn reply(msg: Msg) -> Result<Self::Reply, UnexpectedReply>;
}

/// A message of another type than the reply a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnexpectedReply {
    /// The message that came.
    pub got: &'static str,
    /// The reply that was due.
    pub want: &'static str,
}

impl std::fmt::Display for UnexpectedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} where {} was due", self.got, self.want)
    }
}

impl std::error::Error for UnexpectedReply {}

/// Pairs each request with its reply. The stream extension's requests are
/// not here: they are answered by many messages, or none.
macro_rules! replies {
    ($($request:ident => $reply:ident),* $(,)?) => {
        $(
            impl Request for $request {
                type Reply = $reply;

                fn reply(msg: Msg) -> Result<$reply, UnexpectedReply> {
                    match msg {
                        Msg::$reply(r) => Ok(r),
                        other => Err(UnexpectedReply {
                            got: other.name(),
                            want: stringify!($reply),
                        }),
                    }
                }
            }
        )*

        impl Msg {
            /// The type number of the reply that answers this request, for
            /// requests answered by one message.
            pub fn reply_type(&self) -> Option<u8> {
                match self {
                    $( Msg::$request(_) => Some($reply::TYPE), )*
                    _ => None,
                }
            }
        }
    };
}

replies! {
    Tversion => Rversion, Tauth => Rauth, Tattach => Rattach, Tflush => Rflush,
    Twalk => Rwalk, Topen => Ropen, Tcreate => Rcreate, Tread => Rread,
    Twrite => Rwrite, Tclunk => Rclunk, Tremove => Rremove, Tstat => Rstat,
    Twstat => Rwstat, Tstatfs => Rstatfs, Tlopen => Rlopen, Tlcreate => Rlcreate,
    Tsymlink => Rsymlink, Tmknod => Rmknod, Trename => Rrename, Treadlink => Rreadlink,
    Tgetattr => Rgetattr, Tsetattr => Rsetattr, Txattrwalk => Rxattrwalk,
    Txattrcreate => Rxattrcreate, Treaddir => Rreaddir, Tfsync => Rfsync, Tlock => Rlock,
    Tgetlock => Rgetlock, Tlink => Rlink, Tmkdir => Rmkdir, Trenameat => Rrenameat,
    Tunlinkat => Runlinkat, Tsession => Rsession, Tresume => Rresume,
}

impl Msg {
    /// True for requests (T-messages), false for replies.
    pub fn is_request(&self) -> bool {
        self.ty() % 2 == 0
    }

    /// The data payload of Rread, Twrite, Rreaddir, Rsread or Tsdata.
    pub fn payload(&self) -> Option<&Bytes> {
        match self {
            Msg::Rread(m) => Some(&m.data),
            Msg::Twrite(m) => Some(&m.data),
            Msg::Rreaddir(m) => Some(&m.data),
            Msg::Rsread(m) => Some(&m.data),
            Msg::Tsdata(m) => Some(&m.data),
            _ => None,
        }
    }
}

impl Rstatfs {
    /// The statfs type Linux's 9p client reports.
    pub const V9FS_MAGIC: u32 = 0x01021997;

    /// The figures of a tree that counts no blocks or files, so that df
    /// still answers.
    pub fn uncounted() -> Rstatfs {
        Rstatfs {
            ty: Self::V9FS_MAGIC,
            bsize: 4096,
            blocks: 0,
            bfree: 0,
            bavail: 0,
            files: 0,
            ffree: 0,
            fsid: 0,
            namelen: crate::MAX_NAME_LEN as u32,
        }
    }
}

/// The header every message starts with: `size[4] type[1] tag[2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Length of the whole message, these 7 bytes included.
    pub size: u32,
    /// The message's type number.
    pub ty: u8,
    /// The tag that pairs a reply with its request.
    pub tag: u16,
}

impl Header {
    /// Decodes the header alone, so that a request whose body is bad can
    /// still be answered on its tag.
    pub fn decode(buf: &[u8]) -> Result<Header, DecodeError> {
        let Some(h) = buf.get(..HEADER_LEN) else {
            return Err(DecodeError::new(DecodeErrorKind::Truncated, buf.len()));
        };
        let size = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        if (size as usize) < HEADER_LEN {
            return Err(DecodeError::new(DecodeErrorKind::Undersize(size), 0));
        }
        Ok(Header {
            size,
            ty: h[4],
            tag: u16::from_le_bytes([h[5], h[6]]),
        })
    }
}

/// A tagged message: what travels in one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fcall {
    /// The tag that pairs a reply with its request.
    pub tag: u16,
    /// The message.
    pub msg: Msg,
}

impl Fcall {
    /// `msg` with `tag`.
    pub fn new(tag: u16, msg: impl Into<Msg>) -> Fcall {
        Fcall {
            tag,
            msg: msg.into(),
        }
    }

    /// Decodes one whole frame (`size[4]` included) in `protocol` (a
    /// [`crate::Dialect`], or one with the stream extension). Read and write
    /// payloads become slices of `frame`.
    pub fn decode(frame: Bytes, protocol: impl Into<Protocol>) -> Result<Fcall, DecodeError> {
        let Protocol {
            dialect,
            streams,
            resume,
        } = protocol.into();
        let header = Header::decode(&frame)?;
        if header.size as usize != frame.len() {
            let kind = DecodeErrorKind::SizeMismatch {
                declared: header.size,
                actual: frame.len(),
            };
            return Err(DecodeError::new(kind, 0));
        }
        let mut r = Reader::new(frame, HEADER_LEN, dialect);
        r.streams = streams;
        r.resume = resume;
        let msg = Msg::decode_body(header.ty, &mut r)?;
        r.finish()?;
        Ok(Fcall {
            tag: header.tag,
            msg,
        })
    }

    /// Appends the whole frame to `buf`.
    pub fn encode(
        &self,
        protocol: impl Into<Protocol>,
        buf: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        if let Some(payload) = self.encode_head(protocol, buf)? {
            buf.extend_from_slice(&payload);
        }
        Ok(())
    }

    /// Appends the frame to `head` except for a trailing data payload (of
    /// Rread, Twrite, Rreaddir), which is returned to be written after it,
    /// uncopied. The `size[4]` in `head` counts the payload.
    pub fn encode_head(
        &self,
        protocol: impl Into<Protocol>,
        head: &mut BytesMut,
    ) -> Result<Option<Bytes>, EncodeError> {
        let p = protocol.into();
        let dialect = p.dialect;
        if !self.msg.admitted_by(p) {
            if self.msg.admitted_by(Protocol {
                dialect,
                streams: true,
                resume: true,
            }) {
                return Err(EncodeError::NotNegotiated(self.msg.name()));
            }
            return Err(EncodeError::NotInDialect(self.msg.name(), dialect));
        }
        let start = head.len();
        head.put_u32_le(0);
        head.put_u8(self.msg.ty());
        head.put_u16_le(self.tag);
        let mut w = Writer {
            head,
            tail: None,
            dialect,
        };
        if let Err(e) = self.msg.encode_body(&mut w) {
            w.head.truncate(start);
            return Err(e);
        }
        let tail = w.tail;
        let size = head.len() - start + tail.as_ref().map_or(0, Bytes::len);
        let Ok(size) = u32::try_from(size) else {
            head.truncate(start);
            return Err(EncodeError::DataTooLarge(size));
        };
        head[start..start + 4].copy_from_slice(&size.to_le_bytes());
        Ok(tail)
    }

    /// The whole frame as bytes.
    pub fn to_bytes(&self, protocol: impl Into<Protocol>) -> Result<Bytes, EncodeError> {
        let mut buf = BytesMut::new();
        self.encode(protocol, &mut buf)?;
        Ok(buf.freeze())
    }
}

impl Rread {
    /// The head of an Rread on `tag` whose `count` bytes of data are
    /// written after it from elsewhere (a file's pages spliced into the
    /// socket): size[4] type[1] tag[2] count[4], in every dialect.
    pub fn head(tag: u16, count: u32) -> Bytes {
        data_head(Rread::TYPE, tag, count)
    }
}

impl Rsread {
    /// As [`Rread::head`], for a piece of a read stream.
    pub fn head(tag: u16, count: u32) -> Bytes {
        data_head(Rsread::TYPE, tag, count)
    }
}

/// The head of a message of type `ty` that is only `count` bytes of data.
fn data_head(ty: u8, tag: u16, count: u32) -> Bytes {
    const LEN: u32 = 4 + 1 + 2 + 4;
    let mut head = BytesMut::with_capacity(LEN as usize);
    head.put_u32_le(LEN.saturating_add(count));
    head.put_u8(ty);
    head.put_u16_le(tag);
    head.put_u32_le(count);
    head.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dialect;

    #[test]
    fn a_data_head_and_its_data_are_the_whole_message() {
        let data = Bytes::from_static(b"some file data");
        let count = data.len() as u32;
        for dialect in [Dialect::Base, Dialect::U, Dialect::L] {
            let streams = Protocol {
                dialect,
                streams: true,
                resume: false,
            };
            for (msg, head) in [
                (
                    Msg::from(Rread { data: data.clone() }),
                    Rread::head(7, count),
                ),
                (
                    Msg::from(Rsread { data: data.clone() }),
                    Rsread::head(7, count),
                ),
            ] {
                let whole = Fcall::new(7, msg).to_bytes(streams).unwrap();
                assert_eq!([&head[..], &data[..]].concat(), whole[..], "{dialect:?}");
            }
        }
    }
}
