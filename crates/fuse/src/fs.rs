//! The kernel's requests: each unpacked, run as a task on the runtime and
//! answered from there with its outcome. What each does is in the module of
//! its concern (attrs, names, files, dirs, locks, xattrs).

use std::ffi::OsStr;
use std::future::Future;
use std::os::raw::c_int;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fuser::{
    FileAttr, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use ninep_client::{FsStats, SetAttr};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Errno, Name, NameError};

use crate::attrs::set_time;
use crate::dirs::Entry;
use crate::files::Opened;
use crate::locks::Lock;
use crate::names::Make;
use crate::xattrs::Xattr;
use crate::{Errno32, Inner, fail};

/// The largest read or write the kernel is asked to send.
pub(crate) const MAX_IO: u32 = 1 << 20;

/// FUSE 7.33's capability, which fuser does not name.
const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;

/// The FUSE filesystem: a handle on the runtime and the shared state.
pub(crate) struct NinepFs {
    pub inner: Arc<Inner>,
    pub runtime: tokio::runtime::Handle,
}

/// A reply the kernel waits for, and how an outcome fills it in.
trait Answer: Send + 'static {
    /// What a request that succeeds answers with.
    type Value: Send + 'static;
    /// Answers with `value`; `ttl` is how long the kernel may trust
    /// attributes and entries in it.
    fn give(self, value: Self::Value, ttl: Duration);
    fn refuse(self, errno: Errno32);
}

/// Implements [`Answer`] for a reply type: the value it carries, and how.
macro_rules! answer {
    ($reply:ty, $value:ty, |$r:pat_param, $v:pat_param, $ttl:pat_param| $give:expr) => {
        impl Answer for $reply {
            type Value = $value;
            fn give(self, $v: $value, $ttl: Duration) {
                let $r = self;
                $give
            }
            fn refuse(self, errno: Errno32) {
                self.error(errno)
            }
        }
    };
}

answer!(ReplyEmpty, (), |r, (), _| r.ok());
answer!(ReplyEntry, FileAttr, |r, attr, ttl| r.entry(&ttl, &attr, 0));
answer!(ReplyAttr, FileAttr, |r, attr, ttl| r.attr(&ttl, &attr));
answer!(ReplyData, Bytes, |r, data, _| r.data(&data));
answer!(ReplyWrite, u32, |r, n, _| r.written(n));
answer!(ReplyOpen, Opened, |r, o, _| r.opened(o.fh, o.flags));
answer!(ReplyCreate, (FileAttr, Opened), |r, (attr, o), ttl| {
    r.created(&ttl, &attr, 0, o.fh, o.flags)
});
answer!(ReplyStatfs, FsStats, |r, s, _| {
    r.statfs(
        s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
    )
});
// The holder is on another host or behind another fid: no pid here.
answer!(ReplyLock, Lock, |r, l, _| {
    r.locked(l.start, l.end, l.ty as i32, 0)
});
answer!(ReplyXattr, Xattr, |r, x, _| match x {
    Xattr::Size(n) => r.size(n),
    Xattr::Value(value) => r.data(&value),
});
answer!(ReplyDirectory, Vec<(u64, Entry)>, |mut r, entries, _| {
    for (ino, e) in entries {
        // The offset of an entry is the one that resumes after it.
        if r.add(ino, e.next as i64, e.kind, &e.name) {
            break;
        }
    }
    r.ok()
});

/// A name from the kernel as 9P carries it: UTF-8, at most 255 bytes.
fn name_of(name: &OsStr) -> Result<Name, Errno32> {
    let s = name.to_str().ok_or(fail(Errno::EINVAL))?;
    Name::new(s).map_err(|e| match e {
        NameError::TooLong(_) => fail(Errno::ENAMETOOLONG),
        _ => fail(Errno::EINVAL),
    })
}

/// An attribute name from the kernel: UTF-8.
fn xattr_name(name: &OsStr) -> Result<String, Errno32> {
    name.to_str().map(str::to_owned).ok_or(fail(Errno::EINVAL))
}

impl NinepFs {
    /// Runs `op` and answers `reply` with its outcome: here, if it can
    /// finish without waiting (a write taken behind, a read of what was
    /// read ahead), else as a task on the runtime.
    fn answer<A: Answer, F>(&self, reply: A, op: impl FnOnce(Arc<Inner>) -> F)
    where
        F: Future<Output = Result<A::Value, Errno32>> + Send + 'static,
    {
        let ttl = self.inner.ttl;
        let _runtime = self.runtime.enter();
        let mut outcome = Box::pin(op(self.inner.clone()));
        // A future that is not ready has registered to be woken here in
        // vain; the task polls it again at once and registers anew.
        let mut cx = Context::from_waker(Waker::noop());
        let finished = match outcome.as_mut().poll(&mut cx) {
            Poll::Ready(finished) => finished,
            Poll::Pending => {
                self.runtime.spawn(async move {
                    match outcome.await {
                        Ok(value) => reply.give(value, ttl),
                        Err(e) => reply.refuse(e),
                    }
                });
                return;
            }
        };
        match finished {
            Ok(value) => reply.give(value, ttl),
            Err(e) => reply.refuse(e),
        }
    }

    /// The key of the fids that serve `req`.
    fn user(&self, req: &Request<'_>) -> u32 {
        self.inner.user(req.uid())
    }

    /// Makes `name` in `parent` and answers with the new entry.
    fn make(&self, req: &Request<'_>, parent: u64, name: &OsStr, what: Make, reply: ReplyEntry) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(reply, |inner| async move {
            inner.make(parent, &name?, user, what).await
        });
    }

    fn remove(&self, req: &Request<'_>, parent: u64, name: &OsStr, rmdir: bool, reply: ReplyEmpty) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(reply, |inner| async move {
            inner.remove(parent, &name?, user, rmdir).await
        });
    }

    fn open_with(&self, req: &Request<'_>, ino: u64, flags: u32, reply: ReplyOpen) {
        let user = self.user(req);
        self.answer(
            reply,
            |inner| async move { inner.open(ino, user, flags).await },
        );
    }

    fn xattr(
        &self,
        req: &Request<'_>,
        ino: u64,
        name: Result<String, Errno32>,
        size: u32,
        reply: ReplyXattr,
    ) {
        let user = self.user(req);
        self.answer(reply, |inner| async move {
            inner.xattr(ino, user, &name?, size).await
        });
    }
}

impl fuser::Filesystem for NinepFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), c_int> {
        // Record locks go to the server where it knows them; otherwise the
        // kernel keeps them, for this host only.
        if self.inner.conn.dialect == Dialect::L {
            let _ = config.add_capabilities(fuser::consts::FUSE_POSIX_LOCKS);
        }
        // Lookups and listings in one directory need not wait for each
        // other: each is a walk or read of its own over the connection.
        let _ = config.add_capabilities(fuser::consts::FUSE_PARALLEL_DIROPS);
        // O_TRUNC comes with the open, which passes it on (OTRUNC, Tlopen's
        // O_TRUNC), rather than as a setattr after: servers that refuse
        // wstat (synthetic control files) still take an overwrite.
        let _ = config.add_capabilities(fuser::consts::FUSE_ATOMIC_O_TRUNC);
        // Where the server sees who writes, it drops set-id bits and
        // capabilities when a file is written or truncated (as any Unix
        // file system does), and the kernel need not ask for
        // security.capability before every write.
        if self.inner.server_drops_privileges() {
            let _ = config.add_capabilities(FUSE_HANDLE_KILLPRIV_V2);
        }
        // Reads and writes of up to a MiB each (the kernel's largest), so
        // bulk transfers take few round trips; the kernel lowers what it
        // cannot do.
        // Under loose caching writes go to the page cache and reach the
        // server a MiB at a time, on writeback, fsync and close, where an
        // error that befell them is reported.
        if self.inner.cache.writes_back() {
            let _ = config.add_capabilities(fuser::consts::FUSE_WRITEBACK_CACHE);
        }
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        Ok(())
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(reply, |inner| async move {
            inner.lookup(parent, &name?, user).await
        });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.inner.nodes().forget(ino, nlookup);
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        let user = self.user(req);
        self.answer(
            reply,
            |inner| async move { inner.attr_of(ino, fh, user).await },
        );
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
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            ..SetAttr::default()
        };
        self.answer(reply, |inner| async move {
            inner.set_attr(ino, fh, user, set).await
        });
    }

    fn readlink(&mut self, req: &Request<'_>, ino: u64, reply: ReplyData) {
        let user = self.user(req);
        self.answer(reply, |inner| async move {
            inner.readlink(ino, user).await.map(Bytes::from)
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
        let (oldname, newname) = (name_of(name), name_of(newname));
        let user = self.user(req);
        self.answer(reply, |inner| async move {
            inner
                .rename(parent, &oldname?, newparent, &newname?, user)
                .await
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
        self.make(req, newparent, newname, Make::Link { to: ino }, reply);
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.open_with(req, ino, flags as u32, reply);
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.open_with(req, ino, dotl::O_RDONLY | dotl::O_DIRECTORY, reply);
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
        let offset = offset.max(0) as u64;
        self.answer(reply, |inner| async move {
            inner.read(ino, fh, offset, size).await
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
        let (offset, data) = (offset.max(0) as u64, Bytes::copy_from_slice(data));
        self.answer(reply, |inner| async move {
            inner.write(ino, fh, offset, data).await
        });
    }

    fn flush(&mut self, _req: &Request<'_>, ino: u64, fh: u64, lock_owner: u64, reply: ReplyEmpty) {
        self.answer(reply, |inner| async move {
            inner.close(ino, fh, lock_owner).await
        });
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
        self.answer(reply, |inner| async move {
            inner.drop_handle(fh).await;
            Ok(())
        });
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.answer(reply, |inner| async move {
            inner.drop_handle(fh).await;
            Ok(())
        });
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.answer(
            reply,
            |inner| async move { inner.fsync(fh, datasync).await },
        );
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: ReplyDirectory,
    ) {
        let offset = offset.max(0) as u64;
        self.answer(reply, |inner| async move {
            inner.readdir(ino, fh, offset).await
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
        self.answer(reply, |inner| async move { inner.statfs(ino, user).await });
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
        let (name, user) = (xattr_name(name), self.user(req));
        let value = Bytes::copy_from_slice(value);
        self.answer(reply, |inner| async move {
            inner
                .set_xattr(ino, user, &name?, value, flags as u32)
                .await
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
        self.xattr(req, ino, xattr_name(name), size, reply);
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        // An empty name asks for the list of names.
        self.xattr(req, ino, Ok(String::new()), size, reply);
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        let (name, user) = (xattr_name(name), self.user(req));
        self.answer(reply, |inner| async move {
            inner.remove_xattr(ino, user, &name?).await
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
        self.answer(reply, |inner| async move {
            let conflict = inner.conflicting(fh, lock).await?;
            // None in the way: the lock asked about, as F_UNLCK.
            Ok(conflict.unwrap_or(Lock {
                ty: dotl::LOCK_TYPE_UNLCK,
                ..lock
            }))
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
        self.answer(reply, |inner| async move {
            inner.set_lock(ino, fh, lock, sleep).await
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
        let (name, user, gid) = (name_of(name), self.user(req), req.gid());
        let perm = mode & !umask & 0o7777;
        self.answer(reply, |inner| async move {
            let name = name?;
            inner
                .create(parent, &name, user, perm, gid, flags as u32)
                .await
        });
    }
}
