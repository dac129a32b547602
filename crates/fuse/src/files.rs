//! Open files: opened and created, read, written and synced, with the
//! kernel told which may keep their pages.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use fuser::{FileAttr, FileType, FopenFlags};
use ninep_client::may_be_read_early;
use ninep_wire::consts::dotl;
use ninep_wire::{Errno, Name, Qid, QidType};

use crate::{Cache, Handle, Inner, KernelErrno, errno, fail};

/// Most bytes read behind an open, for the kernel's first read (see
/// [`Inner::head_to_read`]): the kernel's own first read-ahead.
const HEAD: u32 = 128 << 10;

/// A file just opened: its handle and FOPEN flags.
pub(crate) struct Opened {
    pub fh: u64,
    pub flags: FopenFlags,
}

/// The kernel's open flags less those that mean nothing to the server once
/// the kernel has acted on them.
fn server_flags(flags: u32) -> u32 {
    flags & !(dotl::O_CREAT | dotl::O_EXCL | dotl::O_NOCTTY)
}

/// Open flags `flags` for a file under the kernel's writeback cache, which
/// may read a page of a file open only for writing (to fill the rest of
/// it) and places appends itself: O_WRONLY becomes O_RDWR, and O_APPEND,
/// which would make the server place the kernel's writes again, goes.
pub(crate) fn writeback_flags(flags: u32) -> u32 {
    let flags = flags & !dotl::O_APPEND;
    if flags & dotl::O_ACCMODE == dotl::O_WRONLY {
        flags & !dotl::O_ACCMODE | dotl::O_RDWR
    } else {
        flags
    }
}

impl Inner {
    /// FOPEN flags for a file just opened: direct I/O without a cache, and
    /// for exact files (synthetic ones, of qid.version 0, and those of
    /// unknown length); else keep the cached pages if the file has not
    /// changed since they were read.
    fn fopen_flags(&self, ino: u64, qid: Qid, exact: bool) -> FopenFlags {
        if self.cache == Cache::None || qid.ty.is_dir() || exact {
            return FopenFlags::FOPEN_DIRECT_IO;
        }
        if self.nodes().keep_cache(ino, qid.version) {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        }
    }

    /// Whether writes to a file opened with `flags` (qid `qid`) may be
    /// sent in the background: under strict caching (loose has the kernel's
    /// writeback), for files whose bytes stay where they are written (not
    /// exact, not appended to, not exclusive-use).
    fn writes_behind(&self, qid: Qid, flags: u32, exact: bool) -> bool {
        self.cache == Cache::Strict
            && !exact
            && flags & dotl::O_ACCMODE != dotl::O_RDONLY
            && flags & dotl::O_APPEND == 0
            && !qid.ty.contains(QidType::APPEND)
            && !qid.ty.contains(QidType::EXCL)
    }

    /// Opens `ino` for `user` with (9P2000.L) open flags `flags`.
    pub async fn open(&self, ino: u64, user: u32, flags: u32) -> Result<Opened, KernelErrno> {
        let flags = server_flags(flags);
        // A file of size 0 may yet have data (those of /proc and /sys, and
        // many synthetic ones): through the page cache the kernel would
        // read none of it, so its length is taken as unknown.
        let unknown_length = self.nodes().size(ino) == Some(0);
        if self.cache.writes_back() && !unknown_length {
            let wanted = writeback_flags(flags);
            let kept = self.idle.lock().take(ino, user, wanted, Instant::now());
            if let Some((file, opened_with)) = kept {
                // Closed here within the time loose caching trusts what
                // it knows of a file: its pages are as they were.
                let fh = self.add_handle(file, ino, user, opened_with, false, false);
                let flags = FopenFlags::FOPEN_KEEP_CACHE;
                return Ok(Opened { fh, flags });
            }
        }
        // The qid.version the open gives must be the one after its times.
        let _ = self.settle_times(|other| other == ino).await;
        // A truncation is a change under way until the open ends.
        let truncating = (flags & dotl::O_TRUNC != 0).then(|| self.changes.start());
        if truncating.is_some() {
            // The writes behind come before the truncation. Its size and
            // times, and maybe its set-id bits, change, and what was read
            // ahead of it is gone.
            self.settle_writes(|_, h| h.ino == ino).await;
            self.nodes().changed(ino);
            self.forget_read_ahead(ino).await;
        }
        let wanted = if self.cache.writes_back() {
            writeback_flags(flags)
        } else {
            flags
        };
        let quiet = self.changes.quiet();
        let head = quiet.map_or(0, |_| self.head_to_read(ino, user, flags));
        if head > 0 {
            // The head must include every write made before the open.
            self.settle_writes(|_, h| h.ino == ino).await;
        }
        let ((file, head), opened_with) = match self.open_fid(ino, user, wanted, head).await {
            // Write-only to this user: the kernel filling a page will
            // fail, but writes of whole pages and appends will not.
            Err(e) if e == fail(Errno::EACCES) && wanted != flags => {
                (self.open_fid(ino, user, flags, head).await?, flags)
            }
            opened => (opened?, wanted),
        };
        let exact = file.qid().version == 0 || unknown_length;
        let fopen = self.fopen_flags(ino, file.qid(), exact);
        let behind = self.writes_behind(file.qid(), flags, exact);
        let opened_with = opened_with & !dotl::O_TRUNC;
        let fh = self.add_handle(Arc::new(file), ino, user, opened_with, exact, behind);
        // Read early, a synthetic file's bytes would not be what its reader
        // asked for; pages the kernel keeps it does not ask for at all; and
        // a write made through the mount while the open was under way may
        // have reached the server after the head was read.
        if let (Some(head), Some(mark)) = (head, quiet)
            && !exact
            && fopen.is_empty()
        {
            let current = || self.changes.none_since(mark);
            self.handle(fh)?.ahead.hold_head(head, current).await;
        }
        Ok(Opened { fh, flags: fopen })
    }

    /// How many bytes of `ino` to read behind its open by `user` with
    /// `flags`, so that the kernel's first read of it is answered without
    /// a round trip (0: none): the whole of a small regular file opened
    /// only to be read, under a policy that lets the kernel cache pages,
    /// unless its walk's qid forbids reading it early (synthetic,
    /// append-only, exclusive-use) or the kernel holds its pages at that
    /// version. A file that is read from its end only, or not at all,
    /// costs at most [`HEAD`] bytes on the link.
    fn head_to_read(&self, ino: u64, user: u32, flags: u32) -> u32 {
        let only_reads = flags & dotl::O_ACCMODE == dotl::O_RDONLY && flags & dotl::O_TRUNC == 0;
        if self.cache == Cache::None || self.read_ahead == 0 || !only_reads {
            return 0;
        }
        let nodes = self.nodes();
        let small = nodes.given_attr(ino).is_some_and(|attr| {
            attr.kind == FileType::RegularFile && (1..=u64::from(HEAD)).contains(&attr.size)
        });
        let qid = nodes.fid(ino, user).map(|fid| fid.qid());
        match qid {
            Some(qid)
                if small && may_be_read_early(qid) && !nodes.holds_pages(ino, qid.version) =>
            {
                HEAD
            }
            _ => 0,
        }
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
    ) -> Result<(FileAttr, Opened), KernelErrno> {
        let mut flags = server_flags(flags);
        if self.cache.writes_back() {
            flags = writeback_flags(flags);
        }
        let dir = self.fid(parent, user).await?;
        let making = self.making(parent);
        // The clone of the directory's fid, the create on it and the stat
        // of the new file go together where the server keeps their order.
        let create = || async {
            let created = dir.create_beside(name.as_str(), perm, flags, gid).await;
            created.map_err(|e| making.failed(e))
        };
        let (file, info) = self.with_room(create).await?;
        // Made: only its stat may be asked for again.
        let info = match info {
            Ok(info) => info,
            Err(_) => {
                let stat = || async { file.fid().stat().await.map_err(errno) };
                self.with_room(stat).await?
            }
        };
        // The new file's inode gets a walked fid only when one is needed:
        // most files written and closed are next removed by name, or
        // opened, which walks anyway.
        let attrs = self.conn.attrs_of(&info);
        self.nodes()
            .entries_changed(parent, std::time::SystemTime::now());
        let attr = self.found(parent, name, user, None, attrs);
        making.done();
        // A new file has no capabilities: writes need not ask.
        let ino = attr.ino.0;
        self.without_caps(ino, true);
        // Its data are those written through the kernel: their length is known.
        let exact = file.qid().version == 0;
        let fopen = self.fopen_flags(ino, file.qid(), exact);
        let behind = self.writes_behind(file.qid(), flags, exact);
        let opened_with = flags & !dotl::O_TRUNC;
        let fh = self.add_handle(Arc::new(file), ino, user, opened_with, exact, behind);
        Ok((attr, Opened { fh, flags: fopen }))
    }

    /// Up to `size` bytes at `offset` of the open file `fh` on `ino`.
    pub async fn read(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
    ) -> Result<Bytes, KernelErrno> {
        let h = self.handle(fh)?;
        self.settle_writes(|_, other| other.ino == ino).await;
        let mut at = offset;
        let first = h.read_some(at, size).await?;
        // Usually one piece does (a Tread of up to a MiB, or what was read
        // ahead); it is then passed on without a copy. Except from an exact
        // file, a short read would mean the end of the file (through the
        // page cache) or would make the reader ask again, so the rest is
        // asked for, unless the kernel knows the file ends there: it asks
        // for whole pages, past the end of the last one.
        at += first.len() as u64;
        let at_end = self.nodes().size(ino).is_some_and(|size| at >= size);
        if h.exact || first.is_empty() || first.len() == size as usize || at_end {
            return Ok(first);
        }
        let mut out = Vec::with_capacity(size as usize);
        out.extend_from_slice(&first);
        while out.len() < size as usize {
            let data = h.read_some(at, size - out.len() as u32).await?;
            if data.is_empty() {
                break;
            }
            at += data.len() as u64;
            out.extend_from_slice(&data);
        }
        Ok(Bytes::from(out))
    }

    /// Writes `data` at `offset` of the open file `fh` on `ino`: at once,
    /// or in the background for a file that writes behind.
    pub async fn write(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        data: Bytes,
    ) -> Result<u32, KernelErrno> {
        let h = self.handle(fh)?;
        let len = data.len() as u32;
        let _changing = self.changes.start();
        self.forget_read_ahead(ino).await;
        match &h.behind {
            Some(behind) => {
                // Writes through other open files go first, as they were made.
                self.settle_writes(|other_fh, other| other.ino == ino && other_fh != fh)
                    .await;
                let taken = behind.write(&h.file, offset, data).await;
                self.handles.lock().mark_writing(fh);
                taken
            }
            None => h.file.write_all_at(offset, data).await,
        }
        .map_err(errno)?;
        self.nodes().written(ino, offset + u64::from(len));
        Ok(len)
    }

    /// A close of `fh` on `ino` by `owner`: the file's writes are done,
    /// their errors reported, and the owner's record locks dropped.
    pub async fn close(&self, ino: u64, fh: u64, owner: u64) -> Result<(), KernelErrno> {
        let written = self.flush_writes(fh).await;
        self.unlock_on_close(ino, fh, owner).await?;
        written
    }

    /// Waits for the writes of `fh` sent in the background; their error.
    async fn flush_writes(&self, fh: u64) -> Result<(), KernelErrno> {
        match &self.handle(fh)?.behind {
            Some(behind) => behind.flush().await.map_err(errno),
            None => Ok(()),
        }
    }

    /// Commits the open file `fh` to stable storage (`datasync`: its data).
    pub async fn fsync(&self, fh: u64, datasync: bool) -> Result<(), KernelErrno> {
        self.flush_writes(fh).await?;
        let h = self.handle(fh)?;
        // The times the kernel set just before are part of what is synced.
        self.settle_times(|ino| ino == h.ino).await?;
        h.file.fsync(datasync).await.map_err(errno)
    }
}

impl Handle {
    /// Up to `count` bytes at `offset`, from what is read ahead if reads
    /// come in order; short of the end of the file, maybe short of `count`.
    async fn read_some(&self, offset: u64, count: u32) -> Result<Bytes, KernelErrno> {
        self.ahead
            .read(&self.file, offset, count, false)
            .await
            .map_err(errno)
    }
}
