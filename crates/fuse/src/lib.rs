//! fuse: any 9P tree mounted on Linux through FUSE.
//!
//! Each FUSE inode holds walked (never opened) fids of its file; each open
//! file or directory holds a fid of its own, opened. Every kernel request is
//! answered from a task on the tokio runtime, so requests run concurrently
//! over the one 9P connection. The client's operations speak whichever
//! dialect the server does: 9P2000.L as is, 9P2000.u and 9P2000 through
//! stat, wstat and Tcreate, refusing with Linux's errno what a dialect
//! cannot do.
//! Directory offsets handed to the kernel are the server's Treaddir cookies
//! (or indexes into a listing read whole), so however the kernel resumes a
//! listing no entry is lost or repeated.
//!
//! Caching follows the v9fs paper's argument, in three policies ([`Cache`]).
//! Files whose qid.version is 0 are synthetic and are never cached: they are
//! always read and written directly. So is a file opened while its size is
//! 0, which may be a file of /proc or /sys whose size says nothing of its
//! data.
//!
//! Identity ([`Access`]): either every request goes out under the one
//! attach the mount was made with, or each calling user gets an attach of
//! their own (by numeric id) and the server checks what they may do.

#![warn(clippy::unwrap_used)]

mod attrs;
mod caller;
mod dirs;
mod files;
mod fs;
mod handles;
mod idle;
mod locks;
mod names;
mod nodes;
mod readahead;
mod whole;
mod xattrs;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fuser::{Config, Errno as KernelErrno, FileType, MountOption, SessionACL};
use ninep_client::{Client, Error, Fid, File, Fsys, ReadAhead, ReadAheadBudget, WriteBehind};
use ninep_wire::{Dialect, Errno, Name};
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::watch;

use handles::{Handle, Handles};
use idle::IdleFiles;
use nodes::{Nodes, ROOT};

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
    /// As strict, and attributes and entries are trusted for 20 seconds
    /// (as sshfs does); writes go to the page cache and reach the server
    /// on writeback, fsync and close, which report their errors. The
    /// kernel then keeps sizes and times of regular files itself: changes
    /// made by others are seen once the kernel forgets the file. The times
    /// it keeps of a file written back reach the server in the background,
    /// before what this mount asks next of that file's attributes or name,
    /// and by the end of fsync, which reports their error; the server's own
    /// times moved with the writes. A directory made here (versioned, on a
    /// mount of one attach) is taken to hold only what is made in it here,
    /// for as long as entries are trusted or until the server shows
    /// otherwise. A regular file closed stays open at the server for that
    /// time too ([`Options::keep_open`]), and an open of it meanwhile,
    /// without O_TRUNC and for no more access, is answered without asking:
    /// a change another client made since the close is then missed.
    /// A file written back keeps its pages at its next open if
    /// it is still at the qid.version it had just after, so a change made
    /// by another client while it was open here for writing is missed
    /// there too.
    Loose,
}

impl Cache {
    /// How long the kernel may trust attributes and entries: under loose
    /// caching, as long as sshfs lets it.
    fn ttl(self) -> Duration {
        match self {
            Cache::Loose => Duration::from_secs(20),
            Cache::None | Cache::Strict => Duration::ZERO,
        }
    }

    /// Whether writes go to the kernel's page cache, and to the server on
    /// writeback.
    fn writes_back(self) -> bool {
        self == Cache::Loose
    }
}

/// Who checks a caller's permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Permissions {
    /// The kernel, against the attributes the server gives, asking for
    /// them again wherever it may not trust them (under `none` and
    /// `strict`, those of every directory of every path); then the server.
    #[default]
    Kernel,
    /// The server alone, as the mount's attach: a mount of one attach
    /// ([`Access::Single`]) whose callers may do whatever its user may, as
    /// sshfs's mounts without `default_permissions`. The kernel still
    /// runs no file without an execute bit.
    Server,
}

/// Whose identity requests carry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Access {
    /// The mount's own attach, for its owner alone.
    #[default]
    Single,
    /// An attach per calling user, made on their first request with their
    /// uid as n_uname (9P2000.u and .L), as v9fs's `access=user`. The
    /// mount is open to all users.
    User {
        /// The tree each user attaches to.
        aname: String,
        /// The user the mount's own attach was made as.
        uid: u32,
    },
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct Options {
    /// What `mount` shows as the source.
    pub source: String,
    /// What the kernel may keep.
    pub cache: Cache,
    /// Whose identity requests carry.
    pub access: Access,
    /// Most bytes read ahead of a reader that reads a file in order (0:
    /// none), per open file: the window that lets a long link move data
    /// at its pace.
    pub read_ahead: u64,
    /// Most bytes read ahead for all open files together: a window comes
    /// out of it while its file is read ahead, and a file read in order
    /// while it is spent is read without reading ahead.
    pub read_ahead_total: u64,
    /// Who checks callers' permissions.
    pub permissions: Permissions,
    /// Most files kept open at the server after their close, under loose
    /// caching, for as long as entries are trusted, so that opening one
    /// again needs no round trip (0: none).
    pub keep_open: usize,
}

impl Options {
    /// The read-ahead of a mount made without saying: enough to fill a
    /// link of 1 GB/s with a round trip of 50 ms.
    pub const READ_AHEAD: u64 = 64 << 20;

    /// The read-ahead of all files together of a mount made without
    /// saying: sixteen files read ahead at full windows.
    pub const READ_AHEAD_TOTAL: u64 = 1 << 30;

    /// The files kept open after their close by a mount made without
    /// saying. A server that runs out of descriptors gets them back as
    /// soon as it says so.
    pub const KEEP_OPEN: usize = 4096;
}

impl Default for Options {
    fn default() -> Self {
        Options {
            source: "ninep".into(),
            cache: Cache::default(),
            access: Access::default(),
            read_ahead: Options::READ_AHEAD,
            read_ahead_total: Options::READ_AHEAD_TOTAL,
            permissions: Permissions::default(),
            keep_open: Options::KEEP_OPEN,
        }
    }
}

/// A mounted tree. Dropping it unmounts; [`Mount::unmount`] also waits for
/// what the mount still has to tell the server.
pub struct Mount {
    session: fuser::BackgroundSession,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mount").finish_non_exhaustive()
    }
}

impl Mount {
    /// Unmounts, if nobody has yet, and returns once the server has what
    /// the kernel left with the mount: the times of files it wrote back as
    /// it went, and the clunks of files kept open.
    pub async fn unmount(self) {
        drop(self.session);
        let settled = self.inner.settle_times(|_| true);
        if tokio::time::timeout(UNMOUNT_WAIT, settled).await.is_err() {
            tracing::warn!("unmounted with times of files written still unset");
        }
        let closed = self.inner.close_idle();
        if tokio::time::timeout(UNMOUNT_WAIT, closed).await.is_err() {
            tracing::warn!("unmounted with files kept open still unclunked");
        }
    }
}

/// How long an unmount waits for the server to take what the mount still
/// has for it: as long as a silent link is given before it is taken for
/// dead.
const UNMOUNT_WAIT: Duration = Duration::from_secs(30);

/// Mounts `fsys` at `mountpoint`. The mount lasts as long as the returned
/// [`Mount`]. Must be called within a tokio runtime, which then serves the
/// mount.
pub fn mount(fsys: Fsys, mountpoint: &Path, options: &Options) -> std::io::Result<Mount> {
    let client = fsys.client().clone();
    let dialect = client.dialect();
    let uid = match &options.access {
        Access::Single => 0,
        Access::User { .. } if dialect == Dialect::Base => {
            return Err(std::io::Error::other(
                "attaching per user needs 9P2000.u or 9P2000.L (numeric user ids)",
            ));
        }
        Access::User { uid, .. } => *uid,
    };
    if options.permissions == Permissions::Server && options.access != Access::Single {
        return Err(std::io::Error::other(
            "the server alone checks permissions only on a mount of one attach",
        ));
    }
    let runtime = tokio::runtime::Handle::current();
    let conn = Conn {
        io_block: io_block(client.msize()),
        client,
        dialect,
        owner: (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        ),
        lock_client: format!("ninep-fuse-{}", std::process::id()),
    };
    let inner = Inner {
        conn,
        nodes: Mutex::new(Nodes::new(uid, fsys.into_root())),
        handles: Mutex::new(Handles::default()),
        next_handle: AtomicU64::new(1),
        changes: Changes::default(),
        locked: Mutex::new(HashSet::new()),
        no_caps: Mutex::new(HashSet::new()),
        times_behind: Mutex::new(HashMap::new()),
        rooms_made: AtomicU64::new(0),
        making_room: tokio::sync::Mutex::new(()),
        idle: Mutex::new(IdleFiles::new(
            if options.cache.writes_back() {
                options.keep_open
            } else {
                0
            },
            options.cache.ttl(),
        )),
        cache: options.cache,
        ttl: options.cache.ttl(),
        access: options.access.clone(),
        read_ahead: options.read_ahead,
        read_ahead_budget: ReadAheadBudget::new(options.read_ahead_total),
    };
    let inner = Arc::new(inner);
    if options.cache.writes_back() {
        tokio::spawn(close_idle_files(Arc::downgrade(&inner)));
    }
    let fs = fs::NinepFs {
        inner: inner.clone(),
        runtime,
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(options.source.clone()),
        MountOption::Subtype("ninep".into()),
    ];
    if options.permissions == Permissions::Kernel {
        config.mount_options.push(MountOption::DefaultPermissions);
    }
    if matches!(options.access, Access::User { .. }) {
        config.acl = SessionACL::All;
    }
    let session = fuser::spawn_mount(fs, mountpoint, &config)?;
    readahead::widen(mountpoint, fs::MAX_IO / 1024);
    Ok(Mount { session, inner })
}

/// Clunks the files kept open longer than allowed, each second, while the
/// mount lasts.
async fn close_idle_files(inner: Weak<Inner>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.idle.lock().expire(Instant::now());
    }
}

/// Most bytes of one open file's writes in flight in the background.
const WRITE_BEHIND: u64 = 8 << 20;

/// The kernel's errno for a failed client operation.
fn errno(e: Error) -> KernelErrno {
    fail(e.errno())
}

fn fail(e: Errno) -> KernelErrno {
    KernelErrno::from_i32(e.0 as i32)
}

/// The connection to the server, and how this mount speaks on it.
struct Conn {
    client: Client,
    dialect: Dialect,
    /// Owner and group shown for files of 9P2000 servers, which name them
    /// only by string: the mounting user's.
    owner: (u32, u32),
    /// The client id in this mount's lock requests.
    lock_client: String,
    /// The block size files show (st_blksize), which programs take as the
    /// size to read and write in.
    io_block: u32,
}

/// The block size regular files show on a connection of `msize`: the
/// largest power of two one request carries, within what one kernel
/// request carries. A program that reads in st_blksize pieces (cp, cat)
/// then makes one kernel request per 9P request's worth rather than one
/// per server's disk block, and the server's own figure, which a hostile
/// server may make absurd, is never shown.
fn io_block(msize: u32) -> u32 {
    let most = msize
        .saturating_sub(ninep_wire::IOHDRSZ)
        .clamp(PAGE, fs::MAX_IO);
    1 << most.ilog2()
}

/// The block size everything but regular files shows, and the least a
/// regular file shows.
const PAGE: u32 = 4096;

/// The outcome of times being set in the background, once it comes.
type TimesSet = watch::Receiver<Option<Result<(), KernelErrno>>>;

/// Changes to files' data (writes, truncations) made through the mount:
/// counted as each starts, and under way until its handler ends, by when
/// its bytes are at the server or waiting in a file's write-behind. A
/// file's head read with its open is kept only if no change was under way
/// as the open started and none started until the head is held (see
/// [`Inner::open`]); a change that started before and ended has its bytes
/// at the server by the time the open waited for the file's write-behind.
#[derive(Default)]
struct Changes {
    started: AtomicU64,
    under_way: AtomicU64,
}

impl Changes {
    /// A change starting; it ends when what this gives is dropped.
    fn start(&self) -> Changing<'_> {
        self.under_way.fetch_add(1, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        Changing(self)
    }

    /// A mark to tell later whether a change started since, while none is
    /// under way now.
    fn quiet(&self) -> Option<u64> {
        let started = self.started.load(Ordering::SeqCst);
        (self.under_way.load(Ordering::SeqCst) == 0).then_some(started)
    }

    /// Whether no change started since `mark`.
    fn none_since(&self, mark: u64) -> bool {
        self.started.load(Ordering::SeqCst) == mark
    }
}

/// A change to a file's data under way (see [`Changes`]).
struct Changing<'a>(&'a Changes);

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.under_way.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What every request shares.
struct Inner {
    conn: Conn,
    nodes: Mutex<Nodes>,
    handles: Mutex<Handles>,
    next_handle: AtomicU64,
    /// Changes to files' data made through the mount, of any file.
    changes: Changes,
    /// (inode, lock owner) pairs that may hold locks: closing a file drops
    /// its owner's locks on it.
    locked: Mutex<HashSet<(u64, u64)>>,
    /// Inodes known to have no security.capability attribute.
    no_caps: Mutex<HashSet<u64>>,
    /// Inodes whose times the kernel kept are being set in the background
    /// (under loose caching), each with the outcome to come.
    times_behind: Mutex<HashMap<u64, TimesSet>>,
    /// Files closed but left open at the server (under loose caching).
    idle: Mutex<IdleFiles<Arc<File>>>,
    /// How often they were given back to a server out of descriptors, and
    /// the lock that has one request at a time give them back: one that
    /// met the shortage while another gave them back asks again too.
    rooms_made: AtomicU64,
    making_room: tokio::sync::Mutex<()>,
    cache: Cache,
    ttl: Duration,
    access: Access,
    /// Most bytes read ahead for one open file.
    read_ahead: u64,
    /// What all open files read ahead share.
    read_ahead_budget: ReadAheadBudget,
}

impl Inner {
    fn nodes(&self) -> MutexGuard<'_, Nodes> {
        self.nodes.lock()
    }

    /// Whether set-id bits and capabilities may be left to the server to
    /// drop when a caller who may not keep them writes a file, so that the
    /// kernel need not ask for security.capability before every write. On
    /// a mount open to its owner alone, that owner being root, nobody but
    /// root writes, who keeps them anyway, under any cache policy. Where
    /// each caller has an attach of their own the server sees who writes,
    /// but the kernel keeps the mode it was last told of: only without
    /// caching (ttl zero) does it ask again before a file just written is
    /// run, so under loose caching it drops the bits itself.
    fn server_drops_privileges(&self) -> bool {
        match self.access {
            Access::User { .. } => self.ttl.is_zero(),
            Access::Single => self.conn.owner.0 == 0,
        }
    }

    /// Whose fids serve a request from `uid`.
    fn user(&self, uid: u32) -> u32 {
        match self.access {
            Access::Single => 0,
            Access::User { .. } => uid,
        }
    }

    /// A walked fid on `ino` for `user` (see [`Inner::user`]): the one kept,
    /// else one walked from the user's own attach along the file's path.
    async fn fid(&self, ino: u64, user: u32) -> Result<Arc<Fid>, KernelErrno> {
        if let Some(fid) = self.nodes().fid(ino, user) {
            return Ok(fid);
        }
        if ino == ROOT {
            return self.attach(user).await;
        }
        let fid = Arc::new(self.walk_to(ino, user).await?);
        if !self.nodes().add_fid(ino, user, fid.clone()) {
            return Err(fail(Errno::ENOENT));
        }
        Ok(fid)
    }

    /// A fid of `user`'s on `ino` opened with `flags`: a file's kept fid
    /// itself (the next request needing one walks anew, but most files
    /// opened are next closed, removed by name or opened again), else a
    /// clone of the one kept or one walked along the path, opened in the
    /// same round trip where the server keeps order. With `head` (a byte
    /// count, 0 for none) the file's first bytes are read behind the open
    /// where that costs no round trip ([`Fid::open_head`]). A server out of
    /// descriptors is given back the files kept open, and asked again.
    async fn open_fid(
        &self,
        ino: u64,
        user: u32,
        flags: u32,
        head: u32,
    ) -> Result<(File, Option<Bytes>), KernelErrno> {
        let once = || async {
            let walked = self.nodes().take_fid(ino, user);
            if let Some(fid) = walked {
                return fid.open_head(flags, head).await.map_err(errno);
            }
            let kept = self.nodes().fid(ino, user);
            match kept {
                Some(fid) => fid.walk_open_head(&[], flags, head).await,
                None => {
                    let (root, path) = self.path_from_root(ino, user).await?;
                    root.walk_open_head(&path, flags, head).await
                }
            }
            .map_err(errno)
        };
        self.with_room(once).await
    }

    /// A new fid walked from `user`'s attach along the path of `ino`.
    async fn walk_to(&self, ino: u64, user: u32) -> Result<Fid, KernelErrno> {
        let (root, path) = self.path_from_root(ino, user).await?;
        self.with_room(|| async { root.walk(&path).await.map_err(errno) })
            .await
    }

    /// `user`'s attach and the path of `ino` from it.
    async fn path_from_root(
        &self,
        ino: u64,
        user: u32,
    ) -> Result<(Arc<Fid>, Vec<Name>), KernelErrno> {
        let kept = self.nodes().fid(ROOT, user);
        let root = match kept {
            Some(root) => root,
            None => self.attach(user).await?,
        };
        let path = {
            let nodes = self.nodes();
            if !nodes.exists(ino) {
                return Err(fail(Errno::ENOENT));
            }
            nodes.path(ino).ok_or(fail(Errno::ESTALE))?
        };
        Ok((root, path))
    }

    /// The root of a new attach for `user` (per-user access only).
    async fn attach(&self, user: u32) -> Result<Arc<Fid>, KernelErrno> {
        let Access::User { aname, .. } = &self.access else {
            return Err(fail(Errno::EIO));
        };
        let fsys = self
            .conn
            .client
            .attach_as("", user, aname)
            .await
            .map_err(errno)?;
        let root = Arc::new(fsys.into_root());
        self.nodes().add_fid(ROOT, user, root.clone());
        Ok(self.nodes().fid(ROOT, user).unwrap_or(root))
    }

    fn handle(&self, fh: u64) -> Result<Arc<Handle>, KernelErrno> {
        self.handles.lock().get(fh).ok_or(fail(Errno::EBADF))
    }

    /// An open file of `user`'s on `ino`, if any.
    fn handle_on(&self, ino: u64, user: u32) -> Option<Arc<Handle>> {
        self.handles
            .lock()
            .on(ino)
            .into_iter()
            .find(|(_, h)| h.user == user)
            .map(|(_, h)| h)
    }

    /// Keeps `file`, opened on `ino` by `user` with `flags`; `exact` as [`Handle::exact`];
    /// `write_behind` if writes may be sent in the background.
    fn add_handle(
        &self,
        file: Arc<File>,
        ino: u64,
        user: u32,
        flags: u32,
        exact: bool,
        write_behind: bool,
    ) -> u64 {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        let read_ahead = if exact { 0 } else { self.read_ahead };
        // The file's type is known from its lookup: whether it may be read
        // ahead then needs no stat.
        let kind = self.nodes().given_attr(ino).map(|attr| attr.kind);
        let ahead = match kind {
            Some(kind) => ReadAhead::knowing(read_ahead, file.qid(), kind == FileType::RegularFile),
            None => ReadAhead::new(read_ahead),
        }
        .sharing(&self.read_ahead_budget);
        let handle = Handle {
            file,
            ino,
            user,
            flags,
            exact,
            ahead,
            behind: write_behind.then(|| WriteBehind::new(WRITE_BEHIND)),
            listing: tokio::sync::Mutex::new(Vec::new()),
        };
        self.handles.lock().insert(fh, handle);
        fh
    }

    /// Waits for the writes sent in the background by open files that
    /// `which` picks, so that what comes from the server next sees them;
    /// their errors are kept for their own writers.
    async fn settle_writes(&self, which: impl Fn(u64, &Handle) -> bool) {
        let pending = self.handles.lock().writing(which);
        for (fh, h) in pending {
            if let Some(behind) = &h.behind {
                behind.settle().await;
            }
            self.handles.lock().settled(fh);
        }
    }

    /// Waits for the times being set in the background on the inodes
    /// `which` picks, so that what is asked of the server next comes
    /// after; the first error of those.
    async fn settle_times(&self, which: impl Fn(u64) -> bool) -> Result<(), KernelErrno> {
        let pending: Vec<_> = self
            .times_behind
            .lock()
            .iter()
            .filter(|(ino, _)| which(**ino))
            .map(|(_, outcome)| outcome.clone())
            .collect();
        let mut first = Ok(());
        for mut outcome in pending {
            // The outcome comes once the times are set (or the task ends).
            let set = outcome.wait_for(Option::is_some).await;
            if let Ok(set) = set
                && let Some(Err(e)) = *set
            {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Forgets what was read ahead of `ino` through any of its open files:
    /// a write to it or a change of its size made that stale.
    async fn forget_read_ahead(&self, ino: u64) {
        let handles = self.handles.lock().on(ino);
        for (_, h) in handles {
            h.ahead.forget().await;
        }
    }

    /// Forgets the open file `fh`, stopping its read-ahead first so that
    /// its fid is clunked now, or kept open a while to be opened again.
    /// Its writes behind are settled while it is still among the open
    /// files: the kernel's release does not wait for this, and a read or
    /// open of the file meanwhile must wait for them as well.
    async fn drop_handle(&self, fh: u64) {
        let Ok(h) = self.handle(fh) else {
            return;
        };
        h.ahead.stop().await;
        if let Some(behind) = &h.behind {
            behind.settle().await;
        }
        let removed = self.handles.lock().remove(fh);
        if let Some(h) = removed
            && self.may_keep_open(&h)
        {
            let file = h.file.clone();
            self.idle
                .lock()
                .keep(h.ino, h.user, file, h.flags, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_shown_is_a_power_of_two_one_request_carries() {
        let iohdrsz = ninep_wire::IOHDRSZ;
        assert_eq!(io_block(fs::MAX_IO + iohdrsz), fs::MAX_IO);
        assert_eq!(io_block(u32::MAX), fs::MAX_IO);
        assert_eq!(io_block(8192 + iohdrsz), 8192);
        assert_eq!(io_block(65536 + iohdrsz - 1), 32768);
        // Below a page, a page: the kernel reads no less.
        assert_eq!(io_block(0), 4096);
    }
}
