//! A ready-made synthetic file tree: static files, files generated when they
//! are opened, control files that take writes, and directories of them.
//!
//! ```no_run
//! use ninep_server::tree::{Dir, Tree};
//! use ninep_server::{Error, Server};
//!
//! # async fn run() -> std::io::Result<()> {
//! let started = std::time::Instant::now();
//! let root = Dir::new()
//!     .file("version", env!("CARGO_PKG_VERSION"))
//!     .read("uptime", move |_| Ok(format!("{}\n", started.elapsed().as_secs())))
//!     .write("ctl", |_, data| match data.trim_ascii() {
//!         b"ping" => Ok(()),
//!         _ => Err(Error::new("unknown ctl command")),
//!     })
//!     .dir("docs", Dir::new().file("README", "served by ninep\n"));
//! Server::new(Tree::new(root)).serve("tcp!127.0.0.1!5640", std::future::pending()).await
//! # }
//! ```

use std::sync::Arc;

use bytes::Bytes;
use ninep_wire::consts::unix::{S_IFDIR, S_IFREG};
use ninep_wire::{Name, Qid, QidType};

use crate::dispatch::slice_at;
use crate::error::{Error, Result};
use crate::fs::{Attr, Cx, DirEntry, Filesystem, Opened, Time, User, can_read, can_write};

type ReadFn = Arc<dyn Fn(&Cx) -> Result<Bytes> + Send + Sync>;
type WriteFn = Arc<dyn Fn(&Cx, &[u8]) -> Result<()> + Send + Sync>;

/// A directory being built.
#[derive(Default)]
pub struct Dir {
    entries: Vec<(Name, Entry)>,
}

enum Entry {
    Dir(Dir),
    File {
        read: Option<ReadFn>,
        write: Option<WriteFn>,
        /// Length to report: known for static files, 0 for generated ones.
        length: u64,
    },
}

impl std::fmt::Debug for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

fn name(name: &str) -> Name {
    // Tree names are written by the programmer, not sent by a peer; a bad
    // one is a bug in the program and is reported at once.
    Name::new(name)
        .ok()
        .filter(|n| !n.is_empty() && !n.is_dot_or_dotdot())
        .unwrap_or_else(|| panic!("{name:?} is not a valid file name"))
}

impl Dir {
    /// An empty directory.
    pub fn new() -> Self {
        Dir::default()
    }

    /// A file with fixed contents.
    pub fn file(mut self, file: &str, contents: impl Into<Bytes>) -> Self {
        let contents = contents.into();
        let length = contents.len() as u64;
        let read: ReadFn = Arc::new(move |_| Ok(contents.clone()));
        self.entries.push((
            name(file),
            Entry::File {
                read: Some(read),
                write: None,
                length,
            },
        ));
        self
    }

    /// A file whose contents `f` makes each time it is opened.
    pub fn read<T: Into<Bytes>>(
        mut self,
        file: &str,
        f: impl Fn(&Cx) -> Result<T> + Send + Sync + 'static,
    ) -> Self {
        let read: ReadFn = Arc::new(move |cx| f(cx).map(Into::into));
        self.entries.push((
            name(file),
            Entry::File {
                read: Some(read),
                write: None,
                length: 0,
            },
        ));
        self
    }

    /// A write-only file: `f` gets the data of each write.
    pub fn write(
        mut self,
        file: &str,
        f: impl Fn(&Cx, &[u8]) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.entries.push((
            name(file),
            Entry::File {
                read: None,
                write: Some(Arc::new(f)),
                length: 0,
            },
        ));
        self
    }

    /// A subdirectory.
    pub fn dir(mut self, dir: &str, contents: Dir) -> Self {
        self.entries.push((name(dir), Entry::Dir(contents)));
        self
    }
}

/// A built tree node; its qid path is its number in a walk of the tree.
struct Node {
    path: u64,
    name: String,
    kind: Kind,
}

enum Kind {
    Dir(Vec<Arc<Node>>),
    File {
        read: Option<ReadFn>,
        write: Option<WriteFn>,
        length: u64,
    },
}

/// A synthetic tree served as a [`Filesystem`].
pub struct Tree {
    root: Arc<Node>,
    made: Time,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree").finish_non_exhaustive()
    }
}

impl Tree {
    /// The tree with `root` as its root directory.
    pub fn new(root: Dir) -> Tree {
        let mut next = 0;
        Tree {
            root: build("/".into(), Entry::Dir(root), &mut next),
            made: Time::now(),
        }
    }
}

fn build(name: String, entry: Entry, next: &mut u64) -> Arc<Node> {
    let path = *next;
    *next += 1;
    let kind = match entry {
        Entry::Dir(dir) => Kind::Dir(
            dir.entries
                .into_iter()
                .map(|(n, e)| build(n.into_string(), e, next))
                .collect(),
        ),
        Entry::File {
            read,
            write,
            length,
        } => Kind::File {
            read,
            write,
            length,
        },
    };
    Arc::new(Node { path, name, kind })
}

/// Where a fid is in the tree: the nodes from the root down, and the
/// contents generated when it was opened.
#[derive(Clone)]
pub struct TreeFile {
    trail: Vec<Arc<Node>>,
    contents: Option<Bytes>,
}

impl std::fmt::Debug for TreeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path: Vec<&str> = self.trail.iter().map(|n| n.name.as_str()).collect();
        f.debug_struct("TreeFile").field("trail", &path).finish()
    }
}

impl TreeFile {
    fn node(&self) -> &Arc<Node> {
        // The trail always starts at the root.
        &self.trail[self.trail.len() - 1]
    }
}

fn qid(node: &Node) -> Qid {
    let ty = match node.kind {
        Kind::Dir(_) => QidType::DIR,
        Kind::File { .. } => QidType::FILE,
    };
    // Version 0: the contents are synthetic and must not be cached.
    Qid {
        ty,
        version: 0,
        path: node.path,
    }
}

impl Tree {
    fn attr(&self, node: &Node, user: &User) -> Attr {
        let (mode, size) = match &node.kind {
            Kind::Dir(_) => (S_IFDIR | 0o555, 0),
            Kind::File {
                read,
                write,
                length,
            } => {
                let r = if read.is_some() { 0o444 } else { 0 };
                let w = if write.is_some() { 0o222 } else { 0 };
                (S_IFREG | r | w, *length)
            }
        };
        let owner = if user.uname.is_empty() {
            "none".to_owned()
        } else {
            user.uname.clone()
        };
        let id = if user.n_uname == ninep_wire::NONUNAME {
            0
        } else {
            user.n_uname
        };
        Attr {
            qid: qid(node),
            name: node.name.clone(),
            mode,
            uid: owner.clone(),
            gid: owner.clone(),
            muid: owner,
            n_uid: id,
            n_gid: id,
            nlink: 1,
            size,
            blksize: 4096,
            atime: self.made,
            mtime: self.made,
            ctime: self.made,
            ..Attr::default()
        }
    }
}

impl Filesystem for Tree {
    type File = TreeFile;

    async fn attach(&self, _user: &User) -> Result<(TreeFile, Qid)> {
        let file = TreeFile {
            trail: vec![self.root.clone()],
            contents: None,
        };
        Ok((file, qid(&self.root)))
    }

    async fn walk(&self, _cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        let mut trail = dir.trail.clone();
        if name == ".." {
            if trail.len() > 1 {
                trail.pop();
            }
        } else {
            let Kind::Dir(entries) = &dir.node().kind else {
                return Err(Error::not_dir());
            };
            let child = entries
                .iter()
                .find(|n| n.name == name.as_str())
                .ok_or_else(Error::not_found)?;
            trail.push(child.clone());
        }
        let file = TreeFile {
            trail,
            contents: None,
        };
        let q = qid(file.node());
        Ok((file, q))
    }

    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        Ok(self.attr(file.node(), &cx.user))
    }

    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        if let Kind::File { read, write, .. } = &file.node().kind {
            if can_write(flags) && write.is_none() || can_read(flags) && read.is_none() {
                return Err(Error::access());
            }
            if let Some(read) = read {
                file.contents = Some(read(cx)?);
            }
        }
        Ok(Opened {
            qid: qid(file.node()),
            iounit: 0,
        })
    }

    async fn read(&self, _cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        match &file.contents {
            Some(contents) => Ok(slice_at(contents, offset, count)),
            None => Err(Error::prohibited("read")),
        }
    }

    async fn write(&self, cx: &Cx, file: &TreeFile, _offset: u64, data: Bytes) -> Result<u32> {
        match &file.node().kind {
            Kind::File {
                write: Some(write), ..
            } => {
                write(cx, &data)?;
                Ok(data.len() as u32)
            }
            _ => Err(Error::prohibited("write")),
        }
    }

    async fn read_dir(&self, cx: &Cx, dir: &TreeFile) -> Result<Vec<DirEntry>> {
        let Kind::Dir(entries) = &dir.node().kind else {
            return Err(Error::not_dir());
        };
        Ok(entries
            .iter()
            .map(|node| DirEntry {
                name: Name::new(node.name.as_str()).unwrap_or_default(),
                attr: self.attr(node, &cx.user),
            })
            .collect())
    }
}
