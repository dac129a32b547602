//! Fids as handles, and an attached tree with path helpers.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use ninep_wire::consts::dotl;
use ninep_wire::*;

use crate::conn::Client;
use crate::error::Error;
use crate::file::{File, read_fid};
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

/// The names of a slash-separated path (see [`ninep_wire::split_path`]).
pub(crate) fn path_names(path: &str) -> Result<Vec<Name>, Error> {
    split_path(path).map_err(|err| bad_name(path, err))
}

/// `name` as the name of a new directory entry: not empty, `.` or `..`.
pub(crate) fn entry_name(name: &str) -> Result<Name, Error> {
    Name::entry(name).map_err(|err| bad_name(name, err))
}

pub(crate) fn bad_name(name: &str, err: NameError) -> Error {
    Error::refused(err.errno(), format!("{name:?}: {err}"))
}

/// A walk that stopped short at `name`.
fn not_found(name: &Name) -> Error {
    Error::Remote {
        errno: Errno::ENOENT,
        ename: format!("{name}: {}", Errno::ENOENT.ename()),
    }
}

/// Opens `fid` with Linux open flags: its qid and iounit.
async fn open_fid(client: &Client, fid: ninep_wire::Fid, flags: u32) -> Result<(Qid, u32), Error> {
    let inner = &client.inner;
    match client.dialect() {
        Dialect::L => {
            let r = inner.call(Tlopen { fid, flags }).await?;
            Ok((r.qid, r.iounit))
        }
        _ => {
            let mode = convert::open_mode(flags);
            let r = inner.call(Topen { fid, mode }).await?;
            Ok((r.qid, r.iounit))
        }
    }
}

/// Creates `name` in the directory of fid number `fid`, which becomes the
/// new file, opened with Linux open flags.
async fn create_fid(
    client: &Client,
    fid: ninep_wire::Fid,
    name: Name,
    perm: u32,
    flags: u32,
    gid: u32,
) -> Result<(Qid, u32), Error> {
    let inner = &client.inner;
    match client.dialect() {
        Dialect::L => {
            let mode = perm & 0o7777;
            let msg = Tlcreate {
                fid,
                name,
                flags,
                mode,
                gid,
            };
            let r = inner.call(msg).await?;
            Ok((r.qid, r.iounit))
        }
        _ => {
            let msg = Tcreate {
                fid,
                name,
                perm,
                mode: convert::open_mode(flags),
                extension: String::new(),
            };
            let r = inner.call(msg).await?;
            Ok((r.qid, r.iounit))
        }
    }
}

/// The stat of fid number `fid`, which need not have a handle yet; `name`
/// is the file's name where the reply has none (9P2000.L).
async fn stat_fid(client: &Client, fid: ninep_wire::Fid, name: String) -> Result<FileInfo, Error> {
    let dialect = client.dialect();
    match dialect {
        Dialect::L => {
            let msg = Tgetattr {
                fid,
                request_mask: dotl::GETATTR_BASIC,
            };
            let r = client.inner.call(msg).await?;
            Ok(FileInfo::from_getattr(r, name))
        }
        _ => {
            let r = client.inner.call(Tstat { fid }).await?;
            Ok(FileInfo::from_stat(r.stat, dialect))
        }
    }
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

    /// The file's qid as the walk (or open) returned it.
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

    /// One Twalk from this fid to `names`, and the new fid it makes.
    fn walk_here(&self, names: &[Name]) -> (Unfinished, Twalk) {
        let unfinished = self.new_fid();
        let msg = Twalk {
            fid: self.fid,
            newfid: unfinished.fid,
            wname: names.to_vec(),
        };
        (unfinished, msg)
    }

    /// The fid number on the wire.
    pub fn number(&self) -> ninep_wire::Fid {
        self.fid
    }

    /// The connection the fid belongs to.
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
                .call(Twalk {
                    fid: from,
                    newfid,
                    wname: chunk.to_vec(),
                })
                .await;
            let wqid = match reply {
                Ok(r) => r.wqid,
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
                return Err(not_found(&chunk[wqid.len()]));
            }
            if wqid.len() > chunk.len() {
                // A broken server: newfid may or may not exist (unless an
                // earlier chunk made it), so its number is never reused.
                unfinished.armed = from == newfid;
                return Err(Error::protocol("Rwalk with more qids than names"));
            }
            qid = wqid.last().copied().unwrap_or(qid);
            from = newfid;
        }
        unfinished.armed = false;
        let mut fid = Fid::new(self.client.clone(), newfid, qid);
        fid.name = self.name_of(names);
        Ok(fid)
    }

    /// One Twalk of at most 16 names that may stop short: the qids of the
    /// names walked and, if all were, the new fid. Fails only if the first
    /// name does not exist.
    pub async fn walk_some(&self, names: &[Name]) -> Result<(Vec<Qid>, Option<Fid>), Error> {
        if names.len() > MAXWELEM {
            return Err(Error::refused(
                Errno::EINVAL,
                "more than 16 names in one walk",
            ));
        }
        let inner = &self.client.inner;
        let (mut unfinished, msg) = self.walk_here(names);
        let newfid = unfinished.fid;
        let wqid = match inner.call(msg).await {
            Ok(r) => r.wqid,
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
        fid.name = self.name_of(names);
        Ok((wqid, Some(fid)))
    }

    /// Walks a slash-separated path.
    pub async fn walk_path(&self, path: &str) -> Result<Fid, Error> {
        let mut fid = self.walk(&path_names(path)?).await?;
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
        let (qid, iounit) = open_fid(&self.client, self.fid, flags).await?;
        let mut fid = self;
        fid.qid = qid;
        Ok(File::new(fid, iounit))
    }

    /// Walks to `names` and opens the file there (see [`Fid::open`]), in
    /// one round trip where the server runs requests in order
    /// ([`Client::runs_in_order`]): the open, sent without waiting for the
    /// walk, names the fid the walk makes.
    pub async fn walk_open(&self, names: &[Name], flags: u32) -> Result<File, Error> {
        let (file, ()) = self.walk_open_then(names, flags, |_, _| async {}).await?;
        Ok(file)
    }

    /// As [`Fid::walk_open`], and stats the file and reads up to `count`
    /// bytes from its start, all in the same round trip where the server
    /// runs requests in order: the stat and the read go behind the open.
    /// A directory's data is what its read gave, or none where reading a
    /// directory is refused (9P2000.L).
    pub async fn walk_open_read(
        &self,
        names: &[Name],
        flags: u32,
        count: u32,
    ) -> Result<(File, FileInfo, Bytes), Error> {
        let client = &self.client;
        let count = count.min(client.msize().saturating_sub(IOHDRSZ));
        let (file, (info, data)) = self
            .walk_open_then(names, flags, |fid, name| async move {
                tokio::join!(
                    biased;
                    stat_fid(client, fid, name),
                    read_fid(client, fid, 0, count)
                )
            })
            .await?;
        let data = match data {
            Err(e) if e.is_remote() && file.fid().qid().ty.is_dir() => Bytes::new(),
            other => other?,
        };
        Ok((file, info?, data))
    }

    /// As [`Fid::walk_open`], and where the server runs requests in order,
    /// reads up to `count` bytes from the file's start behind the open, in
    /// the same round trip: the head of the file, for a caller that expects
    /// to be asked for it. Elsewhere nothing is read (`None`): reading after
    /// the open would cost a round trip the caller was not asked for. A
    /// refused read leaves the open standing; a `count` of 0 reads nothing.
    pub async fn walk_open_head(
        &self,
        names: &[Name],
        flags: u32,
        count: u32,
    ) -> Result<(File, Option<Bytes>), Error> {
        if count == 0 || !self.pipelines(names) {
            return Ok((self.walk_open(names, flags).await?, None));
        }
        let client = &self.client;
        let count = count.min(client.msize().saturating_sub(IOHDRSZ));
        let (file, head) = self
            .walk_open_then(names, flags, |fid, _| read_fid(client, fid, 0, count))
            .await?;
        Ok((file, head.ok()))
    }

    /// As [`Fid::open`] on a fid already walked, with the head of the file
    /// read behind the open as [`Fid::walk_open_head`] reads it.
    pub async fn open_head(self, flags: u32, count: u32) -> Result<(File, Option<Bytes>), Error> {
        if count == 0 || !self.client.runs_in_order() {
            return Ok((self.open(flags).await?, None));
        }
        let client = &self.client;
        let count = count.min(client.msize().saturating_sub(IOHDRSZ));
        let (opened, head) = tokio::join!(
            biased;
            open_fid(client, self.fid, flags),
            read_fid(client, self.fid, 0, count)
        );
        // Dropped on an error, the fid is clunked.
        let (qid, iounit) = opened?;
        let mut fid = self;
        fid.qid = qid;
        Ok((File::new(fid, iounit), head.ok()))
    }

    /// Walks to `names` and opens the file there, with what `behind` sends
    /// (given the new fid's number and the file's name) sent behind the
    /// open.
    async fn walk_open_then<'a, T, F>(
        &'a self,
        names: &[Name],
        flags: u32,
        behind: impl FnOnce(ninep_wire::Fid, String) -> F,
    ) -> Result<(File, T), Error>
    where
        F: Future<Output = T> + 'a,
    {
        let client = &self.client;
        let name = self.name_of(names);
        let open = |fid| open_fid(client, fid, flags);
        self.walk_then_make_file(names, name, open, behind).await
    }

    /// Walks to `names` and makes the new fid an open file by what `open`
    /// sends (an open, or a create in the directory walked to), with what
    /// `behind` sends sent behind it; `name` is the file's. All go in one
    /// round trip where the server runs requests in order; otherwise one
    /// after another.
    async fn walk_then_make_file<'a, T, O, F>(
        &'a self,
        names: &[Name],
        name: String,
        open: impl FnOnce(ninep_wire::Fid) -> O,
        behind: impl FnOnce(ninep_wire::Fid, String) -> F,
    ) -> Result<(File, T), Error>
    where
        O: Future<Output = Result<(Qid, u32), Error>> + 'a,
        F: Future<Output = T> + 'a,
    {
        if !self.pipelines(names) {
            let mut fid = self.walk(names).await?;
            fid.name = name.clone();
            let (qid, iounit) = open(fid.number()).await?;
            fid.qid = qid;
            let behind = behind(fid.number(), name).await;
            return Ok((File::new(fid, iounit), behind));
        }
        let (mut fid, (opened, behind)) = self
            .walk_pipelined(names, name.clone(), |newfid| async move {
                // Polled in this order, each sends its request on its first poll.
                tokio::join!(biased; open(newfid), behind(newfid, name))
            })
            .await?;
        // Dropped on an error, the walked fid is clunked.
        let (qid, iounit) = opened?;
        fid.qid = qid;
        Ok((File::new(fid, iounit), behind))
    }

    /// Whether the file at `names` may be opened with `flags`, and its qid
    /// once opened, with no fid kept: a walk, an open and a clunk, in one
    /// round trip where the server runs requests in order. (Not on a client
    /// that reconnects, which answers a clunk of a fid it has not yet made
    /// again itself while the walk goes out again.)
    pub async fn walk_open_clunk(&self, names: &[Name], flags: u32) -> Result<Qid, Error> {
        if !self.pipelines(names) || self.client.recovers() {
            return Ok(self.walk_open(names, flags).await?.fid().qid());
        }
        let client = &self.client;
        let inner = &client.inner;
        let (fid, (opened, clunked)) = self
            .walk_pipelined(names, String::new(), |newfid| async move {
                tokio::join!(
                    biased;
                    open_fid(client, newfid, flags),
                    inner.call(Tclunk { fid: newfid })
                )
            })
            .await?;
        // A clunk refused beside the walk is sent again as the fid drops.
        if clunked.is_ok() {
            fid.live.store(false, Ordering::Relaxed);
            inner.free_fid(fid.fid);
        }
        let (qid, _) = opened?;
        Ok(qid)
    }

    /// Walks to `names` and stats the file there, in one round trip where
    /// the server runs requests in order.
    pub async fn walk_stat(&self, names: &[Name]) -> Result<(Fid, FileInfo), Error> {
        let name = self.name_of(names);
        if !self.pipelines(names) {
            let fid = self.walk(names).await?;
            let info = fid.stat().await?;
            return Ok((fid, info));
        }
        let client = &self.client;
        let (fid, info) = self
            .walk_pipelined(names, name.clone(), |newfid| stat_fid(client, newfid, name))
            .await?;
        // The walk made the fid: a stat refused beside it (too many
        // requests in flight) is asked again rather than fail the walk.
        let info = match info {
            Ok(info) => info,
            Err(_) => fid.stat().await?,
        };
        Ok((fid, info))
    }

    /// Whether requests on the fid a walk to `names` makes may go without
    /// waiting for the walk: where the server runs requests in order and
    /// the walk is one Twalk. A server that runs requests side by side
    /// (diod) may run one on a fid a walk is still making.
    fn pipelines(&self, names: &[Name]) -> bool {
        names.len() <= MAXWELEM && self.client.runs_in_order()
    }

    /// Walks to `names` (one Twalk) on a new fid named `name`, with what
    /// `behind` sends on that fid sent behind the walk without waiting for
    /// it; for servers that run requests in order ([`Fid::pipelines`]).
    /// What `behind` gave is dropped if the walk fails.
    async fn walk_pipelined<'a, T, F>(
        &'a self,
        names: &[Name],
        name: String,
        behind: impl FnOnce(ninep_wire::Fid) -> F,
    ) -> Result<(Fid, T), Error>
    where
        F: Future<Output = T> + 'a,
    {
        let inner = &self.client.inner;
        let (mut unfinished, msg) = self.walk_here(names);
        let newfid = unfinished.fid;
        let walked = match inner.start(msg) {
            Ok(walked) => walked,
            Err(e) => {
                unfinished.armed = false;
                inner.free_fid(newfid);
                return Err(e);
            }
        };
        // The walk is sent first: it was started before `behind` is polled.
        let (walked, behind) = tokio::join!(biased; walked, behind(newfid));
        unfinished.armed = false;
        let wqid = match walked {
            Ok(r) if r.wqid.len() == names.len() => r.wqid,
            Ok(r) if r.wqid.len() < names.len() => {
                inner.free_fid(newfid);
                return Err(not_found(&names[r.wqid.len()]));
            }
            Ok(_) => return Err(Error::protocol("Rwalk with more qids than names")),
            Err(e) => {
                inner.free_fid(newfid);
                return Err(e);
            }
        };
        let mut fid = Fid::new(
            self.client.clone(),
            newfid,
            wqid.last().copied().unwrap_or(self.qid),
        );
        fid.name = name;
        Ok((fid, behind))
    }

    /// The name of the file `names` lead to from this one.
    fn name_of(&self, names: &[Name]) -> String {
        names
            .last()
            .map_or_else(|| self.name.clone(), |n| n.to_string())
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
        let entry = entry_name(name)?;
        let (qid, iounit) = create_fid(&self.client, self.fid, entry, perm, flags, gid).await?;
        let mut fid = self;
        fid.qid = qid;
        fid.name = name.to_owned();
        Ok(File::new(fid, iounit))
    }

    /// Creates `name` in this directory as [`Fid::create_with_gid`] does,
    /// on a new fid (this one stays the directory's), and stats the new
    /// file: the clone's walk, the create and the stat in one round trip
    /// where the server runs requests in order. The file made comes back
    /// even if its stat fails: asking for the create again would find the
    /// name taken.
    pub async fn create_beside(
        &self,
        name: &str,
        perm: u32,
        flags: u32,
        gid: u32,
    ) -> Result<(File, Result<FileInfo, Error>), Error> {
        let entry = entry_name(name)?;
        let client = &self.client;
        let create = |fid| create_fid(client, fid, entry, perm, flags, gid);
        let stat = |fid, name| stat_fid(client, fid, name);
        let (file, info) = self
            .walk_then_make_file(&[], name.to_owned(), create, stat)
            .await?;
        // The file is made: a stat refused beside the create (too many
        // requests in flight) is asked again rather than fail it.
        let info = match info {
            Ok(info) => Ok(info),
            Err(_) => file.fid().stat().await,
        };
        Ok((file, info))
    }

    /// The file's attributes.
    pub async fn stat(&self) -> Result<FileInfo, Error> {
        stat_fid(&self.client, self.fid, self.name.clone()).await
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
        let result = self.client.inner.call(Tremove { fid: self.fid }).await;
        self.client.inner.free_fid(self.fid);
        result.map(drop)
    }

    /// Clunks the fid and waits for the server to agree.
    pub async fn clunk(self) -> Result<(), Error> {
        self.live.store(false, Ordering::Relaxed);
        let result = self.client.inner.call(Tclunk { fid: self.fid }).await;
        self.client.inner.free_fid(self.fid);
        result.map(drop)
    }
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

    /// The connection the tree was attached on.
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

    /// A fid for `path`.
    pub async fn walk(&self, path: &str) -> Result<Fid, Error> {
        self.root.walk_path(path).await
    }

    /// Opens `path` with Linux open flags (see [`Fid::open`]).
    pub async fn open(&self, path: &str, flags: u32) -> Result<File, Error> {
        self.walk(path).await?.open(flags).await
    }

    /// As [`Fsys::open`], in one round trip rather than two where the
    /// server runs requests in order (see [`Fid::walk_open`]).
    pub async fn open_pipelined(&self, path: &str, flags: u32) -> Result<File, Error> {
        self.root.walk_open(&path_names(path)?, flags).await
    }

    /// Creates file `path` (its directory must exist) and opens it.
    pub async fn create(&self, path: &str, perm: u32, flags: u32) -> Result<File, Error> {
        let (dir, name) = self.parent(path).await?;
        dir.create(&name, perm, flags).await
    }

    /// Makes directory `path` (its parent must exist).
    pub async fn mkdir(&self, path: &str, perm: u32) -> Result<Qid, Error> {
        let (dir, name) = self.parent(path).await?;
        dir.mkdir(&name, perm).await
    }

    /// The attributes of `path`.
    pub async fn stat(&self, path: &str) -> Result<FileInfo, Error> {
        self.walk(path).await?.stat().await
    }

    /// Removes `path`.
    pub async fn remove(&self, path: &str) -> Result<(), Error> {
        self.walk(path).await?.remove().await
    }

    /// Renames `path` to `newname` within its directory.
    pub async fn rename(&self, path: &str, newname: &str) -> Result<(), Error> {
        let newname = entry_name(newname)?;
        let (dir, oldname) = self.parent(path).await?;
        dir.rename_at(&oldname, &dir, &newname).await
    }

    /// The whole contents of a file.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, Error> {
        self.open(path, dotl::O_RDONLY).await?.read_all().await
    }

    /// The whole contents of a file, which must be UTF-8.
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
    async fn parent(&self, path: &str) -> Result<(Fid, Name), Error> {
        let mut names = path_names(path)?;
        let name = names
            .pop()
            .ok_or_else(|| Error::refused(Errno::EINVAL, "no file name in path"))?;
        Ok((self.root.walk(&names).await?, name))
    }
}
