//! Running one request: the protocol rules that depend on fid state (a
//! fid walked while open, opened twice, read or written against its open
//! mode), and the mapping of each message onto the [`Filesystem`] trait.
//! Creation, directory reads, stat and wstat, and extended-attribute fids
//! have modules of their own; this one dispatches to them.

use std::os::fd::AsFd;
use std::sync::Arc;

use bytes::Bytes;
use ninep_transport::PipedFile;
use ninep_wire::consts::{dotl, open::*};
use ninep_wire::*;
use tokio::sync::RwLockReadGuard;

use crate::auth::AuthFid;
use crate::clunk::{self, Ending};
use crate::error::{Error, Result};
use crate::fids::{FidState, Pending, Slot};
use crate::fs::{Cx, Filesystem, Opened, User, can_read, can_write};
use crate::session::{Conn, Session};
use crate::translate;
use crate::xattr::Xattr;

/// The fids a request names, looked up or reserved as it arrived.
pub(crate) struct Resolved<T> {
    pub fid: Option<Arc<Slot<T>>>,
    pub other: Option<Arc<Slot<T>>>,
    pub new: Option<Pending<T>>,
    /// The authentication fid a Tauth made, or that a Tattach, Tread,
    /// Twrite, Tclunk or Tremove names.
    pub afid: Option<Arc<AuthFid>>,
}

impl<T> Default for Resolved<T> {
    fn default() -> Self {
        Resolved {
            fid: None,
            other: None,
            new: None,
            afid: None,
        }
    }
}

pub(crate) struct Handler<'a, F: Filesystem> {
    pub conn: &'a Conn<F>,
    pub session: Session,
}

/// A request's answer: a message, or an Rread whose data waits in a pipe
/// to be spliced into the connection.
pub(crate) enum Reply {
    Msg(Msg),
    Piped(PipedFile),
}

impl From<Msg> for Reply {
    fn from(msg: Msg) -> Reply {
        Reply::Msg(msg)
    }
}

/// Reads that bring at least this much are spliced from a host file when
/// they can be; smaller ones cost less copied than a pipe costs to make.
const SPLICE_MIN: u32 = 64 * 1024;

/// What a spliced read answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A Tread: the reply may be kept for a resume to send again.
    Read,
    /// A piece of a read stream: never kept (a stream ends at a cut), and
    /// it may be shorter than asked.
    Piece,
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

/// Refuses a name no new file may have.
pub(crate) fn check_new_name(name: &Name) -> Result<()> {
    name.check_entry()
        .map_err(|e| Error::with_errno(e.errno(), e.to_string()))
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

    pub(crate) fn iounit(&self, opened: &Opened) -> u32 {
        let max = self.session.msize - IOHDRSZ;
        if opened.iounit == 0 {
            max
        } else {
            opened.iounit.min(max)
        }
    }

    pub async fn run(self, msg: Msg, r: Resolved<F::File>) -> Result<Reply> {
        if let Some(afid) = &r.afid
            && !matches!(msg, Msg::Tattach(_))
        {
            return authentication(msg, afid).await.map(Reply::Msg);
        }
        Ok(Reply::Msg(match msg {
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
            Msg::Tlcreate(m) => self.lcreate(m, &r).await?,
            Msg::Tread(m) => return self.read(m, &r).await,
            Msg::Twrite(m) => self.write(m, &r).await?,
            Msg::Tclunk(_) => {
                self.end(r, Ending::Clunk).await?;
                Rclunk {}.into()
            }
            Msg::Tremove(_) => {
                self.end(r, Ending::Remove).await?;
                Rremove {}.into()
            }
            Msg::Tstat(_) => self.stat(&r).await?,
            Msg::Twstat(m) => self.wstat(m, &r).await?,
            Msg::Tgetattr(_) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let attr = self.fs().getattr(&self.cx(s), &s.file).await?;
                translate::getattr(&attr).into()
            }
            Msg::Tsetattr(m) => {
                let g = read(&r.fid).await?;
                let s = state(&g)?;
                let set = translate::setattr(&m);
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
            Msg::Txattrwalk(m) => self.xattr_walk(m, r).await?,
            Msg::Txattrcreate(m) => self.xattr_create(m, &r).await?,
            other => {
                return Err(Error::with_errno(
                    Errno::EOPNOTSUPP,
                    format!("{} not supported", other.name()),
                ));
            }
        }))
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
        let claim = User {
            uname: m.uname,
            n_uname: m.n_uname,
            aname: m.aname,
        };
        let policy = &self.conn.shared.policy;
        let user = Arc::new(match &r.afid {
            Some(afid) => afid.attach(policy, &claim).await?,
            None => policy.by_connection(&self.conn.peer, &claim)?,
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

    async fn read(&self, m: Tread, r: &Resolved<F::File>) -> Result<Reply> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        let count = m.count.min(self.session.msize - IOHDRSZ);
        if let Some(Xattr::Read(value)) = &s.xattr {
            let data = slice_at(value, m.offset, count);
            return Ok(Msg::from(Rread { data }).into());
        }
        let flags = s.open.ok_or_else(not_open)?;
        if !can_read(flags) {
            return Err(Error::with_errno(Errno::EBADF, "fid not open for reading"));
        }
        if s.qid.ty.is_dir() {
            if self.session.dialect == Dialect::L {
                return Err(Error::is_dir());
            }
            return Ok(self.read_stats(s, m.offset, count).await?.into());
        }
        let cx = self.cx(s);
        if let Some(piped) = self
            .spliced(&cx, &s.file, m.offset, count, Answer::Read)
            .await
        {
            return Ok(Reply::Piped(piped));
        }
        let mut data = self.fs().read(&cx, &s.file, m.offset, count).await?;
        data.truncate(count as usize);
        Ok(Msg::from(Rread { data }).into())
    }

    /// `count` bytes of the open `file` from `offset` in a pipe, to be
    /// spliced into the connection: for a large read of a file that lives
    /// on the host, or of one whose bytes wait in the kernel
    /// ([`Filesystem::read_piped`]), while a pipe may be held (see
    /// `Conn::pipe_leave`). None: read it the usual way (also when
    /// splicing fails: a file system that cannot, or an error the usual
    /// read will report).
    pub(crate) async fn spliced(
        &self,
        cx: &Cx,
        file: &F::File,
        offset: u64,
        count: u32,
        answer: Answer,
    ) -> Option<PipedFile> {
        if count < SPLICE_MIN {
            return None;
        }
        let Some(host) = self.fs().host_file(file) else {
            let leave = self.conn.pipe_leave(answer)?;
            return self.fs().read_piped(cx, file, count as usize, &leave).await;
        };
        if PipedFile::would_bring(host.as_fd(), offset, count as usize) < SPLICE_MIN as usize {
            return None;
        }
        let leave = self.conn.pipe_leave(answer)?;
        let (permit, count) = match answer {
            Answer::Read => (leave.take()?, count as usize),
            // To a page boundary, a piece fits a pipe of its size wherever
            // it starts, and the next starts on one.
            Answer::Piece => (
                leave.take_in_turn().await?,
                PipedFile::to_page_boundary(offset, count as usize),
            ),
        };
        // A Tread whose pages are all in memory is moved into the pipe here
        // (as far as the file's size then); filling a pipe may otherwise wait
        // on the disk, which belongs on the blocking pool. A stream's pieces
        // always go there: on a cold file each follows the read-ahead of the
        // one before, still coming in, and their trips to the pool overlap
        // with the sending anyway.
        let here = match answer {
            Answer::Read => ninep_transport::in_memory(host.as_fd(), offset, count),
            Answer::Piece => None,
        };
        let fill = move |count| {
            PipedFile::from_file(host.as_fd(), offset, count).map(|piped| piped.holding(permit))
        };
        if let Some(count) = here {
            return fill(count).ok();
        }
        tokio::task::spawn_blocking(move || fill(count))
            .await
            .ok()?
            .ok()
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

    /// Tclunk, Tremove: ends the fid, which left the table as the request
    /// arrived.
    async fn end(&self, r: Resolved<F::File>, how: Ending) -> Result<()> {
        let slot = r.fid.ok_or_else(unknown_fid)?;
        let conn = self.conn;
        clunk::end(&conn.tasks, &conn.shared, slot, self.session.dialect, how).await
    }
}

/// A request on an authentication fid: Tauth made it, Tread and Twrite
/// carry its exchange, and Tclunk or Tremove (which cannot remove it) end
/// it, whatever it was doing.
async fn authentication(msg: Msg, afid: &AuthFid) -> Result<Msg> {
    Ok(match msg {
        Msg::Tauth(_) => Rauth { aqid: afid.qid }.into(),
        Msg::Tread(m) => Rread {
            data: afid.read(m.offset, m.count).await?,
        }
        .into(),
        Msg::Twrite(m) => Rwrite {
            count: afid.write(m.offset, m.data).await?,
        }
        .into(),
        Msg::Tclunk(_) => Rclunk {}.into(),
        Msg::Tremove(_) => {
            return Err(Error::with_errno(
                Errno::EPERM,
                "an authentication fid cannot be removed",
            ));
        }
        other => {
            let what = format!("{} of an authentication fid", other.name());
            return Err(Error::with_errno(Errno::EINVAL, what));
        }
    })
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

/// `count` bytes of `value` from `offset`, empty past the end.
pub(crate) fn slice_at(value: &Bytes, offset: u64, count: u32) -> Bytes {
    let len = value.len() as u64;
    if offset >= len {
        return Bytes::new();
    }
    let end = offset.saturating_add(count as u64).min(len);
    value.slice(offset as usize..end as usize)
}
