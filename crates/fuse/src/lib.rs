//! fuse: any 9P2000.L tree mounted on Linux through FUSE.
//!
//! Each FUSE inode holds a walked (never opened) fid of its file; each open
//! file or directory holds a fid of its own, opened. Every kernel request is
//! answered from a task on the tokio runtime, so requests run concurrently
//! over the one 9P connection. Directory offsets handed to the kernel are the
//! server's Treaddir cookies, so however the kernel resumes a listing no
//! entry is lost or repeated.
//!
//! Caching follows the v9fs paper's argument, in three policies ([`Cache`]).
//! Files whose qid.version is 0 are synthetic and are never cached: they are
//! always read and written directly.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use fuser::{
    FileAttr, FileType, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use ninep_client::{Client, Error, Fid, File, Fsys};
use ninep_wire::consts::{dotl, unix};
use ninep_wire::*;

/// What the kernel may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cache {
    /// Nothing: every read, write, attribute and lookup goes to the server.
    #[default]
    None,
    /// File contents stay in the page cache while the file's qid.version is
    /// unchanged, checked at each open; attributes and entries are always
    /// asked for.
    Strict,
    /// As strict, and attributes and entries are trusted for a second.
    Loose,
}

impl Cache {
    /// How long the kernel may trust attributes and entries.
    fn ttl(self) -> Duration {
        match self {
            Cache::Loose => Duration::from_secs(1),
            Cache::None | Cache::Strict => Duration::ZERO,
        }
    }
}

/// Mounts `fsys` at `mountpoint`. The mount lasts as long as the returned
/// session; dropping it unmounts.
pub fn mount(
    fsys: Fsys,
    mountpoint: &Path,
    source: &str,
    cache: Cache,
) -> std::io::Result<fuser::BackgroundSession> {
    if fsys.client().dialect() != Dialect::L {
        return Err(std::io::Error::other(
            "ninep mount needs a 9P2000.L server for now",
        ));
    }
    let runtime = tokio::runtime::Handle::current();
    let fs = NinepFs {
        inner: Arc::new(Inner {
            client: fsys.client().clone(),
            nodes: Mutex::new(Nodes::new(fsys)),
            handles: Mutex::new(HashMap::new()),
            next_handle: Mutex::new(1),
            cache,
            ttl: cache.ttl(),
        }),
        runtime,
    };
    let options = [
        MountOption::FSName(source.to_owned()),
        MountOption::Subtype("ninep".into()),
        MountOption::DefaultPermissions,
    ];
    fuser::spawn_mount2(fs, mountpoint, &options)
}

/// The FUSE filesystem: a handle on the runtime and the shared state.
struct NinepFs {
    inner: Arc<Inner>,
    runtime: tokio::runtime::Handle,
}

struct Inner {
    client: Client,
    nodes: Mutex<Nodes>,
    handles: Mutex<HashMap<u64, Arc<File>>>,
    next_handle: Mutex<u64>,
    cache: Cache,
    ttl: Duration,
}

/// Inode numbers and the walked fids behind them.
struct Nodes {
    /// ino -> (fid, lookup count)
    by_ino: HashMap<u64, (Arc<Fid>, u64)>,
    /// qid.path -> ino, kept for good so a file keeps its number
    ino_of: HashMap<u64, u64>,
    /// ino -> the qid.version its cached pages belong to
    cached_version: HashMap<u64, u32>,
    next_ino: u64,
}

impl Nodes {
    fn new(fsys: Fsys) -> Nodes {
        let root = fsys.into_root();
        let mut nodes = Nodes {
            by_ino: HashMap::new(),
            ino_of: HashMap::new(),
            cached_version: HashMap::new(),
            next_ino: fuser::FUSE_ROOT_ID + 1,
        };
        nodes.ino_of.insert(root.qid().path, fuser::FUSE_ROOT_ID);
        nodes
            .by_ino
            .insert(fuser::FUSE_ROOT_ID, (Arc::new(root), 1));
        nodes
    }

    fn ino(&mut self, qid: Qid) -> u64 {
        let next = &mut self.next_ino;
        *self.ino_of.entry(qid.path).or_insert_with(|| {
            *next += 1;
            *next - 1
        })
    }
}

fn errno(e: &Error) -> i32 {
    e.errno().0 as i32
}

fn time(sec: u64, nsec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::new(sec, nsec.min(999_999_999) as u32)
}

fn kind(mode: u32) -> FileType {
    match mode & unix::S_IFMT {
        unix::S_IFDIR => FileType::Directory,
        unix::S_IFLNK => FileType::Symlink,
        unix::S_IFCHR => FileType::CharDevice,
        unix::S_IFBLK => FileType::BlockDevice,
        unix::S_IFIFO => FileType::NamedPipe,
        unix::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn dirent_kind(ty: u8) -> FileType {
    match ty {
        dotl::DT_DIR => FileType::Directory,
        dotl::DT_LNK => FileType::Symlink,
        dotl::DT_CHR => FileType::CharDevice,
        dotl::DT_BLK => FileType::BlockDevice,
        dotl::DT_FIFO => FileType::NamedPipe,
        dotl::DT_SOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn file_attr(ino: u64, r: &Rgetattr) -> FileAttr {
    FileAttr {
        ino,
        size: r.size,
        blocks: r.blocks,
        atime: time(r.atime_sec, r.atime_nsec),
        mtime: time(r.mtime_sec, r.mtime_nsec),
        ctime: time(r.ctime_sec, r.ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: kind(r.mode),
        perm: (r.mode & 0o7777) as u16,
        nlink: r.nlink as u32,
        uid: r.uid,
        gid: r.gid,
        rdev: r.rdev as u32,
        blksize: r.blksize as u32,
        flags: 0,
    }
}

fn name_of(name: &OsStr) -> Result<Name, i32> {
    let s = name.to_str().ok_or(Errno::EINVAL.0 as i32)?;
    Name::new(s).map_err(|_| Errno::EINVAL.0 as i32)
}

impl Inner {
    fn fid(&self, ino: u64) -> Result<Arc<Fid>, i32> {
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes
            .by_ino
            .get(&ino)
            .map(|(f, _)| f.clone())
            .ok_or(Errno::ENOENT.0 as i32)
    }

    fn handle(&self, fh: u64) -> Result<Arc<File>, i32> {
        let handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        handles.get(&fh).cloned().ok_or(Errno::EBADF.0 as i32)
    }

    fn add_handle(&self, file: File) -> u64 {
        let mut next = self.next_handle.lock().unwrap_or_else(|e| e.into_inner());
        let fh = *next;
        *next += 1;
        self.handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fh, Arc::new(file));
        fh
    }

    async fn getattr(&self, fid: &Fid) -> Result<Rgetattr, Error> {
        let msg = Tgetattr {
            fid: fid.number(),
            request_mask: dotl::GETATTR_BASIC,
        };
        match self.client.rpc(msg).await? {
            Msg::Rgetattr(r) => Ok(r),
            _ => unreachable!("rpc checks the reply type"),
        }
    }

    /// Walks `name` in `parent` and makes (or finds) its inode; one more
    /// lookup of it is counted.
    async fn lookup(&self, parent: u64, name: &Name) -> Result<FileAttr, i32> {
        let dir = self.fid(parent)?;
        let fid = dir
            .walk(std::slice::from_ref(name))
            .await
            .map_err(|e| errno(&e))?;
        let r = self.getattr(&fid).await.map_err(|e| errno(&e))?;
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let ino = nodes.ino(r.qid);
        // The fid just walked replaces any older one: on servers whose fids
        // name paths (diod), a fid from before a rename names nothing now.
        let count = nodes.by_ino.get(&ino).map_or(0, |(_, n)| *n);
        nodes.by_ino.insert(ino, (Arc::new(fid), count + 1));
        Ok(file_attr(ino, &r))
    }

    /// After a rename, gives the moved inode a fid walked by its new name
    /// (its old fid names the old path on servers like diod). The lookup
    /// count does not change.
    async fn refresh(&self, parent: u64, name: &Name) {
        let Ok(dir) = self.fid(parent) else { return };
        let Ok(fid) = dir.walk(std::slice::from_ref(name)).await else {
            return;
        };
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ino) = nodes.ino_of.get(&fid.qid().path).copied()
            && let Some(entry) = nodes.by_ino.get_mut(&ino)
        {
            entry.0 = Arc::new(fid);
        }
    }

    async fn attr_of(&self, ino: u64) -> Result<FileAttr, i32> {
        let fid = self.fid(ino)?;
        let r = self.getattr(&fid).await.map_err(|e| errno(&e))?;
        Ok(file_attr(ino, &r))
    }

    /// FOPEN flags for a file just opened: direct I/O without a cache or for
    /// synthetic files (qid.version 0); else keep the cached pages if the
    /// file has not changed since they were read.
    fn open_flags(&self, ino: u64, qid: Qid) -> u32 {
        if self.cache == Cache::None || qid.version == 0 || qid.ty.is_dir() {
            return fuser::consts::FOPEN_DIRECT_IO;
        }
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let before = nodes.cached_version.insert(ino, qid.version);
        if before == Some(qid.version) {
            fuser::consts::FOPEN_KEEP_CACHE
        } else {
            0
        }
    }

    async fn rpc(&self, msg: impl Into<Msg>) -> Result<Msg, i32> {
        self.client.rpc(msg).await.map_err(|e| errno(&e))
    }
}

impl NinepFs {
    /// Runs `f` on the runtime; it answers the kernel itself.
    fn spawn<F>(&self, f: impl FnOnce(Arc<Inner>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.runtime.spawn(f(self.inner.clone()));
    }
}

impl fuser::Filesystem for NinepFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        self.spawn(|inner| async move {
            match inner.lookup(parent, &name).await {
                Ok(attr) => reply.entry(&inner.ttl, &attr, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        if ino == fuser::FUSE_ROOT_ID {
            return;
        }
        let mut nodes = self.inner.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = nodes.by_ino.get_mut(&ino) {
            entry.1 = entry.1.saturating_sub(nlookup);
            if entry.1 == 0 {
                // Dropping the last reference clunks the fid.
                nodes.by_ino.remove(&ino);
            }
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        self.spawn(|inner| async move {
            // An open file's own fid first (fstat), then the inode's.
            let by_handle = match fh.map(|fh| inner.handle(fh)) {
                Some(Ok(file)) => inner.getattr(file.fid()).await.ok(),
                _ => None,
            };
            let attr = match by_handle {
                Some(r) => Ok(file_attr(ino, &r)),
                None => inner.attr_of(ino).await,
            };
            match attr {
                Ok(attr) => reply.attr(&inner.ttl, &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino)?;
                let mut msg = Tsetattr {
                    fid: fid.number(),
                    valid: 0,
                    mode: mode.unwrap_or(0),
                    uid: uid.unwrap_or(0),
                    gid: gid.unwrap_or(0),
                    size: size.unwrap_or(0),
                    atime_sec: 0,
                    atime_nsec: 0,
                    mtime_sec: 0,
                    mtime_nsec: 0,
                };
                for (present, bit) in [
                    (mode.is_some(), dotl::SETATTR_MODE),
                    (uid.is_some(), dotl::SETATTR_UID),
                    (gid.is_some(), dotl::SETATTR_GID),
                    (size.is_some(), dotl::SETATTR_SIZE),
                ] {
                    if present {
                        msg.valid |= bit;
                    }
                }
                let mut set_time = |t: Option<TimeOrNow>, plain: u32, given: u32| -> (u64, u64) {
                    match t {
                        None => (0, 0),
                        Some(TimeOrNow::Now) => {
                            msg.valid |= plain;
                            (0, 0)
                        }
                        Some(TimeOrNow::SpecificTime(at)) => {
                            msg.valid |= plain | given;
                            let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
                            (d.as_secs(), d.subsec_nanos() as u64)
                        }
                    }
                };
                let (asec, ansec) = set_time(atime, dotl::SETATTR_ATIME, dotl::SETATTR_ATIME_SET);
                let (msec, mnsec) = set_time(mtime, dotl::SETATTR_MTIME, dotl::SETATTR_MTIME_SET);
                (msg.atime_sec, msg.atime_nsec, msg.mtime_sec, msg.mtime_nsec) =
                    (asec, ansec, msec, mnsec);
                if msg.valid != 0 {
                    msg.valid |= dotl::SETATTR_CTIME;
                    inner.rpc(msg).await?;
                }
                inner.attr_of(ino).await
            }
            .await;
            match result {
                Ok(attr) => reply.attr(&inner.ttl, &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino)?;
                match inner.rpc(Treadlink { fid: fid.number() }).await? {
                    Msg::Rreadlink(r) => Ok(r.target),
                    _ => Err(Errno::EIO.0 as i32),
                }
            }
            .await;
            match result {
                Ok(target) => reply.data(target.as_bytes()),
                Err(e) => reply.error(e),
            }
        });
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let gid = req.gid();
        let (major, minor) = (
            (rdev >> 8) & 0xfff,
            (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
        );
        self.make(parent, name, reply, move |_, dfid, name| {
            Ok(Tmknod {
                dfid,
                name,
                mode: mode & !umask,
                major,
                minor,
                gid,
            }
            .into())
        });
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let gid = req.gid();
        self.make(parent, name, reply, move |_, dfid, name| {
            Ok(Tmkdir {
                dfid,
                name,
                mode: mode & !umask & 0o7777,
                gid,
            }
            .into())
        });
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, 0, reply);
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, dotl::AT_REMOVEDIR, reply);
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let gid = req.gid();
        let Some(target) = target.to_str().map(str::to_owned) else {
            return reply.error(Errno::EINVAL.0 as i32);
        };
        self.make(parent, link_name, reply, move |_, fid, name| {
            Ok(Tsymlink {
                fid,
                name,
                symtgt: target,
                gid,
            }
            .into())
        });
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            // RENAME_NOREPLACE and friends have no 9P counterpart.
            return reply.error(Errno::EINVAL.0 as i32);
        }
        let (oldname, newname) = match (name_of(name), name_of(newname)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return reply.error(Errno::EINVAL.0 as i32),
        };
        let newname_again = newname.clone();
        self.spawn(|inner| async move {
            let result = async {
                let (from, to) = (inner.fid(parent)?, inner.fid(newparent)?);
                let msg = Trenameat {
                    olddirfid: from.number(),
                    oldname: oldname.clone(),
                    newdirfid: to.number(),
                    newname: newname.clone(),
                };
                match inner.client.rpc(msg).await {
                    // Servers that know only Trename (diod), as Linux does.
                    Err(e) if e.errno() == Errno::EOPNOTSUPP => {
                        let file = from.walk(&[oldname]).await.map_err(|e| errno(&e))?;
                        let msg = Trename {
                            fid: file.number(),
                            dfid: to.number(),
                            name: newname,
                        };
                        inner.rpc(msg).await.map(drop)
                    }
                    other => other.map(drop).map_err(|e| errno(&e)),
                }
            }
            .await;
            if result.is_ok() {
                inner.refresh(newparent, &newname_again).await;
            }
            match result {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.make(newparent, newname, reply, move |inner, dfid, name| {
            let file = inner.fid(ino)?;
            Ok(Tlink {
                dfid,
                fid: file.number(),
                name,
            }
            .into())
        });
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.open_fid(ino, flags as u32, reply);
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.open_fid(ino, dotl::O_RDONLY | dotl::O_DIRECTORY, reply);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.spawn(|inner| async move {
            let result = async {
                let file = inner.handle(fh)?;
                let mut out = Vec::with_capacity(size as usize);
                let mut at = offset.max(0) as u64;
                while out.len() < size as usize {
                    let want = size - out.len() as u32;
                    let data = file.read_at(at, want).await.map_err(|e| errno(&e))?;
                    if data.is_empty() {
                        break;
                    }
                    at += data.len() as u64;
                    out.extend_from_slice(&data);
                }
                Ok::<_, i32>(out)
            }
            .await;
            match result {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(e),
            }
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let data = Bytes::copy_from_slice(data);
        self.spawn(|inner| async move {
            let result = async {
                let file = inner.handle(fh)?;
                let len = data.len() as u32;
                file.write_all_at(offset.max(0) as u64, data)
                    .await
                    .map_err(|e| errno(&e))?;
                Ok::<_, i32>(len)
            }
            .await;
            match result {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(e),
            }
        });
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.inner
            .handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fh);
        reply.ok();
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.inner
            .handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.spawn(|inner| async move {
            let result = async {
                let file = inner.handle(fh)?;
                let msg = Tfsync {
                    fid: file.fid().number(),
                    datasync: Some(datasync as u32),
                };
                inner.rpc(msg).await.map(drop)
            }
            .await;
            match result {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        self.spawn(|inner| async move {
            let result = async {
                let file = inner.handle(fh)?;
                let msg = Treaddir {
                    fid: file.fid().number(),
                    offset: offset.max(0) as u64,
                    count: file.iounit(),
                };
                match inner.rpc(msg).await? {
                    Msg::Rreaddir(r) => Ok(r.data),
                    _ => Err(Errno::EIO.0 as i32),
                }
            }
            .await;
            let data = match result {
                Ok(data) => data,
                Err(e) => return reply.error(e),
            };
            for entry in Dirent::entries(&data) {
                let Ok(d) = entry else { break };
                let ino = inner
                    .nodes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .ino(d.qid);
                // The offset of an entry is the cookie that resumes after it.
                if reply.add(ino, d.offset as i64, dirent_kind(d.ty), d.name.as_str()) {
                    break;
                }
            }
            reply.ok();
        });
    }

    fn statfs(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyStatfs) {
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino)?;
                match inner.rpc(Tstatfs { fid: fid.number() }).await? {
                    Msg::Rstatfs(s) => Ok(s),
                    _ => Err(Errno::EIO.0 as i32),
                }
            }
            .await;
            match result {
                Ok(s) => reply.statfs(
                    s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
                ),
                Err(e) => reply.error(e),
            }
        });
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let gid = req.gid();
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent)?;
                let at = dir.clone_fid().await.map_err(|e| errno(&e))?;
                let flags = flags as u32 & !(dotl::O_CREAT | dotl::O_EXCL | dotl::O_NOCTTY);
                let file = at
                    .create_with_gid(name.as_str(), mode & !umask & 0o7777, flags, gid)
                    .await
                    .map_err(|e| errno(&e))?;
                let attr = inner.lookup(parent, &name).await?;
                let open_flags = inner.open_flags(attr.ino, file.qid());
                let fh = inner.add_handle(file);
                Ok::<_, i32>((attr, fh, open_flags))
            }
            .await;
            match result {
                Ok((attr, fh, flags)) => reply.created(&inner.ttl, &attr, 0, fh, flags),
                Err(e) => reply.error(e),
            }
        });
    }
}

impl NinepFs {
    /// Makes `name` in directory `parent` with the request `msg` builds
    /// (from the directory's fid and the name), then looks it up: mkdir,
    /// mknod, symlink and link all answer with the new entry.
    fn make<M>(&mut self, parent: u64, name: &OsStr, reply: ReplyEntry, msg: M)
    where
        M: FnOnce(&Inner, ninep_wire::Fid, Name) -> Result<Msg, i32> + Send + 'static,
    {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent)?;
                let request = msg(&inner, dir.number(), name.clone())?;
                inner.rpc(request).await?;
                inner.lookup(parent, &name).await
            }
            .await;
            match result {
                Ok(attr) => reply.entry(&inner.ttl, &attr, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    fn remove(&mut self, parent: u64, name: &OsStr, flags: u32, reply: ReplyEmpty) {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent)?;
                let msg = Tunlinkat {
                    dirfid: dir.number(),
                    name: name.clone(),
                    flags,
                };
                match inner.client.rpc(msg).await {
                    // Servers without Tunlinkat (diod): walk to it and
                    // Tremove, as Linux does.
                    Err(e) if e.errno() == Errno::EOPNOTSUPP => {
                        let file = dir.walk(&[name]).await.map_err(|e| errno(&e))?;
                        file.remove().await.map_err(|e| errno(&e))
                    }
                    other => other.map(drop).map_err(|e| errno(&e)),
                }
            }
            .await;
            match result {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn open_fid(&mut self, ino: u64, flags: u32, reply: ReplyOpen) {
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino)?;
                let fresh = fid.clone_fid().await.map_err(|e| errno(&e))?;
                let flags = flags & !(dotl::O_CREAT | dotl::O_EXCL | dotl::O_NOCTTY);
                let file = fresh.open(flags).await.map_err(|e| errno(&e))?;
                let open_flags = inner.open_flags(ino, file.qid());
                Ok::<_, i32>((inner.add_handle(file), open_flags))
            }
            .await;
            match result {
                Ok((fh, open_flags)) => reply.opened(fh, open_flags),
                Err(e) => reply.error(e),
            }
        });
    }
}
