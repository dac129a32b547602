//! Confinement beneath the export's root: the `O_PATH` descriptor each fid
//! holds, names resolved one element at a time without leaving the export
//! or following a link, links followed for 9P2000 only where the kernel
//! finds their targets beneath the root, and the server's own descriptors
//! reopened through `/proc/self/fd` for I/O.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;

use ninep_server::{Error, Result};
use ninep_wire::{Errno, Name};
use parking_lot::Mutex;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};

use crate::{Inner, errno};

/// A file the export reached: its `O_PATH` descriptor and identity, and
/// where it was last seen.
pub(crate) struct Node {
    pub(crate) fd: OwnedFd,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) ty: FileType,
    pub(crate) place: Mutex<Place>,
}

/// Where a node was last seen: renaming it through the export moves it.
pub(crate) struct Place {
    /// The directory walked from; `None` at the root.
    pub(crate) parent: Option<Arc<Node>>,
    pub(crate) name: String,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("dev", &self.dev)
            .field("ino", &self.ino)
            .finish()
    }
}

impl Node {
    /// The node of `fd`, reached as `name` in `parent`.
    pub(crate) fn new(
        fd: OwnedFd,
        parent: Option<Arc<Node>>,
        name: &str,
    ) -> rustix::io::Result<Node> {
        Node::with_stat(fd, parent, name).map(|(node, _)| node)
    }

    /// As [`Node::new`], with the stat that told its identity.
    fn with_stat(
        fd: OwnedFd,
        parent: Option<Arc<Node>>,
        name: &str,
    ) -> rustix::io::Result<(Node, Stat)> {
        let st = rustix::fs::fstat(&fd)?;
        let node = Node {
            fd,
            dev: st.st_dev,
            ino: st.st_ino,
            ty: FileType::from_raw_mode(st.st_mode),
            place: Mutex::new(Place {
                parent,
                name: name.to_owned(),
            }),
        };
        Ok((node, st))
    }

    pub(crate) fn place(&self) -> (Option<Arc<Node>>, String) {
        let p = self.place.lock();
        (p.parent.clone(), p.name.clone())
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.ty == FileType::Directory
    }
}

/// How every client-supplied name is resolved: beneath the directory it is
/// looked up in, through no link of any kind.
pub(crate) fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// A name that may be made, removed or renamed in a directory. The
/// framework refuses the others before they come here; the export checks
/// again because a `..` made or removed here would leave the export.
pub(crate) fn not_dir_entry(name: &Name) -> Result<&str> {
    name.check_entry()
        .map_err(|e| Error::with_errno(e.errno(), e.to_string()))?;
    Ok(name.as_str())
}

impl Inner {
    /// Looks `name` up in `dir` without leaving the export or following
    /// a link.
    pub(crate) fn lookup(&self, dir: &Arc<Node>, name: &str) -> Result<Arc<Node>> {
        self.lookup_with_stat(dir, name).map(|(node, _)| node)
    }

    /// As [`Inner::lookup`], with the file's stat as the lookup found it.
    pub(crate) fn lookup_with_stat(
        &self,
        dir: &Arc<Node>,
        name: &str,
    ) -> Result<(Arc<Node>, Stat)> {
        let fd = rustix::fs::openat2(
            &dir.fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        )
        .map_err(errno)?;
        let (node, st) = Node::with_stat(fd, Some(dir.clone()), name).map_err(errno)?;
        Ok((Arc::new(node), st))
    }

    /// For 9P2000, which has no symbolic links: what the link `link`, found
    /// as `name` in `dir`, leads to, under the link's name (so `..` leads
    /// back to `dir`). Where the target is outside the export, missing or a
    /// loop, the link itself, which opens to nothing.
    pub(crate) fn follow(&self, dir: &Arc<Node>, name: &str, link: Arc<Node>) -> Result<Arc<Node>> {
        match self.link_target(&link) {
            Ok(fd) => {
                let node = Node::new(fd, Some(dir.clone()), name).map_err(errno)?;
                Ok(Arc::new(node))
            }
            Err(e) => {
                tracing::debug!(name, error = %e, "link not followed");
                Ok(link)
            }
        }
    }

    /// Opens what `link` leads to, resolved by the kernel from the root
    /// with `RESOLVE_BENEATH`: links on the way are followed, but `..`
    /// above the root and absolute targets (host paths) are refused with
    /// EXDEV, and loops with ELOOP.
    fn link_target(&self, link: &Node) -> rustix::io::Result<OwnedFd> {
        let path = self.beneath_root(link)?;
        // The path was read from the kernel a moment ago; check it still
        // names the link (a link removed meanwhile reads as "name (deleted)").
        let again = rustix::fs::openat2(
            &self.root.fd,
            &path,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        )?;
        let st = rustix::fs::fstat(&again)?;
        if st.st_dev != link.dev || st.st_ino != link.ino {
            return Err(rustix::io::Errno::NOENT);
        }
        rustix::fs::openat2(
            &self.root.fd,
            &path,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
    }

    /// Where `node` is beneath the root, as the kernel names both now;
    /// EXDEV if the host has moved it out.
    fn beneath_root(&self, node: &Node) -> rustix::io::Result<PathBuf> {
        let host_path = |n: &Node| {
            let fd = n.fd.as_raw_fd().to_string();
            let path = rustix::fs::readlinkat(&self.proc_fd, fd.as_str(), Vec::new())?;
            Ok::<_, rustix::io::Errno>(PathBuf::from(OsString::from_vec(path.into_bytes())))
        };
        let root = host_path(&self.root)?;
        host_path(node)?
            .strip_prefix(&root)
            .map(|p| p.to_path_buf())
            .map_err(|_| rustix::io::Errno::XDEV)
    }

    /// Opens the very inode `node` holds, for I/O.
    pub(crate) fn reopen(&self, node: &Node, flags: OFlags) -> Result<OwnedFd> {
        if node.ty == FileType::Symlink {
            return Err(Error::from_errno(Errno::ELOOP));
        }
        let special = !matches!(node.ty, FileType::RegularFile | FileType::Directory);
        if special && !self.options.allow_special {
            return Err(Error::with_errno(
                Errno::EPERM,
                "special files are not opened",
            ));
        }
        let name = node.fd.as_raw_fd().to_string();
        rustix::fs::openat(
            &self.proc_fd,
            name.as_str(),
            flags | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)
    }

    /// `/proc/self/fd/N` for a node, for calls that take only a path.
    pub(crate) fn proc_path(&self, node: &Node) -> String {
        format!("/proc/self/fd/{}", node.fd.as_raw_fd())
    }

    /// Checks that `name` in `dir` is still `node` before acting on it by name.
    pub(crate) fn still_there(&self, dir: &Node, name: &str, node: &Node) -> Result<()> {
        let st = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        if st.st_dev != node.dev || st.st_ino != node.ino {
            return Err(Error::with_errno(
                Errno::ENOENT,
                "file has been moved or removed",
            ));
        }
        Ok(())
    }
}
