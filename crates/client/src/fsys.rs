//! Fids as handles, and an attached tree with path helpers.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use ninep_wire::consts::{dotl, mode::DMDIR, open};
use ninep_wire::*;

use crate::conn::Client;
use crate::error::Error;
use crate::file::File;
use crate::info::{DirEntry, FileInfo};

/// A fid: a handle on a file in the server. Dropping it clunks it.
pub struct Fid {
    pub(crate) client: Client,
    pub(crate) fid: ninep_wire::Fid,
    qid: Qid,
    /// Last path element walked, for getattr's nameless replies.
    name: String,
    /// False once the fid is gone from the server (removed, clunked).
    live: AtomicBool,
}

impl std::fmt::Debug for Fid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fid")
            .field("fid", &self.fid.0)
            .field("qid", &self.qid)
            .finish()
    }
}

impl Drop for Fid {
    fn drop(&mut self) {
        if !*self.live.get_mut() {
            return;
        }
        self.client.inner.clunk_detached(self.fid);
    }
}

/// Clunks a fid whose walk was abandoned part-way: the server may have made it.
struct Unfinished {
    client: Client,
    fid: ninep_wire::Fid,
    armed: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.armed {
            self.client.inner.clunk_detached(self.fid);
        }
    }
}

/// Splits a slash-separated path into names; empty elements and `.` vanish.
pub(crate) fn split_path(path: &str) -> Result<Vec<Name>, Error> {
    path.split('/')
        .filter(|e| !e.is_empty() && *e != ".")
        .map(|e| Name::new(e).map_err(|err| Error::protocol(format!("{e:?}: {err}"))))
        .collect()
}

impl Fid {
    pub(crate) fn new(client: Client, fid: ninep_wire::Fid, qid: Qid) -> Fid {
        Fid {
            client,
            fid,
            qid,
            name: "/".into(),
            live: AtomicBool::new(true),
        }
    }

    pub fn qid(&self) -> Qid {
        self.qid
    }

    /// A fid number for a walk to make, clunked if the walk is abandoned
    /// (the server may make it even if the caller gives up on the reply).
    fn new_fid(&self) -> Unfinished {
        Unfinished {
            client: self.client.clone(),
            fid: self.client.inner.alloc_fid(),
            armed: true,
        }
    }

    /// The fid number on the wire.
    pub fn number(&self) -> ninep_wire::Fid {
        self.fid
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Walks to `names` (any number; sent 16 at a time) and returns a new fid.
    /// A walk that stops short fails with ENOENT.
    pub async fn walk(&self, names: &[Name]) -> Result<Fid, Error> {
        let inner = &self.client.inner;
        let mut unfinished = self.new_fid();
        let newfid = unfinished.fid;
        let mut from = self.fid;
        let mut qid = self.qid;
        let mut chunks: Vec<&[Name]> = names.chunks(MAXWELEM).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let reply = inner
                .rpc(
                    Twalk {
                        fid: from,
                        newfid,
                        wname: chunk.to_vec(),
                    }
                    .into(),
                )
                .await;
            let wqid = match reply {
                Ok(Msg::Rwalk(r)) => r.wqid,
                Ok(_) => unreachable!("rpc checks the reply type"),
                Err(e) => {
                    // Nothing was made unless an earlier chunk made newfid.
                    unfinished.armed = from == newfid;
                    if !unfinished.armed {
                        inner.free_fid(newfid);
                    }
                    return Err(e);
                }
            };
            if wqid.len() < chunk.len() {
                unfinished.armed = from == newfid;
                if !unfinished.armed {
                    inner.free_fid(newfid);
                }
                return Err(Error::Remote {
                    errno: Errno::ENOENT,
                    ename: format!("{}: {}", chunk[wqid.len()], Errno::ENOENT.ename()),
                });
            }
            qid = wqid.last().copied().unwrap_or(qid);
            from = newfid;
        }
        unfinished.armed = false;
        let mut fid = Fid::new(self.client.clone(), newfid, qid);
        fid.name = names
            .last()
            .map_or_else(|| self.name.clone(), |n| n.to_string());
        Ok(fid)
    }

    /// One Twalk of at most 16 names that may stop short: the qids of the
    /// names walked and, if all were, the new fid. Fails only if the first
    /// name does not exist.
    pub async fn walk_some(&self, names: &[Name]) -> Result<(Vec<Qid>, Option<Fid>), Error> {
        if names.len() > MAXWELEM {
            return Err(Error::protocol("more than 16 names in one walk"));
        }
        let inner = &self.client.inner;
        let mut unfinished = self.new_fid();
        let newfid = unfinished.fid;
        let msg = Twalk {
            fid: self.fid,
            newfid,
            wname: names.to_vec(),
        };
        let wqid = match inner.rpc(msg.into()).await {
            Ok(Msg::Rwalk(r)) => r.wqid,
            Ok(_) => unreachable!("rpc checks the reply type"),
            Err(e) => {
                unfinished.armed = false;
                inner.free_fid(newfid);
                return Err(e);
            }
        };
        unfinished.armed = false;
        if wqid.len() > names.len() {
            // A broken server: newfid may or may not exist, so it is never reused.
            return Err(Error::protocol("Rwalk with more qids than names"));
        }
        if wqid.len() < names.len() {
            inner.free_fid(newfid);
            return Ok((wqid, None));
        }
        let qid = wqid.last().copied().unwrap_or(self.qid);
        let mut fid = Fid::new(self.client.clone(), newfid, qid);
        fid.name = names
            .last()
            .map_or_else(|| self.name.clone(), |n| n.to_string());
        Ok((wqid, Some(fid)))
    }

    /// Walks a slash-separated path.
    pub async fn walk_path(&self, path: &str) -> Result<Fid, Error> {
        let mut fid = self.walk(&split_path(path)?).await?;
        if let Some(last) = path.rsplit('/').find(|e| !e.is_empty() && *e != ".") {
            fid.name = last.to_owned();
        }
        Ok(fid)
    }

    /// A second fid on the same file.
    pub async fn clone_fid(&self) -> Result<Fid, Error> {
        self.walk(&[]).await
    }

    /// Opens the file with Linux open flags (`O_RDONLY`, `O_RDWR | O_TRUNC`,
    /// ...); for 9P2000 and .u they become the matching open mode.
    pub async fn open(self, flags: u32) -> Result<File, Error> {
        let reply = match self.client.dialect() {
            Dialect::L => {
                self.client
                    .inner
                    .rpc(
                        Tlopen {
                            fid: self.fid,
                            flags,
                        }
                        .into(),
                    )
                    .await?
            }
            _ => {
                let mode = plan9_mode(flags);
                self.client
                    .inner
                    .rpc(
                        Topen {
                            fid: self.fid,
                            mode,
                        }
                        .into(),
                    )
                    .await?
            }
        };
        let (qid, iounit) = match reply {
            Msg::Rlopen(r) => (r.qid, r.iounit),
            Msg::Ropen(r) => (r.qid, r.iounit),
            _ => unreachable!("rpc checks the reply type"),
        };
        let mut fid = self;
        fid.qid = qid;
        Ok(File::new(fid, iounit))
    }

    /// Creates `name` in this directory with permissions `perm` and opens it
    /// with `flags`; the fid becomes the new file. `perm` may carry Plan 9's
    /// DMAPPEND and DMEXCL for 9P2000 servers.
    pub async fn create(self, name: &str, perm: u32, flags: u32) -> Result<File, Error> {
        self.create_with_gid(name, perm, flags, NONUNAME).await
    }

    /// As [`Fid::create`], naming the group of the new file (9P2000.L; other
    /// dialects ignore it).
    pub async fn create_with_gid(
        self,
        name: &str,
        perm: u32,
        flags: u32,
        gid: u32,
    ) -> Result<File, Error> {
        let name = Name::new(name).map_err(|e| Error::protocol(e.to_string()))?;
        let reply = match self.client.dialect() {
            Dialect::L => {
                self.client
                    .inner
                    .rpc(
                        Tlcreate {
                            fid: self.fid,
                            name,
                            flags,
                            mode: perm & 0o7777,
                            gid,
                        }
                        .into(),
                    )
                    .await?
            }
            _ => {
                self.client
                    .inner
                    .rpc(
                        Tcreate {
                            fid: self.fid,
                            name,
                            perm,
                            mode: plan9_mode(flags),
                            extension: String::new(),
                        }
                        .into(),
                    )
                    .await?
            }
        };
        let (qid, iounit) = match reply {
            Msg::Rlcreate(r) => (r.qid, r.iounit),
            Msg::Rcreate(r) => (r.qid, r.iounit),
            _ => unreachable!("rpc checks the reply type"),
        };
        let mut fid = self;
        fid.qid = qid;
        Ok(File::new(fid, iounit))
    }

    /// Makes directory `name` in this directory.
    pub async fn mkdir(&self, name: &str, perm: u32) -> Result<Qid, Error> {
        let name_ok = Name::new(name).map_err(|e| Error::protocol(e.to_string()))?;
        match self.client.dialect() {
            Dialect::L => {
                let msg = Tmkdir {
                    dfid: self.fid,
                    name: name_ok,
                    mode: perm & 0o7777,
                    gid: NONUNAME,
                };
                match self.client.inner.rpc(msg.into()).await? {
                    Msg::Rmkdir(r) => Ok(r.qid),
                    _ => unreachable!("rpc checks the reply type"),
                }
            }
            _ => {
                let dir = self.clone_fid().await?;
                let file = dir
                    .create(name, DMDIR | (perm & 0o777), dotl::O_RDONLY)
                    .await?;
                Ok(file.qid())
            }
        }
    }

    /// The file's attributes.
    pub async fn stat(&self) -> Result<FileInfo, Error> {
        let dialect = self.client.dialect();
        match dialect {
            Dialect::L => {
                let msg = Tgetattr {
                    fid: self.fid,
                    request_mask: dotl::GETATTR_BASIC,
                };
                match self.client.inner.rpc(msg.into()).await? {
                    Msg::Rgetattr(r) => Ok(FileInfo::from_getattr(r, self.name.clone())),
                    _ => unreachable!("rpc checks the reply type"),
                }
            }
            _ => match self
                .client
                .inner
                .rpc(Tstat { fid: self.fid }.into())
                .await?
            {
                Msg::Rstat(r) => Ok(FileInfo::from_stat(r.stat, dialect)),
                _ => unreachable!("rpc checks the reply type"),
            },
        }
    }

    /// Removes the file; the fid is clunked either way.
    pub async fn remove(self) -> Result<(), Error> {
        self.remove_in_place().await
    }

    /// Removes the file through a borrowed handle, which is dead afterwards:
    /// the server forgot the fid, and dropping the handle sends nothing.
    /// For a handle that nothing else uses: the fid number is reused.
    pub async fn remove_in_place(&self) -> Result<(), Error> {
        if !self.live.swap(false, Ordering::Relaxed) {
            return Err(Error::protocol("fid already removed"));
        }
        let result = self
            .client
            .inner
            .rpc(Tremove { fid: self.fid }.into())
            .await;
        self.client.inner.free_fid(self.fid);
        result.map(drop)
    }

    /// Clunks the fid and waits for the server to agree.
    pub async fn clunk(self) -> Result<(), Error> {
        self.live.store(false, Ordering::Relaxed);
        let result = self.client.inner.rpc(Tclunk { fid: self.fid }.into()).await;
        self.client.inner.free_fid(self.fid);
        result.map(drop)
    }
}

/// A 9P2000 open mode for Linux open flags.
fn plan9_mode(flags: u32) -> u8 {
    let access = match flags & dotl::O_ACCMODE {
        dotl::O_WRONLY => open::OWRITE,
        dotl::O_RDWR => open::ORDWR,
        _ => open::OREAD,
    };
    let trunc = if flags & dotl::O_TRUNC != 0 {
        open::OTRUNC
    } else {
        0
    };
    access | trunc
}

/// An attached file tree, with helpers that take slash-separated paths
/// relative to its root.
#[derive(Debug)]
pub struct Fsys {
    root: Fid,
}

impl Fsys {
    pub(crate) fn new(root: Fid) -> Fsys {
        Fsys { root }
    }

    /// The root fid.
    pub fn root(&self) -> &Fid {
        &self.root
    }

    /// The root fid, for keeping beyond the `Fsys`.
    pub fn into_root(self) -> Fid {
        self.root
    }

    pub fn client(&self) -> &Client {
        &self.root.client
    }

    /// Clunks the root and waits until every outstanding request, the
    /// clunks of dropped fids among them, has been answered.
    pub async fn close(self) {
        let client = self.root.client.clone();
        drop(self);
        client.idle().await;
    }

    pub async fn walk(&self, path: &str) -> Result<Fid, Error> {
        self.root.walk_path(path).await
    }

    pub async fn open(&self, path: &str, flags: u32) -> Result<File, Error> {
        self.walk(path).await?.open(flags).await
    }

    /// Creates file `path` (its directory must exist) and opens it.
    pub async fn create(&self, path: &str, perm: u32, flags: u32) -> Result<File, Error> {
        let (dir, name) = self.parent(path).await?;
        dir.create(&name, perm, flags).await
    }

    pub async fn mkdir(&self, path: &str, perm: u32) -> Result<Qid, Error> {
        let (dir, name) = self.parent(path).await?;
        dir.mkdir(&name, perm).await
    }

    pub async fn stat(&self, path: &str) -> Result<FileInfo, Error> {
        self.walk(path).await?.stat().await
    }

    pub async fn remove(&self, path: &str) -> Result<(), Error> {
        self.walk(path).await?.remove().await
    }

    /// Renames `path` to `newname` within its directory.
    pub async fn rename(&self, path: &str, newname: &str) -> Result<(), Error> {
        let newname = Name::new(newname).map_err(|e| Error::protocol(e.to_string()))?;
        let client = self.client();
        match client.dialect() {
            Dialect::L => {
                let (dir, oldname) = self.parent(path).await?;
                let oldname = Name::new(oldname).map_err(|e| Error::protocol(e.to_string()))?;
                let msg = Trenameat {
                    olddirfid: dir.fid,
                    oldname: oldname.clone(),
                    newdirfid: dir.fid,
                    newname: newname.clone(),
                };
                match client.inner.rpc(msg.into()).await {
                    // Older servers (diod) know only Trename, as Linux expects.
                    Err(e) if e.errno() == Errno::EOPNOTSUPP => {
                        let file = dir.walk(&[oldname]).await?;
                        let msg = Trename {
                            fid: file.fid,
                            dfid: dir.fid,
                            name: newname,
                        };
                        client.inner.rpc(msg.into()).await.map(drop)
                    }
                    other => other.map(drop),
                }
            }
            _ => {
                let fid = self.walk(path).await?;
                let stat = Stat {
                    name: newname.into_string(),
                    ..Stat::dont_touch()
                };
                client
                    .inner
                    .rpc(Twstat { fid: fid.fid, stat }.into())
                    .await
                    .map(drop)
            }
        }
    }

    /// The whole contents of a file.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, Error> {
        self.open(path, dotl::O_RDONLY).await?.read_all().await
    }

    pub async fn read_to_string(&self, path: &str) -> Result<String, Error> {
        String::from_utf8(self.read(path).await?).map_err(|_| Error::Remote {
            errno: Errno::EINVAL,
            ename: format!("{path}: not UTF-8"),
        })
    }

    /// Writes `data` to an existing file from offset 0, without truncating.
    pub async fn write(&self, path: &str, data: impl Into<Bytes>) -> Result<(), Error> {
        let file = self.open(path, dotl::O_WRONLY).await?;
        file.write_all_at(0, data.into()).await
    }

    /// The entries of a directory (never `.` or `..`).
    pub async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let flags = dotl::O_RDONLY
            | if self.client().dialect() == Dialect::L {
                dotl::O_DIRECTORY
            } else {
                0
            };
        self.open(path, flags).await?.read_dir().await
    }

    /// The directory holding `path`, and the last element of `path`.
    async fn parent(&self, path: &str) -> Result<(Fid, String), Error> {
        let mut names = split_path(path)?;
        let name = names
            .pop()
            .ok_or_else(|| Error::protocol("no file name in path"))?;
        Ok((self.root.walk(&names).await?, name.into_string()))
    }
}
