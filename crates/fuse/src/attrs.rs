//! Lookups and attributes: names walked to inodes, attributes in the
//! kernel's terms and changed at its request, symbolic links read, the
//! file system's figures.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};
use ninep_client::{Fid, FileInfo, FsStats, SetAttr, SetTime};
use ninep_wire::consts::unix;
use ninep_wire::{Dialect, Errno, NONUNAME, Name, Qid};
use tokio::sync::watch;

use crate::{Conn, Handle, Inner, KernelErrno, PAGE, errno, fail};

/// A time the server gave; one past what the host can hold (a server's
/// nonsense) reads as the epoch.
fn time(sec: u64, nsec: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::new(sec, nsec.min(999_999_999) as u32))
        .unwrap_or(UNIX_EPOCH)
}

/// The longest symbolic link target the kernel takes, with its NUL: a page.
const LINK_MAX: usize = 4096;

/// A time to set, in the client's terms.
pub(crate) fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(at) => {
            let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            SetTime::At {
                sec: since.as_secs(),
                nsec: since.subsec_nanos(),
            }
        }
    }
}

/// A time set, as the kernel will see it.
fn system_time(t: SetTime) -> SystemTime {
    match t {
        SetTime::Now => SystemTime::now(),
        SetTime::At { sec, nsec } => time(sec, u64::from(nsec)),
    }
}

/// The kernel's file type for Unix mode `mode`.
pub(crate) fn file_type(mode: u32) -> FileType {
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

/// The kernel's 32-bit device number: the low half of Linux's 64-bit one,
/// which it equals for every number that fits.
fn kernel_rdev(rdev: u64) -> u32 {
    rdev as u32
}

impl Conn {
    /// The file's qid and attributes (with inode number 0).
    pub async fn attr(&self, fid: &Fid) -> Result<(Qid, FileAttr), KernelErrno> {
        let info = fid.stat().await.map_err(errno)?;
        Ok(self.attrs_of(&info))
    }

    /// The qid and the kernel's attributes of a file the server stat'ed.
    pub fn attrs_of(&self, info: &FileInfo) -> (Qid, FileAttr) {
        (info.qid, self.info_attr(info))
    }

    fn info_attr(&self, info: &FileInfo) -> FileAttr {
        let known = |id: u32, or: u32| if id == NONUNAME { or } else { id };
        // A stat has no link count; a directory has at least two.
        let nlink = match self.dialect {
            Dialect::L => info.nlink,
            _ if info.is_dir() => 2,
            _ => 1,
        };
        FileAttr {
            ino: INodeNo(0),
            size: info.size,
            blocks: info.blocks,
            atime: time(info.atime, u64::from(info.atime_nsec)),
            mtime: time(info.mtime, u64::from(info.mtime_nsec)),
            ctime: time(info.ctime, u64::from(info.ctime_nsec)),
            crtime: UNIX_EPOCH,
            kind: file_type(info.mode),
            perm: (info.mode & 0o7777) as u16,
            nlink: nlink as u32,
            uid: known(info.n_uid, self.owner.0),
            gid: known(info.n_gid, self.owner.1),
            rdev: kernel_rdev(info.rdev),
            // A pipe or device keeps a page: stdio sizes its buffers by
            // this, and a reader may be waiting for what is written.
            blksize: if file_type(info.mode) == FileType::RegularFile {
                self.io_block
            } else {
                PAGE
            },
            flags: 0,
        }
    }
}

impl Inner {
    /// Walks `name` in `parent` and makes (or finds) its inode; one more
    /// lookup of it is counted.
    pub async fn lookup(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
    ) -> Result<FileAttr, KernelErrno> {
        if self.nodes().absent(parent, name, self.ttl) {
            return Err(fail(Errno::ENOENT));
        }
        // The name may be of a file being written: the attributes must
        // include what was written, and the times it was given.
        self.settle_writes(|_, _| true).await;
        let named = self.nodes().ino_at(parent, name);
        let _ = self.settle_times(|ino| Some(ino) == named).await;
        let dir = self.fid(parent, user).await?;
        let names = std::slice::from_ref(name);
        // A name looked up again usually names the same file still: its
        // attributes are asked for on the fid kept while the walk goes,
        // and serve if the reply's qid is the one the walk reached.
        // Otherwise the walk and the stat of what it reaches go together.
        let walk = || async {
            let kept = self.nodes().fid_at(parent, name, user);
            match kept {
                Some(kept) => {
                    let (walked, early) = tokio::join!(dir.walk(names), self.conn.attr(&kept));
                    let fid = walked.map_err(errno)?;
                    match early {
                        Ok((qid, attr)) if qid.path == fid.qid().path => Ok((fid, (qid, attr))),
                        _ => {
                            let found = self.conn.attr(&fid).await?;
                            Ok((fid, found))
                        }
                    }
                }
                None => {
                    let (fid, info) = dir.walk_stat(names).await.map_err(errno)?;
                    Ok((fid, self.conn.attrs_of(&info)))
                }
            }
        };
        let (fid, found) = self.with_room(walk).await?;
        Ok(self.found(parent, name, user, Some(fid), found))
    }

    /// Records `name` in `parent`, found by `user` (who walked `fid`, if
    /// given), with its qid and attributes; the attributes with the inode
    /// number.
    pub fn found(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
        fid: Option<Fid>,
        (qid, mut attr): (Qid, FileAttr),
    ) -> FileAttr {
        let mut nodes = self.nodes();
        let ino = nodes.found(parent, name.clone(), user, fid, qid, &attr);
        attr.ino = INodeNo(ino);
        nodes.given(ino, attr);
        attr
    }

    /// The attributes of `ino`, through the open file `fh` if given.
    pub async fn attr_of(
        &self,
        ino: u64,
        fh: Option<u64>,
        user: u32,
    ) -> Result<FileAttr, KernelErrno> {
        // The server's size and times must include every write made.
        self.settle_writes(|_, h| h.ino == ino).await;
        let _ = self.settle_times(|other| other == ino).await;
        // Under loose caching, as trusted as the kernel may trust them.
        if let Some(attr) = self.nodes().fresh(ino, self.ttl) {
            return Ok(attr);
        }
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
            Some(h) => self.conn.attr(h.file.fid()).await.ok(),
            None => None,
        };
        let (_, mut attr) = match by_handle {
            Some(found) => found,
            None => self.conn.attr(&*self.fid(ino, user).await?).await?,
        };
        attr.ino = INodeNo(ino);
        self.nodes().given(ino, attr);
        Ok(attr)
    }

    /// Whether `ino` may be run or searched (access(2) with X_OK, chdir)
    /// where the server alone checks permissions: any directory (a kind no
    /// inode changes), and any other file with an execute bit, as the
    /// kernel itself asks of a file it runs.
    pub async fn may_run(&self, ino: u64, user: u32) -> Result<(), KernelErrno> {
        let known = self.nodes().given_attr(ino);
        let attr = match known {
            Some(attr) if attr.kind == FileType::Directory => attr,
            _ => self.attr_of(ino, None, user).await?,
        };
        if attr.kind == FileType::Directory || attr.perm & 0o111 != 0 {
            Ok(())
        } else {
            Err(fail(Errno::EACCES))
        }
    }

    /// Makes the changes `set` to `ino`, through the open file `fh` if
    /// given, and answers with the attributes after.
    pub async fn set_attr(
        self: &Arc<Self>,
        ino: u64,
        fh: Option<u64>,
        user: u32,
        mut set: SetAttr,
    ) -> Result<FileAttr, KernelErrno> {
        // Any change changes the inode (ctime), as in Linux; a truncation
        // comes after the writes made before it.
        set.ctime = set != SetAttr::default();
        let times_only = SetAttr {
            atime: None,
            mtime: None,
            ctime: false,
            ..set.clone()
        } == SetAttr::default();
        // Times being set behind come first: a caller's own come after them.
        let _ = self.settle_times(|other| other == ino).await;
        self.settle_writes(|_, h| h.ino == ino).await;
        let _resizing = set.size.is_some().then(|| self.changes.start());
        if set.size.is_some() {
            self.forget_read_ahead(ino).await;
        }
        let who_may = set.mode.is_some() || set.uid.is_some() || set.gid.is_some();
        // ftruncate and fchmod work on open files whose names are gone; the
        // inode's fid serves when the open one names a path that is gone
        // (diod, after a rename).
        let by_handle = match fh.map(|fh| self.handle(fh)) {
            Some(Ok(h)) if times_only && self.cache.writes_back() => {
                self.set_times_behind(ino, h, user, set.clone());
                Ok(())
            }
            Some(Ok(h)) => h.file.fid().setattr(&set).await.map_err(errno),
            _ => Err(fail(Errno::ENOENT)),
        };
        if by_handle == Err(fail(Errno::ENOENT)) {
            let fid = self.fid(ino, user).await?;
            fid.setattr(&set).await.map_err(errno)?;
        } else {
            by_handle?;
        }
        if who_may {
            // Who may open it changed: the next open asks the server. Let
            // go after the change, so that a close answered meanwhile
            // cannot keep it.
            self.idle.lock().forget(ino);
        }
        if times_only {
            if let Some(attr) = self.times_given(ino, &set) {
                return Ok(attr);
            }
        } else {
            self.nodes().changed(ino);
        }
        self.attr_of(ino, fh, user).await
    }

    /// The attributes trusted for `ino`, if any, with the times `set`
    /// gives it.
    fn times_given(&self, ino: u64, set: &SetAttr) -> Option<FileAttr> {
        let mut nodes = self.nodes();
        nodes.times_set(ino, set.atime.map(system_time), set.mtime.map(system_time));
        nodes.fresh(ino, self.ttl)
    }

    /// Sets the kernel's own times of a file it wrote back in the
    /// background. The kernel sends them after each writeback of the file,
    /// mostly between the writes at close and the close itself, which
    /// need not wait for them (see [`crate::Cache::Loose`]).
    fn set_times_behind(self: &Arc<Self>, ino: u64, h: Arc<Handle>, user: u32, set: SetAttr) {
        let (setting, outcome) = watch::channel(None);
        let mine = outcome.clone();
        self.times_behind.lock().insert(ino, outcome);
        let inner = self.clone();
        tokio::spawn(async move {
            let mut set_times = inner.times_after_writeback(ino, &h, &set).await;
            if set_times == Err(fail(Errno::ENOENT)) {
                set_times = match inner.fid(ino, user).await {
                    Ok(fid) => fid.setattr(&set).await.map_err(errno),
                    Err(e) => Err(e),
                };
            }
            if let Err(e) = set_times {
                tracing::warn!("the times of inode {ino}, written back, were not set: {e:?}");
            }
            setting.send_replace(Some(set_times));
            let mut behind = inner.times_behind.lock();
            if behind.get(&ino).is_some_and(|o| o.same_channel(&mine)) {
                behind.remove(&ino);
            }
        });
    }

    /// Sets the kernel's own times of a file it wrote back, through its
    /// open file `h` (under loose caching; a caller's utimensat names no
    /// open file), with a stat beside them in the same round trip: the
    /// server's file then holds what the kernel's pages do, so the next
    /// open keeps the pages if the file is still at the qid.version the
    /// stat gives. Where the server ran the stat first, that version is
    /// one the file has already left, and the pages go as before.
    async fn times_after_writeback(
        &self,
        ino: u64,
        h: &Handle,
        set: &SetAttr,
    ) -> Result<(), KernelErrno> {
        let fid = h.file.fid();
        let (set, stat) = tokio::join!(biased; fid.setattr(set), fid.stat());
        set.map_err(errno)?;
        if let Ok(info) = stat
            && !h.exact
        {
            self.nodes().written_back(ino, info.qid.version);
        }
        Ok(())
    }

    /// The target of symbolic link `ino`. The kernel takes at most a page
    /// less one byte, and refuses a longer answer so that no answer
    /// reaches the caller: a server's longer target fails here instead.
    pub async fn readlink(&self, ino: u64, user: u32) -> Result<String, KernelErrno> {
        let fid = self.fid(ino, user).await?;
        let target = fid.readlink().await.map_err(errno)?;
        if target.len() >= LINK_MAX {
            return Err(fail(Errno::ENAMETOOLONG));
        }
        Ok(target)
    }

    /// statfs(2)'s figures for the file system holding `ino`.
    pub async fn statfs(&self, ino: u64, user: u32) -> Result<FsStats, KernelErrno> {
        let fid = self.fid(ino, user).await?;
        fid.statfs().await.map_err(errno)
    }
}
