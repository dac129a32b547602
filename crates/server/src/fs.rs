//! The file-server trait: one async method per operation, each with a
//! canonical refusal, so a server implements only what it means.
//!
//! One trait serves all three dialects. Its vocabulary is the common ground
//! of them: open flags and modes are Linux's (as 9P2000.L has them),
//! attributes carry both Plan 9 names and numeric ids, and the framework maps
//! stat/wstat, getattr/setattr and both kinds of directory read onto it.

use std::future::Future;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use bytes::Bytes;
use ninep_transport::PipedFile;
use ninep_wire::consts::{dotl, unix};
use ninep_wire::{Dialect, Name, Qid, Rgetlock, Rstatfs, Tgetlock, Tlock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// Who an attach was made as. Every request on fids derived from that attach
/// carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user name sent (may be empty in 9P2000.L).
    pub uname: String,
    /// The numeric id sent in 9P2000.u/.L, or `NONUNAME`.
    pub n_uname: u32,
    /// The tree asked for.
    pub aname: String,
}

/// The context of one request.
#[derive(Debug, Clone)]
pub struct Cx {
    /// Who the fid's attach was made as.
    pub user: Arc<User>,
    /// The dialect of the session, for servers whose answers differ by it.
    pub dialect: Dialect,
    /// The read is one of a stream's (docs/streams.md): more follow, each
    /// starting where the last ended, so reading ahead is safe to start.
    pub streaming: bool,
}

/// A time as 9P2000.L carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Time {
    /// Seconds since the Unix epoch.
    pub sec: u64,
    /// Nanoseconds past `sec`.
    pub nsec: u32,
}

impl Time {
    /// The system clock's time.
    pub fn now() -> Time {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Time {
            sec: d.as_secs(),
            nsec: d.subsec_nanos(),
        }
    }
}

/// A file's attributes, enough for a 9P2000 stat, a 9P2000.u stat and a
/// 9P2000.L getattr.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attr {
    /// The file's qid, as walks to it answer.
    pub qid: Qid,
    /// The last path element; `/` for the root.
    pub name: String,
    /// Unix `st_mode`: file type bits and permissions (`S_IFDIR | 0o755`).
    pub mode: u32,
    /// The owner's name (9P2000 stat).
    pub uid: String,
    /// The group's name (9P2000 stat).
    pub gid: String,
    /// Who last modified the file.
    pub muid: String,
    /// The owner's numeric id (9P2000.u stat, 9P2000.L getattr).
    pub n_uid: u32,
    /// The group's numeric id (9P2000.u stat, 9P2000.L getattr).
    pub n_gid: u32,
    /// Number of hard links.
    pub nlink: u64,
    /// Device number of a device file, as Linux encodes it.
    pub rdev: u64,
    /// Length in bytes (directories report 0 in a 9P2000 stat).
    pub size: u64,
    /// Preferred I/O size.
    pub blksize: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    /// Last access.
    pub atime: Time,
    /// Last change of the contents.
    pub mtime: Time,
    /// Last change of the attributes.
    pub ctime: Time,
}

impl Attr {
    /// True if `mode` says the file is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & unix::S_IFMT == unix::S_IFDIR
    }
}

/// A time to set: the server's clock, or a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// The server's clock at the time of the change.
    Now,
    /// This time.
    At(Time),
}

/// Attribute changes, all-or-nothing; `None` leaves a field alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetAttr {
    /// Permission bits (07777) only; the file type never changes.
    pub mode: Option<u32>,
    /// An owner by numeric id.
    pub uid: Option<u32>,
    /// A group by numeric id.
    pub gid: Option<u32>,
    /// A group by name, as 9P2000 wstat names it.
    pub gid_name: Option<String>,
    /// A new length: the file is truncated or extended with zeros.
    pub size: Option<u64>,
    /// A new access time.
    pub atime: Option<SetTime>,
    /// A new modification time.
    pub mtime: Option<SetTime>,
    /// Bump ctime even if nothing else changes.
    pub ctime: bool,
}

impl SetAttr {
    /// True if nothing is to change.
    pub fn is_empty(&self) -> bool {
        *self == SetAttr::default()
    }
}

/// A file just opened or created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// The file's qid as opened (its version may have moved on).
    pub qid: Qid,
    /// Largest I/O the server handles atomically; 0 means msize - IOHDRSZ.
    pub iounit: u32,
}

/// One entry of a directory listing (never `.` or `..`: the framework adds
/// those where a dialect wants them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name in the directory.
    pub name: Name,
    /// Its attributes, as [`Filesystem::getattr`] would answer.
    pub attr: Attr,
}

/// Open flags in 9P2000.L's numbering; 9P2000 open modes are mapped to them.
pub fn access_mode(flags: u32) -> u32 {
    flags & dotl::O_ACCMODE
}

/// True if `flags` allow reading.
pub fn can_read(flags: u32) -> bool {
    matches!(access_mode(flags), dotl::O_RDONLY | dotl::O_RDWR)
}

/// True if `flags` allow writing.
pub fn can_write(flags: u32) -> bool {
    matches!(access_mode(flags), dotl::O_WRONLY | dotl::O_RDWR)
}

/// A 9P file server. `File` is what a fid refers to; the framework keeps one
/// per fid and hands it back on every request naming that fid.
///
/// Every method has a default that refuses (or, for the few where a neutral
/// answer exists, gives it), so a server implements only what it means.
/// Methods may run concurrently for different fids; a method's future is
/// dropped if its request is flushed, so hold no state across awaits that a
/// drop would corrupt.
pub trait Filesystem: Send + Sync + 'static {
    /// What a fid refers to: a file or directory, open or not.
    type File: Clone + Send + Sync + 'static;

    /// The root of the tree `user.aname`, as `user`.
    fn attach(&self, user: &User) -> impl Future<Output = Result<(Self::File, Qid)>> + Send;

    /// One step of a walk: `name` in directory `dir` (`..` is the parent;
    /// at the root it is the root).
    fn walk(
        &self,
        cx: &Cx,
        dir: &Self::File,
        name: &Name,
    ) -> impl Future<Output = Result<(Self::File, Qid)>> + Send;

    /// All the steps of one Twalk at once, for servers that do better than
    /// a step at a time (a proxy sends them on in one message). Returns the
    /// qid of each step that succeeded and, if every one did, the file
    /// reached; fails only if the first step fails. With no names it makes
    /// the file a new fid starts on. The default calls
    /// [`Filesystem::walk`] for each name.
    fn walk_names(
        &self,
        cx: &Cx,
        dir: &Self::File,
        names: &[Name],
    ) -> impl Future<Output = Result<(Vec<Qid>, Option<Self::File>)>> + Send {
        async move {
            let mut file = dir.clone();
            let mut wqid = Vec::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                match self.walk(cx, &file, name).await {
                    Ok((next, qid)) => {
                        file = next;
                        wqid.push(qid);
                    }
                    Err(e) if i == 0 => return Err(e),
                    Err(_) => return Ok((wqid, None)),
                }
            }
            Ok((wqid, Some(file)))
        }
    }

    /// The attributes of `file` (Tstat, Tgetattr).
    fn getattr(&self, cx: &Cx, file: &Self::File) -> impl Future<Output = Result<Attr>> + Send;

    /// Changes attributes of `file` (Twstat, Tsetattr), all or none.
    fn setattr(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _set: &SetAttr,
    ) -> impl Future<Output = Result<()>> + Send {
        async { Err(Error::prohibited("wstat")) }
    }

    /// Prepares `file` for I/O with Linux open `flags`. The default allows it.
    fn open(
        &self,
        cx: &Cx,
        file: &mut Self::File,
        _flags: u32,
    ) -> impl Future<Output = Result<Opened>> + Send {
        async move {
            let attr = self.getattr(cx, file).await?;
            Ok(Opened {
                qid: attr.qid,
                iounit: 0,
            })
        }
    }

    /// Creates and opens regular file `name` in `dir` with permissions `mode`.
    fn create(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _name: &Name,
        _mode: u32,
        _flags: u32,
        _gid: u32,
    ) -> impl Future<Output = Result<(Self::File, Opened)>> + Send {
        async { Err(Error::prohibited("create")) }
    }

    /// Makes directory `name` in `dir` with permissions `mode`, of group
    /// `gid` (the server's choice for `NONUNAME`, as 9P2000 sends).
    fn mkdir(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _name: &Name,
        _mode: u32,
        _gid: u32,
    ) -> impl Future<Output = Result<Qid>> + Send {
        async { Err(Error::prohibited("create")) }
    }

    /// Makes symbolic link `name` in `dir` pointing at `target`.
    fn symlink(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _name: &Name,
        _target: &str,
        _gid: u32,
    ) -> impl Future<Output = Result<Qid>> + Send {
        async { Err(Error::prohibited("create")) }
    }

    /// Creates a device, fifo or socket; `mode` includes the file type.
    #[allow(clippy::too_many_arguments)] // the fields of Tmknod
    fn mknod(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _name: &Name,
        _mode: u32,
        _major: u32,
        _minor: u32,
        _gid: u32,
    ) -> impl Future<Output = Result<Qid>> + Send {
        async { Err(Error::prohibited("create")) }
    }

    /// Makes `name` in `dir` a hard link to `file`.
    fn link(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _file: &Self::File,
        _name: &Name,
    ) -> impl Future<Output = Result<()>> + Send {
        async { Err(Error::prohibited("create")) }
    }

    /// Undoes the making of `name` in `dir`, just made as the file of qid
    /// `made` by a request that then failed (a 9P2000.u Tcreate of a
    /// directory, link or node, whose walk to what it made found the server
    /// out of descriptors): removes `name` if it still names that file, so
    /// that asking again may succeed. The default leaves it, for file
    /// systems whose walk to a file just made cannot fail.
    fn unmake(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
        _name: &Name,
        _made: Qid,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The target of symbolic link `file`.
    fn readlink(
        &self,
        _cx: &Cx,
        _file: &Self::File,
    ) -> impl Future<Output = Result<String>> + Send {
        async { Err(Error::from_errno(ninep_wire::Errno::EINVAL)) }
    }

    /// Up to `count` bytes of `file` from `offset`; none means the end of
    /// the file. Called only on a fid open for reading.
    fn read(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _offset: u64,
        _count: u32,
    ) -> impl Future<Output = Result<Bytes>> + Send {
        async { Err(Error::prohibited("read")) }
    }

    /// The open host file whose bytes [`Filesystem::read`] of `file`
    /// returns, unchanged and at the same offsets (a regular file an export
    /// serves). Large reads of it may then be answered by splicing its
    /// pages into the connection, uncopied, where the connection is a plain
    /// socket; `read` answers the rest. None (the default): every read
    /// goes through `read`.
    fn host_file(&self, _file: &Self::File) -> Option<Arc<OwnedFd>> {
        None
    }

    /// A read of `file` whose bytes wait in the kernel, in no host file:
    /// up to `count` of them moved into a pipe (see
    /// [`PipedFile::from_socket`]) that holds what `leave` gives once they
    /// are there, to be spliced into the connection uncopied, as
    /// [`Filesystem::read`] would have answered them. None (the default,
    /// and when `leave` gives nothing): `read` answers, as it does for
    /// reads too small to be worth a pipe.
    fn read_piped(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _count: usize,
        _leave: &PipeLeave,
    ) -> impl Future<Output = Option<PipedFile>> + Send {
        async { None }
    }

    /// Writes `data` at `offset` (append-only files: at the end) and says
    /// how much was written.
    fn write(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _offset: u64,
        _data: Bytes,
    ) -> impl Future<Output = Result<u32>> + Send {
        async { Err(Error::prohibited("write")) }
    }

    /// The entries of directory `dir`, in a stable order. The framework reads
    /// the whole listing when a client starts reading at offset 0 and serves
    /// resumed reads from that snapshot, so offsets never skip or repeat.
    fn read_dir(
        &self,
        _cx: &Cx,
        _dir: &Self::File,
    ) -> impl Future<Output = Result<Vec<DirEntry>>> + Send {
        async { Err(Error::not_dir()) }
    }

    /// Removes `file` (Tremove, ORCLOSE). The framework clunks it after,
    /// whether or not the remove succeeded.
    fn remove(&self, _cx: &Cx, _file: &Self::File) -> impl Future<Output = Result<()>> + Send {
        async { Err(Error::prohibited("remove")) }
    }

    /// Moves `file` to `name` in `newdir` (its own directory if `None`).
    fn rename(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _newdir: Option<&Self::File>,
        _name: &Name,
    ) -> impl Future<Output = Result<()>> + Send {
        async { Err(Error::prohibited("wstat")) }
    }

    /// Removes `name` from `dir`. The default walks to it and removes it.
    fn unlinkat(
        &self,
        cx: &Cx,
        dir: &Self::File,
        name: &Name,
        flags: u32,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let (file, _) = self.walk(cx, dir, name).await?;
            let attr = self.getattr(cx, &file).await?;
            let want_dir = flags & dotl::AT_REMOVEDIR != 0;
            let result = match (want_dir, attr.is_dir()) {
                (true, false) => Err(Error::not_dir()),
                (false, true) => Err(Error::is_dir()),
                _ => self.remove(cx, &file).await,
            };
            let _ = self.clunk(cx, file).await;
            result
        }
    }

    /// Moves `oldname` in `olddir` to `newname` in `newdir`. The default walks
    /// to it and renames it.
    fn renameat(
        &self,
        cx: &Cx,
        olddir: &Self::File,
        oldname: &Name,
        newdir: &Self::File,
        newname: &Name,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let (file, _) = self.walk(cx, olddir, oldname).await?;
            let result = self.rename(cx, &file, Some(newdir), newname).await;
            let _ = self.clunk(cx, file).await;
            result
        }
    }

    /// The default knows nothing of space: [`Rstatfs::uncounted`].
    fn statfs(&self, _cx: &Cx, _file: &Self::File) -> impl Future<Output = Result<Rstatfs>> + Send {
        async { Ok(Rstatfs::uncounted()) }
    }

    /// Commits `file` to stable storage. The default has nothing to commit.
    fn fsync(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _datasync: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }

    /// A POSIX record lock; answers an Rlock status.
    fn lock(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _lock: &Tlock,
    ) -> impl Future<Output = Result<u8>> + Send {
        async { Err(Error::not_supported()) }
    }

    /// Whether a POSIX record lock could be had: the lock that stands in its
    /// way, or `lock` itself with type unlocked.
    fn getlock(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _lock: &Tgetlock,
    ) -> impl Future<Output = Result<Rgetlock>> + Send {
        async { Err(Error::not_supported()) }
    }

    /// The value of extended attribute `name`, or with `name` empty the
    /// NUL-separated list of names.
    fn xattr_get(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        name: &str,
    ) -> impl Future<Output = Result<Bytes>> + Send {
        let empty_list = name.is_empty();
        async move {
            if empty_list {
                Ok(Bytes::new())
            } else {
                Err(Error::from_errno(ninep_wire::Errno::ENODATA))
            }
        }
    }

    /// Sets extended attribute `name` (flags as setxattr(2)), or removes
    /// it where [`removes_xattr`] says the request is a removal.
    fn xattr_set(
        &self,
        _cx: &Cx,
        _file: &Self::File,
        _name: &str,
        _value: Bytes,
        _flags: u32,
    ) -> impl Future<Output = Result<()>> + Send {
        async { Err(Error::not_supported()) }
    }

    /// The fid is gone. The default drops the file.
    fn clunk(&self, _cx: &Cx, _file: Self::File) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }
}

/// Leave to hold a pipe for a read spliced into the connection, within
/// the session's and the server's share of pipes (`Limits::spliced_reads`).
/// Taken only once there is something to move, so that a read waiting for
/// bytes to come holds no pipe meanwhile.
#[derive(Debug)]
pub struct PipeLeave {
    session: Arc<Semaphore>,
    server: Arc<Semaphore>,
}

impl PipeLeave {
    pub(crate) fn new(session: Arc<Semaphore>, server: Arc<Semaphore>) -> PipeLeave {
        PipeLeave { session, server }
    }

    /// One pipe's share, if there is one: to be kept with the pipe
    /// ([`PipedFile::holding`]) until its bytes are sent.
    pub fn take(&self) -> Option<PipeShare> {
        let ours = self.session.clone().try_acquire_owned().ok()?;
        self.with_server_share(ours)
    }

    /// The same for a read that may wait its turn (a stream's next piece):
    /// waits for the session's share, held by its own replies until its
    /// peer takes them, so a stream that outruns its socket waits instead
    /// of copying. The server's share is still taken only if free: another
    /// peer's slow reading must not stop this one.
    pub(crate) async fn take_in_turn(&self) -> Option<PipeShare> {
        let ours = self.session.clone().acquire_owned().await.ok()?;
        self.with_server_share(ours)
    }

    /// The session's share `ours` with the server's, if that is free.
    fn with_server_share(&self, ours: OwnedSemaphorePermit) -> Option<PipeShare> {
        let server = self.server.clone().try_acquire_owned().ok()?;
        Some(PipeShare {
            _session: ours,
            _server: server,
        })
    }
}

/// One pipe's share of the session's and the server's: given back when
/// dropped.
#[derive(Debug)]
pub struct PipeShare {
    _session: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

/// Whether a Txattrcreate of `value` with `flags` removes the attribute:
/// an empty value not asked to be created, as Linux's client removes one
/// (an empty value with XATTR_REPLACE), and as QEMU and diod take it.
pub fn removes_xattr(value: &[u8], flags: u32) -> bool {
    value.is_empty() && flags & dotl::XATTR_CREATE == 0
}
