//! New files get the modes clients ask for. The server's own umask applies
//! to whatever it makes, but a client's mode is final (a 9P2000.L client
//! has applied its user's umask already), so the bits it withheld are put
//! back after the fact.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

use ninep_server::Result;
use ninep_wire::Qid;
use rustix::fs::{AtFlags, Mode};

use crate::confine::Node;
use crate::{Inner, errno};

/// The extended attribute holding a directory's default ACL.
const DEFAULT_ACL: &str = "system.posix_acl_default";

impl Inner {
    /// The qid of `name`, just made in `dir` with `mode`, given that mode.
    pub(crate) fn made(&self, dir: &Arc<Node>, name: &str, mode: u32) -> Result<Qid> {
        let node = self.lookup(dir, name)?;
        self.unmask(dir, node.fd.as_fd(), mode);
        let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
        Ok(self.qid(&st))
    }

    /// Gives `fd`, a file just made in `dir`, the permission bits of `mode`
    /// that the server's umask withheld. Where `dir` has a default ACL the
    /// kernel applied that instead of the umask, and what it decided stands.
    pub(crate) fn unmask(&self, dir: &Node, fd: BorrowedFd<'_>, mode: u32) {
        let Ok(st) = rustix::fs::fstat(fd) else {
            return;
        };
        if mode & 0o777 & !st.st_mode == 0 {
            return;
        }
        let acl = rustix::fs::getxattr_query(self.proc_path(dir).as_str(), DEFAULT_ACL);
        if acl.is_ok() {
            return;
        }
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let mode = (st.st_mode & 0o7000) | (mode & 0o777);
        let set = rustix::fs::chmodat(
            rustix::fs::CWD,
            path.as_str(),
            Mode::from_raw_mode(mode),
            AtFlags::empty(),
        );
        if let Err(e) = set {
            tracing::debug!("cannot give a new file mode {mode:o}: {e}");
        }
    }
}
