//! export: a host directory served over 9P2000, 9P2000.u and 9P2000.L.
//!
//! Confinement comes first. Every fid holds an `O_PATH` descriptor of its
//! file, and every client-supplied name is one path element resolved from
//! its directory's descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and `O_NOFOLLOW`: no host
//! path is ever built from a client's strings, a symbolic link is served as
//! a link and never followed by the server, and `..` is answered from the
//! fid's own record of the directories it walked through, so it stops at
//! the export's root whatever happens on the host meanwhile.
//!
//! To read, write or change a walked file the server reopens its own
//! descriptor through `/proc/self/fd` (as virtiofsd does). That names
//! exactly the inode the fid was walked to, so a fid whose file was renamed
//! keeps working and one whose file was replaced never reaches the new one.
//! Device nodes and fifos are not opened unless the export allows it.
//!
//! Calls that move data or may wait long (reads, writes, listings, fsync,
//! truncation, opening devices and fifos) run on tokio's blocking pool, so
//! a slow disk never holds up a connection's other requests. Calls on names
//! and attributes run on the thread serving the request: they take a few
//! microseconds, and a trip through the pool costs two thread switches,
//! several times more. Either way, in multi-user mode the thread takes on
//! the attaching user's ids for the call (see [`users`]).

mod locks;
pub mod users;

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ninep_server::{
    Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, SetAttr, SetTime, Time, User,
};
use ninep_wire::consts::dotl;
use ninep_wire::consts::mode::{DMAPPEND, DMEXCL};
use ninep_wire::{Errno, Name, Qid, QidType, Rgetlock, Rstatfs, Tgetlock, Tlock};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, Timespec, Timestamps};

use crate::locks::{LockTable, Owner, end_of};
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
    pub readonly: bool,
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

/// A file the export reached: its `O_PATH` descriptor and identity, and
/// where it was last seen.
struct Node {
    fd: OwnedFd,
    dev: u64,
    ino: u64,
    ty: FileType,
    place: Mutex<Place>,
}

struct Place {
    /// The directory walked from; `None` at the root.
    parent: Option<Arc<Node>>,
    name: String,
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
    fn place(&self) -> (Option<Arc<Node>>, String) {
        let p = self.place.lock().unwrap_or_else(|e| e.into_inner());
        (p.parent.clone(), p.name.clone())
    }

    fn is_dir(&self) -> bool {
        self.ty == FileType::Directory
    }
}

/// What a fid refers to.
#[derive(Debug, Clone)]
pub struct ExportFile {
    node: Arc<Node>,
    /// The descriptor opened for I/O, once the fid is open.
    io: Option<Arc<OwnedFd>>,
    creds: Option<Arc<Creds>>,
}

struct Inner {
    root: Arc<Node>,
    /// `/proc/self/fd`, through which the server reopens its own descriptors.
    proc_fd: OwnedFd,
    options: Options,
    users: UserDb,
    /// Device numbers seen, numbered in order, for unique qid paths.
    devs: Mutex<HashMap<u64, u64>>,
    locks: LockTable,
    path: String,
}

/// A host directory as a [`Filesystem`].
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

/// The extended attribute holding Plan 9's DMAPPEND and DMEXCL marks of a
/// file made through the export: `a`, `l`, or both.
const PLAN9_MARKS: &str = "user.9p.mode";

/// The extended attribute holding a directory's default ACL.
const DEFAULT_ACL: &str = "system.posix_acl_default";

fn errno(e: rustix::io::Errno) -> Error {
    Error::from_errno(Errno(e.raw_os_error() as u32))
}

fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// Linux open flags from 9P2000.L's numbering, keeping only those that make
/// sense for a file reopened by the server.
fn oflags(flags: u32) -> OFlags {
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

fn time(sec: i64, nsec: i64) -> Time {
    Time {
        sec: sec.max(0) as u64,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

impl Export {
    /// Exports the directory at `path`.
    pub fn new(path: impl AsRef<Path>, options: Options) -> std::io::Result<Export> {
        let path = path.as_ref();
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        let proc_fd = rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let root = Arc::new(Node {
            fd,
            dev: st.st_dev,
            ino: st.st_ino,
            ty: FileType::Directory,
            place: Mutex::new(Place {
                parent: None,
                name: "/".into(),
            }),
        });
        let mut devs = HashMap::new();
        devs.insert(st.st_dev, 0);
        Ok(Export {
            inner: Arc::new(Inner {
                root,
                proc_fd,
                options,
                users: UserDb::default(),
                devs: Mutex::new(devs),
                locks: LockTable::default(),
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
            Err(Error::from_errno(Errno(30))) // EROFS
        } else {
            Ok(())
        }
    }
}

impl Inner {
    fn qid(&self, st: &rustix::fs::Stat) -> Qid {
        // The paper's convention: a version that changes with the file,
        // taken from its modification time.
        let version = (st.st_mtime as u32) ^ (st.st_mtime_nsec as u32);
        self.qid_of(st.st_dev, st.st_ino, st.st_mode, version)
    }

    /// A qid path unique across the devices under the export: the device's
    /// number in order of discovery, then the inode number.
    fn qid_of(&self, dev: u64, ino: u64, mode: u32, version: u32) -> Qid {
        let index = {
            let mut devs = self.devs.lock().unwrap_or_else(|e| e.into_inner());
            let next = devs.len() as u64;
            *devs.entry(dev).or_insert(next)
        };
        let ty = match FileType::from_raw_mode(mode) {
            FileType::Directory => QidType::DIR,
            FileType::Symlink => QidType::SYMLINK,
            _ => QidType::FILE,
        };
        Qid {
            ty,
            version,
            path: (index << 56) | (ino & 0x00ff_ffff_ffff_ffff),
        }
    }

    fn attr(&self, st: &rustix::fs::Stat, name: &str) -> Attr {
        Attr {
            qid: self.qid(st),
            name: name.to_owned(),
            mode: st.st_mode,
            uid: self.users.user_name(st.st_uid),
            gid: self.users.group_name(st.st_gid),
            muid: String::new(),
            n_uid: st.st_uid,
            n_gid: st.st_gid,
            nlink: st.st_nlink,
            rdev: st.st_rdev,
            size: st.st_size as u64,
            blksize: st.st_blksize as u64,
            blocks: st.st_blocks as u64,
            atime: time(st.st_atime, st.st_atime_nsec as i64),
            mtime: time(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: time(st.st_ctime, st.st_ctime_nsec as i64),
        }
    }

    /// Attributes of a directory entry that cannot be stat'ed: its inode
    /// number and type, and nothing else.
    fn entry_attr(&self, dev: u64, ino: u64, ty: FileType, name: &str) -> Attr {
        let mode = ty.as_raw_mode();
        Attr {
            qid: self.qid_of(dev, ino, mode, 0),
            name: name.to_owned(),
            mode,
            nlink: 1,
            ..Attr::default()
        }
    }

    /// Looks `name` up in `dir` without leaving the export or following
    /// a link.
    fn lookup(&self, dir: &Arc<Node>, name: &str) -> Result<Arc<Node>> {
        let fd = rustix::fs::openat2(
            &dir.fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        )
        .map_err(errno)?;
        let st = rustix::fs::fstat(&fd).map_err(errno)?;
        Ok(Arc::new(Node {
            fd,
            dev: st.st_dev,
            ino: st.st_ino,
            ty: FileType::from_raw_mode(st.st_mode),
            place: Mutex::new(Place {
                parent: Some(dir.clone()),
                name: name.to_owned(),
            }),
        }))
    }

    /// Opens the very inode `node` holds, for I/O.
    fn reopen(&self, node: &Node, flags: OFlags) -> Result<OwnedFd> {
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
    fn proc_path(&self, node: &Node) -> String {
        format!("/proc/self/fd/{}", node.fd.as_raw_fd())
    }

    /// Checks that `name` in `dir` is still `node` before acting on it by name.
    fn still_there(&self, dir: &Node, name: &str, node: &Node) -> Result<()> {
        let st = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        if st.st_dev != node.dev || st.st_ino != node.ino {
            return Err(Error::with_errno(
                Errno::ENOENT,
                "file has been moved or removed",
            ));
        }
        Ok(())
    }

    /// Plan 9's append-only and exclusive-use marks of a regular file, kept
    /// in an extended attribute since Unix files have no such bits. `path`
    /// is followed only when it is one of the server's own `/proc/self/fd`
    /// links.
    fn marks(&self, path: &str, follow: bool) -> QidType {
        let mut buf = [0u8; 8];
        let got = if follow {
            rustix::fs::getxattr(path, PLAN9_MARKS, &mut buf)
        } else {
            rustix::fs::lgetxattr(path, PLAN9_MARKS, &mut buf)
        };
        let Ok(n) = got else {
            return QidType::FILE;
        };
        let mut ty = QidType::FILE;
        for &b in &buf[..n] {
            match b {
                b'a' => ty = ty | QidType::APPEND,
                b'l' => ty = ty | QidType::EXCL,
                _ => {}
            }
        }
        ty
    }

    /// `qid` with the marks of `node` added.
    fn marked(&self, node: &Node, mut qid: Qid) -> Qid {
        if node.ty == FileType::RegularFile {
            qid.ty = qid.ty | self.marks(&self.proc_path(node), true);
        }
        qid
    }

    fn qid_at(&self, dir: &Node, name: &str) -> Result<Qid> {
        let st = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        Ok(self.qid(&st))
    }

    /// The qid of `name`, just made in `dir` with `mode`, given that mode.
    fn made(&self, dir: &Arc<Node>, name: &str, mode: u32) -> Result<Qid> {
        let node = self.lookup(dir, name)?;
        self.unmask(dir, node.fd.as_fd(), mode);
        let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
        Ok(self.qid(&st))
    }

    /// Gives `fd`, a file just made in `dir`, the permission bits of `mode`
    /// that the server's own umask withheld: a client's mode is final (a
    /// 9P2000.L client has applied its user's umask already). Where `dir`
    /// has a default ACL the kernel applied that instead of the umask, and
    /// what it decided stands.
    fn unmask(&self, dir: &Node, fd: BorrowedFd<'_>, mode: u32) {
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

fn not_dir_entry(name: &Name) -> Result<&str> {
    if name.is_empty() || name.is_dot_or_dotdot() {
        return Err(Error::with_errno(Errno::EINVAL, "illegal name"));
    }
    Ok(name.as_str())
}

impl Filesystem for Export {
    type File = ExportFile;

    async fn attach(&self, user: &User) -> Result<(ExportFile, Qid)> {
        if !user.aname.is_empty() && user.aname != self.inner.path && user.aname != "/" {
            return Err(Error::with_errno(Errno::ENOENT, "no such tree"));
        }
        let creds = match &self.inner.options.identity {
            Identity::Server => None,
            Identity::Squash(c) => Some(Arc::new(c.clone())),
            Identity::Multiuser => Some(Arc::new(
                self.inner.users.resolve(&user.uname, user.n_uname)?,
            )),
        };
        let root = self.inner.root.clone();
        let file = ExportFile {
            node: root.clone(),
            io: None,
            creds,
        };
        let qid = self
            .call_here(&file.creds, move |inner| {
                let st = rustix::fs::fstat(&root.fd).map_err(errno)?;
                // The user must be able to search the root.
                rustix::fs::accessat(&root.fd, ".", rustix::fs::Access::EXEC_OK, AtFlags::EACCESS)
                    .or_else(|e| {
                        if e == rustix::io::Errno::INVAL {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })
                    .map_err(errno)?;
                Ok(inner.qid(&st))
            })
            .await?;
        Ok((file, qid))
    }

    async fn walk(&self, _cx: &Cx, dir: &ExportFile, name: &Name) -> Result<(ExportFile, Qid)> {
        let from = dir.node.clone();
        let name = name.to_string();
        let (node, qid) = self
            .call_here(&dir.creds, move |inner| {
                let node = if name == ".." {
                    from.place().0.unwrap_or_else(|| inner.root.clone())
                } else {
                    inner.lookup(&from, &name)?
                };
                let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
                let qid = inner.marked(&node, inner.qid(&st));
                Ok((node, qid))
            })
            .await?;
        let file = ExportFile {
            node,
            io: None,
            creds: dir.creds.clone(),
        };
        Ok((file, qid))
    }

    async fn getattr(&self, _cx: &Cx, file: &ExportFile) -> Result<Attr> {
        let node = file.node.clone();
        self.call_here(&file.creds, move |inner| {
            let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
            let mut attr = inner.attr(&st, &node.place().1);
            attr.qid = inner.marked(&node, attr.qid);
            Ok(attr)
        })
        .await
    }

    async fn setattr(&self, _cx: &Cx, file: &ExportFile, set: &SetAttr) -> Result<()> {
        self.readonly()?;
        let node = file.node.clone();
        let io = file.io.clone();
        let set = set.clone();
        // Truncation may free many blocks on a disk.
        let truncates = set.size.is_some();
        let change = move |inner: &Inner| {
            let is_link = node.ty == FileType::Symlink;
            if let Some(mode) = set.mode {
                if is_link {
                    return Err(Error::not_supported());
                }
                rustix::fs::chmodat(
                    rustix::fs::CWD,
                    inner.proc_path(&node).as_str(),
                    Mode::from_raw_mode(mode & 0o7777),
                    AtFlags::empty(),
                )
                .map_err(errno)?;
            }
            let gid = match &set.gid_name {
                Some(name) => Some(
                    inner
                        .users
                        .group_id(name)
                        .ok_or_else(|| Error::new("unknown group"))?,
                ),
                None => set.gid,
            };
            // Every other change bumps ctime itself; an empty chown, which
            // also clears the set-id bits of a file not the caller's to
            // keep them on, is only for a bump alone.
            let bump_only = set.ctime
                && set.mode.is_none()
                && set.size.is_none()
                && set.atime.is_none()
                && set.mtime.is_none();
            if set.uid.is_some() || gid.is_some() || bump_only {
                let uid = set.uid.map(rustix::process::Uid::from_raw);
                let gid = gid.map(rustix::process::Gid::from_raw);
                rustix::fs::chownat(
                    &node.fd,
                    "",
                    uid,
                    gid,
                    AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(errno)?;
            }
            if let Some(size) = set.size {
                // A fid open for writing truncates through its descriptor
                // (ftruncate), which the file's mode no longer governs.
                let writable = io.filter(|fd| {
                    let access = rustix::fs::fcntl_getfl(&**fd).map(|f| f & OFlags::ACCMODE);
                    matches!(access, Ok(OFlags::WRONLY | OFlags::RDWR))
                });
                let fd = match writable {
                    Some(fd) => fd,
                    None => Arc::new(inner.reopen(&node, OFlags::WRONLY)?),
                };
                rustix::fs::ftruncate(&*fd, size).map_err(errno)?;
            }
            if set.atime.is_some() || set.mtime.is_some() {
                let spec = |t: Option<SetTime>| match t {
                    None => Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_OMIT,
                    },
                    Some(SetTime::Now) => Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_NOW,
                    },
                    Some(SetTime::At(t)) => Timespec {
                        tv_sec: t.sec as i64,
                        tv_nsec: t.nsec as _,
                    },
                };
                let times = Timestamps {
                    last_access: spec(set.atime),
                    last_modification: spec(set.mtime),
                };
                if is_link {
                    // A link's own times, through its O_PATH descriptor.
                    rustix::fs::utimensat(&node.fd, "", &times, AtFlags::EMPTY_PATH)
                } else {
                    rustix::fs::utimensat(
                        rustix::fs::CWD,
                        inner.proc_path(&node).as_str(),
                        &times,
                        AtFlags::empty(),
                    )
                }
                .map_err(errno)?;
            }
            Ok(())
        };
        if truncates {
            self.call(&file.creds, change).await
        } else {
            self.call_here(&file.creds, change).await
        }
    }

    async fn open(&self, _cx: &Cx, file: &mut ExportFile, flags: u32) -> Result<Opened> {
        let wants_write = matches!(flags & dotl::O_ACCMODE, dotl::O_WRONLY | dotl::O_RDWR)
            || flags & dotl::O_TRUNC != 0;
        if wants_write {
            self.readonly()?;
        }
        let node = file.node.clone();
        // Opening a device or a fifo may wait; so may truncating.
        let may_wait = !matches!(node.ty, FileType::RegularFile | FileType::Directory)
            || flags & dotl::O_TRUNC != 0;
        let open = move |inner: &Inner| {
            let mut o = oflags(flags);
            if node.is_dir() {
                o = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            }
            let marks = inner.marked(&node, Qid::default()).ty;
            if marks.contains(QidType::APPEND) {
                // Writes land at the end; truncation is ignored (open(5)).
                o = (o | OFlags::APPEND) - OFlags::TRUNC;
            }
            let fd = inner.reopen(&node, o)?;
            let st = rustix::fs::fstat(&fd).map_err(errno)?;
            Ok((fd, inner.marked(&node, inner.qid(&st))))
        };
        let (fd, qid) = if may_wait {
            self.call(&file.creds, open).await?
        } else {
            self.call_here(&file.creds, open).await?
        };
        file.io = Some(Arc::new(fd));
        Ok(Opened { qid, iounit: 0 })
    }

    async fn create(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        flags: u32,
        _gid: u32,
    ) -> Result<(ExportFile, Opened)> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let parent = dir.node.clone();
        let (node, fd, qid) = self
            .call_here(&dir.creds, move |inner| {
                let mut o = oflags(flags) | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
                if mode & DMAPPEND != 0 {
                    o |= OFlags::APPEND;
                }
                let fd = rustix::fs::openat2(
                    &parent.fd,
                    name.as_str(),
                    o,
                    Mode::from_raw_mode(mode & 0o7777),
                    beneath(),
                )
                .map_err(errno)?;
                inner.unmask(&parent, fd.as_fd(), mode);
                let st = rustix::fs::fstat(&fd).map_err(errno)?;
                let node = inner.lookup(&parent, &name)?;
                if node.ino != st.st_ino || node.dev != st.st_dev {
                    return Err(Error::with_errno(
                        Errno::ENOENT,
                        "file was replaced as it was made",
                    ));
                }
                let marks = [(DMAPPEND, b'a'), (DMEXCL, b'l')]
                    .iter()
                    .filter(|(bit, _)| mode & bit != 0)
                    .map(|(_, letter)| *letter)
                    .collect::<Vec<u8>>();
                if !marks.is_empty() {
                    let set = rustix::fs::setxattr(
                        inner.proc_path(&node).as_str(),
                        PLAN9_MARKS,
                        &marks,
                        rustix::fs::XattrFlags::empty(),
                    );
                    if let Err(e) = set {
                        let _ = rustix::fs::unlinkat(&parent.fd, name.as_str(), AtFlags::empty());
                        return Err(Error::with_errno(
                            Errno(e.raw_os_error() as u32),
                            "append-only and exclusive files need extended attributes here",
                        ));
                    }
                }
                Ok((node.clone(), fd, inner.marked(&node, inner.qid(&st))))
            })
            .await?;
        let file = ExportFile {
            node,
            io: Some(Arc::new(fd)),
            creds: dir.creds.clone(),
        };
        Ok((file, Opened { qid, iounit: 0 }))
    }

    async fn mkdir(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        _gid: u32,
    ) -> Result<Qid> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let parent = dir.node.clone();
        self.call_here(&dir.creds, move |inner| {
            rustix::fs::mkdirat(
                &parent.fd,
                name.as_str(),
                Mode::from_raw_mode(mode & 0o7777),
            )
            .map_err(errno)?;
            inner.made(&parent, &name, mode)
        })
        .await
    }

    async fn symlink(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        target: &str,
        _gid: u32,
    ) -> Result<Qid> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let target = target.to_owned();
        let parent = dir.node.clone();
        self.call_here(&dir.creds, move |inner| {
            rustix::fs::symlinkat(target.as_str(), &parent.fd, name.as_str()).map_err(errno)?;
            inner.qid_at(&parent, &name)
        })
        .await
    }

    async fn mknod(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        major: u32,
        minor: u32,
        _gid: u32,
    ) -> Result<Qid> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let ty = FileType::from_raw_mode(mode);
        let device = matches!(ty, FileType::CharacterDevice | FileType::BlockDevice);
        if device && !self.inner.options.allow_special {
            return Err(Error::with_errno(Errno::EPERM, "device nodes are not made"));
        }
        let parent = dir.node.clone();
        self.call_here(&dir.creds, move |inner| {
            let dev = rustix::fs::makedev(major, minor);
            rustix::fs::mknodat(
                &parent.fd,
                name.as_str(),
                ty,
                Mode::from_raw_mode(mode & 0o7777),
                dev,
            )
            .map_err(errno)?;
            inner.made(&parent, &name, mode)
        })
        .await
    }

    async fn link(&self, _cx: &Cx, dir: &ExportFile, file: &ExportFile, name: &Name) -> Result<()> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let parent = dir.node.clone();
        let node = file.node.clone();
        self.call_here(&dir.creds, move |inner| {
            let fd = node.fd.as_raw_fd().to_string();
            rustix::fs::linkat(
                &inner.proc_fd,
                fd.as_str(),
                &parent.fd,
                name.as_str(),
                AtFlags::SYMLINK_FOLLOW,
            )
            .map_err(errno)
        })
        .await
    }

    async fn readlink(&self, _cx: &Cx, file: &ExportFile) -> Result<String> {
        let node = file.node.clone();
        self.call_here(&file.creds, move |_| {
            let target = rustix::fs::readlinkat(&node.fd, "", Vec::new()).map_err(errno)?;
            target
                .into_string()
                .map_err(|_| Error::with_errno(Errno::EINVAL, "link target is not UTF-8"))
        })
        .await
    }

    async fn read(&self, _cx: &Cx, file: &ExportFile, offset: u64, count: u32) -> Result<Bytes> {
        let fd = file
            .io
            .clone()
            .ok_or_else(|| Error::from_errno(Errno::EBADF))?;
        self.call(&file.creds, move |_| {
            let mut buf: Vec<u8> = Vec::with_capacity(count as usize);
            rustix::io::pread(&*fd, rustix::buffer::spare_capacity(&mut buf), offset)
                .map_err(errno)?;
            Ok(Bytes::from(buf))
        })
        .await
    }

    async fn write(&self, _cx: &Cx, file: &ExportFile, offset: u64, data: Bytes) -> Result<u32> {
        let fd = file
            .io
            .clone()
            .ok_or_else(|| Error::from_errno(Errno::EBADF))?;
        self.call(&file.creds, move |_| {
            let mut done = 0;
            while done < data.len() {
                let n =
                    rustix::io::pwrite(&*fd, &data[done..], offset + done as u64).map_err(errno)?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            Ok(done as u32)
        })
        .await
    }

    async fn read_dir(&self, cx: &Cx, dir: &ExportFile) -> Result<Vec<DirEntry>> {
        let node = dir.node.clone();
        // A 9P2000.L dirent carries only the qid and type, which the
        // directory itself gives; 9P2000 listings carry whole stats.
        let entries_suffice = cx.dialect == ninep_wire::Dialect::L;
        self.call(&dir.creds, move |inner| {
            let fd = inner.reopen(&node, OFlags::RDONLY | OFlags::DIRECTORY)?;
            let mut entries = Vec::new();
            // Dir::new reads this descriptor; read_from would open "." in it,
            // which needs search permission a reader may not have.
            let listing = fd.try_clone().map_err(Error::from)?;
            let mut list = Dir::new(listing).map_err(errno)?;
            while let Some(entry) = list.read() {
                let entry = entry.map_err(errno)?;
                let raw = entry.file_name().to_bytes();
                if raw == b"." || raw == b".." {
                    continue;
                }
                // Names 9P cannot carry (not UTF-8, too long) are left out.
                let Some(name) = std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| Name::new(s).ok())
                else {
                    tracing::debug!("skipping a name 9P cannot carry");
                    continue;
                };
                if entries_suffice && entry.file_type() != FileType::Unknown {
                    let attr = inner.entry_attr(node.dev, entry.ino(), entry.file_type(), &name);
                    entries.push(DirEntry { name, attr });
                    continue;
                }
                let attr = match rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => {
                        let mut attr = inner.attr(&st, &name);
                        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                            let path = format!("/proc/self/fd/{}/{name}", fd.as_raw_fd());
                            attr.qid.ty = attr.qid.ty | inner.marks(&path, false);
                        }
                        attr
                    }
                    // Readable but not searchable: what the entry itself says.
                    Err(rustix::io::Errno::ACCESS) => {
                        inner.entry_attr(node.dev, entry.ino(), entry.file_type(), &name)
                    }
                    Err(_) => continue, // gone since the listing was read
                };
                entries.push(DirEntry { name, attr });
            }
            Ok(entries)
        })
        .await
    }

    async fn remove(&self, _cx: &Cx, file: &ExportFile) -> Result<()> {
        self.readonly()?;
        let node = file.node.clone();
        self.call_here(&file.creds, move |inner| {
            let (Some(parent), name) = node.place() else {
                return Err(Error::with_errno(Errno::EBUSY, "cannot remove the root"));
            };
            inner.still_there(&parent, &name, &node)?;
            let flags = if node.is_dir() {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(&parent.fd, name.as_str(), flags).map_err(errno)
        })
        .await
    }

    async fn unlinkat(&self, _cx: &Cx, dir: &ExportFile, name: &Name, flags: u32) -> Result<()> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let parent = dir.node.clone();
        self.call_here(&dir.creds, move |_| {
            let at = if flags & dotl::AT_REMOVEDIR != 0 {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(&parent.fd, name.as_str(), at).map_err(errno)
        })
        .await
    }

    async fn rename(
        &self,
        _cx: &Cx,
        file: &ExportFile,
        newdir: Option<&ExportFile>,
        name: &Name,
    ) -> Result<()> {
        self.readonly()?;
        let name = not_dir_entry(name)?.to_owned();
        let node = file.node.clone();
        let newdir = newdir.map(|d| d.node.clone());
        self.call_here(&file.creds, move |inner| {
            let (Some(parent), oldname) = node.place() else {
                return Err(Error::with_errno(Errno::EBUSY, "cannot rename the root"));
            };
            let target = newdir.unwrap_or_else(|| parent.clone());
            inner.still_there(&parent, &oldname, &node)?;
            rustix::fs::renameat(&parent.fd, oldname.as_str(), &target.fd, name.as_str())
                .map_err(errno)?;
            *node.place.lock().unwrap_or_else(|e| e.into_inner()) = Place {
                parent: Some(target),
                name,
            };
            Ok(())
        })
        .await
    }

    async fn renameat(
        &self,
        _cx: &Cx,
        olddir: &ExportFile,
        oldname: &Name,
        newdir: &ExportFile,
        newname: &Name,
    ) -> Result<()> {
        self.readonly()?;
        let (oldname, newname) = (
            not_dir_entry(oldname)?.to_owned(),
            not_dir_entry(newname)?.to_owned(),
        );
        let (from, to) = (olddir.node.clone(), newdir.node.clone());
        self.call_here(&olddir.creds, move |_| {
            rustix::fs::renameat(&from.fd, oldname.as_str(), &to.fd, newname.as_str())
                .map_err(errno)
        })
        .await
    }

    async fn statfs(&self, _cx: &Cx, file: &ExportFile) -> Result<Rstatfs> {
        let node = file.node.clone();
        self.call_here(&file.creds, move |_| {
            let s = rustix::fs::fstatfs(&node.fd).map_err(errno)?;
            Ok(Rstatfs {
                ty: s.f_type as u32,
                bsize: s.f_bsize as u32,
                blocks: s.f_blocks,
                bfree: s.f_bfree,
                bavail: s.f_bavail,
                files: s.f_files,
                ffree: s.f_ffree,
                fsid: 0,
                namelen: s.f_namelen as u32,
            })
        })
        .await
    }

    async fn fsync(&self, _cx: &Cx, file: &ExportFile, datasync: bool) -> Result<()> {
        let node = file.node.clone();
        let io = file.io.clone();
        self.call(&file.creds, move |inner| {
            let reopened;
            let fd = match &io {
                Some(fd) => fd.as_fd(),
                None => {
                    let flags = if node.is_dir() {
                        OFlags::RDONLY | OFlags::DIRECTORY
                    } else {
                        OFlags::RDONLY
                    };
                    reopened = inner.reopen(&node, flags)?;
                    reopened.as_fd()
                }
            };
            if datasync {
                rustix::fs::fdatasync(fd).map_err(errno)
            } else {
                rustix::fs::fsync(fd).map_err(errno)
            }
        })
        .await
    }

    async fn lock(&self, _cx: &Cx, file: &ExportFile, lock: &Tlock) -> Result<u8> {
        let owner = Owner {
            client: lock.client_id.clone(),
            proc_id: lock.proc_id,
        };
        let key = (file.node.dev, file.node.ino);
        Ok(self.inner.locks.lock(
            key,
            owner,
            lock.ty,
            lock.start,
            end_of(lock.start, lock.length),
        ))
    }

    async fn getlock(&self, _cx: &Cx, file: &ExportFile, lock: &Tgetlock) -> Result<Rgetlock> {
        let owner = Owner {
            client: lock.client_id.clone(),
            proc_id: lock.proc_id,
        };
        let key = (file.node.dev, file.node.ino);
        let write = lock.ty == dotl::LOCK_TYPE_WRLCK;
        Ok(
            match self.inner.locks.test(
                key,
                &owner,
                write,
                lock.start,
                end_of(lock.start, lock.length),
            ) {
                Some(held) => Rgetlock {
                    ty: if held.write {
                        dotl::LOCK_TYPE_WRLCK
                    } else {
                        dotl::LOCK_TYPE_RDLCK
                    },
                    start: held.start,
                    length: if held.end == u64::MAX {
                        0
                    } else {
                        held.end - held.start
                    },
                    proc_id: held.owner.proc_id,
                    client_id: held.owner.client,
                },
                None => Rgetlock {
                    ty: dotl::LOCK_TYPE_UNLCK,
                    ..lock_reply(lock)
                },
            },
        )
    }

    async fn xattr_get(&self, _cx: &Cx, file: &ExportFile, name: &str) -> Result<Bytes> {
        let node = file.node.clone();
        let name = name.to_owned();
        self.call_here(&file.creds, move |inner| {
            if node.ty == FileType::Symlink {
                return Err(Error::from_errno(Errno::ENODATA));
            }
            let path = inner.proc_path(&node);
            let mut buf = Vec::with_capacity(64 * 1024);
            let n = if name.is_empty() {
                rustix::fs::listxattr(path.as_str(), rustix::buffer::spare_capacity(&mut buf))
                    .map_err(errno)?
            } else {
                rustix::fs::getxattr(
                    path.as_str(),
                    name.as_str(),
                    rustix::buffer::spare_capacity(&mut buf),
                )
                .map_err(errno)?
            };
            debug_assert_eq!(n, buf.len());
            Ok(Bytes::from(buf))
        })
        .await
    }

    async fn xattr_set(
        &self,
        _cx: &Cx,
        file: &ExportFile,
        name: &str,
        value: Bytes,
        flags: u32,
    ) -> Result<()> {
        self.readonly()?;
        let node = file.node.clone();
        let name = name.to_owned();
        self.call_here(&file.creds, move |inner| {
            if node.ty == FileType::Symlink {
                return Err(Error::not_supported());
            }
            let path = inner.proc_path(&node);
            if value.is_empty() && flags & dotl::XATTR_CREATE == 0 {
                // Linux's client removes an attribute by setting it empty
                // (with XATTR_REPLACE), as QEMU understands it.
                return rustix::fs::removexattr(path.as_str(), name.as_str()).map_err(errno);
            }
            let f = rustix::fs::XattrFlags::from_bits_retain(flags);
            rustix::fs::setxattr(path.as_str(), name.as_str(), &value, f).map_err(errno)
        })
        .await
    }
}

fn lock_reply(lock: &Tgetlock) -> Rgetlock {
    Rgetlock {
        ty: lock.ty,
        start: lock.start,
        length: lock.length,
        proc_id: lock.proc_id,
        client_id: lock.client_id.clone(),
    }
}
