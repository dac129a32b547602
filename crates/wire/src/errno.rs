//! Errors as 9P carries them: an error string (9P2000), a string and a Unix
//! errno (9P2000.u), or a Linux errno alone (9P2000.L). [`Errno`] maps between
//! the three so that a server can answer in any dialect and a client can
//! understand any server.

use std::fmt;

/// A Linux errno number, as Rlerror and the .u Rerror carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub u32);

/// Every errno we name: its constant, the Plan 9 style string we send, and
/// the Linux strerror text other servers send for it.
macro_rules! errnos {
    ($($name:ident = $n:literal, $ours:literal, $linux:literal;)*) => {
        impl Errno {
            $(
                #[doc = $linux]
                pub const $name: Errno = Errno($n);
            )*
        }

        const TABLE: &[(Errno, &str, &str)] = &[$((Errno::$name, $ours, $linux),)*];
    };
}

errnos! {
    EPERM = 1, "operation not permitted", "Operation not permitted";
    ENOENT = 2, "file does not exist", "No such file or directory";
    EINTR = 4, "interrupted", "Interrupted system call";
    EIO = 5, "i/o error", "Input/output error";
    ENXIO = 6, "no such device or address", "No such device or address";
    E2BIG = 7, "argument list too long", "Argument list too long";
    EBADF = 9, "unknown fid", "Bad file descriptor";
    EAGAIN = 11, "resource temporarily unavailable", "Resource temporarily unavailable";
    ENOMEM = 12, "out of memory", "Cannot allocate memory";
    EACCES = 13, "permission denied", "Permission denied";
    EBUSY = 16, "file in use", "Device or resource busy";
    EEXIST = 17, "file already exists", "File exists";
    EXDEV = 18, "cross-device link", "Invalid cross-device link";
    ENODEV = 19, "no such device", "No such device";
    ENOTDIR = 20, "not a directory", "Not a directory";
    EISDIR = 21, "is a directory", "Is a directory";
    EINVAL = 22, "invalid argument", "Invalid argument";
    ENFILE = 23, "too many open files in system", "Too many open files in system";
    EMFILE = 24, "too many open fids", "Too many open files";
    EFBIG = 27, "file too large", "File too large";
    ENOSPC = 28, "no space left on device", "No space left on device";
    ESPIPE = 29, "illegal seek", "Illegal seek";
    EROFS = 30, "read-only file system", "Read-only file system";
    EMLINK = 31, "too many links", "Too many links";
    EPIPE = 32, "broken pipe", "Broken pipe";
    ERANGE = 34, "result out of range", "Numerical result out of range";
    EDEADLK = 35, "resource deadlock would occur", "Resource deadlock avoided";
    ENAMETOOLONG = 36, "file name too long", "File name too long";
    ENOLCK = 37, "no locks available", "No locks available";
    ENOSYS = 38, "function not implemented", "Function not implemented";
    ENOTEMPTY = 39, "directory not empty", "Directory not empty";
    ELOOP = 40, "too many levels of symbolic links", "Too many levels of symbolic links";
    ENODATA = 61, "no such attribute", "No data available";
    EPROTO = 71, "protocol error", "Protocol error";
    EBADMSG = 74, "bad 9P message", "Bad message";
    EOVERFLOW = 75, "value too large", "Value too large for defined data type";
    EMSGSIZE = 90, "message too long", "Message too long";
    EOPNOTSUPP = 95, "operation not supported", "Operation not supported";
    ECONNABORTED = 103, "connection aborted", "Software caused connection abort";
    ECONNRESET = 104, "connection reset", "Connection reset by peer";
    ENOTCONN = 107, "not connected", "Transport endpoint is not connected";
    ETIMEDOUT = 110, "timed out", "Connection timed out";
    ECONNREFUSED = 111, "connection refused", "Connection refused";
    ESTALE = 116, "stale file handle", "Stale file handle";
    EDQUOT = 122, "disk quota exceeded", "Disk quota exceeded";
}

impl Errno {
    /// The error string a 9P2000 server sends for this errno.
    pub fn ename(self) -> &'static str {
        TABLE.iter().find(|e| e.0 == self).map_or("error", |e| e.1)
    }

    /// The errno an error string means: our own strings, Linux's strerror
    /// texts and Plan 9's common ones; EIO when the string is not known.
    pub fn from_ename(ename: &str) -> Errno {
        let found = TABLE
            .iter()
            .find(|e| e.1 == ename || e.2.eq_ignore_ascii_case(ename));
        if let Some(e) = found {
            return e.0;
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
        for &(errno, ours, linux) in TABLE {
            assert_eq!(Errno::from_ename(ours), errno, "{ours}");
            assert_eq!(Errno::from_ename(linux), errno, "{linux}");
            assert_eq!(errno.ename(), ours);
        }
        assert_eq!(
            Errno::from_ename("exclusive use file already open"),
            Errno::EBUSY
        );
        assert_eq!(Errno::from_ename("something odd"), Errno::EIO);
        assert_eq!(Errno(9999).ename(), "error");
    }
}
