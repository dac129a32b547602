//! A file of a mounted server as the mux holds it: one upstream fid (two
//! for a listed 9P2000.L directory) and its read-ahead.
//!
//! Each operation here takes one turn in the server's request window (see
//! [`super::Upstream`]) and sends what it needs within it, a short sequence
//! at most (a clone and an open, a walk and a stat). Which message a
//! dialect needs is the client library's business; refusals come back with
//! the errno the client gives them.

use std::sync::Arc;

use bytes::Bytes;
use ninep_client::{DirEntry, Fid, File, FileInfo, FsStats, Node, OpenFile, SetAttr};
use ninep_server::{Error, Result};
use ninep_wire::consts::dotl::O_TRUNC;
use ninep_wire::{Dialect, Errno, Name, Qid};

use super::{KnownReadAhead, Upstream};

/// A file of a mounted server, through one upstream fid.
pub(crate) struct RemoteFile {
    up: Arc<Upstream>,
    fids: Fids,
    /// Reading ahead, for an open file read in order (none for a walked
    /// fid).
    ahead: Option<KnownReadAhead>,
}

/// The upstream fids behind a remote file.
enum Fids {
    Walked(Fid),
    Open(File),
    /// An open directory of a 9P2000.L server listed for a client of
    /// another dialect: the open fid reads the names, the other is walked
    /// from to stat each entry.
    OpenDir {
        file: File,
        dir: Fid,
    },
}

impl RemoteFile {
    pub(super) fn walked(up: Arc<Upstream>, fid: Fid) -> RemoteFile {
        RemoteFile::with(up, Fids::Walked(fid))
    }

    fn with(up: Arc<Upstream>, fids: Fids) -> RemoteFile {
        let ahead = match &fids {
            Fids::Open(file) | Fids::OpenDir { file, .. } => {
                Some(up.read_ahead_for(file.qid().path))
            }
            Fids::Walked(_) => None,
        };
        RemoteFile { up, fids, ahead }
    }

    /// The number of the file's server, as qids and mount points name it.
    pub fn src(&self) -> u32 {
        self.up.id
    }

    /// Whether the file's server has hung up.
    pub fn is_closed(&self) -> bool {
        self.up.is_closed()
    }

    /// The file's qid as its server gave it (at the open, once open).
    pub fn qid(&self) -> Qid {
        self.fid().qid()
    }

    /// The open file's iounit; 0 before it is open.
    pub fn iounit(&self) -> u32 {
        self.open_file().map_or(0, File::iounit)
    }

    fn fid(&self) -> &Fid {
        match &self.fids {
            Fids::Walked(fid) => fid,
            Fids::Open(file) | Fids::OpenDir { file, .. } => file.fid(),
        }
    }

    fn file(&self) -> Result<&File> {
        self.open_file().ok_or_else(not_open)
    }

    /// Two files of one server may be named in one request; across servers
    /// a link or rename is EXDEV, as across Unix file systems.
    fn same_server(&self, other: &RemoteFile) -> Result<()> {
        if Arc::ptr_eq(&self.up, &other.up) {
            Ok(())
        } else {
            Err(Error::from_errno(Errno::EXDEV))
        }
    }

    fn error(&self, e: ninep_client::Error) -> Error {
        self.up.error(e)
    }

    /// Walks `names` (at most 16): the qids of the steps taken and, if all
    /// were, the file reached.
    pub async fn walk(&self, names: &[Name]) -> Result<(Vec<Qid>, Option<RemoteFile>)> {
        let _turn = self.up.turn().await;
        let (wqid, fid) = self
            .fid()
            .walk_some(names)
            .await
            .map_err(|e| self.error(e))?;
        let file = fid.map(|fid| RemoteFile::walked(self.up.clone(), fid));
        Ok((wqid, file))
    }

    pub async fn stat(&self) -> Result<FileInfo> {
        let _turn = self.up.turn().await;
        self.fid().stat().await.map_err(|e| self.error(e))
    }

    pub async fn setattr(&self, set: &SetAttr) -> Result<()> {
        if set.size.is_some() {
            // What was read ahead may end where the file no longer does.
            self.up.forget_read_ahead(self.qid().path).await;
        }
        let _turn = self.up.turn().await;
        self.fid().setattr(set).await.map_err(|e| self.error(e))
    }

    pub async fn readlink(&self) -> Result<String> {
        let _turn = self.up.turn().await;
        self.fid().readlink().await.map_err(|e| self.error(e))
    }

    /// Figures of the file system holding the file.
    pub async fn statfs(&self) -> Result<FsStats> {
        let _turn = self.up.turn().await;
        self.fid().statfs().await.map_err(|e| self.error(e))
    }

    /// Commits the file to stable storage.
    pub async fn fsync(&self, datasync: bool) -> Result<()> {
        let _turn = self.up.turn().await;
        self.fid().fsync(datasync).await.map_err(|e| self.error(e))
    }

    /// Makes directory `name` in this one.
    pub async fn mkdir(&self, name: &Name, perm: u32, gid: u32) -> Result<Qid> {
        let _turn = self.up.turn().await;
        self.fid()
            .mkdir_with_gid(name.as_str(), perm, gid)
            .await
            .map_err(|e| self.error(e))
    }

    /// Makes `name` in this directory a symbolic link to `target`.
    pub async fn symlink(&self, name: &Name, target: &str, gid: u32) -> Result<Qid> {
        let _turn = self.up.turn().await;
        self.fid()
            .symlink(name.as_str(), target, gid)
            .await
            .map_err(|e| self.error(e))
    }

    /// Makes the special file `name` in this directory.
    pub async fn mknod(&self, name: &Name, node: Node, gid: u32) -> Result<Qid> {
        let _turn = self.up.turn().await;
        self.fid()
            .mknod(name.as_str(), node, gid)
            .await
            .map_err(|e| self.error(e))
    }

    /// Makes `name` in this directory a hard link to `to`.
    pub async fn link(&self, name: &Name, to: &RemoteFile) -> Result<()> {
        self.same_server(to)?;
        let _turn = self.up.turn().await;
        self.fid()
            .link(name.as_str(), to.fid())
            .await
            .map_err(|e| self.error(e))
    }

    /// Creates and opens `name` in this directory, through a fid of its own.
    pub async fn create(&self, name: &Name, perm: u32, flags: u32, gid: u32) -> Result<RemoteFile> {
        let _turn = self.up.turn().await;
        let fid = self.fid().clone_fid().await.map_err(|e| self.error(e))?;
        let file = fid
            .create_with_gid(name.as_str(), perm, flags, gid)
            .await
            .map_err(|e| self.error(e))?;
        Ok(RemoteFile::with(self.up.clone(), Fids::Open(file)))
    }

    /// Opens the file with Linux open `flags`. A fid that only this handle
    /// holds is opened itself; a shared one (the root of a mount, a clone)
    /// is cloned first. `stat_entries`: the file is a directory opened for
    /// a client whose listings carry each entry's stat.
    pub async fn open(self: Arc<Self>, flags: u32, stat_entries: bool) -> Result<RemoteFile> {
        let up = self.up.clone();
        let _turn = up.turn().await;
        let fid = match Arc::try_unwrap(self) {
            Ok(RemoteFile {
                fids: Fids::Walked(fid),
                ..
            }) => fid,
            Ok(_) => return Err(Error::with_errno(Errno::EBADF, "fid already open")),
            Err(shared) => shared
                .fid()
                .clone_fid()
                .await
                .map_err(|e| shared.error(e))?,
        };
        // A 9P2000.L listing has no stats: keep a fid beside the open
        // directory to walk to each entry from and stat it.
        let fids = if stat_entries && up.dialect() == Dialect::L {
            let file = fid.clone_fid().await.map_err(|e| up.error(e))?;
            let file = file.open(flags).await.map_err(|e| up.error(e))?;
            Fids::OpenDir { file, dir: fid }
        } else {
            Fids::Open(fid.open(flags).await.map_err(|e| up.error(e))?)
        };
        drop(_turn);
        let file = RemoteFile::with(up.clone(), fids);
        if flags & O_TRUNC != 0 {
            // What other fids read ahead of the file is gone with it.
            up.forget_read_ahead(file.qid().path).await;
        }
        Ok(file)
    }

    /// Removes the file: through its own fid if `in_place` (nothing else
    /// holds it), else through a clone of a fid that is not open.
    pub async fn remove(&self, in_place: bool) -> Result<()> {
        let _turn = self.up.turn().await;
        if in_place {
            return self
                .fid()
                .remove_in_place()
                .await
                .map_err(|e| self.error(e));
        }
        match &self.fids {
            Fids::Walked(fid) => {
                let clone = fid.clone_fid().await.map_err(|e| self.error(e))?;
                clone.remove().await.map_err(|e| self.error(e))
            }
            _ => Err(Error::with_errno(Errno::EBUSY, "file in use")),
        }
    }

    /// Renames the file to `newname` in directory `to`, or in its own. Its
    /// directory is `names` walked from `start` (a file's own fid cannot
    /// walk to `..`).
    pub async fn rename(
        &self,
        (start, names): (&RemoteFile, &[Name]),
        to: Option<&RemoteFile>,
        newname: &Name,
    ) -> Result<()> {
        if let Some(to) = to {
            self.same_server(to)?;
        }
        let _turn = self.up.turn().await;
        let walked = if names.is_empty() {
            None
        } else {
            match start.fid().walk_some(names).await {
                Ok((_, Some(fid))) => Some(fid),
                Ok((_, None)) => return Err(Error::not_found()),
                Err(e) => return Err(self.error(e)),
            }
        };
        let from = walked.as_ref().unwrap_or_else(|| start.fid());
        let to = to.map_or(from, |to| to.fid());
        self.fid()
            .rename(from, to, newname)
            .await
            .map_err(|e| self.error(e))
    }

    /// Reads the open file at `offset`, from what is read ahead if the
    /// reads come in order (or `streaming`, a client's stream).
    pub async fn read(self: &Arc<Self>, offset: u64, count: u32, streaming: bool) -> Result<Bytes> {
        let ahead = self.ahead.as_ref().ok_or_else(not_open)?;
        let _turn = self.up.turn().await;
        ahead
            .read(self, offset, count, streaming)
            .await
            .map_err(|e| self.error(e))
    }

    /// Writes `data` at `offset` in pieces the server takes (a client's
    /// msize may be larger than the server's, and few clients write the
    /// rest again after a short write), one after another: all of it, or
    /// what went before a piece came back short or failed.
    pub async fn write(&self, offset: u64, data: Bytes) -> Result<u32> {
        let file = self.file()?;
        // What was read ahead may hold the bytes from before.
        self.up.forget_read_ahead(self.qid().path).await;
        let _turn = self.up.turn().await;
        let mut done = 0;
        while done < data.len() {
            let want = (data.len() - done).min(file.iounit() as usize);
            let piece = data.slice(done..done + want);
            match file.write_at(offset + done as u64, piece).await {
                Ok(n) => {
                    done += n as usize;
                    if (n as usize) < want {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(self.error(e)),
                Err(_) => break,
            }
        }
        Ok(done as u32)
    }

    /// The entries of the open directory.
    pub async fn read_dir(&self) -> Result<Vec<DirEntry>> {
        let file = self.file()?;
        let _turn = self.up.turn().await;
        file.read_dir().await.map_err(|e| self.error(e))
    }

    /// The attributes of entry `name` of the open directory, if a fid was
    /// kept beside it to walk to the entry from; none otherwise.
    pub async fn stat_entry(&self, name: &Name) -> Result<Option<FileInfo>> {
        let Fids::OpenDir { dir, .. } = &self.fids else {
            return Ok(None);
        };
        let _turn = self.up.turn().await;
        let (_, fid) = dir
            .walk_some(std::slice::from_ref(name))
            .await
            .map_err(|e| self.error(e))?;
        let fid = fid.ok_or_else(Error::not_found)?;
        let info = fid.stat().await.map_err(|e| self.error(e))?;
        Ok(Some(info))
    }

    /// Stops reading ahead: the file is being clunked.
    pub async fn stop_reading_ahead(&self) {
        if let Some(ahead) = &self.ahead {
            ahead.stop().await;
        }
    }
}

/// The error for an operation on a file that must be open and is not.
fn not_open() -> Error {
    Error::with_errno(Errno::EBADF, "not open")
}

impl OpenFile for RemoteFile {
    fn open_file(&self) -> Option<&File> {
        match &self.fids {
            Fids::Open(file) | Fids::OpenDir { file, .. } => Some(file),
            Fids::Walked(_) => None,
        }
    }
}
