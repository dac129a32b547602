//! The kernel's requests, each answered from a task on the runtime.

use std::ffi::OsStr;
use std::os::raw::c_int;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fuser::{
    FileAttr, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use ninep_client::{Fid, SetAttr};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Errno, Name, NameError, Qid};

use crate::remote::{Lock, Make, set_time};
use crate::{Errno32, Inner, errno, fail};

/// The attribute holding a file's capabilities.
const CAPABILITY: &str = "security.capability";

/// The largest read or write the kernel is asked to send.
const MAX_IO: u32 = 1 << 20;

/// The FUSE filesystem: a handle on the runtime and the shared state.
pub(crate) struct NinepFs {
    pub inner: Arc<Inner>,
    pub runtime: tokio::runtime::Handle,
}

/// A name from the kernel as 9P carries it: UTF-8, at most 255 bytes.
fn name_of(name: &OsStr) -> Result<Name, Errno32> {
    let s = name.to_str().ok_or(fail(Errno::EINVAL))?;
    Name::new(s).map_err(|e| match e {
        NameError::TooLong(_) => fail(Errno::ENAMETOOLONG),
        _ => fail(Errno::EINVAL),
    })
}

/// Open flags that mean nothing to the server once the kernel has acted on them.
fn open_flags(flags: i32) -> u32 {
    flags as u32 & !(dotl::O_CREAT | dotl::O_EXCL | dotl::O_NOCTTY)
}

/// Answers the kernel: done, or the errno.
fn answer(reply: ReplyEmpty, result: Result<(), Errno32>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Answers the kernel with a directory entry, or the errno.
fn entry(reply: ReplyEntry, ttl: Duration, result: Result<FileAttr, Errno32>) {
    match result {
        Ok(attr) => reply.entry(&ttl, &attr, 0),
        Err(e) => reply.error(e),
    }
}

impl Inner {
    /// Walks `name` in `parent` and makes (or finds) its inode; one more
    /// lookup of it is counted.
    async fn lookup(&self, parent: u64, name: &Name, user: u32) -> Result<FileAttr, Errno32> {
        let dir = self.fid(parent, user).await?;
        let walk = dir.walk(std::slice::from_ref(name));
        // A name looked up again usually names the same file still: its
        // attributes are asked for on the fid kept while the walk goes,
        // and serve if the reply's qid is the one the walk reached.
        let kept = self.nodes().fid_at(parent, name, user);
        let (walked, early) = match kept {
            Some(kept) => {
                let (walked, attr) = tokio::join!(walk, self.remote.attr(&kept));
                (walked, attr.ok())
            }
            None => (walk.await, None),
        };
        let fid = walked.map_err(|e| errno(&e))?;
        let found = match early {
            Some((qid, attr)) if qid.path == fid.qid().path => (qid, attr),
            _ => self.remote.attr(&fid).await?,
        };
        Ok(self.found(parent, name, user, Some(fid), found))
    }

    /// Records `name` in `parent`, found by `user` (who walked `fid`, if
    /// given), with its qid and attributes; the attributes with the inode
    /// number.
    fn found(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
        fid: Option<Fid>,
        (qid, mut attr): (Qid, FileAttr),
    ) -> FileAttr {
        let mut nodes = self.nodes();
        attr.ino = nodes.ino(qid);
        nodes.found(attr.ino, parent, name.clone(), user, fid);
        nodes.sized(attr.ino, attr.size);
        attr
    }

    async fn attr_of(&self, ino: u64, fh: Option<u64>, user: u32) -> Result<FileAttr, Errno32> {
        // An open file's own fid first (fstat); without one, the fid of
        // another open file on the inode rather than a walk to a fid of its
        // own (new files keep none). Then the inode's: on servers whose fids
        // name paths (diod), an open fid stops working when its file is
        // renamed.
        let handle = match fh {
            Some(fh) => self.handle(fh).ok(),
            None if self.nodes().fid(ino, user).is_none() => self.handle_on(ino, user),
            None => None,
        };
        let by_handle = match handle {
            Some(h) => self.remote.attr(h.file.fid()).await.ok(),
            None => None,
        };
        let (_, mut attr) = match by_handle {
            Some(found) => found,
            None => self.remote.attr(&*self.fid(ino, user).await?).await?,
        };
        attr.ino = ino;
        self.nodes().sized(ino, attr.size);
        Ok(attr)
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

    /// The key of the fids that serve `req`.
    fn user(&self, req: &Request<'_>) -> u32 {
        self.inner.user(req.uid())
    }

    /// Makes `name` in directory `parent`, then looks it up: mkdir, mknod,
    /// symlink and link all answer with the new entry.
    fn make(&self, req: &Request<'_>, parent: u64, name: &OsStr, what: Make, reply: ReplyEntry) {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent, user).await?;
                inner.remote.make(&dir, &name, what).await?;
                inner.lookup(parent, &name, user).await
            }
            .await;
            entry(reply, inner.ttl, result);
        });
    }

    fn remove(&self, req: &Request<'_>, parent: u64, name: &OsStr, rmdir: bool, reply: ReplyEmpty) {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent, user).await?;
                dir.unlink_at(name.as_str(), rmdir)
                    .await
                    .map_err(|e| errno(&e))?;
                inner.nodes().unlinked(parent, &name);
                Ok(())
            }
            .await;
            answer(reply, result);
        });
    }

    fn open_fid(&self, req: &Request<'_>, ino: u64, flags: u32, reply: ReplyOpen) {
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fresh = inner.fresh_fid(ino, user).await?;
                let file = fresh.open(flags).await.map_err(|e| errno(&e))?;
                let open_flags = inner.open_flags(ino, file.qid());
                Ok::<_, Errno32>((inner.add_handle(file, ino, user, open_flags), open_flags))
            }
            .await;
            match result {
                Ok((fh, open_flags)) => reply.opened(fh, open_flags),
                Err(e) => reply.error(e),
            }
        });
    }

    /// Takes, changes or drops `lock` through the open file `fh`.
    fn lock(&self, fh: u64, lock: Lock, wait: bool, reply: ReplyEmpty) {
        self.spawn(|inner| async move {
            let result = async {
                let h = inner.handle(fh)?;
                inner.remote.lock(&h.file, lock, wait).await
            }
            .await;
            answer(reply, result);
        });
    }

    /// Answers an xattr read: the size alone when asked for 0 bytes.
    fn xattr_read(
        &self,
        req: &Request<'_>,
        ino: u64,
        name: Option<&OsStr>,
        size: u32,
        reply: ReplyXattr,
    ) {
        if self.inner.remote.dialect != Dialect::L {
            return reply.error(fail(Errno::EOPNOTSUPP));
        }
        let name = match name.map(|n| n.to_str()) {
            Some(Some(n)) => n.to_owned(),
            Some(None) => return reply.error(fail(Errno::EINVAL)),
            None => String::new(),
        };
        // The kernel asks for this before every write through the page
        // cache, to drop it. A file seen without one keeps that answer until
        // an attribute is set through this mount; a server on Linux drops
        // capabilities on writes itself.
        let caps = name == CAPABILITY;
        if caps && self.inner.known_without_caps(ino) {
            return reply.error(fail(Errno::ENODATA));
        }
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino, user).await?;
                let value = if name.is_empty() {
                    fid.xattr_names().await
                } else {
                    fid.xattr(&name).await
                };
                value.map_err(|e| errno(&e))
            }
            .await;
            match result {
                Ok(value) if size == 0 => reply.size(value.len() as u32),
                Ok(value) if value.len() > size as usize => reply.error(fail(Errno::ERANGE)),
                Ok(value) => reply.data(&value),
                Err(e) => {
                    if caps && e == fail(Errno::ENODATA) {
                        inner.without_caps(ino, true);
                    }
                    reply.error(e)
                }
            }
        });
    }
}

impl fuser::Filesystem for NinepFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), c_int> {
        // Record locks go to the server where it knows them; otherwise the
        // kernel keeps them, for this host only.
        if self.inner.remote.dialect == Dialect::L {
            let _ = config.add_capabilities(fuser::consts::FUSE_POSIX_LOCKS);
        }
        // Lookups and listings in one directory need not wait for each
        // other: each is a walk or read of its own over the connection.
        let _ = config.add_capabilities(fuser::consts::FUSE_PARALLEL_DIROPS);
        // Reads and writes of up to a MiB each (the kernel's largest), so
        // bulk transfers take few round trips; the kernel lowers what it
        // cannot do.
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        Ok(())
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = match name_of(name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            entry(reply, inner.ttl, inner.lookup(parent, &name, user).await);
        });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.inner.nodes().forget(ino, nlookup);
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        let user = self.user(req);
        self.spawn(|inner| async move {
            match inner.attr_of(ino, fh, user).await {
                Ok(attr) => reply.attr(&inner.ttl, &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let user = self.user(req);
        // The kernel's mode carries the file's type, which a 9P2000.u wstat
        // needs to keep a device a device.
        let mut changes = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ..SetAttr::default()
        };
        // Any change is a change of the inode (ctime), as in Linux.
        changes.ctime = changes != SetAttr::default();
        self.spawn(|inner| async move {
            let result = async {
                // ftruncate and fchmod work on open files whose names are
                // gone; the inode's fid serves when the open one names a
                // path that is gone (diod, after a rename).
                let by_handle = match fh.map(|fh| inner.handle(fh)) {
                    Some(Ok(h)) => h.file.fid().setattr(&changes).await.map_err(|e| errno(&e)),
                    _ => Err(fail(Errno::ENOENT)),
                };
                if by_handle == Err(fail(Errno::ENOENT)) {
                    let fid = inner.fid(ino, user).await?;
                    fid.setattr(&changes).await.map_err(|e| errno(&e))?;
                } else {
                    by_handle?;
                }
                inner.attr_of(ino, fh, user).await
            }
            .await;
            match result {
                Ok(attr) => reply.attr(&inner.ttl, &attr),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&mut self, req: &Request<'_>, ino: u64, reply: ReplyData) {
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino, user).await?;
                fid.readlink().await.map_err(|e| errno(&e))
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
        let what = Make::Node {
            mode: mode & !umask,
            rdev,
            gid: req.gid(),
        };
        self.make(req, parent, name, what, reply);
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
        let what = Make::Dir {
            mode: mode & !umask & 0o7777,
            gid: req.gid(),
        };
        self.make(req, parent, name, what, reply);
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, false, reply);
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, true, reply);
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let Some(target) = target.to_str().map(str::to_owned) else {
            return reply.error(fail(Errno::EINVAL));
        };
        let what = Make::Symlink {
            target,
            gid: req.gid(),
        };
        self.make(req, parent, link_name, what, reply);
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            // RENAME_NOREPLACE and friends have no 9P counterpart.
            return reply.error(fail(Errno::EINVAL));
        }
        let (oldname, newname) = match (name_of(name), name_of(newname)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let from = inner.fid(parent, user).await?;
                let to = inner.fid(newparent, user).await?;
                from.rename_at(&oldname, &to, &newname)
                    .await
                    .map_err(|e| errno(&e))?;
                inner.nodes().renamed(parent, &oldname, newparent, &newname);
                Ok(())
            }
            .await;
            answer(reply, result);
        });
    }

    fn link(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let name = match name_of(newname) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let to = inner.fid(ino, user).await?;
                let dir = inner.fid(newparent, user).await?;
                inner.remote.make(&dir, &name, Make::Link { to }).await?;
                inner.lookup(newparent, &name, user).await
            }
            .await;
            entry(reply, inner.ttl, result);
        });
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.open_fid(req, ino, open_flags(flags), reply);
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.open_fid(req, ino, dotl::O_RDONLY | dotl::O_DIRECTORY, reply);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.spawn(|inner| async move {
            let result = async {
                let h = inner.handle(fh)?;
                let file = &h.file;
                let mut at = offset.max(0) as u64;
                let first = file.read_at(at, size).await.map_err(|e| errno(&e))?;
                // Usually one Tread does (msize allows a MiB); the reply is
                // then passed on without a copy. Through the page cache a
                // short read would mean the end of the file, so the rest is
                // asked for, unless the kernel knows the file ends there:
                // it asks for whole pages, past the end of the last one.
                at += first.len() as u64;
                let at_end = inner.nodes().size(ino).is_some_and(|size| at >= size);
                if h.direct || first.is_empty() || first.len() == size as usize || at_end {
                    return Ok(first);
                }
                let mut out = Vec::with_capacity(size as usize);
                out.extend_from_slice(&first);
                while out.len() < size as usize {
                    let want = size - out.len() as u32;
                    let data = file.read_at(at, want).await.map_err(|e| errno(&e))?;
                    if data.is_empty() {
                        break;
                    }
                    at += data.len() as u64;
                    out.extend_from_slice(&data);
                }
                Ok::<_, Errno32>(Bytes::from(out))
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
        ino: u64,
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
                let file = &inner.handle(fh)?.file;
                let len = data.len() as u32;
                let at = offset.max(0) as u64;
                file.write_all_at(at, data).await.map_err(|e| errno(&e))?;
                inner.nodes().written(ino, at + u64::from(len));
                Ok::<_, Errno32>(len)
            }
            .await;
            match result {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(e),
            }
        });
    }

    fn flush(&mut self, _req: &Request<'_>, ino: u64, fh: u64, lock_owner: u64, reply: ReplyEmpty) {
        // A close drops the closing owner's record locks on the file.
        let held = self
            .inner
            .locked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(ino, lock_owner));
        if !held {
            return reply.ok();
        }
        let unlock = Lock {
            ty: dotl::LOCK_TYPE_UNLCK,
            start: 0,
            end: Lock::TO_END,
            owner: lock_owner,
        };
        self.lock(fh, unlock, false, reply);
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
        self.inner.drop_handle(fh);
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
        self.inner.drop_handle(fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.spawn(|inner| async move {
            let result = async {
                let h = inner.handle(fh)?;
                h.file.fsync(datasync).await.map_err(|e| errno(&e))
            }
            .await;
            answer(reply, result);
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        self.spawn(|inner| async move {
            let result = async {
                let h = inner.handle(fh)?;
                inner
                    .remote
                    .list(&h.file, offset.max(0) as u64, &h.listing)
                    .await
            }
            .await;
            let entries = match result {
                Ok(entries) => entries,
                Err(e) => return reply.error(e),
            };
            let mut nodes = inner.nodes();
            for e in entries {
                let number = match e.name.as_str() {
                    "." => ino,
                    ".." => nodes.parent(ino),
                    _ => nodes.ino(e.qid),
                };
                // The offset of an entry is the one that resumes after it.
                if reply.add(number, e.next as i64, e.kind, &e.name) {
                    break;
                }
            }
            drop(nodes);
            reply.ok();
        });
    }

    fn fsyncdir(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&mut self, req: &Request<'_>, ino: u64, reply: ReplyStatfs) {
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino, user).await?;
                inner.remote.statfs(&fid).await
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

    fn setxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if self.inner.remote.dialect != Dialect::L {
            return reply.error(fail(Errno::EOPNOTSUPP));
        }
        let Some(name) = name.to_str().map(str::to_owned) else {
            return reply.error(fail(Errno::EINVAL));
        };
        let value = Bytes::copy_from_slice(value);
        if name == CAPABILITY {
            self.inner.without_caps(ino, false);
        }
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino, user).await?;
                fid.set_xattr(&name, value, flags as u32)
                    .await
                    .map_err(|e| errno(&e))
            }
            .await;
            answer(reply, result);
        });
    }

    fn getxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        self.xattr_read(req, ino, Some(name), size, reply);
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.xattr_read(req, ino, None, size, reply);
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        if self.inner.remote.dialect != Dialect::L {
            return reply.error(fail(Errno::EOPNOTSUPP));
        }
        let Some(name) = name.to_str().map(str::to_owned) else {
            return reply.error(fail(Errno::EINVAL));
        };
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let fid = inner.fid(ino, user).await?;
                fid.remove_xattr(&name).await.map_err(|e| errno(&e))
            }
            .await;
            answer(reply, result);
        });
    }

    fn getlk(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        lock_owner: u64,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        let lock = Lock {
            ty: typ as u8,
            start,
            end,
            owner: lock_owner,
        };
        self.spawn(|inner| async move {
            let result = async {
                let h = inner.handle(fh)?;
                inner.remote.conflicting(&h.file, lock).await
            }
            .await;
            match result {
                // The holder is on another host or behind another fid: no pid here.
                Ok(Some(l)) => reply.locked(l.start, l.end, l.ty as i32, 0),
                Ok(None) => reply.locked(start, end, dotl::LOCK_TYPE_UNLCK as i32, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setlk(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        lock_owner: u64,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let lock = Lock {
            ty: typ as u8,
            start,
            end,
            owner: lock_owner,
        };
        if lock.ty != dotl::LOCK_TYPE_UNLCK {
            self.inner
                .locked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((ino, lock_owner));
        }
        self.lock(fh, lock, sleep, reply);
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
        let user = self.user(req);
        self.spawn(|inner| async move {
            let result = async {
                let dir = inner.fid(parent, user).await?;
                let at = dir.clone_fid().await.map_err(|e| errno(&e))?;
                let file = at
                    .create_with_gid(
                        name.as_str(),
                        mode & !umask & 0o7777,
                        open_flags(flags),
                        gid,
                    )
                    .await
                    .map_err(|e| errno(&e))?;
                // The new file's inode gets a walked fid only when one is
                // needed: most files written and closed are next removed
                // by name, or opened, which walks anyway.
                let attrs = inner.remote.attr(file.fid()).await?;
                let attr = inner.found(parent, &name, user, None, attrs);
                // A new file has no capabilities: writes need not ask.
                inner.without_caps(attr.ino, true);
                let open_flags = inner.open_flags(attr.ino, file.qid());
                let fh = inner.add_handle(file, attr.ino, user, open_flags);
                Ok::<_, Errno32>((attr, fh, open_flags))
            }
            .await;
            match result {
                Ok((attr, fh, flags)) => reply.created(&inner.ttl, &attr, 0, fh, flags),
                Err(e) => reply.error(e),
            }
        });
    }
}
