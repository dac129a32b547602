//! ramfs: a file tree in memory, with everything a file system has: files,
//! directories, symbolic and hard links, device nodes, append-only and
//! exclusive-use files, attributes and extended attributes.
//!
//! ramfs trusts its clients: it records owners and modes but checks no
//! permissions. Qid versions start at 1 and grow with every change, so
//! clients may cache its files.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use ninep_server::{
    Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, SetAttr, SetTime, Time, User,
};
use ninep_wire::consts::dotl::{O_TRUNC, XATTR_CREATE, XATTR_REPLACE};
use ninep_wire::consts::mode::{DMAPPEND, DMEXCL, DMTMP};
use ninep_wire::consts::unix::*;
use ninep_wire::{Dialect, Errno, NONUNAME, Name, Qid, QidType};

use crate::nodes::{Kind, Node, State, owner};
use crate::space::{Contents, Limits, Space};

/// The qid path of the root directory.
pub const ROOT: u64 = 1;

/// An in-memory file server.
#[derive(Debug)]
pub struct RamFs {
    state: Mutex<State>,
    space: Arc<Space>,
}

/// The most bytes of names and values a file's extended attributes hold
/// together (as ext4 holds a file's in one block, more generously):
/// past it a set is refused with ENOSPC, so that attributes cannot
/// grow without bound as the file's data cannot.
pub const MAX_XATTR_BYTES: usize = 64 * 1024;

/// What a fid refers to: a node, by qid path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RamFile(pub u64);

impl Default for RamFs {
    fn default() -> Self {
        Self::new()
    }
}

impl RamFs {
    /// An empty tree: a root directory owned by `none`, mode 0777, held
    /// to the default [`Limits`].
    pub fn new() -> RamFs {
        RamFs::with_limits(Limits::default())
    }

    /// The same, held to `limits`.
    pub fn with_limits(limits: Limits) -> RamFs {
        let mut nodes = HashMap::new();
        let root = Node::new(
            ROOT,
            "/",
            Kind::Dir(BTreeMap::new()),
            0o777,
            ("none", 0),
            ("none", 0),
        );
        nodes.insert(ROOT, root);
        RamFs {
            state: Mutex::new(State {
                nodes,
                next_path: ROOT + 1,
            }),
            space: Space::new(limits),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Makes a directory at the top of the tree (for servers built on ramfs).
    pub fn make_dir(&self, name: &str, perm: u32) -> Result<RamFile> {
        let name = Name::new(name).map_err(|e| Error::new(e.to_string()))?;
        let user = User {
            uname: "none".into(),
            n_uname: 0,
            aname: String::new(),
        };
        self.lock()
            .insert(
                ROOT,
                &name,
                Kind::Dir(BTreeMap::new()),
                perm,
                &user,
                NONUNAME,
            )
            .map(|(path, _)| RamFile(path))
    }

    /// Moves `file` to `name` in `dir`, replacing what was there.
    pub fn move_to(&self, file: RamFile, dir: RamFile, name: &str) -> Result<()> {
        self.lock().rename(file.0, Some(dir.0), name)
    }

    /// The directory `file` was last linked into.
    pub fn parent(&self, file: RamFile) -> Option<RamFile> {
        self.lock().nodes.get(&file.0).map(|n| RamFile(n.parent))
    }

    /// The name `file` was last linked under.
    pub fn name(&self, file: RamFile) -> Option<String> {
        self.lock().nodes.get(&file.0).map(|n| n.name.clone())
    }
}

impl Filesystem for RamFs {
    type File = RamFile;

    async fn attach(&self, _user: &User) -> Result<(RamFile, Qid)> {
        let qid = self.lock().node(ROOT)?.qid(ROOT);
        Ok((RamFile(ROOT), qid))
    }

    async fn walk(&self, _cx: &Cx, dir: &RamFile, name: &Name) -> Result<(RamFile, Qid)> {
        let state = self.lock();
        let path = if name == ".." {
            state.node(dir.0)?.parent
        } else {
            *state
                .entries(dir.0)?
                .get(name.as_str())
                .ok_or_else(Error::not_found)?
        };
        Ok((RamFile(path), state.node(path)?.qid(path)))
    }

    async fn getattr(&self, _cx: &Cx, file: &RamFile) -> Result<Attr> {
        Ok(self.lock().node(file.0)?.attr(file.0))
    }

    async fn setattr(&self, cx: &Cx, file: &RamFile, set: &SetAttr) -> Result<()> {
        let mut state = self.lock();
        let node = state.node_mut(file.0)?;
        if set.size.is_some() && !matches!(node.kind, Kind::File(_)) {
            return Err(Error::from_errno(Errno::EINVAL));
        }
        let now = Time::now();
        // First what may fail (a size past the limits), so that a refused
        // setattr changes nothing.
        if let (Some(size), Kind::File(data)) = (set.size, &mut node.kind) {
            data.resize(size)?;
            node.touch(owner(&cx.user).0);
        }
        if let Some(mode) = set.mode {
            node.perm = mode & 0o7777;
        }
        if let Some(uid) = set.uid {
            node.n_uid = uid;
        }
        if let Some(gid) = set.gid {
            node.n_gid = gid;
        }
        if let Some(gid) = &set.gid_name {
            node.gid = gid.clone();
        }
        let at = |t: SetTime| match t {
            SetTime::Now => now,
            SetTime::At(t) => t,
        };
        if let Some(t) = set.atime {
            node.atime = at(t);
        }
        if let Some(t) = set.mtime {
            node.mtime = at(t);
        }
        node.ctime = now;
        node.version = node.version.wrapping_add(1).max(1);
        Ok(())
    }

    async fn open(&self, cx: &Cx, file: &mut RamFile, flags: u32) -> Result<Opened> {
        let mut state = self.lock();
        let node = state.node_mut(file.0)?;
        let append = node.flags.contains(QidType::APPEND);
        if flags & O_TRUNC != 0
            && !append
            && let Kind::File(data) = &mut node.kind
        {
            data.resize(0)?;
            node.touch(owner(&cx.user).0);
        }
        Ok(Opened {
            qid: node.qid(file.0),
            iounit: 0,
        })
    }

    async fn create(
        &self,
        cx: &Cx,
        dir: &RamFile,
        name: &Name,
        mode: u32,
        flags: u32,
        gid: u32,
    ) -> Result<(RamFile, Opened)> {
        let mut state = self.lock();
        let mut perm = mode & 0o7777;
        if cx.dialect != Dialect::L {
            // Plan 9: a new file gets at most the directory's rw bits.
            perm &= !0o666 | (state.node(dir.0)?.perm & 0o666);
        }
        let (path, _) = state.insert(
            dir.0,
            name,
            Kind::File(Contents::new(&self.space)),
            perm,
            &cx.user,
            gid,
        )?;
        let node = state.node_mut(path)?;
        for (dm, q) in [
            (DMAPPEND, QidType::APPEND),
            (DMEXCL, QidType::EXCL),
            (DMTMP, QidType::TMP),
        ] {
            if mode & dm != 0 {
                node.flags = node.flags | q;
            }
        }
        let _ = flags; // a new file is empty: O_TRUNC has nothing to do
        let qid = node.qid(path);
        Ok((RamFile(path), Opened { qid, iounit: 0 }))
    }

    async fn mkdir(&self, cx: &Cx, dir: &RamFile, name: &Name, mode: u32, gid: u32) -> Result<Qid> {
        let mut state = self.lock();
        let mut perm = mode & 0o7777;
        if cx.dialect != Dialect::L {
            perm &= !0o777 | (state.node(dir.0)?.perm & 0o777);
        }
        let (path, qid) =
            state.insert(dir.0, name, Kind::Dir(BTreeMap::new()), perm, &cx.user, gid)?;
        state.node_mut(path)?.nlink = 2;
        Ok(qid)
    }

    async fn symlink(
        &self,
        cx: &Cx,
        dir: &RamFile,
        name: &Name,
        target: &str,
        gid: u32,
    ) -> Result<Qid> {
        let kind = Kind::Symlink(target.to_owned());
        Ok(self
            .lock()
            .insert(dir.0, name, kind, 0o777, &cx.user, gid)?
            .1)
    }

    async fn mknod(
        &self,
        cx: &Cx,
        dir: &RamFile,
        name: &Name,
        mode: u32,
        major: u32,
        minor: u32,
        gid: u32,
    ) -> Result<Qid> {
        let ty = mode & S_IFMT;
        let kind = match ty {
            S_IFREG | 0 => Kind::File(Contents::new(&self.space)),
            S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK => Kind::Special {
                ty,
                rdev: ninep_wire::convert::makedev(major, minor),
            },
            _ => return Err(Error::from_errno(Errno::EINVAL)),
        };
        Ok(self
            .lock()
            .insert(dir.0, name, kind, mode, &cx.user, gid)?
            .1)
    }

    async fn link(&self, _cx: &Cx, dir: &RamFile, file: &RamFile, name: &Name) -> Result<()> {
        let mut state = self.lock();
        if matches!(state.node(file.0)?.kind, Kind::Dir(_)) {
            return Err(Error::from_errno(Errno::EPERM));
        }
        if state.entries(dir.0)?.contains_key(name.as_str()) {
            return Err(Error::exists());
        }
        state.entries_mut(dir.0)?.insert(name.to_string(), file.0);
        let node = state.node_mut(file.0)?;
        node.nlink += 1;
        node.ctime = Time::now();
        Ok(())
    }

    async fn readlink(&self, _cx: &Cx, file: &RamFile) -> Result<String> {
        match &self.lock().node(file.0)?.kind {
            Kind::Symlink(target) => Ok(target.clone()),
            _ => Err(Error::from_errno(Errno::EINVAL)),
        }
    }

    async fn read(&self, _cx: &Cx, file: &RamFile, offset: u64, count: u32) -> Result<Bytes> {
        let mut state = self.lock();
        let node = state.node_mut(file.0)?;
        let Kind::File(data) = &node.kind else {
            return Err(Error::from_errno(Errno::EINVAL));
        };
        let data = data.bytes();
        let len = data.len() as u64;
        let start = offset.min(len) as usize;
        let end = offset.saturating_add(count as u64).min(len) as usize;
        let bytes = Bytes::copy_from_slice(&data[start..end]);
        node.atime = Time::now();
        Ok(bytes)
    }

    async fn write(&self, cx: &Cx, file: &RamFile, offset: u64, data: Bytes) -> Result<u32> {
        let mut state = self.lock();
        let node = state.node_mut(file.0)?;
        let append = node.flags.contains(QidType::APPEND);
        let Kind::File(contents) = &mut node.kind else {
            return Err(Error::from_errno(Errno::EINVAL));
        };
        let start = if append {
            contents.bytes().len() as u64
        } else {
            offset
        };
        contents.write_at(start, &data)?;
        node.touch(owner(&cx.user).0);
        Ok(data.len() as u32)
    }

    async fn read_dir(&self, _cx: &Cx, dir: &RamFile) -> Result<Vec<DirEntry>> {
        let state = self.lock();
        let entries = state.entries(dir.0)?;
        let mut list = Vec::with_capacity(entries.len());
        for (name, &path) in entries {
            let mut attr = state.node(path)?.attr(path);
            // A hard link shows the name it has in this directory.
            attr.name = name.clone();
            list.push(DirEntry {
                name: Name::new(name.as_str()).map_err(|e| Error::new(e.to_string()))?,
                attr,
            });
        }
        Ok(list)
    }

    async fn remove(&self, _cx: &Cx, file: &RamFile) -> Result<()> {
        let mut state = self.lock();
        if file.0 == ROOT {
            return Err(Error::with_errno(Errno::EBUSY, "cannot remove the root"));
        }
        let node = state.node(file.0)?;
        let (dir, name) = (node.parent, node.name.clone());
        state.unlink(dir, &name)
    }

    async fn unlinkat(&self, _cx: &Cx, dir: &RamFile, name: &Name, flags: u32) -> Result<()> {
        let mut state = self.lock();
        let path = *state
            .entries(dir.0)?
            .get(name.as_str())
            .ok_or_else(Error::not_found)?;
        let is_dir = matches!(state.node(path)?.kind, Kind::Dir(_));
        let want_dir = flags & ninep_wire::consts::dotl::AT_REMOVEDIR != 0;
        match (want_dir, is_dir) {
            (true, false) => Err(Error::not_dir()),
            (false, true) => Err(Error::is_dir()),
            _ => state.unlink(dir.0, name),
        }
    }

    async fn rename(
        &self,
        _cx: &Cx,
        file: &RamFile,
        newdir: Option<&RamFile>,
        name: &Name,
    ) -> Result<()> {
        self.lock().rename(file.0, newdir.map(|d| d.0), name)
    }

    async fn renameat(
        &self,
        _cx: &Cx,
        olddir: &RamFile,
        oldname: &Name,
        newdir: &RamFile,
        newname: &Name,
    ) -> Result<()> {
        let mut state = self.lock();
        let path = *state
            .entries(olddir.0)?
            .get(oldname.as_str())
            .ok_or_else(Error::not_found)?;
        // A hard-linked file is renamed by the link named, not its last name.
        let node = state.node_mut(path)?;
        node.parent = olddir.0;
        node.name = oldname.to_string();
        state.rename(path, Some(newdir.0), newname)
    }

    async fn xattr_get(&self, _cx: &Cx, file: &RamFile, name: &str) -> Result<Bytes> {
        let state = self.lock();
        let node = state.node(file.0)?;
        if name.is_empty() {
            let mut list = Vec::new();
            for key in node.xattrs.keys() {
                list.extend_from_slice(key.as_bytes());
                list.push(0);
            }
            return Ok(Bytes::from(list));
        }
        node.xattrs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::from_errno(Errno::ENODATA))
    }

    async fn xattr_set(
        &self,
        _cx: &Cx,
        file: &RamFile,
        name: &str,
        value: Bytes,
        flags: u32,
    ) -> Result<()> {
        let mut state = self.lock();
        let node = state.node_mut(file.0)?;
        let exists = node.xattrs.contains_key(name);
        if flags & XATTR_CREATE != 0 && exists {
            return Err(Error::exists());
        }
        if flags & XATTR_REPLACE != 0 && !exists {
            return Err(Error::from_errno(Errno::ENODATA));
        }
        if ninep_server::fs::removes_xattr(&value, flags) {
            node.xattrs
                .remove(name)
                .ok_or_else(|| Error::from_errno(Errno::ENODATA))?;
            node.ctime = Time::now();
            return Ok(());
        }
        let others: usize = node
            .xattrs
            .iter()
            .filter(|(key, _)| *key != name)
            .map(|(key, value)| key.len() + value.len())
            .sum();
        if others + name.len() + value.len() > MAX_XATTR_BYTES {
            return Err(Error::from_errno(Errno::ENOSPC));
        }
        node.xattrs.insert(name.to_owned(), value);
        node.ctime = Time::now();
        Ok(())
    }
}
