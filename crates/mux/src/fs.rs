//! The mux as a file server: each operation on a node goes to the members
//! behind it, in their servers' dialects.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::join_all;
use ninep_client::{Dialer, Options, Prover, ReadAheadBudget, Recovery};
use ninep_server::{Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, SetAttr, Time, User};
use ninep_wire::consts::{dotl, unix};
use ninep_wire::{Dialect, Errno, NONUNAME, Name, Qid, Rstatfs, convert};

use crate::attr;
use crate::namespace::{Attacher, Member, Namespace, Shared, Target, local_qid};
use crate::node::{Kind, Node, View};
use crate::nsfile::{self, Entry};
use crate::upstream::{LOCAL, ReadAheads, RemoteFile, Upstreams};

/// How the mux reaches its servers.
#[derive(Debug, Clone)]
pub struct Config {
    /// Who the mux attaches to its servers as (every client's requests
    /// reach a server as this user, unless `attach_per_user`).
    pub uname: String,
    /// The numeric id sent with it (9P2000.u, .L).
    pub n_uname: u32,
    /// Each client's name space attaches to the servers as the user the
    /// client attached as (its uname and n_uname), so each server decides
    /// what each user may do, as `ninep mount --access user` does. The
    /// mux vouches for its clients' users: require them to prove who they
    /// are (an auth policy), and give it servers that take its word.
    pub attach_per_user: bool,
    /// Most requests in flight to one server.
    pub window: usize,
    /// Most bytes read ahead of a client for one open file (the window or
    /// stream credit of its upstream transfer); 0 reads only as asked.
    pub read_ahead: u64,
    /// Most bytes read ahead for all open files together; a file read in
    /// order while they are in use is read only as asked.
    pub read_ahead_total: u64,
    /// How to connect to servers.
    pub client: Options,
    /// How to reach servers: TLS for their `tls!` addresses, say.
    pub dialer: Dialer,
    /// What proves the mux's user to servers that ask for it through
    /// Tauth (MUNGE, say); servers that do not are attached to without.
    pub prover: Option<Arc<dyn Prover>>,
    /// Whether and how a lost connection to a server dialled directly is
    /// recovered, its clients keeping their fids and open files
    /// (docs/resume.md); `None` fails their requests at once.
    pub recovery: Option<Recovery>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            uname: "none".into(),
            n_uname: NONUNAME,
            attach_per_user: false,
            window: 256,
            read_ahead: 16 << 20,
            read_ahead_total: 1 << 30,
            client: Options::default(),
            dialer: Dialer::default(),
            prover: None,
            recovery: None,
        }
    }
}

/// The multiplexer: a [`Filesystem`] whose tree is a name space of mounted
/// servers. Each attach gets a copy of the base name space.
#[derive(Debug)]
pub struct Mux {
    base: Arc<Namespace>,
    /// See [`Config::attach_per_user`].
    attach_per_user: bool,
    /// When the base name space was last mended (one mend at a time).
    mended: tokio::sync::Mutex<Option<Instant>>,
}

/// How often a broken base name space is mended at most: each try dials
/// the servers that hung up.
const MEND_EVERY: Duration = Duration::from_secs(1);

impl Mux {
    /// A mux with an empty base name space.
    pub fn new(config: Config) -> Mux {
        let upstreams = Upstreams::new(
            config.window,
            ReadAheads {
                per_file: config.read_ahead,
                budget: ReadAheadBudget::new(config.read_ahead_total),
            },
            config.client,
            config.dialer,
            // Attaching per user, the mux has no one user to meet gateways
            // as: its own would lend every client its rights there.
            (!config.attach_per_user).then(|| config.uname.clone()),
            config.prover,
            config.recovery,
        );
        let attacher = Attacher {
            uname: config.uname.clone(),
            n_uname: config.n_uname,
        };
        let shared = Arc::new(Shared::new(upstreams, config.uname));
        Mux {
            base: Arc::new(Namespace::empty(shared, attacher)),
            attach_per_user: config.attach_per_user,
            mended: tokio::sync::Mutex::new(None),
        }
    }

    /// Applies entries to the base name space, which later attaches copy.
    pub async fn apply(&self, entries: Vec<Entry>) -> Result<()> {
        for entry in entries {
            let line = entry.to_string();
            self.base
                .apply(entry)
                .await
                .map_err(|e| Error::with_errno(e.errno(), format!("{line}: {}", e.ename())))?;
        }
        Ok(())
    }

    /// The base name space, as a namespace file.
    pub fn namespace(&self) -> String {
        self.base.text()
    }

    /// Mends the base name space if a server in it hung up: its entries
    /// are applied again, so that a server that came back is mounted anew
    /// for the clients that attach from now on. Attaches while another
    /// mends go on with the name space as it is.
    async fn mend(&self) {
        if !self.base.is_broken() {
            return;
        }
        let Ok(mut mended) = self.mended.try_lock() else {
            return;
        };
        if !self.base.is_broken() || mended.is_some_and(|at| at.elapsed() < MEND_EVERY) {
            return;
        }
        let fresh = self.base.replayed().await;
        self.base.replace(fresh);
        *mended = Some(Instant::now());
    }
}

fn prohibited() -> Error {
    Error::with_errno(Errno::EPERM, "mounted directory forbids creation")
}

/// The attributes of one of the mux's own directories.
fn local_attr(node_qid: Qid, name: String, uname: &str) -> Attr {
    Attr {
        qid: node_qid,
        name,
        mode: unix::S_IFDIR | 0o555,
        uid: uname.to_owned(),
        gid: uname.to_owned(),
        muid: uname.to_owned(),
        nlink: 2,
        ..Attr::default()
    }
}

/// The member of `dir` that creates go to.
fn create_member(dir: &Node) -> Result<&Arc<RemoteFile>> {
    if !dir.view.mounted {
        return dir.remote().map_err(|_| Error::prohibited("create"));
    }
    match dir.members().iter().find(|t| t.create) {
        Some(Target {
            member: Member::Remote(r),
            ..
        }) => Ok(r),
        Some(_) => Err(Error::prohibited("create")),
        None => Err(prohibited()),
    }
}

/// Opens one member of a node with Linux open `flags`; `stat_entries`
/// keeps a walkable fid beside an open directory (see [`RemoteFile::open`]).
async fn open_member(target: Target, flags: u32, stat_entries: bool) -> Result<Target> {
    let Member::Remote(remote) = target.member else {
        return Ok(target);
    };
    let opened = remote.open(flags, stat_entries).await?;
    Ok(Target {
        member: Member::Remote(Arc::new(opened)),
        ..target
    })
}

impl Filesystem for Mux {
    type File = Node;

    async fn attach(&self, user: &User) -> Result<(Node, Qid)> {
        self.mend().await;
        let ns = Arc::new(if self.attach_per_user {
            let attacher = Attacher {
                uname: user.uname.clone(),
                n_uname: user.n_uname,
            };
            self.base.replayed_as(attacher).await
        } else {
            self.base.fork()
        });
        let root = ns.root()?;
        let qid = root.view.qid;
        Ok((root, qid))
    }

    async fn walk(&self, _cx: &Cx, dir: &Node, name: &Name) -> Result<(Node, Qid)> {
        match dir.walk(std::slice::from_ref(name)).await? {
            (_, Some(node)) => {
                let qid = node.view.qid;
                Ok((node, qid))
            }
            (_, None) => Err(Error::not_found()),
        }
    }

    async fn walk_names(
        &self,
        _cx: &Cx,
        dir: &Node,
        names: &[Name],
    ) -> Result<(Vec<Qid>, Option<Node>)> {
        dir.walk(names).await
    }

    async fn getattr(&self, _cx: &Cx, node: &Node) -> Result<Attr> {
        let shared = &node.ns.shared;
        let name = node.view.name.clone();
        match (&node.view.kind, node.members().first().map(|t| &t.member)) {
            (Kind::Ctl, _) => Ok(Attr {
                qid: node.view.qid,
                name: "#ns".into(),
                mode: unix::S_IFREG | 0o644,
                uid: shared.uname.clone(),
                gid: shared.uname.clone(),
                muid: shared.uname.clone(),
                nlink: 1,
                mtime: Time::now(),
                ..Attr::default()
            }),
            (_, Some(Member::Local(_))) => Ok(local_attr(
                node.view.qid,
                name.unwrap_or_default(),
                &shared.uname,
            )),
            (_, Some(Member::Remote(r))) => {
                let info = r.stat().await?;
                let qid = node.ns.translate(r.src(), info.qid)?;
                let name = name.unwrap_or_else(|| info.name.clone());
                Ok(attr::from_info(&info, qid, name))
            }
            (_, None) => Err(Error::not_found()),
        }
    }

    async fn setattr(&self, _cx: &Cx, node: &Node, set: &SetAttr) -> Result<()> {
        node.remote()?.setattr(&attr::to_client(set)).await
    }

    async fn open(&self, cx: &Cx, node: &mut Node, flags: u32) -> Result<Opened> {
        let (name, qid, key, mounted, parent) = (
            node.view.name.clone(),
            node.view.qid,
            node.view.key,
            node.view.mounted,
            node.view.parent.clone(),
        );
        if node.is_ctl() {
            return Ok(Opened { qid, iounit: 0 });
        }
        let targets = match Arc::get_mut(&mut node.view).map(|v| &mut v.kind) {
            Some(Kind::Members(members)) => std::mem::take(members),
            _ => node.members().to_vec(),
        };
        // Directories are read, whatever the client asked; one listed for
        // a client of 9P2000 or .u needs each entry's stat.
        let is_dir = qid.ty.is_dir();
        let flags = if is_dir {
            dotl::O_RDONLY | dotl::O_DIRECTORY
        } else {
            flags
        };
        let stat_entries = is_dir && cx.dialect != Dialect::L;
        let opened = join_all(
            targets
                .into_iter()
                .map(|t| open_member(t, flags, stat_entries)),
        )
        .await
        .into_iter()
        .collect::<Result<Vec<Target>>>()?;
        let mut iounit = 0;
        let mut qid = qid;
        if let Some(Target {
            member: Member::Remote(r),
            ..
        }) = opened.first()
        {
            iounit = r.iounit();
            qid = node.ns.translate(r.src(), r.qid())?;
        }
        *node = node.with_view(View {
            kind: Kind::Members(opened),
            name,
            qid,
            key,
            mounted,
            parent,
        });
        Ok(Opened { qid, iounit })
    }

    async fn create(
        &self,
        _cx: &Cx,
        dir: &Node,
        name: &Name,
        mode: u32,
        flags: u32,
        gid: u32,
    ) -> Result<(Node, Opened)> {
        let r = create_member(dir)?;
        let file = r.create(name, mode, flags, gid).await?;
        let iounit = file.iounit();
        let mut view = dir.remote_view(file, name.as_str())?;
        view.parent = Some((r.clone(), Vec::new()));
        let qid = view.qid;
        Ok((dir.child(view), Opened { qid, iounit }))
    }

    async fn mkdir(&self, _cx: &Cx, dir: &Node, name: &Name, mode: u32, gid: u32) -> Result<Qid> {
        let r = create_member(dir)?;
        let qid = r.mkdir(name, mode, gid).await?;
        dir.ns.translate(r.src(), qid)
    }

    async fn symlink(
        &self,
        _cx: &Cx,
        dir: &Node,
        name: &Name,
        target: &str,
        gid: u32,
    ) -> Result<Qid> {
        let r = create_member(dir)?;
        let qid = r.symlink(name, target, gid).await?;
        dir.ns.translate(r.src(), qid)
    }

    async fn mknod(
        &self,
        _cx: &Cx,
        dir: &Node,
        name: &Name,
        mode: u32,
        major: u32,
        minor: u32,
        gid: u32,
    ) -> Result<Qid> {
        let r = create_member(dir)?;
        let node = ninep_client::Node {
            mode,
            rdev: convert::makedev(major, minor),
        };
        let qid = r.mknod(name, node, gid).await?;
        dir.ns.translate(r.src(), qid)
    }

    async fn link(&self, _cx: &Cx, dir: &Node, file: &Node, name: &Name) -> Result<()> {
        let r = create_member(dir)?;
        let to = file.remote().map_err(|_| Error::from_errno(Errno::EXDEV))?;
        r.link(name, to).await
    }

    async fn readlink(&self, _cx: &Cx, node: &Node) -> Result<String> {
        node.remote()?.readlink().await
    }

    async fn read(&self, cx: &Cx, node: &Node, offset: u64, count: u32) -> Result<Bytes> {
        if node.is_ctl() {
            let text = Bytes::from(node.ns.text());
            let start = (offset.min(text.len() as u64)) as usize;
            let end = start.saturating_add(count as usize).min(text.len());
            return Ok(text.slice(start..end));
        }
        node.remote()?.read(offset, count, cx.streaming).await
    }

    async fn write(&self, _cx: &Cx, node: &Node, offset: u64, data: Bytes) -> Result<u32> {
        if node.is_ctl() {
            let text = std::str::from_utf8(&data)
                .map_err(|_| Error::with_errno(Errno::EINVAL, "namespace lines are text"))?;
            let entries =
                nsfile::parse(text).map_err(|e| Error::with_errno(Errno::EINVAL, e.to_string()))?;
            for entry in entries {
                node.ns.apply(entry).await?;
            }
            return Ok(data.len() as u32);
        }
        node.remote()?.write(offset, data).await
    }

    async fn clunk(&self, _cx: &Cx, node: Node) -> Result<()> {
        if let Ok(r) = node.remote() {
            r.stop_reading_ahead().await;
        }
        Ok(())
    }

    async fn read_dir(&self, cx: &Cx, node: &Node) -> Result<Vec<DirEntry>> {
        // Every member is read at once; the merge keeps their order.
        let listings = join_all(node.members().iter().map(|t| list_member(cx, node, t))).await;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for listing in listings {
            for entry in listing? {
                if seen.insert(entry.name.as_str().to_owned()) {
                    out.push(entry);
                }
            }
        }
        Ok(out)
    }

    async fn remove(&self, _cx: &Cx, node: &Node) -> Result<()> {
        if node.view.mounted {
            return Err(Error::with_errno(Errno::EBUSY, "mount point"));
        }
        let r = node.remote().map_err(|_| Error::prohibited("remove"))?;
        // Only this node holds the fid: remove through it.
        let in_place = Arc::strong_count(&node.view) == 1 && Arc::strong_count(r) == 1;
        r.remove(in_place).await
    }

    async fn rename(
        &self,
        _cx: &Cx,
        node: &Node,
        newdir: Option<&Node>,
        name: &Name,
    ) -> Result<()> {
        if node.view.mounted {
            return Err(Error::with_errno(Errno::EBUSY, "mount point"));
        }
        let r = node.remote()?;
        let newdir = match newdir {
            Some(d) => Some(d.remote().map_err(|_| Error::from_errno(Errno::EXDEV))?),
            None => None,
        };
        // The directory holding the file, walked to afresh if need be.
        let Some((start, names)) = &node.view.parent else {
            return Err(Error::from_errno(Errno::EXDEV));
        };
        r.rename((start, names), newdir.map(|d| &**d), name).await
    }

    async fn fsync(&self, _cx: &Cx, node: &Node, datasync: bool) -> Result<()> {
        match node.remote() {
            Ok(r) => r.fsync(datasync).await,
            Err(_) => Ok(()),
        }
    }

    async fn statfs(&self, _cx: &Cx, node: &Node) -> Result<Rstatfs> {
        // Nothing to ask for the mux's own directories and unions.
        match node.remote() {
            Ok(r) => r.statfs().await,
            Err(_) => Ok(Rstatfs::uncounted()),
        }
    }
}

/// The entries of one member of a directory.
async fn list_member(cx: &Cx, node: &Node, target: &Target) -> Result<Vec<DirEntry>> {
    let r = match &target.member {
        Member::Local(id) => {
            let uname = &node.ns.shared.uname;
            return node
                .ns
                .local_children(*id)
                .into_iter()
                .map(|(name, child)| {
                    let qid = node.ns.translate(LOCAL, local_qid(child))?;
                    Ok(DirEntry {
                        name: Name::new(name.clone()).map_err(|e| Error::new(e.to_string()))?,
                        attr: local_attr(qid, name, uname),
                    })
                })
                .collect();
        }
        Member::Remote(r) => r,
    };
    let entries = r.read_dir().await?;
    let attrs = join_all(entries.iter().map(|e| entry_attr(cx, node, r, e))).await;
    let mut out = Vec::with_capacity(entries.len());
    for (e, attr) in entries.into_iter().zip(attrs) {
        // An entry gone between the listing and its stat is left out.
        let Ok(attr) = attr else { continue };
        let name = Name::new(e.name).map_err(|e| Error::new(e.to_string()))?;
        out.push(DirEntry { name, attr });
    }
    Ok(out)
}

/// The attributes of one listed entry. A 9P2000 or .u listing carries them;
/// a 9P2000.L one carries only qids, enough for a .L client's Treaddir, and
/// other clients get a stat of each entry.
async fn entry_attr(
    cx: &Cx,
    node: &Node,
    r: &RemoteFile,
    e: &ninep_client::DirEntry,
) -> Result<Attr> {
    let qid = node.ns.translate(r.src(), e.qid)?;
    if let Some(info) = &e.info {
        return Ok(attr::from_info(info, qid, e.name.clone()));
    }
    let name = Name::new(e.name.clone()).map_err(|e| Error::new(e.to_string()))?;
    match r.stat_entry(&name).await? {
        Some(info) => Ok(attr::from_info(&info, qid, e.name.clone())),
        None if cx.dialect == Dialect::L => Ok(attr::from_entry(e, qid)),
        None => Err(Error::from_errno(Errno::EIO)),
    }
}
