//! Running one request: the protocol rules that depend on fid state, and the
//! mapping of each message onto the [`Filesystem`] trait.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ninep_wire::consts::{dotl, mode::*, open::*, unix::*};
use ninep_wire::*;
use tokio::sync::RwLockReadGuard;

use crate::clunk::{self, Ending};
use crate::convert;
use crate::error::{Error, Result};
use crate::fids::{FidState, Pending, Slot, Xattr};
use crate::fs::{Cx, DirEntry, Filesystem, Opened, User, can_read, can_write};
use crate::session::{Conn, Session};

/// Largest extended attribute value accepted (Linux's XATTR_SIZE_MAX).
const XATTR_SIZE_MAX: u64 = 64 * 1024;

/// The fids a request names, looked up or reserved as it arrived.
pub(crate) struct Resolved<T> {
    pub fid: Option<Arc<Slot<T>>>,
    pub other: Option<Arc<Slot<T>>>,
    pub new: Option<Pending<T>>,
}

impl<T> Default for Resolved<T> {
    fn default() -> Self {
        Resolved {
            fid: None,
            other: None,
            new: None,
        }
    }
}

pub(crate) struct Handler<'a, F: Filesystem> {
    pub conn: &'a Conn<F>,
    pub session: Session,
}

pub(crate) fn unknown_fid() -> Error {
    Error::with_errno(Errno::EBADF, "unknown fid")
}

pub(crate) fn not_open() -> Error {
    Error::with_errno(Errno::EBADF, "fid not open")
}

/// A read lock on a fid that must exist.
pub(crate) async fn read<T>(
    slot: &Option<Arc<Slot<T>>>,
) -> Result<RwLockReadGuard<'_, Option<FidState<T>>>> {
    let guard = slot.as_ref().ok_or_else(unknown_fid)?.read().await;
    if guard.is_none() {
        return Err(unknown_fid());
    }
    Ok(guard)
}

pub(crate) fn state<T>(guard: &Option<FidState<T>>) -> Result<&FidState<T>> {
    guard.as_ref().ok_or_else(unknown_fid)
}

fn check_new_name(name: &Name) -> Result<()> {
    if name.is_empty() || name.is_dot_or_dotdot() {
        return Err(Error::with_errno(Errno::EINVAL, "illegal name"));
    }
    Ok(())
}

impl<F: Filesystem> Handler<'_, F> {
    pub(crate) fn fs(&self) -> &F {
        &self.conn.shared.fs
    }

    pub(crate) fn cx(&self, state: &FidState<F::File>) -> Cx {
        Cx {
            user: state.user.clone(),
            dialect: self.session.dialect,
            streaming: false,
        }
    }

    fn iounit(&self, opened: &Opened) -> u32 {
        let max = self.session.msize - IOHDRSZ;
        if opened.iounit == 0 {
            max
        } else {
            opened.iounit.min(max)
        }
    }

    pub async fn run(self, msg: Msg, r: Resolved<F::File>) -> Result<Msg> {
        let d = self.session.dialect;
        Ok(match msg {
            Msg::Tattach(m) => self.attach(m, r).await?,
            Msg::Twalk(m) => self.walk(m, r).await?,
            Msg::Topen(m) => {
                let flags = convert::open_flags(m.mode);
                let opened = self.open(&r, flags, m.mode & ORCLOSE != 0).await?;
                Ropen {
                    qid: opened.qid,
                    iounit: self.iounit(&opened),
                }
                .into()
            }
            Msg::Tlopen(m) => {
                let opened = self.open(&r, m.flags, false).await?;
                Rlopen {
                    qid: opened.qid,
                    iounit: self.iounit(&opened),
                }
                .into()
            }
            Msg::Tcreate(m) => self.create(m, &r).await?,
            Msg::Tlcreate(m) => {
                check_new_name(&m.name)?;
                let flags = m.flags & !(dotl::O_CREAT | dotl::O_EXCL);
                let opened = self
                    .create_file(&r, &m.name, m.mode & 0o7777, flags, m.gid, false)
                    .await?;
                Rlcreate {
                    qid: opened.qid,
                    iounit: self.iounit(&opened),
                }
                .into()
            }
            Msg::Tread(m) => self.read(m, &r).await?,
            Msg::Twrite(m) => self.write(m, &r).await?,
            Msg::Tclunk(_) => {
                self.end(r, Ending::Clunk).await?;
                Rclunk {}.into()
            }
            Msg::Tremove(_) => {
                self.end(r, Ending::Remove).await?;
                Rremove {}.into()
            }
            Msg::Tstat(_) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let attr = self.fs().getattr(&self.cx(s), &s.file).await?;
                let ext = self.extension(s, &attr).await;
                Rstat {
                    stat: convert::stat(&attr, d, ext),
                }
                .into()
            }
            Msg::Twstat(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let cx = self.cx(s);
                let attr = self.fs().getattr(&cx, &s.file).await?;
                let (set, rename) = convert::wstat(&m.stat, &attr, d)?;
                if set.is_empty() && rename.is_none() {
                    self.fs().fsync(&cx, &s.file, false).await?;
                }
                if !set.is_empty() {
                    self.fs().setattr(&cx, &s.file, &set).await?;
                }
                if let Some(name) = rename {
                    self.fs().rename(&cx, &s.file, None, &name).await?;
                }
                Rwstat {}.into()
            }
            Msg::Tgetattr(_) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let attr = self.fs().getattr(&self.cx(s), &s.file).await?;
                convert::getattr(&attr).into()
            }
            Msg::Tsetattr(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let set = convert::setattr(&m);
                self.fs().setattr(&self.cx(s), &s.file, &set).await?;
                Rsetattr {}.into()
            }
            Msg::Tstatfs(_) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                self.fs().statfs(&self.cx(s), &s.file).await?.into()
            }
            Msg::Treadlink(_) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let target = self.fs().readlink(&self.cx(s), &s.file).await?;
                Rreadlink { target }.into()
            }
            Msg::Tfsync(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let datasync = m.datasync.unwrap_or(0) != 0;
                self.fs().fsync(&self.cx(s), &s.file, datasync).await?;
                Rfsync {}.into()
            }
            Msg::Tlock(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let status = self.fs().lock(&self.cx(s), &s.file, &m).await?;
                Rlock { status }.into()
            }
            Msg::Tgetlock(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                self.fs().getlock(&self.cx(s), &s.file, &m).await?.into()
            }
            Msg::Tsymlink(m) => {
                check_new_name(&m.name)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                let qid = self
                    .fs()
                    .symlink(&self.cx(s), &s.file, &m.name, &m.symtgt, m.gid)
                    .await?;
                Rsymlink { qid }.into()
            }
            Msg::Tmknod(m) => {
                check_new_name(&m.name)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                let qid = self
                    .fs()
                    .mknod(
                        &self.cx(s),
                        &s.file,
                        &m.name,
                        m.mode,
                        m.major,
                        m.minor,
                        m.gid,
                    )
                    .await?;
                Rmknod { qid }.into()
            }
            Msg::Tmkdir(m) => {
                check_new_name(&m.name)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                let qid = self
                    .fs()
                    .mkdir(&self.cx(s), &s.file, &m.name, m.mode & 0o7777, m.gid)
                    .await?;
                Rmkdir { qid }.into()
            }
            Msg::Tlink(m) => {
                check_new_name(&m.name)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                let other = self.other(&r, &g).await?;
                let target = &state(other.get(&g))?.file;
                self.fs()
                    .link(&self.cx(s), &s.file, target, &m.name)
                    .await?;
                Rlink {}.into()
            }
            Msg::Trename(m) => {
                check_new_name(&m.name)?;
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let other = self.other(&r, &g).await?;
                let newdir = &state(other.get(&g))?.file;
                self.fs()
                    .rename(&self.cx(s), &s.file, Some(newdir), &m.name)
                    .await?;
                Rrename {}.into()
            }
            Msg::Trenameat(m) => {
                check_new_name(&m.oldname)?;
                check_new_name(&m.newname)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                let other = self.other(&r, &g).await?;
                let newdir = &state(other.get(&g))?.file;
                self.fs()
                    .renameat(&self.cx(s), &s.file, &m.oldname, newdir, &m.newname)
                    .await?;
                Rrenameat {}.into()
            }
            Msg::Tunlinkat(m) => {
                check_new_name(&m.name)?;
                let g = self.dir(&r).await?;
                let s = state(&g)?;
                self.fs()
                    .unlinkat(&self.cx(s), &s.file, &m.name, m.flags)
                    .await?;
                Runlinkat {}.into()
            }
            Msg::Treaddir(m) => self.readdir(m, &r).await?,
            Msg::Txattrwalk(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let value = self.fs().xattr_get(&self.cx(s), &s.file, &m.name).await?;
                let size = value.len() as u64;
                let mut new = FidState::new(s.file.clone(), s.qid, s.user.clone());
                new.xattr = Some(Xattr::Read(value));
                new.open = Some(dotl::O_RDONLY);
                r.new.ok_or_else(unknown_fid)?.fill(new);
                Rxattrwalk { size }.into()
            }
            Msg::Txattrcreate(m) => {
                if m.attr_size > XATTR_SIZE_MAX {
                    return Err(Error::from_errno(Errno(7))); // E2BIG
                }
                let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
                let mut g = slot.write().await;
                let s = g.as_mut().ok_or_else(unknown_fid)?;
                s.xattr = Some(Xattr::Write {
                    name: m.name,
                    size: m.attr_size,
                    flags: m.flags,
                    value: BytesMut::with_capacity(m.attr_size as usize),
                });
                s.open = Some(dotl::O_WRONLY);
                Rxattrcreate {}.into()
            }
            other => {
                return Err(Error::with_errno(
                    Errno::EOPNOTSUPP,
                    format!("{} not supported", other.name()),
                ));
            }
        })
    }

    /// A read lock on the request's fid, which must be a directory.
    async fn dir<'r>(
        &self,
        r: &'r Resolved<F::File>,
    ) -> Result<RwLockReadGuard<'r, Option<FidState<F::File>>>> {
        let g = read(&r.fid).await?;
        if !state(&g)?.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        Ok(g)
    }

    /// The request's second fid, locked; the same guard if it names the
    /// first fid again (taking a second read lock could deadlock behind a
    /// queued writer).
    async fn other<'r>(
        &self,
        r: &'r Resolved<F::File>,
        _first: &RwLockReadGuard<'r, Option<FidState<F::File>>>,
    ) -> Result<Other<'r, F::File>> {
        let (Some(a), Some(b)) = (&r.fid, &r.other) else {
            return Err(unknown_fid());
        };
        if Arc::ptr_eq(a, b) {
            return Ok(Other::Same);
        }
        Ok(Other::Own(read(&r.other).await?))
    }

    async fn attach(&self, m: Tattach, r: Resolved<F::File>) -> Result<Msg> {
        let user = Arc::new(User {
            uname: m.uname,
            n_uname: m.n_uname,
            aname: m.aname,
        });
        let (file, qid) = self.fs().attach(&user).await?;
        r.new
            .ok_or_else(unknown_fid)?
            .fill(FidState::new(file, qid, user));
        Ok(Rattach { qid }.into())
    }

    async fn walk(&self, m: Twalk, r: Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        if s.open.is_some() {
            return Err(Error::with_errno(Errno::EBADF, "cannot walk an open fid"));
        }
        if !m.wname.is_empty() && !s.qid.ty.is_dir() {
            return Err(Error::with_errno(Errno::ENOTDIR, "walk in non-directory"));
        }
        let cx = self.cx(s);
        let (mut wqid, walked) = self.fs().walk_names(&cx, &s.file, &m.wname).await?;
        wqid.truncate(m.wname.len());
        if let Some(file) = walked.filter(|_| wqid.len() == m.wname.len()) {
            let qid = wqid.last().copied().unwrap_or(s.qid);
            let user = s.user.clone();
            drop(g);
            match r.new {
                Some(new) => new.fill(FidState::new(file, qid, user)),
                None => {
                    // newfid == fid: the fid itself moves.
                    let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
                    let mut g = slot.write().await;
                    let s = g.as_mut().ok_or_else(unknown_fid)?;
                    if s.open.is_some() {
                        return Err(Error::with_errno(Errno::EBADF, "cannot walk an open fid"));
                    }
                    s.file = file;
                    s.qid = qid;
                }
            }
        }
        Ok(Rwalk { wqid }.into())
    }

    async fn open(&self, r: &Resolved<F::File>, flags: u32, rclose: bool) -> Result<Opened> {
        let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
        let mut g = slot.write().await;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        if s.open.is_some() {
            return Err(Error::with_errno(Errno::EBADF, "fid already open"));
        }
        if s.qid.ty.is_dir() && (can_write(flags) || flags & dotl::O_TRUNC != 0 || rclose) {
            return Err(Error::is_dir());
        }
        let exclusive = if s.qid.ty.contains(QidType::EXCL) {
            let claim = self.conn.shared.exclusive.claim(s.qid.path);
            Some(claim.ok_or_else(|| {
                Error::with_errno(Errno::EBUSY, "exclusive use file already open")
            })?)
        } else {
            None
        };
        // An open that fails (or is flushed) drops the claim.
        let cx = self.cx(s);
        let opened = self.fs().open(&cx, &mut s.file, flags).await?;
        s.open = Some(flags);
        s.qid = opened.qid;
        s.rclose = rclose;
        s.exclusive = exclusive;
        Ok(opened)
    }

    async fn create(&self, m: Tcreate, r: &Resolved<F::File>) -> Result<Msg> {
        check_new_name(&m.name)?;
        let rclose = m.mode & ORCLOSE != 0;
        let perm = m.perm;
        let special = DMSYMLINK | DMLINK | DMDEVICE | DMNAMEDPIPE | DMSOCKET;
        let opened = if perm & DMDIR != 0 || perm & special != 0 {
            self.create_special(&m, r).await?
        } else {
            let mut mode = perm & (0o777 | DMAPPEND | DMEXCL | DMTMP);
            if self.session.dialect == Dialect::U {
                for (dm, bit) in [
                    (DMSETUID, S_ISUID),
                    (DMSETGID, S_ISGID),
                    (DMSETVTX, S_ISVTX),
                ] {
                    if perm & dm != 0 {
                        mode |= bit;
                    }
                }
            }
            let flags = convert::open_flags(m.mode);
            self.create_file(r, &m.name, mode, flags, NONUNAME, rclose)
                .await?
        };
        Ok(Rcreate {
            qid: opened.qid,
            iounit: self.iounit(&opened),
        }
        .into())
    }

    /// Creates and opens a regular file; the fid becomes the new file.
    async fn create_file(
        &self,
        r: &Resolved<F::File>,
        name: &Name,
        mode: u32,
        flags: u32,
        gid: u32,
        rclose: bool,
    ) -> Result<Opened> {
        let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
        let mut g = slot.write().await;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        if s.open.is_some() {
            return Err(Error::with_errno(Errno::EBADF, "fid already open"));
        }
        if !s.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        let cx = self.cx(s);
        let (file, opened) = self
            .fs()
            .create(&cx, &s.file, name, mode, flags, gid)
            .await?;
        // A new file is free, so the claim is sure to be had.
        let exclusive = if opened.qid.ty.contains(QidType::EXCL) {
            self.conn.shared.exclusive.claim(opened.qid.path)
        } else {
            None
        };
        s.file = file;
        s.qid = opened.qid;
        s.open = Some(flags);
        s.rclose = rclose;
        s.exclusive = exclusive;
        Ok(opened)
    }

    /// 9P2000 and .u Tcreate of a directory or (9P2000.u) a special file: made
    /// with the matching .L operation, then walked to.
    async fn create_special(&self, m: &Tcreate, r: &Resolved<F::File>) -> Result<Opened> {
        let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
        let mut g = slot.write().await;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        if s.open.is_some() {
            return Err(Error::with_errno(Errno::EBADF, "fid already open"));
        }
        if !s.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        let cx = self.cx(s);
        let fs = self.fs();
        let perm = m.perm & 0o777;
        let is_u = self.session.dialect == Dialect::U;
        if m.perm & DMDIR != 0 {
            if m.mode & 3 != OREAD || m.mode & (OTRUNC | ORCLOSE) != 0 {
                return Err(Error::is_dir());
            }
            fs.mkdir(&cx, &s.file, &m.name, perm, NONUNAME).await?;
        } else if !is_u {
            return Err(Error::new("special files need 9P2000.u"));
        } else if m.perm & DMSYMLINK != 0 {
            fs.symlink(&cx, &s.file, &m.name, &m.extension, NONUNAME)
                .await?;
        } else if m.perm & DMLINK != 0 {
            let fid: u32 = m
                .extension
                .trim()
                .parse()
                .map_err(|_| Error::new("bad hard link extension"))?;
            let target = self.conn.fids.get(Fid(fid)).ok_or_else(unknown_fid)?;
            if Arc::ptr_eq(&target, slot) {
                return Err(Error::from_errno(Errno::EINVAL));
            }
            let tg = target.read().await;
            let t = tg.as_ref().ok_or_else(unknown_fid)?;
            fs.link(&cx, &s.file, &t.file, &m.name).await?;
        } else {
            let (ty, major, minor) = if m.perm & DMDEVICE != 0 {
                parse_device(&m.extension)?
            } else if m.perm & DMNAMEDPIPE != 0 {
                (S_IFIFO, 0, 0)
            } else {
                (S_IFSOCK, 0, 0)
            };
            fs.mknod(&cx, &s.file, &m.name, ty | perm, major, minor, NONUNAME)
                .await?;
        }
        let (file, qid) = fs.walk(&cx, &s.file, &m.name).await?;
        s.file = file;
        s.qid = qid;
        s.open = Some(dotl::O_RDONLY);
        Ok(Opened { qid, iounit: 0 })
    }

    async fn read(&self, m: Tread, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        let count = m.count.min(self.session.msize - IOHDRSZ);
        if let Some(Xattr::Read(value)) = &s.xattr {
            return Ok(Rread {
                data: slice_at(value, m.offset, count),
            }
            .into());
        }
        let flags = s.open.ok_or_else(not_open)?;
        if !can_read(flags) {
            return Err(Error::with_errno(Errno::EBADF, "fid not open for reading"));
        }
        if s.qid.ty.is_dir() {
            if self.session.dialect == Dialect::L {
                return Err(Error::is_dir());
            }
            return self.read_stats(s, m.offset, count).await;
        }
        let mut data = self
            .fs()
            .read(&self.cx(s), &s.file, m.offset, count)
            .await?;
        data.truncate(count as usize);
        Ok(Rread { data }.into())
    }

    /// The listing of a directory fid, taken afresh when a read starts at 0.
    async fn listing(&self, s: &FidState<F::File>, offset: u64) -> Result<Arc<Vec<DirEntry>>> {
        let have = lock(&s.dir).entries.clone();
        match have {
            Some(entries) if offset != 0 => Ok(entries),
            _ => {
                let entries = Arc::new(self.fs().read_dir(&self.cx(s), &s.file).await?);
                let mut cursor = lock(&s.dir);
                cursor.entries = Some(entries.clone());
                cursor.next_offset = 0;
                cursor.next_index = 0;
                Ok(entries)
            }
        }
    }

    /// A 9P2000 directory read: whole stat entries, from the offset where the
    /// last read ended (or 0).
    async fn read_stats(&self, s: &FidState<F::File>, offset: u64, count: u32) -> Result<Msg> {
        let entries = self.listing(s, offset).await?;
        let start = {
            let cursor = lock(&s.dir);
            if offset != cursor.next_offset {
                return Err(Error::with_errno(
                    Errno::EINVAL,
                    "bad offset in directory read",
                ));
            }
            cursor.next_index
        };
        let mut data = BytesMut::new();
        let mut index = start;
        for entry in &entries[start.min(entries.len())..] {
            let ext = self.extension_of(s, entry).await;
            let stat = convert::stat(&entry.attr, self.session.dialect, ext);
            let len = stat.encoded_len(self.session.dialect) + 2;
            if data.len() + len > count as usize {
                break;
            }
            stat.encode_entry(&mut data, self.session.dialect)
                .map_err(|e| Error::new(e.to_string()))?;
            index += 1;
        }
        if index == start && start < entries.len() {
            return Err(Error::with_errno(
                Errno::EINVAL,
                "read count too small for a directory entry",
            ));
        }
        let mut cursor = lock(&s.dir);
        cursor.next_offset = offset + data.len() as u64;
        cursor.next_index = index;
        Ok(Rread {
            data: data.freeze(),
        }
        .into())
    }

    /// 9P2000.L Treaddir: `.`, `..`, then the listing; each entry's offset is
    /// the cookie that resumes after it.
    async fn readdir(&self, m: Treaddir, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        s.open.ok_or_else(not_open)?;
        if !s.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        let count = m.count.min(self.session.msize - READDIRHDRSZ) as usize;
        let entries = self.listing(s, m.offset).await?;
        let cx = self.cx(s);
        let dot = |name: &str, qid: Qid, offset: u64| Dirent {
            qid,
            offset,
            ty: dotl::DT_DIR,
            name: Name::new(name).unwrap_or_default(),
        };
        let mut data = BytesMut::new();
        let mut index = m.offset;
        loop {
            let entry = match index {
                0 => dot(".", s.qid, 1),
                1 => {
                    let parent = match self.fs().walk(&cx, &s.file, &dotdot()).await {
                        Ok((_, qid)) => qid,
                        Err(_) => s.qid,
                    };
                    dot("..", parent, 2)
                }
                i => match entries.get((i - 2) as usize) {
                    Some(e) => Dirent {
                        qid: e.attr.qid,
                        offset: i + 1,
                        ty: convert::dirent_type(&e.attr),
                        name: e.name.clone(),
                    },
                    None => break,
                },
            };
            if data.len() + entry.encoded_len() > count {
                break;
            }
            entry.encode(&mut data);
            index += 1;
        }
        if data.is_empty() && (index as usize) < entries.len() + 2 {
            return Err(Error::with_errno(
                Errno::EINVAL,
                "read count too small for a directory entry",
            ));
        }
        Ok(Rreaddir {
            data: data.freeze(),
        }
        .into())
    }

    async fn write(&self, m: Twrite, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        if let Some(Xattr::Write { .. }) = &s.xattr {
            drop(g);
            return self.write_xattr(m, r).await;
        }
        let flags = s.open.ok_or_else(not_open)?;
        if !can_write(flags) {
            return Err(Error::with_errno(Errno::EBADF, "fid not open for writing"));
        }
        if s.qid.ty.is_dir() {
            return Err(Error::is_dir());
        }
        let len = m.data.len() as u32;
        let count = self
            .fs()
            .write(&self.cx(s), &s.file, m.offset, m.data)
            .await?;
        Ok(Rwrite {
            count: count.min(len),
        }
        .into())
    }

    async fn write_xattr(&self, m: Twrite, r: &Resolved<F::File>) -> Result<Msg> {
        let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
        let mut g = slot.write().await;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        let Some(Xattr::Write { size, value, .. }) = &mut s.xattr else {
            return Err(not_open());
        };
        let end = m.offset.checked_add(m.data.len() as u64);
        if m.offset != value.len() as u64 || end.is_none_or(|end| end > *size) {
            return Err(Error::from_errno(Errno::EINVAL));
        }
        value.extend_from_slice(&m.data);
        Ok(Rwrite {
            count: m.data.len() as u32,
        }
        .into())
    }

    /// Tclunk, Tremove: ends the fid, which left the table as the request
    /// arrived.
    async fn end(&self, r: Resolved<F::File>, how: Ending) -> Result<()> {
        let slot = r.fid.ok_or_else(unknown_fid)?;
        let conn = self.conn;
        clunk::end(&conn.tasks, &conn.shared, slot, self.session.dialect, how).await
    }

    /// The 9P2000.u stat extension of a file: a symlink's target, a device's
    /// numbers.
    async fn extension(&self, s: &FidState<F::File>, attr: &crate::fs::Attr) -> String {
        if self.session.dialect != Dialect::U {
            return String::new();
        }
        if attr.mode & S_IFMT == S_IFLNK {
            return self
                .fs()
                .readlink(&self.cx(s), &s.file)
                .await
                .unwrap_or_default();
        }
        convert::device_extension(attr).unwrap_or_default()
    }

    async fn extension_of(&self, dir: &FidState<F::File>, entry: &DirEntry) -> String {
        if self.session.dialect != Dialect::U {
            return String::new();
        }
        if entry.attr.mode & S_IFMT == S_IFLNK {
            let cx = self.cx(dir);
            if let Ok((file, _)) = self.fs().walk(&cx, &dir.file, &entry.name).await {
                return self.fs().readlink(&cx, &file).await.unwrap_or_default();
            }
        }
        convert::device_extension(&entry.attr).unwrap_or_default()
    }
}

/// A second fid that may be the first one again.
enum Other<'r, T> {
    Same,
    Own(RwLockReadGuard<'r, Option<FidState<T>>>),
}

impl<'r, T> Other<'r, T> {
    fn get<'a>(
        &'a self,
        first: &'a RwLockReadGuard<'r, Option<FidState<T>>>,
    ) -> &'a Option<FidState<T>> {
        match self {
            Other::Same => first,
            Other::Own(g) => g,
        }
    }
}

fn dotdot() -> Name {
    Name::new("..").unwrap_or_default()
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `count` bytes of `value` from `offset`, empty past the end.
pub(crate) fn slice_at(value: &Bytes, offset: u64, count: u32) -> Bytes {
    let len = value.len() as u64;
    if offset >= len {
        return Bytes::new();
    }
    let end = offset.saturating_add(count as u64).min(len);
    value.slice(offset as usize..end as usize)
}

/// `c 1 3` or `b 8 1` from a 9P2000.u extension.
fn parse_device(ext: &str) -> Result<(u32, u32, u32)> {
    let bad = || Error::new("bad device extension");
    let mut parts = ext.split_whitespace();
    let ty = match parts.next() {
        Some("c") => S_IFCHR,
        Some("b") => S_IFBLK,
        _ => return Err(bad()),
    };
    let major = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let minor = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    Ok((ty, major, minor))
}
