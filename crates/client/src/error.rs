//! The client's error: the server said no, or the connection failed.

use std::fmt;
use std::io;

use ninep_wire::Errno;

/// A failed request.
#[derive(Debug)]
pub enum Error {
    /// The server answered with an error.
    Remote {
        /// The errno, as the server gave it or as its error string means.
        errno: Errno,
        /// The server's error string.
        ename: String,
    },
    /// Refused before anything was sent: a name no file can have, or an
    /// operation the server's dialect cannot express.
    Refused {
        /// The errno Linux gives for the same refusal.
        errno: Errno,
        /// What was refused, and why.
        what: String,
    },
    /// The connection is gone.
    Closed,
    /// The server broke the protocol (a reply of the wrong type, say).
    Protocol(String),
    /// The connection could not be made or failed.
    Io(io::Error),
    /// The connection was lost while the request was in flight, and it is
    /// not sent again on the next, since running twice would differ from
    /// running once (a create, an append): it may or may not have taken
    /// effect.
    Interrupted(String),
    /// The fid could not be made again on a new connection (its file is
    /// gone, or is another file now): it fails until clunked.
    Lost(String),
}

impl Error {
    pub(crate) fn protocol(what: impl Into<String>) -> Error {
        Error::Protocol(what.into())
    }

    pub(crate) fn refused(errno: Errno, what: impl Into<String>) -> Error {
        Error::Refused {
            errno,
            what: what.into(),
        }
    }

    /// True if the server refused the request (as opposed to a failure of
    /// the connection).
    pub fn is_remote(&self) -> bool {
        matches!(self, Error::Remote { .. })
    }

    /// True if the connection is gone.
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed)
    }

    /// True if the request was cut off by a lost connection that the client
    /// is recovering: the same request may be made again once
    /// [`crate::Client::ready`] returns.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Interrupted(_))
    }

    /// The errno of the failure, as the server gave it or as its error
    /// string means.
    pub fn errno(&self) -> Errno {
        match self {
            Error::Remote { errno, .. } | Error::Refused { errno, .. } => *errno,
            Error::Closed => Errno::ENOTCONN,
            Error::Protocol(_) => Errno::EPROTO,
            Error::Io(e) => e.raw_os_error().map_or(Errno::EIO, |n| Errno(n as u32)),
            Error::Interrupted(_) => Errno::EIO,
            Error::Lost(_) => Errno::ESTALE,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Remote { ename, .. } => f.write_str(ename),
            Error::Refused { what, .. } => f.write_str(what),
            Error::Closed => f.write_str("connection closed"),
            Error::Protocol(what) => write!(f, "protocol error: {what}"),
            Error::Io(e) => e.fmt(f),
            Error::Interrupted(what) => f.write_str(what),
            Error::Lost(why) => write!(f, "fid lost with the connection: {why}"),
        }
    }
}

impl std::error::Error for Error {
    // An I/O error is shown as itself (above), so its causes are this
    // error's: naming it as the source would print its text twice.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => e.source(),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::from_raw_os_error(other.errno().0 as i32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cause in a chain is printed once (`{:#}` of anyhow, for one,
    /// prints every source after the error).
    #[test]
    fn an_io_error_is_not_its_own_cause() {
        let inner = io::Error::new(io::ErrorKind::InvalidData, "invalid peer certificate");
        let e = Error::from(inner);
        let mut texts = vec![e.to_string()];
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            texts.push(c.to_string());
            cause = c.source();
        }
        assert_eq!(texts, ["invalid peer certificate"]);
    }
}
