//! Open files: opened and created, read, written and synced, with the
//! kernel told which may keep their pages.

use bytes::Bytes;
use fuser::FileAttr;
use fuser::consts::{FOPEN_DIRECT_IO, FOPEN_KEEP_CACHE};
use ninep_wire::consts::dotl;
use ninep_wire::{Name, Qid};

use crate::{Cache, Errno32, Inner, errno};

/// A file just opened: its handle and FOPEN flags.
pub(crate) struct Opened {
    pub fh: u64,
    pub flags: u32,
}

/// The kernel's open flags less those that mean nothing to the server once
/// the kernel has acted on them.
pub(crate) fn server_flags(flags: i32) -> u32 {
    flags as u32 & !(dotl::O_CREAT | dotl::O_EXCL | dotl::O_NOCTTY)
}

impl Inner {
    /// FOPEN flags for a file just opened: direct I/O without a cache, for
    /// synthetic files (qid.version 0) and for files of unknown length;
    /// else keep the cached pages if the file has not changed since they
    /// were read.
    fn fopen_flags(&self, ino: u64, qid: Qid, unknown_length: bool) -> u32 {
        if self.cache == Cache::None || qid.version == 0 || qid.ty.is_dir() || unknown_length {
            return FOPEN_DIRECT_IO;
        }
        if self.nodes().keep_cache(ino, qid.version) {
            FOPEN_KEEP_CACHE
        } else {
            0
        }
    }

    /// Opens `ino` for `user` with (9P2000.L) open flags `flags`.
    pub async fn open(&self, ino: u64, user: u32, flags: u32) -> Result<Opened, Errno32> {
        let fresh = self.fresh_fid(ino, user).await?;
        let file = fresh.open(flags).await.map_err(errno)?;
        // A file of size 0 may yet have data (those of /proc and /sys, and
        // many synthetic ones): through the page cache the kernel would
        // read none of it, so its length is taken as unknown.
        let unknown_length = self.nodes().size(ino) == Some(0);
        let fopen = self.fopen_flags(ino, file.qid(), unknown_length);
        let fh = self.add_handle(file, ino, user, fopen);
        Ok(Opened { fh, flags: fopen })
    }

    /// Creates `name` in `parent` with permissions `perm` and group `gid`,
    /// and opens it with open flags `flags`.
    pub async fn create(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
        perm: u32,
        gid: u32,
        flags: u32,
    ) -> Result<(FileAttr, Opened), Errno32> {
        let dir = self.fid(parent, user).await?;
        let at = dir.clone_fid().await.map_err(errno)?;
        let file = at
            .create_with_gid(name.as_str(), perm, flags, gid)
            .await
            .map_err(errno)?;
        // The new file's inode gets a walked fid only when one is needed:
        // most files written and closed are next removed by name, or
        // opened, which walks anyway.
        let attrs = self.conn.attr(file.fid()).await?;
        let attr = self.found(parent, name, user, None, attrs);
        // A new file has no capabilities: writes need not ask.
        self.without_caps(attr.ino, true);
        // Its data are those written through the kernel: their length is known.
        let fopen = self.fopen_flags(attr.ino, file.qid(), false);
        let fh = self.add_handle(file, attr.ino, user, fopen);
        Ok((attr, Opened { fh, flags: fopen }))
    }

    /// Up to `size` bytes at `offset` of the open file `fh` on `ino`.
    pub async fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<Bytes, Errno32> {
        let h = self.handle(fh)?;
        let file = &h.file;
        let mut at = offset;
        let first = file.read_at(at, size).await.map_err(errno)?;
        // Usually one Tread does (msize allows a MiB); the reply is then
        // passed on without a copy. Through the page cache a short read
        // would mean the end of the file, so the rest is asked for, unless
        // the kernel knows the file ends there: it asks for whole pages,
        // past the end of the last one.
        at += first.len() as u64;
        let at_end = self.nodes().size(ino).is_some_and(|size| at >= size);
        if h.direct || first.is_empty() || first.len() == size as usize || at_end {
            return Ok(first);
        }
        let mut out = Vec::with_capacity(size as usize);
        out.extend_from_slice(&first);
        while out.len() < size as usize {
            let want = size - out.len() as u32;
            let data = file.read_at(at, want).await.map_err(errno)?;
            if data.is_empty() {
                break;
            }
            at += data.len() as u64;
            out.extend_from_slice(&data);
        }
        Ok(Bytes::from(out))
    }

    /// Writes `data` at `offset` of the open file `fh` on `ino`.
    pub async fn write(&self, ino: u64, fh: u64, offset: u64, data: Bytes) -> Result<u32, Errno32> {
        let file = &self.handle(fh)?.file;
        let len = data.len() as u32;
        file.write_all_at(offset, data).await.map_err(errno)?;
        self.nodes().written(ino, offset + u64::from(len));
        Ok(len)
    }

    /// Commits the open file `fh` to stable storage (`datasync`: its data).
    pub async fn fsync(&self, fh: u64, datasync: bool) -> Result<(), Errno32> {
        let h = self.handle(fh)?;
        h.file.fsync(datasync).await.map_err(errno)
    }
}
