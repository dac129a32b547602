//! Extended-attribute fids (9P2000.L): Txattrwalk makes a fid that reads
//! an attribute's value (or, for the empty name, the list of names);
//! Txattrcreate turns a fid into one that takes the new value by Twrite,
//! which is set when the fid is clunked.

use bytes::{Bytes, BytesMut};
use ninep_wire::consts::dotl;
use ninep_wire::*;

use crate::dispatch::{Handler, Resolved, not_open, read, state, unknown_fid};
use crate::error::{Error, Result};
use crate::fids::FidState;
use crate::fs::{Cx, Filesystem};

/// Largest extended attribute value accepted (Linux's XATTR_SIZE_MAX).
const XATTR_SIZE_MAX: u64 = 64 * 1024;

/// What an extended-attribute fid holds.
pub(crate) enum Xattr {
    /// Txattrwalk: the value read.
    Read(Bytes),
    /// Txattrcreate: the value being written, set at Tclunk.
    Write {
        name: String,
        size: u64,
        flags: u32,
        value: BytesMut,
    },
}

impl Xattr {
    /// Sets the value written through a Txattrcreate fid as it is clunked:
    /// all `size` bytes of it, or none.
    pub(crate) async fn set_at_clunk<F: Filesystem>(
        self,
        fs: &F,
        cx: &Cx,
        file: &F::File,
    ) -> Result<()> {
        let Xattr::Write {
            name,
            size,
            flags,
            value,
        } = self
        else {
            return Ok(());
        };
        if value.len() as u64 != size {
            return Err(Error::from_errno(Errno::EINVAL));
        }
        fs.xattr_set(cx, file, &name, value.freeze(), flags).await
    }
}

impl<F: Filesystem> Handler<'_, F> {
    pub(crate) async fn xattr_walk(&self, m: Txattrwalk, r: Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        let value = self.fs().xattr_get(&self.cx(s), &s.file, &m.name).await?;
        let size = value.len() as u64;
        let mut new = FidState::new(s.file.clone(), s.qid, s.user.clone());
        new.xattr = Some(Xattr::Read(value));
        new.open = Some(dotl::O_RDONLY);
        r.new.ok_or_else(unknown_fid)?.fill(new);
        Ok(Rxattrwalk { size }.into())
    }

    pub(crate) async fn xattr_create(&self, m: Txattrcreate, r: &Resolved<F::File>) -> Result<Msg> {
        if m.attr_size > XATTR_SIZE_MAX {
            return Err(Error::from_errno(Errno::E2BIG));
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
        Ok(Rxattrcreate {}.into())
    }

    pub(crate) async fn write_xattr(&self, m: Twrite, r: &Resolved<F::File>) -> Result<Msg> {
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
}
