//! Why a frame could not be decoded or a message could not be encoded.

use std::fmt;

/// A frame that is not a valid message of the dialect it was decoded in.
///
/// Small and `Copy`: it says what is wrong and at which byte of the frame, so
/// a server can answer on the frame's tag and a person reading a capture can
/// find the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError {
    /// What is wrong.
    pub kind: DecodeErrorKind,
    /// Offset within the frame of the field that is wrong.
    pub offset: usize,
}

/// What is wrong with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The frame ends before the message's fields do.
    Truncated,
    /// The message's fields end before the frame does.
    TrailingBytes,
    /// The frame's `size[4]` disagrees with the number of bytes in it.
    SizeMismatch {
        /// What `size[4]` says.
        declared: u32,
        /// The bytes there are.
        actual: usize,
    },
    /// `size[4]` is less than the 7 bytes of the header.
    Undersize(u32),
    /// No message has this type number in this dialect.
    UnknownType(u8),
    /// A string is not UTF-8.
    InvalidUtf8,
    /// A string contains a NUL byte.
    Nul,
    /// A file name contains `/`.
    Slash,
    /// A file name is longer than [`crate::MAX_NAME_LEN`] bytes.
    NameTooLong(usize),
    /// A Twalk or Rwalk with more than [`crate::MAXWELEM`] elements.
    TooManyWalkElements(u16),
    /// A stat's size fields disagree with each other or with its contents.
    BadStatSize,
}

impl DecodeError {
    pub(crate) fn new(kind: DecodeErrorKind, offset: usize) -> Self {
        DecodeError { kind, offset }
    }

    /// True if more bytes might complete the message: the frame ended early.
    pub fn is_truncated(&self) -> bool {
        matches!(
            self.kind,
            DecodeErrorKind::Truncated | DecodeErrorKind::SizeMismatch { .. }
        )
    }
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DecodeErrorKind::*;
        match *self {
            Truncated => write!(f, "message truncated"),
            TrailingBytes => write!(f, "bytes left over after the message"),
            SizeMismatch { declared, actual } => {
                write!(
                    f,
                    "size field says {declared} bytes but the frame has {actual}"
                )
            }
            Undersize(size) => write!(f, "size {size} is smaller than a header"),
            UnknownType(ty) => write!(f, "unknown message type {ty}"),
            InvalidUtf8 => write!(f, "string is not UTF-8"),
            Nul => write!(f, "string contains NUL"),
            Slash => write!(f, "name contains '/'"),
            NameTooLong(len) => write!(f, "name of {len} bytes is too long"),
            TooManyWalkElements(n) => write!(f, "{n} walk elements is more than 16"),
            BadStatSize => write!(f, "stat size does not match its contents"),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.kind, self.offset)
    }
}

impl std::error::Error for DecodeError {}

/// A message that cannot be put on the wire as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// A string longer than the 65535 bytes a `len[2]` can count.
    StringTooLong(usize),
    /// A Twalk or Rwalk with more than 16 elements.
    TooManyWalkElements(usize),
    /// A stat larger than its `size[2]` can count.
    StatTooLarge(usize),
    /// A payload larger than its `count[4]` can count.
    DataTooLarge(usize),
    /// The message does not exist in the dialect it is being encoded in.
    NotInDialect(&'static str, crate::Dialect),
    /// The message belongs to an extension the connection did not negotiate.
    NotNegotiated(&'static str),
}

impl EncodeError {
    /// The errno Linux gives for the same refusal: a message the dialect
    /// lacks is not supported; anything else is too large for its field.
    pub fn errno(&self) -> crate::Errno {
        match self {
            EncodeError::NotInDialect(..) | EncodeError::NotNegotiated(_) => {
                crate::Errno::EOPNOTSUPP
            }
            EncodeError::TooManyWalkElements(_) => crate::Errno::EINVAL,
            EncodeError::StringTooLong(_) => crate::Errno::ENAMETOOLONG,
            EncodeError::StatTooLarge(_) | EncodeError::DataTooLarge(_) => crate::Errno::EMSGSIZE,
        }
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EncodeError::*;
        match *self {
            StringTooLong(n) => write!(f, "string of {n} bytes does not fit in a 9P string"),
            TooManyWalkElements(n) => write!(f, "{n} walk elements is more than 16"),
            StatTooLarge(n) => write!(f, "stat of {n} bytes does not fit its size field"),
            DataTooLarge(n) => write!(f, "payload of {n} bytes does not fit its count field"),
            NotInDialect(name, d) => write!(f, "{name} does not exist in {d}"),
            NotNegotiated(name) => write!(f, "{name} needs an extension not negotiated"),
        }
    }
}

impl std::error::Error for EncodeError {}
