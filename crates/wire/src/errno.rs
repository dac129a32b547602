//! Errors as 9P carries them: an error string (9P2000), a string and a Unix
//! errno (9P2000.u), or a Linux errno alone (9P2000.L). [`Errno`] maps between
//! the three so that a server can answer in any dialect and a client can
//! understand any server.

use std::fmt;

/// A Linux errno number, as Rlerror and the .u Rerror carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub u32);

/// Each errno with the Plan 9 style string we send, and the Linux
/// strerror text other servers send for it.
const TABLE: &[(u32, &str, &str)] = &[
    (1, "operation not permitted", "Operation not permitted"),
    (2, "file does not exist", "No such file or directory"),
    (4, "interrupted", "Interrupted system call"),
    (5, "i/o error", "Input/output error"),
    (6, "no such device or address", "No such device or address"),
    (9, "unknown fid", "Bad file descriptor"),
    (
        11,
        "resource temporarily unavailable",
        "Resource temporarily unavailable",
    ),
    (12, "out of memory", "Cannot allocate memory"),
    (13, "permission denied", "Permission denied"),
    (16, "file in use", "Device or resource busy"),
    (17, "file already exists", "File exists"),
    (18, "cross-device link", "Invalid cross-device link"),
    (19, "no such device", "No such device"),
    (20, "not a directory", "Not a directory"),
    (21, "is a directory", "Is a directory"),
    (22, "invalid argument", "Invalid argument"),
    (
        23,
        "too many open files in system",
        "Too many open files in system",
    ),
    (24, "too many open fids", "Too many open files"),
    (27, "file too large", "File too large"),
    (28, "no space left on device", "No space left on device"),
    (29, "illegal seek", "Illegal seek"),
    (30, "read-only file system", "Read-only file system"),
    (31, "too many links", "Too many links"),
    (32, "broken pipe", "Broken pipe"),
    (34, "result out of range", "Numerical result out of range"),
    (
        35,
        "resource deadlock would occur",
        "Resource deadlock avoided",
    ),
    (36, "file name too long", "File name too long"),
    (37, "no locks available", "No locks available"),
    (38, "function not implemented", "Function not implemented"),
    (39, "directory not empty", "Directory not empty"),
    (
        40,
        "too many levels of symbolic links",
        "Too many levels of symbolic links",
    ),
    (61, "no such attribute", "No data available"),
    (71, "protocol error", "Protocol error"),
    (74, "bad 9P message", "Bad message"),
    (
        75,
        "value too large",
        "Value too large for defined data type",
    ),
    (90, "message too long", "Message too long"),
    (95, "operation not supported", "Operation not supported"),
    (
        103,
        "connection aborted",
        "Software caused connection abort",
    ),
    (104, "connection reset", "Connection reset by peer"),
    (107, "not connected", "Transport endpoint is not connected"),
    (110, "timed out", "Connection timed out"),
    (116, "stale file handle", "Stale file handle"),
    (122, "disk quota exceeded", "Disk quota exceeded"),
];

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const EINTR: Errno = Errno(4);
    pub const EIO: Errno = Errno(5);
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EACCES: Errno = Errno(13);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const EXDEV: Errno = Errno(18);
    pub const ENOTDIR: Errno = Errno(20);
    pub const EISDIR: Errno = Errno(21);
    pub const EINVAL: Errno = Errno(22);
    pub const EMFILE: Errno = Errno(24);
    pub const EFBIG: Errno = Errno(27);
    pub const ENOSPC: Errno = Errno(28);
    pub const ERANGE: Errno = Errno(34);
    pub const ENOLCK: Errno = Errno(37);
    pub const EROFS: Errno = Errno(30);
    pub const ENAMETOOLONG: Errno = Errno(36);
    pub const ENOSYS: Errno = Errno(38);
    pub const ENOTEMPTY: Errno = Errno(39);
    pub const ELOOP: Errno = Errno(40);
    pub const ENODATA: Errno = Errno(61);
    pub const EPROTO: Errno = Errno(71);
    pub const EBADMSG: Errno = Errno(74);
    pub const EMSGSIZE: Errno = Errno(90);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const ENOTCONN: Errno = Errno(107);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const ESTALE: Errno = Errno(116);

    /// The error string a 9P2000 server sends for this errno.
    pub fn ename(self) -> &'static str {
        TABLE
            .iter()
            .find(|e| e.0 == self.0)
            .map_or("error", |e| e.1)
    }

    /// The errno an error string means: our own strings, Linux's strerror
    /// texts and Plan 9's common ones; EIO when the string is not known.
    pub fn from_ename(ename: &str) -> Errno {
        let found = TABLE
            .iter()
            .find(|e| e.1 == ename || e.2.eq_ignore_ascii_case(ename));
        if let Some(e) = found {
            return Errno(e.0);
        }
        // Plan 9 servers word some errors differently.
        let plan9 = [
            ("file not found", Errno::ENOENT),
            ("no such file", Errno::ENOENT),
            ("exclusive use file already open", Errno::EBUSY),
            ("file exists", Errno::EEXIST),
            ("create prohibited", Errno::EPERM),
            ("remove prohibited", Errno::EPERM),
            ("wstat prohibited", Errno::EPERM),
            ("read prohibited", Errno::EACCES),
            ("write prohibited", Errno::EACCES),
            ("walk in non-directory", Errno::ENOTDIR),
        ];
        let lower = ename.to_ascii_lowercase();
        plan9
            .iter()
            .find(|(s, _)| lower.contains(s))
            .map_or(Errno::EIO, |(_, e)| *e)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.ename(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_map_both_ways() {
        for &(n, ours, linux) in TABLE {
            assert_eq!(Errno::from_ename(ours), Errno(n), "{ours}");
            assert_eq!(Errno::from_ename(linux), Errno(n), "{linux}");
            assert_eq!(Errno(n).ename(), ours);
        }
        assert_eq!(
            Errno::from_ename("exclusive use file already open"),
            Errno::EBUSY
        );
        assert_eq!(Errno::from_ename("something odd"), Errno::EIO);
        assert_eq!(Errno(9999).ename(), "error");
    }
}
