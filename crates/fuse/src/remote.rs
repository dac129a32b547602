//! File operations whose answers the kernel needs in its own terms:
//! attributes, directory entries with the offsets that resume after them,
//! record locks. Everything else is one of the client's operations, which
//! speak whichever dialect the server does.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, TimeOrNow};
use ninep_client::{Client, Error, Fid, File, FileInfo, FsStats, Node, SetTime};
use ninep_wire::consts::{dotl, unix};
use ninep_wire::*;

/// An errno for the kernel.
pub(crate) type Errno32 = i32;

pub(crate) fn errno(e: &Error) -> Errno32 {
    e.errno().0 as i32
}

pub(crate) fn fail(e: Errno) -> Errno32 {
    e.0 as i32
}

/// The server and how to talk to it.
pub(crate) struct Remote {
    pub client: Client,
    pub dialect: Dialect,
    /// Owner and group shown for files of 9P2000 servers, which name them
    /// only by string: the mounting user's.
    pub owner: (u32, u32),
    /// The client id in this mount's lock requests.
    pub lock_client: String,
}

/// A new directory entry to make.
pub(crate) enum Make {
    Dir { mode: u32, gid: u32 },
    Node { mode: u32, rdev: u32, gid: u32 },
    Symlink { target: String, gid: u32 },
    Link { to: Arc<Fid> },
}

/// One directory entry, with the offset that resumes after it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: String,
    pub qid: Qid,
    pub kind: FileType,
    pub next: u64,
}

/// What a server with no way to tell reports (9P2000, .u): an empty disk,
/// so that df still answers.
const EMPTY_DISK: FsStats = FsStats {
    ty: 0,
    bsize: 4096,
    blocks: 0,
    bfree: 0,
    bavail: 0,
    files: 0,
    ffree: 0,
    fsid: 0,
    namelen: MAX_NAME_LEN as u32,
};

fn time(sec: u64, nsec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::new(sec, nsec.min(999_999_999) as u32)
}

/// A time to set, as the client takes it.
pub(crate) fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(at) => {
            let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            SetTime::At {
                sec: d.as_secs(),
                nsec: d.subsec_nanos(),
            }
        }
    }
}

/// The kernel's file type for Unix mode `mode`.
fn file_type(mode: u32) -> FileType {
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
/// which it matches for every number that fits.
fn kernel_rdev(rdev: u64) -> u32 {
    rdev as u32
}

fn getattr_attr(r: &Rgetattr) -> FileAttr {
    FileAttr {
        ino: 0,
        size: r.size,
        blocks: r.blocks,
        atime: time(r.atime_sec, r.atime_nsec),
        mtime: time(r.mtime_sec, r.mtime_nsec),
        ctime: time(r.ctime_sec, r.ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: file_type(r.mode),
        perm: (r.mode & 0o7777) as u16,
        nlink: r.nlink as u32,
        uid: r.uid,
        gid: r.gid,
        rdev: kernel_rdev(r.rdev),
        blksize: r.blksize as u32,
        flags: 0,
    }
}

impl Remote {
    /// The file's qid and attributes (with inode number 0).
    pub async fn attr(&self, fid: &Fid) -> Result<(Qid, FileAttr), Errno32> {
        if self.dialect == Dialect::L {
            // Rgetattr whole: blocks, ctime and blksize are the kernel's too.
            let msg = Tgetattr {
                fid: fid.number(),
                request_mask: dotl::GETATTR_BASIC,
            };
            let r = self.client.call(msg).await.map_err(|e| errno(&e))?;
            return Ok((r.qid, getattr_attr(&r)));
        }
        let info = fid.stat().await.map_err(|e| errno(&e))?;
        Ok((info.qid, self.info_attr(&info)))
    }

    fn info_attr(&self, info: &FileInfo) -> FileAttr {
        let known = |id: u32, or: u32| if id == NONUNAME { or } else { id };
        let mtime = time(info.mtime, info.mtime_nsec as u64);
        FileAttr {
            ino: 0,
            size: info.size,
            blocks: info.size.div_ceil(512),
            atime: time(info.atime, 0),
            mtime,
            ctime: mtime,
            crtime: UNIX_EPOCH,
            kind: file_type(info.mode),
            perm: (info.mode & 0o7777) as u16,
            nlink: if info.is_dir() { 2 } else { 1 },
            uid: known(info.n_uid, self.owner.0),
            gid: known(info.n_gid, self.owner.1),
            rdev: kernel_rdev(info.rdev),
            blksize: 4096,
            flags: 0,
        }
    }

    /// Makes `name` in the directory `dir`.
    pub async fn make(&self, dir: &Fid, name: &Name, what: Make) -> Result<(), Errno32> {
        let name = name.as_str();
        let made = match what {
            Make::Dir { mode, gid } => dir.mkdir_with_gid(name, mode, gid).await.map(drop),
            Make::Node { mode, rdev, gid } => {
                let node = Node {
                    mode,
                    rdev: u64::from(rdev),
                };
                dir.mknod(name, node, gid).await.map(drop)
            }
            Make::Symlink { target, gid } => dir.symlink(name, &target, gid).await.map(drop),
            Make::Link { to } => dir.link(name, &to).await,
        };
        made.map_err(|e| errno(&e))
    }

    /// statfs(2)'s figures, or an empty disk's.
    pub async fn statfs(&self, fid: &Fid) -> Result<FsStats, Errno32> {
        match fid.statfs().await {
            Err(e) if e.errno() == Errno::ENOSYS => Ok(EMPTY_DISK),
            other => other.map_err(|e| errno(&e)),
        }
    }

    /// Entries of the open directory `file` from `offset`: a Treaddir
    /// cookie (9P2000.L) or an index into `snapshot`, the listing read
    /// whole when a read starts at 0 (9P2000 directories cannot seek).
    pub async fn list(
        &self,
        file: &File,
        offset: u64,
        snapshot: &tokio::sync::Mutex<Vec<Entry>>,
    ) -> Result<Vec<Entry>, Errno32> {
        if self.dialect == Dialect::L {
            let msg = Treaddir {
                fid: file.fid().number(),
                offset,
                count: file.iounit(),
            };
            let r = self.client.call(msg).await.map_err(|e| errno(&e))?;
            let mut out = Vec::new();
            for d in Dirent::entries(&r.data) {
                let Ok(d) = d else { break };
                out.push(Entry {
                    name: d.name.into_string(),
                    qid: d.qid,
                    kind: file_type(convert::file_type(d.ty)),
                    next: d.offset,
                });
            }
            return Ok(out);
        }
        let mut listing = snapshot.lock().await;
        if offset == 0 {
            *listing = read_listing(file).await?;
        }
        Ok(listing.iter().skip(offset as usize).cloned().collect())
    }

    /// Takes, changes or drops a POSIX record lock for `owner` on bytes
    /// `start..=end` (9P2000.L). `wait`: retry while another owner holds a
    /// conflicting lock, as Linux's client does (servers answer "blocked"
    /// rather than hold the request).
    pub async fn lock(&self, file: &File, lock: Lock, wait: bool) -> Result<(), Errno32> {
        let mut pause = Duration::from_millis(10);
        loop {
            let msg = Tlock {
                fid: file.fid().number(),
                ty: lock.ty,
                flags: if wait { dotl::LOCK_FLAGS_BLOCK } else { 0 },
                start: lock.start,
                length: lock.length(),
                proc_id: lock.proc_id(),
                client_id: self.lock_client.clone(),
            };
            let r = self.client.call(msg).await.map_err(|e| errno(&e))?;
            match r.status {
                dotl::LOCK_SUCCESS => return Ok(()),
                dotl::LOCK_BLOCKED | dotl::LOCK_GRACE if wait => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                dotl::LOCK_BLOCKED | dotl::LOCK_GRACE => return Err(fail(Errno::EAGAIN)),
                _ => return Err(fail(Errno::ENOLCK)),
            }
        }
    }

    /// The lock that would stop `lock` being taken, if any (F_GETLK).
    pub async fn conflicting(&self, file: &File, lock: Lock) -> Result<Option<Lock>, Errno32> {
        let msg = Tgetlock {
            fid: file.fid().number(),
            ty: lock.ty,
            start: lock.start,
            length: lock.length(),
            proc_id: lock.proc_id(),
            client_id: self.lock_client.clone(),
        };
        let r = self.client.call(msg).await.map_err(|e| errno(&e))?;
        if r.ty == dotl::LOCK_TYPE_UNLCK {
            return Ok(None);
        }
        let end = match r.length {
            0 => Lock::TO_END,
            n => r.start.saturating_add(n - 1),
        };
        Ok(Some(Lock {
            ty: r.ty,
            start: r.start,
            end,
            owner: 0,
        }))
    }
}

/// A 9P2000 or .u directory's entries, read whole.
async fn read_listing(file: &File) -> Result<Vec<Entry>, Errno32> {
    // The server lists neither `.` nor `..`; the kernel's readers expect both.
    let dot = |name: &str, next| Entry {
        name: name.to_owned(),
        qid: file.qid(),
        kind: FileType::Directory,
        next,
    };
    let mut out = vec![dot(".", 1), dot("..", 2)];
    for e in file.read_dir().await.map_err(|e| errno(&e))? {
        let mode = e.info.map_or(0, |info| info.mode);
        out.push(Entry {
            name: e.name,
            qid: e.qid,
            kind: file_type(mode),
            next: out.len() as u64 + 1,
        });
    }
    Ok(out)
}

/// A POSIX record lock as the kernel gives it: type (F_RDLCK, F_WRLCK,
/// F_UNLCK, which are 9P2000.L's numbers too), an inclusive byte range and
/// the owner (an open file table, for the kernel).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lock {
    pub ty: u8,
    pub start: u64,
    pub end: u64,
    pub owner: u64,
}

impl Lock {
    /// The end of a lock that runs to the end of the file (OFFSET_MAX).
    pub const TO_END: u64 = i64::MAX as u64;

    /// 9P's length: 0 means to the end of the file.
    fn length(&self) -> u64 {
        if self.end >= Self::TO_END {
            0
        } else {
            self.end.saturating_sub(self.start) + 1
        }
    }

    /// 9P names a lock's owner by a 32-bit process id.
    fn proc_id(&self) -> u32 {
        (self.owner ^ (self.owner >> 32)) as u32
    }
}
