//! Making files. 9P2000 Tcreate makes and opens a regular file, or makes a
//! directory; in 9P2000.u it also makes symlinks, hard links, devices,
//! pipes and sockets, each through the matching 9P2000.L operation of the
//! file server and then walked to. 9P2000.L Tlcreate makes a regular file.

use std::sync::Arc;

use ninep_wire::consts::{dotl, mode::*, open::*, unix::*};
use ninep_wire::*;
use tokio::sync::RwLockWriteGuard;

use crate::dispatch::{Handler, Resolved, check_new_name, unknown_fid};
use crate::error::{Error, Result};
use crate::fids::FidState;
use crate::fs::{Filesystem, Opened};

impl<F: Filesystem> Handler<'_, F> {
    pub(crate) async fn create(&self, m: Tcreate, r: &Resolved<F::File>) -> Result<Msg> {
        check_new_name(&m.name)?;
        let rclose = m.mode & ORCLOSE != 0;
        let perm = m.perm;
        let special = DMSYMLINK | DMLINK | DMDEVICE | DMNAMEDPIPE | DMSOCKET;
        let opened = if perm & DMDIR != 0 || perm & special != 0 {
            self.create_special(&m, r).await?
        } else {
            let mode = convert::permissions(perm, self.session.dialect)
                | perm & (DMAPPEND | DMEXCL | DMTMP);
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

    /// The request's fid, locked, as a create needs it: a directory, not
    /// open.
    async fn directory_to_create_in<'r>(
        &self,
        r: &'r Resolved<F::File>,
    ) -> Result<RwLockWriteGuard<'r, Option<FidState<F::File>>>> {
        let slot = r.fid.as_ref().ok_or_else(unknown_fid)?;
        let g = slot.write().await;
        let s = g.as_ref().ok_or_else(unknown_fid)?;
        if s.open.is_some() {
            return Err(Error::with_errno(Errno::EBADF, "fid already open"));
        }
        if !s.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        Ok(g)
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
        let mut g = self.directory_to_create_in(r).await?;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        let cx = self.cx(s);
        let (file, opened) = self
            .fs()
            .create(&cx, &s.file, name, mode, flags, gid)
            .await?;
        // A file just made is open nowhere else: the claim is there to take.
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
        let mut g = self.directory_to_create_in(r).await?;
        let s = g.as_mut().ok_or_else(unknown_fid)?;
        let cx = self.cx(s);
        let fs = self.fs();
        let perm = convert::permissions(m.perm, self.session.dialect);
        let is_u = self.session.dialect == Dialect::U;
        let made = if m.perm & DMDIR != 0 {
            if m.mode & 3 != OREAD || m.mode & (OTRUNC | ORCLOSE) != 0 {
                return Err(Error::is_dir());
            }
            fs.mkdir(&cx, &s.file, &m.name, perm, NONUNAME).await?
        } else if !is_u {
            return Err(Error::new("special files need 9P2000.u"));
        } else if m.perm & DMSYMLINK != 0 {
            fs.symlink(&cx, &s.file, &m.name, &m.extension, NONUNAME)
                .await?
        } else if m.perm & DMLINK != 0 {
            let fid: u32 = m
                .extension
                .trim()
                .parse()
                .map_err(|_| Error::new("bad hard link extension"))?;
            let target = self.conn.fids.get(Fid(fid)).ok_or_else(unknown_fid)?;
            if r.fid.as_ref().is_some_and(|dir| Arc::ptr_eq(&target, dir)) {
                return Err(Error::from_errno(Errno::EINVAL));
            }
            let tg = target.read().await;
            let t = tg.as_ref().ok_or_else(unknown_fid)?;
            fs.link(&cx, &s.file, &t.file, &m.name).await?;
            t.qid
        } else {
            let (ty, rdev) = if m.perm & DMDEVICE != 0 {
                convert::device(&m.extension).ok_or_else(|| Error::new("bad device extension"))?
            } else if m.perm & DMNAMEDPIPE != 0 {
                (S_IFIFO, 0)
            } else {
                (S_IFSOCK, 0)
            };
            let (major, minor) = convert::major_minor(rdev);
            fs.mknod(&cx, &s.file, &m.name, ty | perm, major, minor, NONUNAME)
                .await?
        };
        // A walk refused (for want of a descriptor) leaves nothing made.
        let (file, qid) = match fs.walk(&cx, &s.file, &m.name).await {
            Ok(walked) => walked,
            Err(e) => {
                fs.unmake(&cx, &s.file, &m.name, made).await;
                return Err(e);
            }
        };
        s.file = file;
        s.qid = qid;
        s.open = Some(dotl::O_RDONLY);
        Ok(Opened { qid, iounit: 0 })
    }

    /// 9P2000.L Tlcreate.
    pub(crate) async fn lcreate(&self, m: Tlcreate, r: &Resolved<F::File>) -> Result<Msg> {
        check_new_name(&m.name)?;
        let flags = m.flags & !(dotl::O_CREAT | dotl::O_EXCL);
        let opened = self
            .create_file(r, &m.name, m.mode & 0o7777, flags, m.gid, false)
            .await?;
        Ok(Rlcreate {
            qid: opened.qid,
            iounit: self.iounit(&opened),
        }
        .into())
    }
}
