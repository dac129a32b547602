//! Lookups and attributes: names walked to inodes, attributes in the
//! kernel's terms and changed at its request, symbolic links read, the
//! file system's figures.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, TimeOrNow};
use ninep_client::{Fid, FileInfo, FsStats, SetAttr, SetTime};
use ninep_wire::consts::unix;
use ninep_wire::{Dialect, Errno, NONUNAME, Name, Qid};

use crate::{Conn, Errno32, Inner, errno, fail};

fn time(sec: u64, nsec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::new(sec, nsec.min(999_999_999) as u32)
}

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
    pub async fn attr(&self, fid: &Fid) -> Result<(Qid, FileAttr), Errno32> {
        let info = fid.stat().await.map_err(errno)?;
        Ok((info.qid, self.info_attr(&info)))
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
            ino: 0,
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
            blksize: info.blksize as u32,
            flags: 0,
        }
    }
}

impl Inner {
    /// Walks `name` in `parent` and makes (or finds) its inode; one more
    /// lookup of it is counted.
    pub async fn lookup(&self, parent: u64, name: &Name, user: u32) -> Result<FileAttr, Errno32> {
        // The name may be of a file being written: the attributes must
        // include what was written.
        self.settle_writes(|_, _| true).await;
        let dir = self.fid(parent, user).await?;
        let walk = dir.walk(std::slice::from_ref(name));
        // A name looked up again usually names the same file still: its
        // attributes are asked for on the fid kept while the walk goes,
        // and serve if the reply's qid is the one the walk reached.
        let kept = self.nodes().fid_at(parent, name, user);
        let (walked, early) = match kept {
            Some(kept) => {
                let (walked, attr) = tokio::join!(walk, self.conn.attr(&kept));
                (walked, attr.ok())
            }
            None => (walk.await, None),
        };
        let fid = walked.map_err(errno)?;
        let found = match early {
            Some((qid, attr)) if qid.path == fid.qid().path => (qid, attr),
            _ => self.conn.attr(&fid).await?,
        };
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
        attr.ino = nodes.found(parent, name.clone(), user, fid, qid, &attr);
        nodes.sized(attr.ino, attr.size);
        attr
    }

    /// The attributes of `ino`, through the open file `fh` if given.
    pub async fn attr_of(&self, ino: u64, fh: Option<u64>, user: u32) -> Result<FileAttr, Errno32> {
        // The server's size and times must include every write made.
        self.settle_writes(|_, h| h.ino == ino).await;
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
        attr.ino = ino;
        self.nodes().sized(ino, attr.size);
        Ok(attr)
    }

    /// Makes the changes `set` to `ino`, through the open file `fh` if
    /// given, and answers with the attributes after.
    pub async fn set_attr(
        &self,
        ino: u64,
        fh: Option<u64>,
        user: u32,
        mut set: SetAttr,
    ) -> Result<FileAttr, Errno32> {
        // Any change changes the inode (ctime), as in Linux; a truncation
        // comes after the writes made before it.
        set.ctime = set != SetAttr::default();
        self.settle_writes(|_, h| h.ino == ino).await;
        if set.size.is_some() {
            self.forget_read_ahead(ino).await;
        }
        // ftruncate and fchmod work on open files whose names are gone; the
        // inode's fid serves when the open one names a path that is gone
        // (diod, after a rename).
        let by_handle = match fh.map(|fh| self.handle(fh)) {
            Some(Ok(h)) => h.file.fid().setattr(&set).await.map_err(errno),
            _ => Err(fail(Errno::ENOENT)),
        };
        if by_handle == Err(fail(Errno::ENOENT)) {
            let fid = self.fid(ino, user).await?;
            fid.setattr(&set).await.map_err(errno)?;
        } else {
            by_handle?;
        }
        self.attr_of(ino, fh, user).await
    }

    /// The target of the symbolic link `ino`.
    pub async fn readlink(&self, ino: u64, user: u32) -> Result<String, Errno32> {
        let fid = self.fid(ino, user).await?;
        fid.readlink().await.map_err(errno)
    }

    /// statfs(2)'s figures for the file system holding `ino`.
    pub async fn statfs(&self, ino: u64, user: u32) -> Result<FsStats, Errno32> {
        let fid = self.fid(ino, user).await?;
        fid.statfs().await.map_err(errno)
    }
}
