//! The wire layer of ninep: every message of 9P2000, 9P2000.u and 9P2000.L as
//! a Rust value, its encoding and decoding, and Plan 9's text form of it.
//!
//! This crate does no I/O and knows nothing of sockets or async runtimes; the
//! layers above (server, client, mux) read frames and hand them here. Read and
//! write payloads are [`bytes::Bytes`] slices of the frame they arrived in, so a
//! large read is never copied on its way between a file and a socket.
//!
//! A peer's bytes are untrusted: decoding checks every length against the frame
//! it came in, validates names, and fails with a [`DecodeError`] instead of
//! panicking or allocating more than the frame holds.
//!
//! ```
//! use bytes::BytesMut;
//! use ninep_wire::{Dialect, Fcall, Fid, Name, Twalk};
//!
//! let walk = Fcall::new(5, Twalk {
//!     fid: Fid(308),
//!     newfid: Fid(296),
//!     wname: vec![Name::new("tmp").unwrap(), Name::new("usr").unwrap()],
//! });
//! let mut buf = BytesMut::new();
//! walk.encode(Dialect::Base, &mut buf).unwrap();
//! let back = Fcall::decode(buf.freeze(), Dialect::Base).unwrap();
//! assert_eq!(back, walk);
//! assert_eq!(back.to_string(), "Twalk tag 5 fid 308 newfid 296 nwname 2 0:tmp 1:usr");
//! ```

#![warn(clippy::unwrap_used)]

mod dialect;
mod errno;
mod error;
mod field;
mod message;
mod name;
mod qid;
mod stat;
mod text;

pub mod consts;
pub mod convert;

pub use dialect::{Dialect, Protocol, RESUME_SUFFIX, STREAM_SUFFIX};
pub use errno::Errno;
pub use error::{DecodeError, DecodeErrorKind, EncodeError};
pub use message::*;
pub use name::{MAX_NAME_LEN, Name, NameError, split_path};
pub use qid::{Qid, QidType};
pub use stat::{Dirent, DirentIter, Stat, StatIter};

/// Bytes of `size[4] type[1] tag[2]` at the start of every message.
pub const HEADER_LEN: usize = 7;

/// The tag of Tversion, which precedes all tagged requests.
pub const NOTAG: u16 = 0xffff;

/// A numeric user id meaning "none given" in .u/.L Tauth and Tattach.
pub const NONUNAME: u32 = 0xffff_ffff;

/// Most names in one Twalk, and qids in one Rwalk.
pub const MAXWELEM: usize = 16;

/// Room for the header of a Twrite or Rread: `msize - IOHDRSZ` is the most data
/// one message can carry.
pub const IOHDRSZ: u32 = 24;

/// Room for the header of an Rreaddir (9P2000.L).
pub const READDIRHDRSZ: u32 = 24;

/// A fid: the client's handle on a file in the server, chosen by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fid(pub u32);

impl Fid {
    /// "No fid": the afid of an attach that needs no authentication.
    pub const NOFID: Fid = Fid(0xffff_ffff);
}

impl std::fmt::Display for Fid {
    /// Plan 9 prints fids signed, so NOFID reads as -1 in traces.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0 as i32)
    }
}

/// The secret that takes a session over on a new connection (the resume
/// extension, docs/resume.md). It prints as its length alone, so that
/// traces do not give it away, and compares in constant time, so that the
/// time a comparison takes does not either.
#[derive(Clone, Copy, Eq)]
pub struct Token(pub [u8; 16]);

impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        let differ = self
            .0
            .iter()
            .zip(other.0)
            .fold(0, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(differ) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({} bytes)", self.0.len())
    }
}
