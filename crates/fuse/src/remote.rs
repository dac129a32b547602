//! File operations as the kernel asks for them, in whichever dialect the
//! server speaks: 9P2000.L directly; 9P2000.u and 9P2000 through stat,
//! wstat, Tcreate with .u extensions and walk-then-remove. Results and
//! failures are in the kernel's terms (attributes, errnos).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use fuser::{FileAttr, FileType, TimeOrNow};
use ninep_client::{Client, Error, Fid, File, FileInfo};
use ninep_wire::consts::mode::*;
use ninep_wire::consts::{dotl, open, unix};
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

/// Attribute changes the kernel asks for (setattr).
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
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

fn time(sec: u64, nsec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::new(sec, nsec.min(999_999_999) as u32)
}

fn seconds(t: TimeOrNow) -> Duration {
    let at = match t {
        TimeOrNow::Now => SystemTime::now(),
        TimeOrNow::SpecificTime(at) => at,
    };
    at.duration_since(UNIX_EPOCH).unwrap_or_default()
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

/// Linux's dev_t from a major and minor number, and back.
fn rdev(major: u32, minor: u32) -> u32 {
    ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & !0xff) << 12)
}

fn major_minor(rdev: u32) -> (u32, u32) {
    (
        (rdev >> 8) & 0xfff,
        (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
    )
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

impl Remote {
    fn is_l(&self) -> bool {
        self.dialect == Dialect::L
    }

    async fn rpc(&self, msg: impl Into<Msg>) -> Result<Msg, Errno32> {
        self.client.rpc(msg).await.map_err(|e| errno(&e))
    }

    /// The file's qid and attributes (with inode number 0).
    pub async fn attr(&self, fid: &Fid) -> Result<(Qid, FileAttr), Errno32> {
        if self.is_l() {
            let msg = Tgetattr {
                fid: fid.number(),
                request_mask: dotl::GETATTR_BASIC,
            };
            return match self.rpc(msg).await? {
                Msg::Rgetattr(r) => Ok((r.qid, getattr_attr(&r))),
                _ => Err(fail(Errno::EIO)),
            };
        }
        let info = fid.stat().await.map_err(|e| errno(&e))?;
        Ok((info.qid, self.info_attr(&info)))
    }

    fn info_attr(&self, info: &FileInfo) -> FileAttr {
        let known = |id: u32, or: u32| if id == NONUNAME { or } else { id };
        let dev = if info.mode & unix::S_IFMT == unix::S_IFCHR
            || info.mode & unix::S_IFMT == unix::S_IFBLK
        {
            let mut nums = info.extension.split_whitespace().skip(1);
            let mut next = || nums.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            rdev(next(), next())
        } else {
            0
        };
        let mtime = time(info.mtime, info.mtime_nsec as u64);
        FileAttr {
            ino: 0,
            size: info.size,
            blocks: info.size.div_ceil(512),
            atime: time(info.atime, 0),
            mtime,
            ctime: mtime,
            crtime: UNIX_EPOCH,
            kind: kind(info.mode),
            perm: (info.mode & 0o7777) as u16,
            nlink: if info.is_dir() { 2 } else { 1 },
            uid: known(info.n_uid, self.owner.0),
            gid: known(info.n_gid, self.owner.1),
            rdev: dev,
            blksize: 4096,
            flags: 0,
        }
    }

    pub async fn set_attr(&self, fid: &Fid, c: &Changes) -> Result<(), Errno32> {
        if self.is_l() {
            return self.setattr(fid, c).await;
        }
        let mut stat = Stat::dont_touch();
        if let Some(mode) = c.mode {
            // The type bits must stay as they are.
            let now = fid.stat().await.map_err(|e| errno(&e))?;
            let mut m = now.plan9_mode & !(0o777 | DMSETUID | DMSETGID | DMSETVTX);
            m |= mode & 0o777;
            if self.dialect == Dialect::U {
                for (bit, dm) in [
                    (unix::S_ISUID, DMSETUID),
                    (unix::S_ISGID, DMSETGID),
                    (unix::S_ISVTX, DMSETVTX),
                ] {
                    if mode & bit != 0 {
                        m |= dm;
                    }
                }
            }
            stat.mode = m;
        }
        if c.uid.is_some() || c.gid.is_some() {
            if self.dialect != Dialect::U {
                return Err(fail(Errno::EPERM));
            }
            stat.n_uid = c.uid.unwrap_or(NONUNAME);
            stat.n_gid = c.gid.unwrap_or(NONUNAME);
        }
        if let Some(size) = c.size {
            stat.length = size;
        }
        if let Some(t) = c.mtime {
            stat.mtime = seconds(t).as_secs() as u32;
        }
        if let Some(t) = c.atime {
            stat.atime = seconds(t).as_secs() as u32;
        }
        let msg = Twstat {
            fid: fid.number(),
            stat,
        };
        self.rpc(msg).await.map(drop)
    }

    async fn setattr(&self, fid: &Fid, c: &Changes) -> Result<(), Errno32> {
        let mut msg = Tsetattr {
            fid: fid.number(),
            valid: 0,
            mode: c.mode.unwrap_or(0),
            uid: c.uid.unwrap_or(0),
            gid: c.gid.unwrap_or(0),
            size: c.size.unwrap_or(0),
            atime_sec: 0,
            atime_nsec: 0,
            mtime_sec: 0,
            mtime_nsec: 0,
        };
        for (present, bit) in [
            (c.mode.is_some(), dotl::SETATTR_MODE),
            (c.uid.is_some(), dotl::SETATTR_UID),
            (c.gid.is_some(), dotl::SETATTR_GID),
            (c.size.is_some(), dotl::SETATTR_SIZE),
        ] {
            if present {
                msg.valid |= bit;
            }
        }
        // "Now" is the server's clock; a given time is sent with its _SET bit.
        let mut when = |t: Option<TimeOrNow>, plain: u32, given: u32| match t {
            None => (0, 0),
            Some(TimeOrNow::Now) => {
                msg.valid |= plain;
                (0, 0)
            }
            Some(at) => {
                msg.valid |= plain | given;
                let d = seconds(at);
                (d.as_secs(), d.subsec_nanos() as u64)
            }
        };
        let (asec, ansec) = when(c.atime, dotl::SETATTR_ATIME, dotl::SETATTR_ATIME_SET);
        let (msec, mnsec) = when(c.mtime, dotl::SETATTR_MTIME, dotl::SETATTR_MTIME_SET);
        (msg.atime_sec, msg.atime_nsec, msg.mtime_sec, msg.mtime_nsec) = (asec, ansec, msec, mnsec);
        if msg.valid == 0 {
            return Ok(());
        }
        msg.valid |= dotl::SETATTR_CTIME;
        self.rpc(msg).await.map(drop)
    }

    pub async fn readlink(&self, fid: &Fid) -> Result<String, Errno32> {
        match self.dialect {
            Dialect::L => match self.rpc(Treadlink { fid: fid.number() }).await? {
                Msg::Rreadlink(r) => Ok(r.target),
                _ => Err(fail(Errno::EIO)),
            },
            Dialect::U => {
                let info = fid.stat().await.map_err(|e| errno(&e))?;
                if info.mode & unix::S_IFMT != unix::S_IFLNK {
                    return Err(fail(Errno::EINVAL));
                }
                Ok(info.extension)
            }
            Dialect::Base => Err(fail(Errno::EINVAL)),
        }
    }

    /// Makes `name` in the directory `dir`.
    pub async fn make(&self, dir: &Fid, name: Name, what: Make) -> Result<(), Errno32> {
        if self.is_l() {
            let dfid = dir.number();
            let msg: Msg = match what {
                Make::Dir { mode, gid } => Tmkdir {
                    dfid,
                    name,
                    mode,
                    gid,
                }
                .into(),
                Make::Node { mode, rdev, gid } => {
                    let (major, minor) = major_minor(rdev);
                    Tmknod {
                        dfid,
                        name,
                        mode,
                        major,
                        minor,
                        gid,
                    }
                    .into()
                }
                Make::Symlink { target, gid } => Tsymlink {
                    fid: dfid,
                    name,
                    symtgt: target,
                    gid,
                }
                .into(),
                Make::Link { to } => Tlink {
                    dfid,
                    fid: to.number(),
                    name,
                }
                .into(),
            };
            return self.rpc(msg).await.map(drop);
        }
        let (perm, extension) = match what {
            Make::Dir { mode, .. } => (DMDIR | (mode & 0o777), String::new()),
            Make::Node { mode, rdev, .. } => {
                let perm = mode & 0o777;
                let (major, minor) = major_minor(rdev);
                match mode & unix::S_IFMT {
                    unix::S_IFREG | 0 => (perm, String::new()),
                    unix::S_IFIFO => (DMNAMEDPIPE | perm, String::new()),
                    unix::S_IFSOCK => (DMSOCKET | perm, String::new()),
                    unix::S_IFCHR => (DMDEVICE | perm, format!("c {major} {minor}")),
                    unix::S_IFBLK => (DMDEVICE | perm, format!("b {major} {minor}")),
                    _ => return Err(fail(Errno::EINVAL)),
                }
            }
            Make::Symlink { target, .. } => (DMSYMLINK | 0o777, target),
            // 9P2000.u names the file to link to by its fid number.
            Make::Link { to } => (DMLINK, to.number().0.to_string()),
        };
        if perm & (DMSYMLINK | DMLINK | DMDEVICE | DMNAMEDPIPE | DMSOCKET) != 0
            && self.dialect != Dialect::U
        {
            return Err(fail(Errno::EPERM));
        }
        // Tcreate turns the fid into the new file; dropping it clunks that.
        let at = dir.clone_fid().await.map_err(|e| errno(&e))?;
        let msg = Tcreate {
            fid: at.number(),
            name,
            perm,
            mode: open::OREAD,
            extension,
        };
        self.rpc(msg).await.map(drop)
    }

    /// Removes `name` from `dir`; `dir_only` for rmdir.
    pub async fn remove(&self, dir: &Fid, name: Name, dir_only: bool) -> Result<(), Errno32> {
        if self.is_l() {
            let flags = if dir_only { dotl::AT_REMOVEDIR } else { 0 };
            let msg = Tunlinkat {
                dirfid: dir.number(),
                name: name.clone(),
                flags,
            };
            match self.client.rpc(msg).await {
                // Servers without Tunlinkat (diod) get walk and Tremove, as
                // from Linux.
                Err(e) if e.errno() == Errno::EOPNOTSUPP => {}
                other => return other.map(drop).map_err(|e| errno(&e)),
            }
        }
        let file = dir.walk(&[name]).await.map_err(|e| errno(&e))?;
        // Tremove removes whatever it is given; unlink and rmdir may not.
        if !self.is_l() {
            match (dir_only, file.qid().ty.is_dir()) {
                (true, false) => return Err(fail(Errno::ENOTDIR)),
                (false, true) => return Err(fail(Errno::EISDIR)),
                _ => {}
            }
        }
        file.remove().await.map_err(|e| errno(&e))
    }

    pub async fn rename(
        &self,
        from: &Fid,
        oldname: Name,
        to: &Fid,
        newname: Name,
    ) -> Result<(), Errno32> {
        if self.is_l() {
            let msg = Trenameat {
                olddirfid: from.number(),
                oldname: oldname.clone(),
                newdirfid: to.number(),
                newname: newname.clone(),
            };
            match self.client.rpc(msg).await {
                // Servers that know only Trename (diod), as Linux does.
                Err(e) if e.errno() == Errno::EOPNOTSUPP => {}
                other => return other.map(drop).map_err(|e| errno(&e)),
            }
            let file = from.walk(&[oldname]).await.map_err(|e| errno(&e))?;
            let msg = Trename {
                fid: file.number(),
                dfid: to.number(),
                name: newname,
            };
            return self.rpc(msg).await.map(drop);
        }
        // A wstat renames within a directory only.
        if from.qid().path != to.qid().path {
            return Err(fail(Errno::EXDEV));
        }
        let file = from.walk(&[oldname]).await.map_err(|e| errno(&e))?;
        let stat = Stat {
            name: newname.into_string(),
            ..Stat::dont_touch()
        };
        let msg = Twstat {
            fid: file.number(),
            stat,
        };
        self.rpc(msg).await.map(drop)
    }

    /// statfs(2)'s figures; servers without Tstatfs report an empty disk.
    pub async fn statfs(&self, fid: &Fid) -> Result<Rstatfs, Errno32> {
        if !self.is_l() {
            return Ok(Rstatfs {
                ty: 0,
                bsize: 4096,
                blocks: 0,
                bfree: 0,
                bavail: 0,
                files: 0,
                ffree: 0,
                fsid: 0,
                namelen: 255,
            });
        }
        match self.rpc(Tstatfs { fid: fid.number() }).await? {
            Msg::Rstatfs(s) => Ok(s),
            _ => Err(fail(Errno::EIO)),
        }
    }

    pub async fn fsync(&self, file: &File, datasync: bool) -> Result<(), Errno32> {
        if !self.is_l() {
            return file.sync().await.map_err(|e| errno(&e));
        }
        let msg = Tfsync {
            fid: file.fid().number(),
            datasync: Some(datasync as u32),
        };
        self.rpc(msg).await.map(drop)
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
        if self.is_l() {
            let msg = Treaddir {
                fid: file.fid().number(),
                offset,
                count: file.iounit(),
            };
            let data = match self.rpc(msg).await? {
                Msg::Rreaddir(r) => r.data,
                _ => return Err(fail(Errno::EIO)),
            };
            let mut out = Vec::new();
            for d in Dirent::entries(&data) {
                let Ok(d) = d else { break };
                out.push(Entry {
                    name: d.name.into_string(),
                    qid: d.qid,
                    kind: dirent_kind(d.ty),
                    next: d.offset,
                });
            }
            return Ok(out);
        }
        let mut listing = snapshot.lock().await;
        if offset == 0 {
            *listing = self.read_listing(file).await?;
        }
        Ok(listing.iter().skip(offset as usize).cloned().collect())
    }

    async fn read_listing(&self, file: &File) -> Result<Vec<Entry>, Errno32> {
        // The server lists neither `.` nor `..`; the kernel's readers expect both.
        let dot = |name: &str, next| Entry {
            name: name.to_owned(),
            qid: file.qid(),
            kind: FileType::Directory,
            next,
        };
        let mut out = vec![dot(".", 1), dot("..", 2)];
        let mut at = 0;
        loop {
            let data: Bytes = file
                .read_at(at, file.iounit())
                .await
                .map_err(|e| errno(&e))?;
            if data.is_empty() {
                return Ok(out);
            }
            at += data.len() as u64;
            for s in Stat::entries(&data, self.dialect) {
                let s = s.map_err(|_| fail(Errno::EIO))?;
                let info = FileInfo::from_stat(s, self.dialect);
                out.push(Entry {
                    name: info.name,
                    qid: info.qid,
                    kind: kind(info.mode),
                    next: out.len() as u64 + 1,
                });
            }
        }
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
            let status = match self.rpc(msg).await? {
                Msg::Rlock(r) => r.status,
                _ => return Err(fail(Errno::EIO)),
            };
            match status {
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
        let r = match self.rpc(msg).await? {
            Msg::Rgetlock(r) => r,
            _ => return Err(fail(Errno::EIO)),
        };
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
