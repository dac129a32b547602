//! The error a file server returns: what goes on the wire, and nothing more.

use std::borrow::Cow;
use std::fmt;

use ninep_wire::Errno;

/// A failed operation as the peer will see it: an errno (for 9P2000.u and
/// 9P2000.L) and the error string (for 9P2000 and 9P2000.u). Details meant for
/// the operator belong in logs, not here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    errno: Errno,
    ename: Option<Cow<'static, str>>,
}

/// The result of a file-server operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with a message of its own, sent with errno EINVAL.
    pub fn new(ename: impl Into<Cow<'static, str>>) -> Error {
        Error::with_errno(Errno::EINVAL, ename)
    }

    /// An error with both an errno and a message.
    pub fn with_errno(errno: Errno, ename: impl Into<Cow<'static, str>>) -> Error {
        Error {
            errno,
            ename: Some(ename.into()),
        }
    }

    /// The errno, sent with the canonical string for it.
    pub fn from_errno(errno: Errno) -> Error {
        Error { errno, ename: None }
    }

    /// The errno a 9P2000.u or 9P2000.L peer sees.
    pub fn errno(&self) -> Errno {
        self.errno
    }

    /// The string a 9P2000 peer sees.
    pub fn ename(&self) -> &str {
        self.ename.as_deref().unwrap_or_else(|| self.errno.ename())
    }

    /// ENOENT: no such file.
    pub fn not_found() -> Error {
        Error::from_errno(Errno::ENOENT)
    }

    /// EEXIST: the name is taken.
    pub fn exists() -> Error {
        Error::from_errno(Errno::EEXIST)
    }

    /// ENOTDIR: a directory was needed.
    pub fn not_dir() -> Error {
        Error::from_errno(Errno::ENOTDIR)
    }

    /// EISDIR: not for a directory.
    pub fn is_dir() -> Error {
        Error::from_errno(Errno::EISDIR)
    }

    /// EACCES: permission denied.
    pub fn access() -> Error {
        Error::from_errno(Errno::EACCES)
    }

    /// The refusal of an operation a file server does not implement, worded
    /// as lib9p words it ("create prohibited").
    pub fn prohibited(what: &'static str) -> Error {
        let ename = match what {
            "create" => "create prohibited",
            "remove" => "remove prohibited",
            "wstat" => "wstat prohibited",
            "read" => "read prohibited",
            "write" => "write prohibited",
            _ => "operation prohibited",
        };
        Error::with_errno(Errno::EPERM, ename)
    }

    /// EOPNOTSUPP: the operation means nothing here.
    pub fn not_supported() -> Error {
        Error::from_errno(Errno::EOPNOTSUPP)
    }
}

impl From<Errno> for Error {
    fn from(errno: Errno) -> Error {
        Error::from_errno(errno)
    }
}

impl From<std::io::Error> for Error {
    /// Keeps the errno; the message is the canonical one for it, so host
    /// details (paths, say) never reach the peer.
    fn from(e: std::io::Error) -> Error {
        match e.raw_os_error() {
            Some(n) if n > 0 => Error::from_errno(Errno(n as u32)),
            _ => Error::from_errno(Errno::EIO),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.ename(), self.errno.0)
    }
}

impl std::error::Error for Error {}
