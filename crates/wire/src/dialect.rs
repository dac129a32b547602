//! The three living dialects of 9P, the stream and resume extensions on top
//! of them, and how a Tversion string names them.

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

/// The suffix of a version string that asks for the resume extension
/// (`docs/resume.md`): `9P2000.L.resume`, or after the stream extension's,
/// never before it: `9P2000.L.stream.resume`.
pub const RESUME_SUFFIX: &str = ".resume";

/// What a connection speaks: a dialect and the extensions both ends agreed
/// to in Tversion/Rversion, whose messages exist only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocol {
    /// The dialect.
    pub dialect: Dialect,
    /// True if the stream extension was agreed to.
    pub streams: bool,
    /// True if the resume extension was agreed to.
    pub resume: bool,
}

impl Protocol {
    /// The version string for Tversion/Rversion.
    pub fn version(self) -> String {
        let streams = if self.streams { STREAM_SUFFIX } else { "" };
        let resume = if self.resume { RESUME_SUFFIX } else { "" };
        format!("{}{streams}{resume}", self.dialect.version())
    }

    /// What a version string asks for: the dialect as
    /// [`Dialect::from_version`] reads it, with the extensions its suffix
    /// names if the string is exactly that dialect's name and
    /// [`STREAM_SUFFIX`], [`RESUME_SUFFIX`] or both in that order. Any
    /// other suffix asks for the plain dialect.
    pub fn from_version(version: &str) -> Option<Protocol> {
        let dialect = Dialect::from_version(version)?;
        let rest = version.strip_prefix(dialect.version()).unwrap_or_default();
        let (streams, rest) = match rest.strip_prefix(STREAM_SUFFIX) {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        let (resume, rest) = match rest.strip_prefix(RESUME_SUFFIX) {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        Some(match rest {
            "" => Protocol {
                dialect,
                streams,
                resume,
            },
            _ => dialect.into(),
        })
    }

    /// The same, without the extensions `offered` lacks.
    pub fn within(self, offered: Protocol) -> Protocol {
        Protocol {
            dialect: self.dialect,
            streams: self.streams && offered.streams,
            resume: self.resume && offered.resume,
        }
    }

    /// True if every extension of `self` is one of `other`'s too.
    pub fn is_within(self, other: Protocol) -> bool {
        self.dialect == other.dialect && self.within(other) == self
    }
}

impl From<Dialect> for Protocol {
    /// A dialect without extensions.
    fn from(dialect: Dialect) -> Protocol {
        Protocol {
            dialect,
            streams: false,
            resume: false,
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
    pub(crate) const STREAMS: DialectSet = DialectSet(1 | 2 | 4 | Self::STREAM_BIT);
    /// The resume extension's messages: every dialect, once negotiated.
    pub(crate) const RESUME: DialectSet = DialectSet(1 | 2 | 4 | Self::RESUME_BIT);

    const STREAM_BIT: u8 = 8;
    const RESUME_BIT: u8 = 16;

    /// True if the dialect has the message (whatever was negotiated).
    pub(crate) fn contains(self, d: Dialect) -> bool {
        self.0 & d.bit() != 0
    }

    /// True if a connection speaking `p` has the message.
    pub(crate) fn admits(self, p: Protocol) -> bool {
        self.contains(p.dialect)
            && (self.0 & Self::STREAM_BIT == 0 || p.streams)
            && (self.0 & Self::RESUME_BIT == 0 || p.resume)
    }

    /// True for the stream extension's messages.
    pub(crate) fn is_stream_extension(self) -> bool {
        self.0 & Self::STREAM_BIT != 0
    }

    /// True for the messages of either extension.
    pub(crate) fn is_extension(self) -> bool {
        self.0 & (Self::STREAM_BIT | Self::RESUME_BIT) != 0
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
                for resume in [false, true] {
                    let p = Protocol {
                        dialect,
                        streams,
                        resume,
                    };
                    assert_eq!(Protocol::from_version(&p.version()), Some(p));
                }
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

    #[test]
    fn resume_version_strings() {
        let both = Protocol::from_version("9P2000.L.stream.resume").expect("a dialect");
        assert!(both.streams && both.resume);
        assert_eq!(both.version(), "9P2000.L.stream.resume");
        let resume = Protocol::from_version("9P2000.u.resume").expect("a dialect");
        assert!(!resume.streams && resume.resume);
        // Any other order or suffix asks for the plain dialect.
        for plain in [
            "9P2000.L.resume.stream",
            "9P2000.L.resume.x",
            "9P2000.L.stream.resumes",
            "9P2000.L.Google.resume",
            "9P2000.L.resume.resume",
        ] {
            let p = Protocol::from_version(plain).expect("a dialect");
            assert_eq!(p, Protocol::from(Dialect::L), "{plain}");
        }
        let l_resume = Protocol::from_version("9P2000.L.resume").expect("a dialect");
        assert!(l_resume.is_within(both));
        assert!(!both.is_within(l_resume));
        assert!(!resume.is_within(both), "another dialect");
        assert_eq!(both.within(l_resume), l_resume);
    }
}
