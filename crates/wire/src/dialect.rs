//! The three living dialects of 9P, the stream extension on top of them, and
//! how a Tversion string names them.

use std::fmt;

/// The dialect a connection speaks, as settled by Tversion/Rversion.
///
/// Decoding needs it: the same type number has a different layout in
/// different dialects (a 9P2000.u Tattach carries `n_uname`, a 9P2000 one
/// does not), and some type numbers exist in only one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// `9P2000`: Plan 9's protocol.
    Base,
    /// `9P2000.u`: Unix extensions (numeric ids, errno, special files).
    U,
    /// `9P2000.L`: Linux semantics, as Linux's v9fs, QEMU and diod speak it.
    L,
}

impl Dialect {
    /// Every dialect, most capable first: the order a client tries them.
    pub const ALL: [Dialect; 3] = [Dialect::L, Dialect::U, Dialect::Base];

    /// The version string for Tversion/Rversion.
    pub fn version(self) -> &'static str {
        match self {
            Dialect::Base => "9P2000",
            Dialect::U => "9P2000.u",
            Dialect::L => "9P2000.L",
        }
    }

    /// The dialect a Tversion string asks for, or `None` if it is no 9P we
    /// speak (the server then answers `unknown`).
    ///
    /// As version(5) allows, a suffix beyond a known dialect is ignored:
    /// `9P2000.L.Google.7` asks for 9P2000.L and `9P2000.x` for 9P2000.
    pub fn from_version(version: &str) -> Option<Dialect> {
        let rest = version.strip_prefix("9P2000")?;
        if rest.is_empty() {
            return Some(Dialect::Base);
        }
        let mut parts = rest.strip_prefix('.')?.split('.');
        Some(match parts.next() {
            Some("L") => Dialect::L,
            Some("u") => Dialect::U,
            _ => Dialect::Base,
        })
    }

    /// True where Tauth and Tattach carry a numeric user id (`n_uname`).
    pub fn has_n_uname(self) -> bool {
        self != Dialect::Base
    }

    /// True for 9P2000.u, whose Rerror, Tcreate and stat carry extra fields.
    pub fn is_u(self) -> bool {
        self == Dialect::U
    }

    fn bit(self) -> u8 {
        match self {
            Dialect::Base => 1,
            Dialect::U => 2,
            Dialect::L => 4,
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

/// The suffix of a version string that asks for the stream extension
/// (`docs/streams.md`) on top of a dialect: `9P2000.L.stream`.
pub const STREAM_SUFFIX: &str = ".stream";

/// What a connection speaks: a dialect and, if both ends agreed to it in
/// Tversion/Rversion, the stream extension, whose messages exist only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocol {
    /// The dialect.
    pub dialect: Dialect,
    /// True if the stream extension was agreed to.
    pub streams: bool,
}

impl Protocol {
    /// The version string for Tversion/Rversion.
    pub fn version(self) -> String {
        let suffix = if self.streams { STREAM_SUFFIX } else { "" };
        format!("{}{suffix}", self.dialect.version())
    }

    /// What a version string asks for: the dialect as
    /// [`Dialect::from_version`] reads it, with streams if the string is
    /// exactly that dialect's name and [`STREAM_SUFFIX`].
    pub fn from_version(version: &str) -> Option<Protocol> {
        let dialect = Dialect::from_version(version)?;
        let streams = version
            .strip_prefix(dialect.version())
            .is_some_and(|rest| rest == STREAM_SUFFIX);
        Some(Protocol { dialect, streams })
    }
}

impl From<Dialect> for Protocol {
    /// A dialect without extensions.
    fn from(dialect: Dialect) -> Protocol {
        Protocol {
            dialect,
            streams: false,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.version())
    }
}

/// The protocols a message type exists in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DialectSet(u8);

impl DialectSet {
    pub(crate) const ALL: DialectSet = DialectSet(1 | 2 | 4);
    /// Messages 9P2000.L replaced with its own (open, create, stat, wstat, error).
    pub(crate) const BASE_U: DialectSet = DialectSet(1 | 2);
    pub(crate) const L: DialectSet = DialectSet(4);
    /// The stream extension's messages: every dialect, once negotiated.
    pub(crate) const STREAMS: DialectSet = DialectSet(1 | 2 | 4 | 8);

    /// True if the dialect has the message (whatever was negotiated).
    pub(crate) fn contains(self, d: Dialect) -> bool {
        self.0 & d.bit() != 0
    }

    /// True if a connection speaking `p` has the message.
    pub(crate) fn admits(self, p: Protocol) -> bool {
        self.contains(p.dialect) && (self.0 & 8 == 0 || p.streams)
    }

    /// True for the stream extension's messages.
    pub(crate) fn is_extension(self) -> bool {
        self.0 & 8 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings() {
        for d in Dialect::ALL {
            assert_eq!(Dialect::from_version(d.version()), Some(d));
        }
        assert_eq!(Dialect::from_version("9P2000.L.Google.7"), Some(Dialect::L));
        assert_eq!(Dialect::from_version("9P2000.u.x"), Some(Dialect::U));
        assert_eq!(Dialect::from_version("9P2000.x"), Some(Dialect::Base));
        assert_eq!(Dialect::from_version("9P2000L"), None);
        assert_eq!(Dialect::from_version("9P"), None);
        assert_eq!(Dialect::from_version(""), None);
        assert_eq!(Dialect::from_version("unknown"), None);
    }

    #[test]
    fn stream_version_strings() {
        for dialect in Dialect::ALL {
            for streams in [false, true] {
                let p = Protocol { dialect, streams };
                assert_eq!(Protocol::from_version(&p.version()), Some(p));
            }
        }
        assert_eq!(
            Protocol::from_version("9P2000.L.stream").map(|p| p.streams),
            Some(true)
        );
        assert_eq!(
            Protocol::from_version("9P2000.stream").map(|p| p.streams),
            Some(true)
        );
        for plain in [
            "9P2000.L.streams",
            "9P2000.L.Google.7.stream",
            "9P2000.L.stream.x",
        ] {
            let p = Protocol::from_version(plain).expect("a dialect");
            assert!(!p.streams, "{plain}");
        }
    }
}
