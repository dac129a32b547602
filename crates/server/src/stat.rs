//! Tstat and Twstat: a file's attributes as a 9P2000 or 9P2000.u stat, and
//! a stat's changes as attribute changes (the translation is in
//! [`crate::translate`]).

use ninep_wire::consts::unix::*;
use ninep_wire::*;

use crate::dispatch::{Handler, Resolved, read, state};
use crate::error::Result;
use crate::fids::FidState;
use crate::fs::{Attr, DirEntry, Filesystem};
use crate::translate;

impl<F: Filesystem> Handler<'_, F> {
    pub(crate) async fn stat(&self, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        let attr = self.fs().getattr(&self.cx(s), &s.file).await?;
        let ext = self.extension(s, &attr).await;
        Ok(Rstat {
            stat: translate::stat(&attr, self.session.dialect, ext),
        }
        .into())
    }

    /// Twstat; a stat that changes nothing asks for the file to be
    /// committed to stable storage.
    pub(crate) async fn wstat(&self, m: Twstat, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        let cx = self.cx(s);
        let attr = self.fs().getattr(&cx, &s.file).await?;
        let (set, rename) = translate::wstat(&m.stat, &attr, self.session.dialect)?;
        if set.is_empty() && rename.is_none() {
            self.fs().fsync(&cx, &s.file, false).await?;
        }
        if !set.is_empty() {
            self.fs().setattr(&cx, &s.file, &set).await?;
        }
        if let Some(name) = rename {
            self.fs().rename(&cx, &s.file, None, &name).await?;
        }
        Ok(Rwstat {}.into())
    }

    /// The 9P2000.u stat extension of a file: a symlink's target, a device's
    /// numbers.
    async fn extension(&self, s: &FidState<F::File>, attr: &Attr) -> String {
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
        convert::device_extension(attr.mode, attr.rdev).unwrap_or_default()
    }

    pub(crate) async fn extension_of(&self, dir: &FidState<F::File>, entry: &DirEntry) -> String {
        if self.session.dialect != Dialect::U {
            return String::new();
        }
        if entry.attr.mode & S_IFMT == S_IFLNK {
            let cx = self.cx(dir);
            if let Ok((file, _)) = self.fs().walk(&cx, &dir.file, &entry.name).await {
                return self.fs().readlink(&cx, &file).await.unwrap_or_default();
            }
        }
        convert::device_extension(entry.attr.mode, entry.attr.rdev).unwrap_or_default()
    }
}
