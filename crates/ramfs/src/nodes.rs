//! The tree behind ramfs: its nodes, and the changes made to them under
//! one lock (linking, unlinking, renaming).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use ninep_server::{Attr, Error, Result, Time, User};
use ninep_wire::consts::unix::*;
use ninep_wire::{Errno, NONUNAME, Name, Qid, QidType};

use crate::ramfs::ROOT;
use crate::space::Contents;

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) nodes: HashMap<u64, Node>,
    pub(crate) next_path: u64,
}

#[derive(Debug)]
pub(crate) struct Node {
    /// The directory this node was last linked into, and its name there.
    pub(crate) parent: u64,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    /// Permission bits, setuid/setgid/sticky.
    pub(crate) perm: u32,
    /// QTAPPEND, QTEXCL, QTTMP as given at create.
    pub(crate) flags: QidType,
    pub(crate) uid: String,
    pub(crate) gid: String,
    pub(crate) muid: String,
    pub(crate) n_uid: u32,
    pub(crate) n_gid: u32,
    pub(crate) nlink: u64,
    pub(crate) version: u32,
    pub(crate) atime: Time,
    pub(crate) mtime: Time,
    pub(crate) ctime: Time,
    pub(crate) xattrs: BTreeMap<String, Bytes>,
}

#[derive(Debug)]
pub(crate) enum Kind {
    File(Contents),
    Dir(BTreeMap<String, u64>),
    Symlink(String),
    /// Device, fifo or socket: `ty` is the S_IF* type.
    Special {
        ty: u32,
        rdev: u64,
    },
}

pub(crate) fn gone() -> Error {
    Error::with_errno(Errno::ENOENT, "file has been removed")
}

impl Node {
    pub(crate) fn new(
        parent: u64,
        name: &str,
        kind: Kind,
        perm: u32,
        owner: (&str, u32),
        group: (&str, u32),
    ) -> Node {
        let now = Time::now();
        Node {
            parent,
            name: name.to_owned(),
            kind,
            perm,
            flags: QidType::FILE,
            uid: owner.0.to_owned(),
            gid: group.0.to_owned(),
            muid: owner.0.to_owned(),
            n_uid: owner.1,
            n_gid: group.1,
            nlink: 1,
            version: 1,
            atime: now,
            mtime: now,
            ctime: now,
            xattrs: BTreeMap::new(),
        }
    }

    pub(crate) fn qid(&self, path: u64) -> Qid {
        let ty = match self.kind {
            Kind::Dir(_) => QidType::DIR,
            Kind::Symlink(_) => QidType::SYMLINK,
            _ => QidType::FILE,
        };
        Qid {
            ty: ty | self.flags,
            version: self.version,
            path,
        }
    }

    pub(crate) fn attr(&self, path: u64) -> Attr {
        let (ty, size, rdev) = match &self.kind {
            Kind::File(data) => (S_IFREG, data.bytes().len() as u64, 0),
            Kind::Dir(entries) => (S_IFDIR, entries.len() as u64, 0),
            Kind::Symlink(target) => (S_IFLNK, target.len() as u64, 0),
            Kind::Special { ty, rdev } => (*ty, 0, *rdev),
        };
        Attr {
            qid: self.qid(path),
            name: if path == ROOT {
                "/".into()
            } else {
                self.name.clone()
            },
            mode: ty | self.perm,
            uid: self.uid.clone(),
            gid: self.gid.clone(),
            muid: self.muid.clone(),
            n_uid: self.n_uid,
            n_gid: self.n_gid,
            nlink: self.nlink,
            rdev,
            size,
            blksize: 4096,
            blocks: size.div_ceil(512),
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }

    /// Marks a change of contents.
    pub(crate) fn touch(&mut self, who: &str) {
        let now = Time::now();
        self.mtime = now;
        self.ctime = now;
        self.version = self.version.wrapping_add(1).max(1);
        self.muid = who.to_owned();
    }
}

/// The name and numeric id of the user behind a request.
pub(crate) fn owner(user: &User) -> (&str, u32) {
    let name = if user.uname.is_empty() {
        "none"
    } else {
        &user.uname
    };
    let id = if user.n_uname == NONUNAME {
        0
    } else {
        user.n_uname
    };
    (name, id)
}

impl State {
    pub(crate) fn node(&self, path: u64) -> Result<&Node> {
        self.nodes.get(&path).ok_or_else(gone)
    }

    pub(crate) fn node_mut(&mut self, path: u64) -> Result<&mut Node> {
        self.nodes.get_mut(&path).ok_or_else(gone)
    }

    pub(crate) fn entries(&self, dir: u64) -> Result<&BTreeMap<String, u64>> {
        match &self.node(dir)?.kind {
            Kind::Dir(entries) => Ok(entries),
            _ => Err(Error::not_dir()),
        }
    }

    pub(crate) fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<String, u64>> {
        match &mut self.node_mut(dir)?.kind {
            Kind::Dir(entries) => Ok(entries),
            _ => Err(Error::not_dir()),
        }
    }

    /// Adds a new node named `name` to directory `dir`.
    pub(crate) fn insert(
        &mut self,
        dir: u64,
        name: &Name,
        kind: Kind,
        perm: u32,
        user: &User,
        gid: u32,
    ) -> Result<(u64, Qid)> {
        if self.entries(dir)?.contains_key(name.as_str()) {
            return Err(Error::exists());
        }
        let parent = self.node(dir)?;
        let group_name = parent.gid.clone();
        let group = if gid == NONUNAME { parent.n_gid } else { gid };
        let path = self.next_path;
        self.next_path += 1;
        let node = Node::new(
            dir,
            name,
            kind,
            perm & 0o7777,
            owner(user),
            (&group_name, group),
        );
        let qid = node.qid(path);
        self.nodes.insert(path, node);
        self.entries_mut(dir)?.insert(name.to_string(), path);
        self.node_mut(dir)?.touch(owner(user).0);
        Ok((path, qid))
    }

    /// Takes `name` out of `dir`; the node goes when its last link does.
    pub(crate) fn unlink(&mut self, dir: u64, name: &str) -> Result<()> {
        let path = *self.entries(dir)?.get(name).ok_or_else(Error::not_found)?;
        if let Kind::Dir(entries) = &self.node(path)?.kind
            && !entries.is_empty()
        {
            return Err(Error::from_errno(Errno::ENOTEMPTY));
        }
        self.entries_mut(dir)?.remove(name);
        let node = self.node_mut(path)?;
        node.nlink = node.nlink.saturating_sub(1);
        node.ctime = Time::now();
        if node.nlink == 0 || matches!(node.kind, Kind::Dir(_)) {
            self.nodes.remove(&path);
        }
        let now = Time::now();
        let d = self.node_mut(dir)?;
        d.mtime = now;
        d.version = d.version.wrapping_add(1).max(1);
        Ok(())
    }

    /// True if `ancestor` is `path` or above it.
    pub(crate) fn is_within(&self, path: u64, ancestor: u64) -> bool {
        let mut p = path;
        loop {
            if p == ancestor {
                return true;
            }
            match self.nodes.get(&p) {
                Some(n) if n.parent != p => p = n.parent,
                _ => return false,
            }
        }
    }

    pub(crate) fn rename(&mut self, path: u64, newdir: Option<u64>, name: &str) -> Result<()> {
        if path == ROOT {
            return Err(Error::with_errno(Errno::EBUSY, "cannot rename the root"));
        }
        let node = self.node(path)?;
        let (olddir, oldname) = (node.parent, node.name.clone());
        let newdir = newdir.unwrap_or(olddir);
        let is_dir = matches!(node.kind, Kind::Dir(_));
        self.entries(newdir)?;
        if is_dir && self.is_within(newdir, path) {
            return Err(Error::from_errno(Errno::EINVAL));
        }
        if newdir == olddir && name == oldname {
            return Ok(());
        }
        if let Some(&existing) = self.entries(newdir)?.get(name) {
            let existing_dir = matches!(self.node(existing)?.kind, Kind::Dir(_));
            match (is_dir, existing_dir) {
                (true, false) => return Err(Error::not_dir()),
                (false, true) => return Err(Error::is_dir()),
                _ => self.unlink(newdir, name)?,
            }
        }
        self.entries_mut(olddir)?.remove(&oldname);
        self.entries_mut(newdir)?.insert(name.to_owned(), path);
        let node = self.node_mut(path)?;
        node.parent = newdir;
        node.name = name.to_owned();
        node.ctime = Time::now();
        for dir in [olddir, newdir] {
            let d = self.node_mut(dir)?;
            d.version = d.version.wrapping_add(1).max(1);
        }
        Ok(())
    }
}
