//! Open flags as 9P2000.L numbers them, converted to the host's.

use ninep_wire::consts::dotl;
use rustix::fs::OFlags;

/// Linux open flags from 9P2000.L's numbering, keeping only those that make
/// sense for a file reopened by the server.
pub(crate) fn oflags(flags: u32) -> OFlags {
    let mut o = match flags & dotl::O_ACCMODE {
        dotl::O_WRONLY => OFlags::WRONLY,
        dotl::O_RDWR => OFlags::RDWR,
        _ => OFlags::RDONLY,
    };
    for (bit, flag) in [
        (dotl::O_TRUNC, OFlags::TRUNC),
        (dotl::O_APPEND, OFlags::APPEND),
        (dotl::O_NONBLOCK, OFlags::NONBLOCK),
        (dotl::O_DSYNC, OFlags::DSYNC),
        (dotl::O_SYNC, OFlags::SYNC),
        (dotl::O_DIRECTORY, OFlags::DIRECTORY),
    ] {
        if flags & bit != 0 {
            o |= flag;
        }
    }
    o | OFlags::CLOEXEC
}
