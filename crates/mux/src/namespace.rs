//! Name spaces: the mux's own directories and the mount table.
//!
//! A mount point is a file, not a path: the mount table is keyed by the
//! file's identity (its server and qid path), as Plan 9 keys it by channel,
//! so every path that reaches the file reaches what is mounted on it. Its
//! value is the union: the trees mounted or bound there, in search order.
//! Walks through a name space are [`crate::node`]'s.

use std::collections::HashMap;
use std::sync::Arc;

use ninep_server::{Error, Result};
use ninep_wire::{Name, Qid, QidType, split_path};
use parking_lot::RwLock;

use crate::node::{Kind, Node, View};
use crate::nsfile::{Entry, Flags};
use crate::upstream::{LOCAL, Qids, RemoteFile, Upstreams};

/// A file's identity: its source and its qid path there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub src: u32,
    pub path: u64,
}

/// The mux's root directory, and the qid path of `#ns`.
pub(crate) const ROOT: u64 = 1;
pub(crate) const CTL: u64 = 0;

/// Where a node's contents come from.
#[derive(Clone)]
pub(crate) enum Member {
    /// One of the mux's own directories.
    Local(u64),
    /// A file of a mounted server.
    Remote(Arc<RemoteFile>),
}

impl Member {
    pub fn src(&self) -> u32 {
        match self {
            Member::Local(_) => LOCAL,
            Member::Remote(r) => r.src(),
        }
    }
}

/// One member of a mount point's union.
#[derive(Clone)]
pub(crate) struct Target {
    pub member: Member,
    /// The member's own qid, untranslated.
    pub qid: Qid,
    /// `-c`: creates go to the first member that has it.
    pub create: bool,
    /// The namespace entry that put it there; 0 for what was at OLD before
    /// a union was made on it.
    pub origin: u64,
}

/// One of the mux's own directories.
#[derive(Clone)]
struct LocalDir {
    parent: u64,
    name: String,
    /// In the order made.
    children: Vec<(String, u64)>,
}

/// What a name space holds; copied for each attach.
#[derive(Clone)]
pub(crate) struct Space {
    dirs: HashMap<u64, LocalDir>,
    mounts: HashMap<Key, Arc<Vec<Target>>>,
    /// The entries in effect, in the order applied, with their ids.
    log: Vec<(u64, Entry, Key)>,
    /// Entries of a replay (see [`Namespace::replayed`]) that failed.
    left_out: Vec<Entry>,
}

/// Who a name space's mounts attach to their servers as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attacher {
    pub uname: String,
    /// The numeric id sent with it (9P2000.u, .L).
    pub n_uname: u32,
}

/// What every name space of a mux shares.
pub(crate) struct Shared {
    pub upstreams: Upstreams,
    pub qids: Qids,
    /// The mux's own user: the owner of its own directories.
    pub uname: String,
    next_local: std::sync::atomic::AtomicU64,
    next_entry: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub fn new(upstreams: Upstreams, uname: String) -> Shared {
        Shared {
            upstreams,
            qids: Qids::new(),
            uname,
            next_local: (ROOT + 1).into(),
            next_entry: 1.into(),
        }
    }
}

/// One name space: the mux's base one, or a client's copy of it.
pub struct Namespace {
    pub(crate) shared: Arc<Shared>,
    attacher: Attacher,
    space: RwLock<Space>,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Namespace")
    }
}

pub(crate) fn enoent(name: &str) -> Error {
    Error::with_errno(
        ninep_wire::Errno::ENOENT,
        format!("{name}: file does not exist"),
    )
}

pub(crate) fn local_qid(id: u64) -> Qid {
    Qid {
        ty: QidType::DIR,
        version: 0,
        path: id,
    }
}

/// The names of a slash-separated path (`.` and empty elements dropped).
pub(crate) fn names(path: &str) -> Result<Vec<Name>> {
    split_path(path).map_err(|err| Error::with_errno(err.errno(), format!("{path:?}: {err}")))
}

impl Namespace {
    /// An empty name space: the root directory and `#ns`.
    pub(crate) fn empty(shared: Arc<Shared>, attacher: Attacher) -> Namespace {
        let root = LocalDir {
            parent: ROOT,
            name: "/".into(),
            children: Vec::new(),
        };
        Namespace {
            shared,
            attacher,
            space: RwLock::new(Space {
                dirs: HashMap::from([(ROOT, root)]),
                mounts: HashMap::new(),
                log: Vec::new(),
                left_out: Vec::new(),
            }),
        }
    }

    /// A copy whose changes stay its own.
    pub(crate) fn fork(&self) -> Namespace {
        Namespace {
            shared: self.shared.clone(),
            attacher: self.attacher.clone(),
            space: RwLock::new(self.space.read().clone()),
        }
    }

    /// Whether a server mounted here has hung up, or an entry could not be
    /// applied again when it last did.
    pub(crate) fn is_broken(&self) -> bool {
        let space = self.space.read();
        !space.left_out.is_empty()
            || space
                .mounts
                .values()
                .flat_map(|t| t.iter())
                .any(|t| matches!(&t.member, Member::Remote(r) if r.is_closed()))
    }

    /// A name space made by applying this one's entries (and those left
    /// out last time) again, in order: a server that hung up is dialled
    /// anew. An entry that fails now is left out and kept for next time.
    pub(crate) async fn replayed(&self) -> Namespace {
        self.replayed_as(self.attacher.clone()).await
    }

    /// As [`Namespace::replayed`], its mounts attached as `attacher`: the
    /// same name space for another user, each server deciding what that
    /// user may see (an entry the user may not attach to is left out).
    pub(crate) async fn replayed_as(&self, attacher: Attacher) -> Namespace {
        let entries: Vec<Entry> = {
            let space = self.space.read();
            let mut entries: Vec<_> = space.log.iter().map(|(_, e, _)| e.clone()).collect();
            entries.extend(space.left_out.iter().cloned());
            entries
        };
        let fresh = Arc::new(Namespace::empty(self.shared.clone(), attacher));
        let mut left_out = Vec::new();
        for entry in entries {
            if let Err(e) = fresh.apply(entry.clone()).await {
                tracing::warn!("{entry} (as {}): {e}", fresh.attacher.uname);
                left_out.push(entry);
            }
        }
        let mut space = fresh.space.read().clone();
        space.left_out = left_out;
        Namespace {
            shared: self.shared.clone(),
            attacher: fresh.attacher.clone(),
            space: RwLock::new(space),
        }
    }

    /// Takes on `other`'s mounts and binds.
    pub(crate) fn replace(&self, other: Namespace) {
        *self.space.write() = other.space.into_inner();
    }

    /// `qid` of source `src` as clients see it.
    pub(crate) fn translate(&self, src: u32, qid: Qid) -> Result<Qid> {
        self.shared.qids.translate(src, qid)
    }

    /// The root of the name space, with whatever is mounted on it.
    pub(crate) fn root(self: &Arc<Self>) -> Result<Node> {
        let local = self.local_view(ROOT, Some("/".into()))?;
        let mounted = self.mounted_view(local.key, Some("/".into()))?;
        Ok(Node::at_root(self.clone(), mounted.unwrap_or(local)))
    }

    pub(crate) fn local_view(&self, id: u64, name: Option<String>) -> Result<View> {
        Ok(View {
            kind: Kind::Members(vec![Target {
                member: Member::Local(id),
                qid: local_qid(id),
                create: false,
                origin: 0,
            }]),
            name,
            qid: self.translate(LOCAL, local_qid(id))?,
            key: Key {
                src: LOCAL,
                path: id,
            },
            mounted: false,
            parent: None,
        })
    }

    /// The union mounted on `key`, if anything is.
    pub(crate) fn mounted_view(&self, key: Key, name: Option<String>) -> Result<Option<View>> {
        let Some(targets) = self.space.read().mounts.get(&key).cloned() else {
            return Ok(None);
        };
        let first = targets.first().ok_or_else(|| enoent("mount point"))?;
        Ok(Some(View {
            qid: self.translate(first.member.src(), first.qid)?,
            kind: Kind::Members(targets.to_vec()),
            name,
            key,
            mounted: true,
            parent: None,
        }))
    }

    pub(crate) fn is_mounted(&self, key: Key) -> bool {
        self.space.read().mounts.contains_key(&key)
    }

    /// The entries in effect, as a namespace file.
    pub(crate) fn text(&self) -> String {
        let mut text = String::new();
        for (_, entry, _) in &self.space.read().log {
            text += &format!("{entry}\n");
        }
        text
    }

    /// The mux's own directories' entries in `id`.
    pub(crate) fn local_children(&self, id: u64) -> Vec<(String, u64)> {
        self.space
            .read()
            .dirs
            .get(&id)
            .map(|d| d.children.clone())
            .unwrap_or_default()
    }

    /// The parent of the mux's own directory `id`.
    pub(crate) fn local_parent(&self, id: u64) -> u64 {
        self.space.read().dirs.get(&id).map_or(ROOT, |d| d.parent)
    }

    pub(crate) fn local_name(&self, id: u64) -> String {
        self.space
            .read()
            .dirs
            .get(&id)
            .map(|d| d.name.clone())
            .unwrap_or_default()
    }

    /// Makes directory `name` in local directory `parent` (or finds it).
    fn local_mkdir(&self, parent: u64, name: &str) -> u64 {
        let mut space = self.space.write();
        if let Some(&(_, id)) = space
            .dirs
            .get(&parent)
            .and_then(|d| d.children.iter().find(|(n, _)| n == name))
        {
            return id;
        }
        let id = self
            .shared
            .next_local
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        space.dirs.insert(
            id,
            LocalDir {
                parent,
                name: name.to_owned(),
                children: Vec::new(),
            },
        );
        if let Some(d) = space.dirs.get_mut(&parent) {
            d.children.push((name.to_owned(), id));
        }
        id
    }

    /// Applies one namespace-file entry.
    pub(crate) async fn apply(self: &Arc<Self>, entry: Entry) -> Result<()> {
        let id = self
            .shared
            .next_entry
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (flags, new) =
            match &entry {
                Entry::Mount {
                    flags, addr, aname, ..
                } => {
                    let up =
                        self.shared.upstreams.get(addr).await.map_err(|e| {
                            Error::with_errno(e.errno(), format!("mount {addr}: {e}"))
                        })?;
                    let root = up
                        .attach(&self.attacher.uname, self.attacher.n_uname, aname)
                        .await?;
                    let qid = root.qid();
                    (
                        *flags,
                        vec![Target {
                            member: Member::Remote(Arc::new(root)),
                            qid,
                            create: flags.create,
                            origin: id,
                        }],
                    )
                }
                Entry::Bind { flags, new, .. } => {
                    let node = self.resolve(new, false).await?;
                    let Kind::Members(members) = &node.view.kind else {
                        return Err(Error::new("cannot bind the control file"));
                    };
                    let targets = members
                        .iter()
                        .map(|t| Target {
                            create: flags.create,
                            origin: id,
                            ..t.clone()
                        })
                        .collect();
                    (*flags, targets)
                }
                Entry::Unmount { new, old } => return self.unmount(new.as_deref(), old).await,
            };
        let old = self.resolve(entry.old(), true).await?;
        if !old.view.qid.ty.is_dir() && new.iter().any(|t| t.qid.ty.is_dir()) {
            return Err(Error::not_dir());
        }
        let key = old.view.key;
        let mut space = self.space.write();
        let mut targets: Vec<Target> = match space.mounts.get(&key) {
            Some(t) => t.to_vec(),
            None if flags.is_union() => match &old.view.kind {
                Kind::Members(m) => m.clone(),
                Kind::Ctl => Vec::new(),
            },
            None => Vec::new(),
        };
        match flags {
            Flags { before: true, .. } => {
                targets.splice(0..0, new);
            }
            Flags { after: true, .. } => targets.extend(new),
            _ => targets = new,
        }
        space.mounts.insert(key, Arc::new(targets));
        // A replacing mount undoes what was at OLD; its entries go.
        if !flags.is_union() {
            space.log.retain(|(_, _, k)| *k != key);
        }
        space.log.push((id, entry, key));
        Ok(())
    }

    /// `unmount [NEW] OLD`: takes out of OLD's union what NEW's mounts and
    /// binds (all, if no NEW) put there.
    async fn unmount(self: &Arc<Self>, new: Option<&str>, old: &str) -> Result<()> {
        let node = self.resolve(old, false).await?;
        if !node.view.mounted {
            return Err(Error::new(format!("{old}: not mounted")));
        }
        let key = node.view.key;
        let mut space = self.space.write();
        let undone: Vec<u64> = space
            .log
            .iter()
            .filter(|(_, e, k)| {
                *k == key
                    && match (new, e) {
                        (None, _) => true,
                        (Some(n), Entry::Mount { addr, .. }) => addr == n,
                        (Some(n), Entry::Bind { new, .. }) => new == n,
                        (Some(_), Entry::Unmount { .. }) => false,
                    }
            })
            .map(|(id, _, _)| *id)
            .collect();
        if undone.is_empty() {
            return Err(Error::new(format!(
                "{}: not mounted on {old}",
                new.unwrap_or(old)
            )));
        }
        space.log.retain(|(id, _, _)| !undone.contains(id));
        let left: Vec<Target> = space
            .mounts
            .get(&key)
            .map(|t| t.to_vec())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !undone.contains(&t.origin))
            .collect();
        if left.iter().all(|t| t.origin == 0) {
            space.mounts.remove(&key);
        } else {
            space.mounts.insert(key, Arc::new(left));
        }
        Ok(())
    }

    /// Walks `path` from the root. With `make`, missing directories below
    /// one of the mux's own are made, as mount points need them.
    pub(crate) async fn resolve(self: &Arc<Self>, path: &str, make: bool) -> Result<Node> {
        let names = names(path)?;
        let mut node = self.root()?;
        let mut i = 0;
        while i < names.len() {
            let end = (i + ninep_wire::MAXWELEM).min(names.len());
            let (qids, next) = match node.walk(&names[i..end]).await {
                Ok(walked) => walked,
                Err(e) if !make => return Err(e),
                Err(_) => (Vec::new(), None),
            };
            if let Some(next) = next {
                node = next;
                i = end;
                continue;
            }
            if !make {
                return Err(enoent(names[(i + qids.len()).min(end - 1)].as_str()));
            }
            if !qids.is_empty() {
                // Walk again to where it stopped, and go on from there.
                let stop = i + qids.len();
                let (_, part) = node.walk(&names[i..stop]).await?;
                node = part.ok_or_else(|| enoent(names[i].as_str()))?;
                i = stop;
                continue;
            }
            let Some(parent) = node.local_id() else {
                return Err(enoent(names[i].as_str()));
            };
            let id = self.local_mkdir(parent, names[i].as_str());
            node = node.local_child(id, names[i].as_str())?;
            i += 1;
        }
        Ok(node)
    }
}
