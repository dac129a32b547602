//! Name spaces: the mux's own directories, the mount table, and the nodes
//! (files as one client's fid sees them) that walks produce.
//!
//! A mount point is a file, not a path: the mount table is keyed by the
//! file's identity (its server and qid path), as Plan 9 keys it by channel,
//! so every path that reaches the file reaches what is mounted on it. Its
//! value is the union: the trees mounted or bound there, in search order.
//!
//! A node remembers how it was reached: the mount point it last crossed
//! (the node it was crossed from and the union it led to) and how many steps
//! it has walked below it. `..` at the union goes back to the node it was
//! crossed from; one step below the union it returns to the union itself,
//! not to whichever member the step went through.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ninep_client::{Fid, File};
use ninep_server::{Error, Result};
use ninep_wire::{Name, Qid, QidType};

use crate::ahead::Ahead;
use crate::nsfile::{Entry, Flags};
use crate::upstream::{LOCAL, Qids, Upstream, Upstreams};

/// A file's identity: its source and its qid path there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub src: u32,
    pub path: u64,
}

/// The mux's root directory, and the qid path of `#ns`.
pub(crate) const ROOT: u64 = 1;
pub(crate) const CTL: u64 = 0;

/// A file of a mounted server, through one upstream fid.
pub(crate) struct Remote {
    pub up: Arc<Upstream>,
    pub fid: RemoteFid,
    /// Reading ahead, for an open file read in order.
    pub ahead: Ahead,
}

pub(crate) enum RemoteFid {
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

impl Remote {
    pub fn fid(&self) -> &Fid {
        match &self.fid {
            RemoteFid::Walked(fid) => fid,
            RemoteFid::Open(file) | RemoteFid::OpenDir { file, .. } => file.fid(),
        }
    }

    pub fn file(&self) -> Result<&File> {
        match &self.fid {
            RemoteFid::Open(file) | RemoteFid::OpenDir { file, .. } => Ok(file),
            RemoteFid::Walked(_) => Err(Error::with_errno(ninep_wire::Errno::EBADF, "not open")),
        }
    }
}

/// Where a node's contents come from.
#[derive(Clone)]
pub(crate) enum Member {
    /// One of the mux's own directories.
    Local(u64),
    Remote(Arc<Remote>),
}

impl Member {
    pub fn src(&self) -> u32 {
        match self {
            Member::Local(_) => LOCAL,
            Member::Remote(r) => r.up.id,
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

/// What a node is, shared by the clones of a fid.
pub(crate) struct View {
    pub kind: Kind,
    /// The last name walked to it; `None` after a `..` into a server, whose
    /// own name for the file is used.
    pub name: Option<String>,
    /// As clients see it.
    pub qid: Qid,
    /// Its identity, for mounting on it; for a union, the mount point's.
    pub key: Key,
    /// True for the union a mount point leads to.
    pub mounted: bool,
    /// The way to the directory holding this file of a server: a fid and
    /// the names to walk from it (a file's own fid cannot walk to `..`).
    pub parent: Option<(Arc<Remote>, Vec<Name>)>,
}

pub(crate) enum Kind {
    /// A file or directory; several members make a union directory.
    Members(Vec<Target>),
    /// The control file of the node's name space.
    Ctl,
}

/// A mount point as a node crossed it.
pub(crate) struct Crossing {
    /// The node it was crossed from; none at the root of the name space.
    parent: Option<Node>,
    /// The union it leads to.
    root: Arc<View>,
}

/// A file in one client's name space: what the mux keeps per fid.
#[derive(Clone)]
pub struct Node {
    pub(crate) ns: Arc<Namespace>,
    pub(crate) view: Arc<View>,
    /// Steps walked below the last mount point crossed.
    depth: u32,
    crossing: Arc<Crossing>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.view.name)
            .field("qid", &self.view.qid)
            .field("depth", &self.depth)
            .finish()
    }
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

/// What every name space of a mux shares.
pub(crate) struct Shared {
    pub upstreams: Upstreams,
    pub qids: Qids,
    pub uname: String,
    pub n_uname: u32,
    next_local: std::sync::atomic::AtomicU64,
    next_entry: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub fn new(upstreams: Upstreams, uname: String, n_uname: u32) -> Shared {
        Shared {
            upstreams,
            qids: Qids::new(),
            uname,
            n_uname,
            next_local: (ROOT + 1).into(),
            next_entry: 1.into(),
        }
    }
}

/// One name space: the mux's base one, or a client's copy of it.
pub struct Namespace {
    pub(crate) shared: Arc<Shared>,
    space: RwLock<Space>,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Namespace")
    }
}

fn enoent(name: &str) -> Error {
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
    path.split('/')
        .filter(|e| !e.is_empty() && *e != ".")
        .map(|e| Name::new(e).map_err(|err| Error::new(format!("{e:?}: {err}"))))
        .collect()
}

impl Namespace {
    /// An empty name space: the root directory and `#ns`.
    pub(crate) fn empty(shared: Arc<Shared>) -> Namespace {
        let root = LocalDir {
            parent: ROOT,
            name: "/".into(),
            children: Vec::new(),
        };
        Namespace {
            shared,
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
            space: RwLock::new(self.read().clone()),
        }
    }

    /// Whether a server mounted here has hung up, or an entry could not be
    /// applied again when it last did.
    pub(crate) fn is_broken(&self) -> bool {
        let space = self.read();
        !space.left_out.is_empty()
            || space
                .mounts
                .values()
                .flat_map(|t| t.iter())
                .any(|t| matches!(&t.member, Member::Remote(r) if r.up.client.is_closed()))
    }

    /// A name space made by applying this one's entries (and those left
    /// out last time) again, in order: a server that hung up is dialled
    /// anew. An entry that fails now is left out and kept for next time.
    pub(crate) async fn replayed(&self) -> Namespace {
        let entries: Vec<Entry> = {
            let space = self.read();
            let mut entries: Vec<_> = space.log.iter().map(|(_, e, _)| e.clone()).collect();
            entries.extend(space.left_out.iter().cloned());
            entries
        };
        let fresh = Arc::new(Namespace::empty(self.shared.clone()));
        let mut left_out = Vec::new();
        for entry in entries {
            if let Err(e) = fresh.apply(entry.clone()).await {
                tracing::warn!("{entry}: {e}");
                left_out.push(entry);
            }
        }
        let mut space = fresh.read().clone();
        space.left_out = left_out;
        Namespace {
            shared: self.shared.clone(),
            space: RwLock::new(space),
        }
    }

    /// Takes on `other`'s mounts and binds.
    pub(crate) fn replace(&self, other: Namespace) {
        *self.write() = other.space.into_inner().unwrap_or_else(|e| e.into_inner());
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Space> {
        self.space.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Space> {
        self.space.write().unwrap_or_else(|e| e.into_inner())
    }

    fn translate(&self, src: u32, qid: Qid) -> Result<Qid> {
        self.shared.qids.translate(src, qid)
    }

    /// The root of the name space, with whatever is mounted on it.
    pub(crate) fn root(self: &Arc<Self>) -> Result<Node> {
        let local = self.local_view(ROOT, Some("/".into()))?;
        let mounted = self.mounted_view(local.key, Some("/".into()))?;
        let view = Arc::new(mounted.unwrap_or(local));
        Ok(Node {
            ns: self.clone(),
            crossing: Arc::new(Crossing {
                parent: None,
                root: view.clone(),
            }),
            view,
            depth: 0,
        })
    }

    fn local_view(&self, id: u64, name: Option<String>) -> Result<View> {
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
    fn mounted_view(&self, key: Key, name: Option<String>) -> Result<Option<View>> {
        let Some(targets) = self.read().mounts.get(&key).cloned() else {
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

    fn is_mounted(&self, key: Key) -> bool {
        self.read().mounts.contains_key(&key)
    }

    /// The entries in effect, as a namespace file.
    pub(crate) fn text(&self) -> String {
        let mut text = String::new();
        for (_, entry, _) in &self.read().log {
            text += &format!("{entry}\n");
        }
        text
    }

    /// The mux's own directories' entries in `id`.
    pub(crate) fn local_children(&self, id: u64) -> Vec<(String, u64)> {
        self.read()
            .dirs
            .get(&id)
            .map(|d| d.children.clone())
            .unwrap_or_default()
    }

    pub(crate) fn local_name(&self, id: u64) -> String {
        self.read()
            .dirs
            .get(&id)
            .map(|d| d.name.clone())
            .unwrap_or_default()
    }

    /// Makes directory `name` in local directory `parent` (or finds it).
    fn local_mkdir(&self, parent: u64, name: &str) -> u64 {
        let mut space = self.write();
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
                    let fsys = {
                        let _turn = up.turn().await;
                        up.client
                            .attach_as(&self.shared.uname, self.shared.n_uname, aname)
                            .await
                            .map_err(|e| up.error(e))?
                    };
                    let root = fsys.into_root();
                    let qid = root.qid();
                    let remote = Remote {
                        up,
                        fid: RemoteFid::Walked(root),
                        ahead: Ahead::default(),
                    };
                    (
                        *flags,
                        vec![Target {
                            member: Member::Remote(Arc::new(remote)),
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
        let mut space = self.write();
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
        let mut space = self.write();
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

impl Node {
    pub(crate) fn members(&self) -> &[Target] {
        match &self.view.kind {
            Kind::Members(m) => m,
            Kind::Ctl => &[],
        }
    }

    pub(crate) fn is_ctl(&self) -> bool {
        matches!(self.view.kind, Kind::Ctl)
    }

    pub(crate) fn is_root(&self) -> bool {
        self.depth == 0 && self.crossing.parent.is_none()
    }

    /// The one member of a plain file; an error for a union or `#ns`.
    pub(crate) fn remote(&self) -> Result<&Arc<Remote>> {
        match self.members() {
            [
                Target {
                    member: Member::Remote(r),
                    ..
                },
            ] => Ok(r),
            [] | [_] => Err(Error::prohibited("that")),
            _ => Err(Error::is_dir()),
        }
    }

    /// The mux directory this node is, if it is one of those alone.
    fn local_id(&self) -> Option<u64> {
        match self.members() {
            [
                Target {
                    member: Member::Local(id),
                    ..
                },
            ] if !self.view.mounted => Some(*id),
            _ => None,
        }
    }

    /// A node one step below this one.
    fn below(&self, view: View) -> Node {
        Node {
            ns: self.ns.clone(),
            view: Arc::new(view),
            depth: self.depth + 1,
            crossing: self.crossing.clone(),
        }
    }

    /// The node with its file replaced by `view` (now opened, say).
    pub(crate) fn with_view(&self, view: View) -> Node {
        Node {
            view: Arc::new(view),
            ..self.clone()
        }
    }

    /// Crossing into `view`, the union mounted where `self` stepped.
    fn cross(&self, view: View) -> Node {
        let view = Arc::new(view);
        Node {
            ns: self.ns.clone(),
            crossing: Arc::new(Crossing {
                parent: Some(self.clone()),
                root: view.clone(),
            }),
            view,
            depth: 0,
        }
    }

    fn local_child(&self, id: u64, name: &str) -> Result<Node> {
        let view = self.ns.local_view(id, Some(name.to_owned()))?;
        Ok(self.below(view))
    }

    /// The control file, reached from the root.
    fn ctl(&self) -> Result<Node> {
        let qid = Qid {
            ty: QidType::FILE,
            version: 0,
            path: CTL,
        };
        Ok(self.below(View {
            kind: Kind::Ctl,
            name: Some("#ns".into()),
            qid: self.ns.translate(LOCAL, qid)?,
            key: Key {
                src: LOCAL,
                path: CTL,
            },
            mounted: false,
            parent: None,
        }))
    }

    /// A step from `self` to `file`: the union mounted on it, if any.
    fn step(&self, view: View) -> Result<Node> {
        match self.ns.mounted_view(view.key, view.name.clone())? {
            Some(mounted) => Ok(self.cross(mounted)),
            None => Ok(self.below(view)),
        }
    }

    /// Walks `names` (at most 16): the qids of the steps taken and, if all
    /// were, the node reached. Fails if the first step fails, or a later one
    /// for another reason than a missing name or a non-directory.
    pub(crate) async fn walk(&self, names: &[Name]) -> Result<(Vec<Qid>, Option<Node>)> {
        // A walk from the root sees what is mounted on it now, as a
        // lookup from Plan 9's slash does.
        let mut node = if self.is_root() {
            self.ns.root()?
        } else {
            self.clone()
        };
        let mut qids = Vec::with_capacity(names.len());
        let mut i = 0;
        while i < names.len() {
            let result = if names[i].as_str() == ".." {
                node.dotdot().await.map(|n| (1, Some(n)))
            } else if names[i].as_str() == "#ns" && node.is_root() {
                node.ctl().map(|n| (1, Some(n)))
            } else {
                let end = names[i..]
                    .iter()
                    .position(|n| n.as_str() == "..")
                    .map_or(names.len(), |p| i + p);
                node.walk_run(&names[i..end], &mut qids).await
            };
            match result {
                Ok((steps, Some(next))) => {
                    if qids.len() < i + steps {
                        qids.push(next.view.qid);
                    }
                    node = next;
                    i += steps;
                }
                Ok((_, None)) => return Ok((qids, None)),
                // Past the first step a missing name (or a file where a
                // directory should be) stops a walk short; a server gone is
                // worth an error.
                Err(e)
                    if i == 0
                        || !matches!(
                            e.errno(),
                            ninep_wire::Errno::ENOENT | ninep_wire::Errno::ENOTDIR
                        ) =>
                {
                    return Err(e);
                }
                Err(_) => return Ok((qids, None)),
            }
        }
        Ok((qids, Some(node)))
    }

    /// Walks a run of names without `..` through the first member that has
    /// the first of them, stopping after a mount point. Pushes the qids of
    /// the steps taken and returns how many there were, with the node they
    /// reached, or none if the run stopped short inside the member.
    async fn walk_run(&self, run: &[Name], qids: &mut Vec<Qid>) -> Result<(usize, Option<Node>)> {
        if self.is_ctl() || !self.view.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        let mut first_error = None;
        for target in self.members() {
            let walked = match &target.member {
                Member::Local(id) => self.walk_local(*id, run, qids),
                Member::Remote(r) => self.walk_remote(r, run, qids).await,
            };
            match walked {
                Ok(done) => return Ok(done),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| enoent(run[0].as_str())))
    }

    fn walk_local(
        &self,
        mut id: u64,
        run: &[Name],
        qids: &mut Vec<Qid>,
    ) -> Result<(usize, Option<Node>)> {
        let mut node = self.clone();
        for (i, name) in run.iter().enumerate() {
            let child = self
                .ns
                .local_children(id)
                .into_iter()
                .find(|(n, _)| n == name.as_str());
            let Some((_, child)) = child else {
                if i == 0 {
                    return Err(enoent(name.as_str()));
                }
                return Ok((i, None));
            };
            id = child;
            let view = self.ns.local_view(id, Some(name.to_string()))?;
            node = node.step(view)?;
            qids.push(node.view.qid);
            if node.view.mounted {
                return Ok((i + 1, Some(node)));
            }
        }
        Ok((run.len(), Some(node)))
    }

    async fn walk_remote(
        &self,
        r: &Arc<Remote>,
        run: &[Name],
        qids: &mut Vec<Qid>,
    ) -> Result<(usize, Option<Node>)> {
        let up = &r.up;
        let (wqid, fid) = {
            let _turn = up.turn().await;
            r.fid().walk_some(run).await.map_err(|e| up.error(e))?
        };
        if wqid.is_empty() {
            return Err(enoent(run[0].as_str()));
        }
        // The first step onto a mount point ends the run there.
        let cut = wqid.iter().position(|q| {
            self.ns.is_mounted(Key {
                src: up.id,
                path: q.path,
            })
        });
        let Some(j) = cut else {
            for q in &wqid {
                qids.push(self.ns.translate(up.id, *q)?);
            }
            let Some(fid) = fid else {
                return Ok((wqid.len(), None));
            };
            let name = run[wqid.len() - 1].as_str();
            let mut view = self.remote_view(up, fid, name)?;
            view.parent = Some((r.clone(), run[..wqid.len() - 1].to_vec()));
            let mut node = self.below(view);
            node.depth += wqid.len() as u32 - 1;
            return Ok((wqid.len(), Some(node)));
        };
        // The node before the mount point, for `..` to come back to.
        let parent = if j == 0 {
            self.clone()
        } else {
            let (_, fid) = {
                let _turn = up.turn().await;
                r.fid()
                    .walk_some(&run[..j])
                    .await
                    .map_err(|e| up.error(e))?
            };
            let fid = fid.ok_or_else(|| enoent(run[j - 1].as_str()))?;
            let mut view = self.remote_view(up, fid, run[j - 1].as_str())?;
            view.parent = Some((r.clone(), run[..j - 1].to_vec()));
            let mut parent = self.below(view);
            parent.depth += j as u32 - 1;
            parent
        };
        for q in &wqid[..j] {
            qids.push(self.ns.translate(up.id, *q)?);
        }
        let key = Key {
            src: up.id,
            path: wqid[j].path,
        };
        let name = run[j].to_string();
        let view = self
            .ns
            .mounted_view(key, Some(name.clone()))?
            .ok_or_else(|| enoent(&name))?;
        let node = parent.cross(view);
        qids.push(node.view.qid);
        Ok((j + 1, Some(node)))
    }

    /// A plain file of server `up` through `fid`.
    pub(crate) fn remote_view(&self, up: &Arc<Upstream>, fid: Fid, name: &str) -> Result<View> {
        let raw = fid.qid();
        Ok(View {
            qid: self.ns.translate(up.id, raw)?,
            key: Key {
                src: up.id,
                path: raw.path,
            },
            kind: Kind::Members(vec![Target {
                member: Member::Remote(Arc::new(Remote {
                    up: up.clone(),
                    fid: RemoteFid::Walked(fid),
                    ahead: Ahead::default(),
                })),
                qid: raw,
                create: false,
                origin: 0,
            }]),
            name: Some(name.to_owned()),
            mounted: false,
            parent: None,
        })
    }

    /// A node for a file just made below this directory.
    pub(crate) fn child(&self, view: View) -> Node {
        self.below(view)
    }

    /// `..`: back across the mount point at a union's top, back to the
    /// union one step below it, and to the server's parent deeper down.
    async fn dotdot(&self) -> Result<Node> {
        if !self.view.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        match self.depth {
            0 => Ok(self.crossing.parent.clone().unwrap_or_else(|| self.clone())),
            1 => Ok(Node {
                ns: self.ns.clone(),
                view: self.crossing.root.clone(),
                depth: 0,
                crossing: self.crossing.clone(),
            }),
            _ => {
                let mut up = match self.members().first().map(|t| &t.member) {
                    Some(Member::Local(id)) => {
                        let parent = self.ns.read().dirs.get(id).map_or(ROOT, |d| d.parent);
                        let name = self.ns.local_name(parent);
                        self.below(self.ns.local_view(parent, Some(name))?)
                    }
                    Some(Member::Remote(r)) => {
                        let dotdot = Name::new("..").map_err(|e| Error::new(e.to_string()))?;
                        let (_, fid) = {
                            let _turn = r.up.turn().await;
                            r.fid()
                                .walk_some(&[dotdot])
                                .await
                                .map_err(|e| r.up.error(e))?
                        };
                        let fid = fid.ok_or_else(|| enoent(".."))?;
                        let mut view = self.remote_view(&r.up, fid, "..")?;
                        view.name = None;
                        self.below(view)
                    }
                    None => return Err(Error::not_dir()),
                };
                up.depth = self.depth - 1;
                Ok(up)
            }
        }
    }
}
