//! Nodes: files as one client's fid sees them, and the walks that make
//! them through the mount table ([`crate::namespace`]).
//!
//! A node remembers how it was reached: the mount point it last crossed
//! (the node it was crossed from and the union it led to) and how many steps
//! it has walked below it. `..` at the union goes back to the node it was
//! crossed from; one step below the union it returns to the union itself,
//! not to whichever member the step went through.

use std::sync::Arc;

use ninep_server::{Error, Result};
use ninep_wire::{Name, Qid, QidType};

use crate::namespace::{CTL, Key, Member, Namespace, Target, enoent};
use crate::upstream::{LOCAL, RemoteFile};

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
    pub parent: Option<(Arc<RemoteFile>, Vec<Name>)>,
}

pub(crate) enum Kind {
    /// A file or directory; several members make a union directory.
    Members(Vec<Target>),
    /// The control file of the node's name space.
    Ctl,
}

/// A mount point as a node crossed it.
struct Crossing {
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

impl Node {
    /// The root of name space `ns`, which is `view`.
    pub(crate) fn at_root(ns: Arc<Namespace>, view: View) -> Node {
        let view = Arc::new(view);
        Node {
            ns,
            crossing: Arc::new(Crossing {
                parent: None,
                root: view.clone(),
            }),
            view,
            depth: 0,
        }
    }

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
    pub(crate) fn remote(&self) -> Result<&Arc<RemoteFile>> {
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
    pub(crate) fn local_id(&self) -> Option<u64> {
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

    pub(crate) fn local_child(&self, id: u64, name: &str) -> Result<Node> {
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
        r: &Arc<RemoteFile>,
        run: &[Name],
        qids: &mut Vec<Qid>,
    ) -> Result<(usize, Option<Node>)> {
        let src = r.src();
        let (wqid, file) = r.walk(run).await?;
        if wqid.is_empty() {
            return Err(enoent(run[0].as_str()));
        }
        // The first step onto a mount point ends the run there.
        let cut = wqid
            .iter()
            .position(|q| self.ns.is_mounted(Key { src, path: q.path }));
        let Some(j) = cut else {
            for q in &wqid {
                qids.push(self.ns.translate(src, *q)?);
            }
            let Some(file) = file else {
                return Ok((wqid.len(), None));
            };
            let mut view = self.remote_view(file, run[wqid.len() - 1].as_str())?;
            view.parent = Some((r.clone(), run[..wqid.len() - 1].to_vec()));
            let mut node = self.below(view);
            node.depth += wqid.len() as u32 - 1;
            return Ok((wqid.len(), Some(node)));
        };
        // The node before the mount point, for `..` to come back to.
        let parent = if j == 0 {
            self.clone()
        } else {
            let (_, file) = r.walk(&run[..j]).await?;
            let file = file.ok_or_else(|| enoent(run[j - 1].as_str()))?;
            let mut view = self.remote_view(file, run[j - 1].as_str())?;
            view.parent = Some((r.clone(), run[..j - 1].to_vec()));
            let mut parent = self.below(view);
            parent.depth += j as u32 - 1;
            parent
        };
        for q in &wqid[..j] {
            qids.push(self.ns.translate(src, *q)?);
        }
        let key = Key {
            src,
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

    /// A plain file of a server, reached by `name`.
    pub(crate) fn remote_view(&self, file: RemoteFile, name: &str) -> Result<View> {
        let raw = file.qid();
        let src = file.src();
        Ok(View {
            qid: self.ns.translate(src, raw)?,
            key: Key {
                src,
                path: raw.path,
            },
            kind: Kind::Members(vec![Target {
                member: Member::Remote(Arc::new(file)),
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
                        let parent = self.ns.local_parent(*id);
                        let name = self.ns.local_name(parent);
                        self.below(self.ns.local_view(parent, Some(name))?)
                    }
                    Some(Member::Remote(r)) => {
                        let dotdot = Name::new("..").map_err(|e| Error::new(e.to_string()))?;
                        let (_, file) = r.walk(&[dotdot]).await?;
                        let file = file.ok_or_else(|| enoent(".."))?;
                        let mut view = self.remote_view(file, "..")?;
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
