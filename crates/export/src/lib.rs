//! export: a host directory served over 9P2000, 9P2000.u and 9P2000.L.
//!
//! Confinement comes first. Every fid holds an `O_PATH` descriptor of its
//! file, and every client-supplied name is one path element resolved from
//! its directory's descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and `O_NOFOLLOW`: no host
//! path is ever built from a client's strings, a symbolic link is served as
//! a link, and `..` is answered from the fid's own record of the
//! directories it walked through, so it stops at the export's root whatever
//! happens on the host meanwhile. 9P2000 has no links, so there a walk to a
//! link reaches its target when the kernel finds it from the root with
//! `RESOLVE_BENEATH`; links leading out (absolute ones included) stay links.
//!
//! To read, write or change a walked file the server reopens its own
//! descriptor through `/proc/self/fd` (as virtiofsd does). That names
//! exactly the inode the fid was walked to, so a fid whose file was renamed
//! keeps working and one whose file was replaced never reaches the new one.
//! Device nodes and fifos are not opened unless the export allows it.
//!
//! Calls that move data or may wait long (writes, listings, fsync,
//! truncation, opening devices and fifos) run on tokio's blocking pool, so
//! a slow disk never holds up a connection's other requests. Calls on names
//! and attributes run on the thread serving the request: they take a few
//! microseconds, and a trip through the pool costs two thread switches,
//! several times more. Reads of regular files are tried there too, with
//! RWF_NOWAIT, and go to the pool only when the kernel would have to wait;
//! so are small writes to tmpfs pages in memory (see `data`). Either way,
//! in multi-user mode the thread takes on the attaching user's ids for the
//! call (see [`users`]).
//!
//! Where things are: `confine` resolves names beneath the root, `qid`
//! numbers files across devices, `marks` keeps Plan 9's append-only and
//! exclusive-use bits, `umask` gives new files the modes clients ask for,
//! `open_flags` converts 9P2000.L's open flags. `filesystem` answers each
//! 9P call from one of `names`, `attrs`, `data`, `xattrs` and `locks`.

#![warn(clippy::unwrap_used)]

mod attrs;
mod confine;
mod data;
mod filesystem;
mod locks;
mod marks;
mod names;
mod open_flags;
mod qid;
mod umask;
pub mod users;
mod xattrs;

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use ninep_server::{Error, Result};
use ninep_wire::Errno;
use rustix::fs::{Mode, OFlags};

use crate::confine::Node;
use crate::locks::LockTable;
use crate::marks::MarksSeen;
use crate::qid::Devices;
use crate::users::{Creds, UserDb, run_as};

/// Whose identity filesystem calls use.
#[derive(Debug, Clone)]
pub enum Identity {
    /// The server's own, for everyone.
    Server,
    /// One user's, for everyone (the server must be root).
    Squash(Creds),
    /// Each attaching user's own (the server must be root).
    Multiuser,
}

/// How a directory is exported.
#[derive(Debug, Clone)]
pub struct Options {
    /// Refuse every change, with EROFS.
    pub readonly: bool,
    /// Whose identity filesystem calls use.
    pub identity: Identity,
    /// Open device nodes, fifos and sockets on the host when asked to.
    pub allow_special: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            readonly: false,
            identity: Identity::Server,
            allow_special: false,
        }
    }
}

/// What a fid refers to.
#[derive(Debug, Clone)]
pub struct ExportFile {
    node: Arc<Node>,
    /// The descriptor opened for I/O, once the fid is open.
    io: Option<Arc<OwnedFd>>,
    /// Taken by each write through the descriptor: a client's writes in
    /// flight would otherwise run side by side on the blocking pool, each
    /// spinning on the file's lock while another holds it.
    writing: Arc<tokio::sync::Mutex<()>>,
    creds: Option<Arc<Creds>>,
}

impl ExportFile {
    /// The descriptor opened for I/O; EBADF before the fid is opened.
    fn opened(&self) -> Result<Arc<OwnedFd>> {
        self.io
            .clone()
            .ok_or_else(|| Error::from_errno(Errno::EBADF))
    }
}

struct Inner {
    root: Arc<Node>,
    /// `/proc/self/fd`, through which the server reopens its own descriptors.
    proc_fd: OwnedFd,
    options: Options,
    users: UserDb,
    devices: Devices,
    locks: LockTable,
    marks_seen: MarksSeen,
    path: String,
}

/// A host directory as a [`ninep_server::Filesystem`].
#[derive(Clone)]
pub struct Export {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("path", &self.inner.path)
            .finish()
    }
}

fn errno(e: rustix::io::Errno) -> Error {
    Error::from_errno(Errno(e.raw_os_error() as u32))
}

impl Export {
    /// Exports the directory at `path`, naming users and groups as the
    /// host's /etc/passwd and /etc/group do.
    pub fn new(path: impl AsRef<Path>, options: Options) -> std::io::Result<Export> {
        Export::with_users(path, options, UserDb::default())
    }

    /// Exports the directory at `path`, naming users and groups (and, in
    /// multi-user mode, finding who attaches) as `users` does.
    pub fn with_users(
        path: impl AsRef<Path>,
        options: Options,
        users: UserDb,
    ) -> std::io::Result<Export> {
        let path = path.as_ref();
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let root = Arc::new(Node::new(fd, None, "/")?);
        let proc_fd = rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Export {
            inner: Arc::new(Inner {
                devices: Devices::new(root.dev),
                root,
                proc_fd,
                options,
                users,
                locks: LockTable::default(),
                marks_seen: MarksSeen::default(),
                path: path.display().to_string(),
            }),
        })
    }

    /// Runs a filesystem call on the blocking pool as `file`'s user: for
    /// calls that move data or may wait long (on a disk, a fifo).
    async fn call<T: Send + 'static>(
        &self,
        creds: &Option<Arc<Creds>>,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        let creds = creds.clone();
        tokio::task::spawn_blocking(move || run_as(creds.as_deref(), || f(&inner))?)
            .await
            .map_err(|_| Error::from_errno(Errno::EIO))?
    }

    /// Runs a filesystem call as `file`'s user on the thread serving the
    /// request: for calls on names and attributes, which take less time
    /// than the two thread switches of a trip through the pool.
    async fn call_here<T>(
        &self,
        creds: &Option<Arc<Creds>>,
        f: impl FnOnce(&Inner) -> Result<T>,
    ) -> Result<T> {
        run_as(creds.as_deref(), || f(&self.inner))?
    }

    fn readonly(&self) -> Result<()> {
        if self.inner.options.readonly {
            Err(Error::from_errno(Errno::EROFS))
        } else {
            Ok(())
        }
    }
}
