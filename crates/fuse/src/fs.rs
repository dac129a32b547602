//! The kernel's requests: each unpacked, run as a task on the runtime and
//! answered from there with its outcome. What each does is in the module of
//! its concern (attrs, names, files, dirs, locks, xattrs).

use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fuser::{
    AccessFlags, BsdFileFlags, FileAttr, FileHandle, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request,
    TimeOrNow, WriteFlags,
};
use ninep_client::{FsStats, SetAttr};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Errno, Name, NameError};

use crate::attrs::set_time;
use crate::caller::Caller;
use crate::dirs::Entry;
use crate::files::Opened;
use crate::locks::Lock;
use crate::names::Make;
use crate::xattrs::Xattr;
use crate::{Inner, KernelErrno, fail};

/// The largest read or write the kernel is asked to send.
pub(crate) const MAX_IO: u32 = 1 << 20;

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
    fn refuse(self, errno: KernelErrno);
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
            fn refuse(self, errno: KernelErrno) {
                self.error(errno)
            }
        }
    };
}

answer!(ReplyEmpty, (), |r, (), _| r.ok());
answer!(ReplyEntry, FileAttr, |r, attr, ttl| {
    r.entry(&ttl, &attr, Generation(0))
});
answer!(ReplyAttr, FileAttr, |r, attr, ttl| r.attr(&ttl, &attr));
answer!(ReplyData, Bytes, |r, data, _| r.data(&data));
answer!(ReplyWrite, u32, |r, n, _| r.written(n));
answer!(ReplyOpen, Opened, |r, o, _| {
    r.opened(FileHandle(o.fh), o.flags)
});
answer!(ReplyCreate, (FileAttr, Opened), |r, (attr, o), ttl| {
    r.created(&ttl, &attr, Generation(0), FileHandle(o.fh), o.flags)
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
        if r.add(INodeNo(ino), e.next, e.kind, &e.name) {
            break;
        }
    }
    r.ok()
});

/// A name from the kernel as 9P carries it: UTF-8, at most 255 bytes.
fn name_of(name: &OsStr) -> Result<Name, KernelErrno> {
    let s = name.to_str().ok_or(fail(Errno::EINVAL))?;
    Name::new(s).map_err(|e| match e {
        NameError::TooLong(_) => fail(Errno::ENAMETOOLONG),
        _ => fail(Errno::EINVAL),
    })
}

/// An attribute name from the kernel: UTF-8.
fn xattr_name(name: &OsStr) -> Result<String, KernelErrno> {
    name.to_str().map(str::to_owned).ok_or(fail(Errno::EINVAL))
}

impl NinepFs {
    /// Runs `op` and answers `reply` with its outcome: here, if it can
    /// finish without waiting (a write taken behind, a read of what was
    /// read ahead), else as a task on the runtime, which gives up with
    /// EINTR if `caller` is killed meanwhile.
    fn answer<A: Answer, F>(&self, caller: Caller, reply: A, op: impl FnOnce(Arc<Inner>) -> F)
    where
        F: Future<Output = Result<A::Value, KernelErrno>> + Send + 'static,
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
                    // Dropping the operation flushes its 9P requests.
                    let finished = tokio::select! {
                        finished = outcome => finished,
                        () = caller.killed() => Err(fail(Errno::EINTR)),
                    };
                    match finished {
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
    fn user(&self, req: &Request) -> u32 {
        self.inner.user(req.uid())
    }

    /// Makes `name` in `parent` and answers with the new entry.
    fn make(&self, req: &Request, parent: u64, name: &OsStr, what: Make, reply: ReplyEntry) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.make(parent, &name?, user, what).await
        });
    }

    fn remove(&self, req: &Request, parent: u64, name: &OsStr, rmdir: bool, reply: ReplyEmpty) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.remove(parent, &name?, user, rmdir).await
        });
    }

    fn open_with(&self, req: &Request, ino: u64, flags: u32, reply: ReplyOpen) {
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.open(ino, user, flags).await
        });
    }

    fn xattr(
        &self,
        req: &Request,
        ino: u64,
        name: Result<String, KernelErrno>,
        size: u32,
        reply: ReplyXattr,
    ) {
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.xattr(ino, user, &name?, size).await
        });
    }
}

impl fuser::Filesystem for NinepFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Record locks go to the server where it knows them; otherwise the
        // kernel keeps them, for this host only.
        if self.inner.conn.dialect == Dialect::L {
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS);
        }
        // Lookups and listings in one directory need not wait for each
        // other: each is a walk or read of its own over the connection.
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // O_TRUNC comes with the open, which passes it on (OTRUNC, Tlopen's
        // O_TRUNC), rather than as a setattr after: servers that refuse
        // wstat (synthetic control files) still take an overwrite.
        let _ = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC);
        // Where the server sees who writes, it drops set-id bits and
        // capabilities when a file is written or truncated (as any Unix
        // file system does), and the kernel need not ask for
        // security.capability before every write.
        if self.inner.server_drops_privileges() {
            let _ = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        }
        // Reads and writes of up to a MiB each (the kernel's largest), so
        // bulk transfers take few round trips; the kernel lowers what it
        // cannot do. fuser asks for FUSE_MAX_PAGES itself, with as many
        // pages as the larger of the two.
        // Under loose caching writes go to the page cache and reach the
        // server a MiB at a time, on writeback, fsync and close, where an
        // error that befell them is reported.
        if self.inner.cache.writes_back() {
            let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
        }
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        Ok(())
    }

    /// Asked only where the kernel leaves permissions to the server
    /// ([`crate::Permissions::Server`]): what the server allows shows when
    /// the call is made, and only running needs an execute bit.
    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if !mask.contains(AccessFlags::X_OK) {
            return reply.ok();
        }
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.may_run(ino.0, user).await
        });
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (name, user) = (name_of(name), self.user(req));
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.lookup(parent.0, &name?, user).await
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if self.inner.nodes().forget(ino.0, nlookup) {
            self.inner.idle.lock().forget(ino.0);
        }
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let (fh, user) = (fh.map(u64::from), self.user(req));
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.attr_of(ino.0, fh, user).await
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let (fh, user) = (fh.map(u64::from), self.user(req));
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
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.set_attr(ino.0, fh, user, set).await
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.readlink(ino.0, user).await.map(Bytes::from)
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
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
        self.make(req, parent.0, name, what, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let what = Make::Dir {
            mode: mode & !umask & 0o7777,
            gid: req.gid(),
        };
        self.make(req, parent.0, name, what, reply);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent.0, name, false, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent.0, name, true, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
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
        self.make(req, parent.0, link_name, what, reply);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            // RENAME_NOREPLACE and friends have no 9P counterpart.
            return reply.error(fail(Errno::EINVAL));
        }
        let (oldname, newname) = (name_of(name), name_of(newname));
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner
                .rename(parent.0, &oldname?, newparent.0, &newname?, user)
                .await
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.make(req, newparent.0, newname, Make::Link { to: ino.0 }, reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.open_with(req, ino.0, flags.0 as u32, reply);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.open_with(req, ino.0, dotl::O_RDONLY | dotl::O_DIRECTORY, reply);
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.read(ino.0, fh.0, offset, size).await
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let data = Bytes::copy_from_slice(data);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.write(ino.0, fh.0, offset, data).await
        });
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.close(ino.0, fh.0, lock_owner.0).await
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.answer(Caller::Nobody, reply, |inner| async move {
            inner.drop_handle(fh.0).await;
            Ok(())
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.answer(Caller::Nobody, reply, |inner| async move {
            inner.drop_handle(fh.0).await;
            Ok(())
        });
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.fsync(fh.0, datasync).await
        });
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.readdir(ino.0, fh.0, offset).await
        });
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let user = self.user(req);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.statfs(ino.0, user).await
        });
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let (name, user) = (xattr_name(name), self.user(req));
        let value = Bytes::copy_from_slice(value);
        self.answer(Caller::of(req), reply, |inner| async move {
            inner
                .set_xattr(ino.0, user, &name?, value, flags as u32)
                .await
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.xattr(req, ino.0, xattr_name(name), size, reply);
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        // An empty name asks for the list of names.
        self.xattr(req, ino.0, Ok(String::new()), size, reply);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (name, user) = (xattr_name(name), self.user(req));
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.remove_xattr(ino.0, user, &name?).await
        });
    }

    fn getlk(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
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
            owner: lock_owner.0,
        };
        self.answer(Caller::of(req), reply, |inner| async move {
            let conflict = inner.conflicting(fh.0, lock).await?;
            // None in the way: the lock asked about, as F_UNLCK.
            Ok(conflict.unwrap_or(Lock {
                ty: dotl::LOCK_TYPE_UNLCK,
                ..lock
            }))
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
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
            owner: lock_owner.0,
        };
        self.answer(Caller::of(req), reply, |inner| async move {
            inner.set_lock(ino.0, fh.0, lock, sleep).await
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (name, user, gid) = (name_of(name), self.user(req), req.gid());
        let perm = mode & !umask & 0o7777;
        self.answer(Caller::of(req), reply, |inner| async move {
            let name = name?;
            inner
                .create(parent.0, &name, user, perm, gid, flags as u32)
                .await
        });
    }
}
