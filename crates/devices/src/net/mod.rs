//! The host's network as Plan 9's `/net` (ip(3), cs in ndb(8)):
//!
//! ```text
//! cs                  write net!host!service, read translations
//! tcp/clone           open: a new conversation, the fid its ctl
//! tcp/N/ctl           connect, announce, bind, hangup, keepalive, push, pop;
//!                     read: N
//! tcp/N/data          the byte stream
//! tcp/N/listen        open: waits for a call on announced N, the fid
//!                     then the ctl of the new conversation
//! tcp/N/local remote  addr!port
//! tcp/N/status        state and queue figures
//! tcp/N/err           why the last ctl message was refused (9front)
//! ```
//!
//! Each conversation's data goes through a stream whose queues hold at
//! most their high water mark both ways: a slow reader of `data` stops
//! the socket being read, and TCP slows the sender. Actions happen on open
//! and write, never on walk; a conversation lives while any of its files
//! is open, and only the user who made it may open them.

mod allow;
mod conv;
mod cs;

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use ninep_server::queue::{Conversations, Limits, Modules};
use ninep_server::{Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, User};
use ninep_wire::consts::unix::{S_IFDIR, S_IFREG};
use ninep_wire::{Errno, Name, Qid, QidType};
use parking_lot::Mutex;

pub use allow::Allow;
use conv::{Conv, Rules};

use crate::files::{attr, text_at};

/// What a network server allows and holds to.
#[derive(Debug, Clone)]
pub struct Options {
    /// Conversations open at once.
    pub conversations: usize,
    /// Each direction's queue of each conversation.
    pub queue: Limits,
    /// Addresses `connect` may reach.
    pub dial: Allow,
    /// Addresses `announce` may listen on (none by default).
    pub announce: Allow,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            conversations: 256,
            queue: Limits::default(),
            dial: Allow::any(),
            announce: Allow::none(),
        }
    }
}

/// The network server; see the module documentation.
#[derive(Debug)]
pub struct NetFs {
    convs: Conversations<Conv>,
    queue: Limits,
    rules: Rules,
    modules: Modules,
}

/// The files of a conversation directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Ctl,
    Data,
    Listen,
    Local,
    Remote,
    Status,
    Err,
}

const PARTS: [(Part, &str); 7] = [
    (Part::Ctl, "ctl"),
    (Part::Data, "data"),
    (Part::Listen, "listen"),
    (Part::Local, "local"),
    (Part::Remote, "remote"),
    (Part::Status, "status"),
    (Part::Err, "err"),
];

#[derive(Debug, Clone)]
enum Node {
    Root,
    Cs,
    Tcp,
    Clone,
    Conv(usize, Weak<Conv>),
    File(usize, Weak<Conv>, Part),
}

#[derive(Debug, Clone)]
enum Open {
    /// Holds the conversation alive.
    Conv(Arc<Conv>),
    /// The translations still to read.
    Cs(Arc<Mutex<VecDeque<String>>>),
}

/// A fid of the network server.
#[derive(Debug, Clone)]
pub struct NetFile {
    node: Node,
    open: Option<Open>,
}

impl Node {
    fn qid(&self) -> Qid {
        // Conversation N's directory is 0x100 * (N + 1), its files follow.
        let (dir, path) = match self {
            Node::Root => (true, 0),
            Node::Cs => (false, 1),
            Node::Tcp => (true, 2),
            Node::Clone => (false, 3),
            Node::Conv(n, _) => (true, 0x100 * (*n as u64 + 1)),
            Node::File(n, _, part) => (false, 0x100 * (*n as u64 + 1) + 1 + *part as u64),
        };
        Qid {
            ty: if dir { QidType::DIR } else { QidType::FILE },
            version: 0,
            path,
        }
    }

    fn name(&self) -> String {
        match self {
            Node::Root => "/".into(),
            Node::Cs => "cs".into(),
            Node::Tcp => "tcp".into(),
            Node::Clone => "clone".into(),
            Node::Conv(n, _) => n.to_string(),
            Node::File(_, _, part) => part_name(*part).into(),
        }
    }

    fn parent(&self) -> Node {
        match self {
            Node::Root | Node::Cs | Node::Tcp => Node::Root,
            Node::Clone | Node::Conv(..) => Node::Tcp,
            Node::File(n, conv, _) => Node::Conv(*n, conv.clone()),
        }
    }
}

fn part_name(part: Part) -> &'static str {
    PARTS
        .iter()
        .find(|(p, _)| *p == part)
        .map_or("?", |(_, name)| name)
}

fn gone() -> Error {
    Error::with_errno(Errno::ENOENT, "conversation closed")
}

fn not_open() -> Error {
    Error::with_errno(Errno::EBADF, "file not open")
}

impl NetFs {
    /// The host's network, held to `options`.
    pub fn new(options: Options) -> NetFs {
        NetFs {
            convs: Conversations::new(options.conversations),
            queue: options.queue,
            rules: Rules {
                dial: options.dial,
                announce: options.announce,
            },
            modules: Modules::default(),
        }
    }

    fn attr(&self, node: &Node, user: &User) -> Attr {
        let (mode, owner) = match node {
            Node::Root | Node::Tcp => (S_IFDIR | 0o555, user.uname.clone()),
            Node::Cs | Node::Clone => (S_IFREG | 0o666, user.uname.clone()),
            Node::Conv(_, conv) => (S_IFDIR | 0o555, owner(conv, user)),
            Node::File(_, conv, part) => {
                let mode = match part {
                    Part::Ctl | Part::Data | Part::Listen => 0o660,
                    _ => 0o444,
                };
                (S_IFREG | mode, owner(conv, user))
            }
        };
        attr(node.qid(), &node.name(), mode, &owner)
    }

    /// A new conversation for `user`, and the fid on its ctl.
    fn clone_conv(&self, user: &User) -> Result<NetFile> {
        let conv = self
            .convs
            .alloc(|n| Conv::new(n, &user.uname, self.queue, self.modules.clone()))?;
        Ok(ctl_of(conv))
    }

    /// Waits for a call on announced conversation `conv`; the fid on the
    /// ctl of the conversation made for it.
    async fn listen(&self, conv: &Conv, user: &User) -> Result<NetFile> {
        let listener = conv.listener()?;
        let (tcp, _) = listener.accept().await?;
        let file = self.clone_conv(user)?;
        if let Some(Open::Conv(new)) = &file.open {
            new.established(tcp)?;
        }
        Ok(file)
    }
}

fn owner(conv: &Weak<Conv>, user: &User) -> String {
    conv.upgrade()
        .map_or_else(|| user.uname.clone(), |c| c.owner.clone())
}

/// An open fid on `conv`'s ctl.
fn ctl_of(conv: Arc<Conv>) -> NetFile {
    NetFile {
        node: Node::File(conv.n, Arc::downgrade(&conv), Part::Ctl),
        open: Some(Open::Conv(conv)),
    }
}

impl Filesystem for NetFs {
    type File = NetFile;

    async fn attach(&self, _user: &User) -> Result<(NetFile, Qid)> {
        let root = NetFile {
            node: Node::Root,
            open: None,
        };
        Ok((root, Node::Root.qid()))
    }

    async fn walk(&self, _cx: &Cx, dir: &NetFile, name: &Name) -> Result<(NetFile, Qid)> {
        let node = match (&dir.node, name.as_str()) {
            (node, "..") => node.parent(),
            (Node::Root, "cs") => Node::Cs,
            (Node::Root, "tcp") => Node::Tcp,
            (Node::Tcp, "clone") => Node::Clone,
            (Node::Tcp, n) => {
                let n: usize = n.parse().map_err(|_| Error::not_found())?;
                let conv = self.convs.get(n).ok_or_else(Error::not_found)?;
                Node::Conv(n, Arc::downgrade(&conv))
            }
            (Node::Conv(n, conv), name) => {
                let part = PARTS
                    .iter()
                    .find(|(_, p)| *p == name)
                    .ok_or_else(Error::not_found)?
                    .0;
                Node::File(*n, conv.clone(), part)
            }
            (Node::Root, _) => return Err(Error::not_found()),
            _ => return Err(Error::not_dir()),
        };
        let qid = node.qid();
        Ok((NetFile { node, open: None }, qid))
    }

    async fn getattr(&self, cx: &Cx, file: &NetFile) -> Result<Attr> {
        Ok(self.attr(&file.node, &cx.user))
    }

    async fn open(&self, cx: &Cx, file: &mut NetFile, _flags: u32) -> Result<Opened> {
        *file = match &file.node {
            Node::Clone => self.clone_conv(&cx.user)?,
            Node::Cs => NetFile {
                node: Node::Cs,
                open: Some(Open::Cs(Arc::default())),
            },
            Node::File(_, conv, part) => {
                let conv = conv.upgrade().ok_or_else(gone)?;
                if conv.owner != cx.user.uname {
                    return Err(Error::access());
                }
                match part {
                    Part::Listen => self.listen(&conv, &cx.user).await?,
                    _ => NetFile {
                        node: file.node.clone(),
                        open: Some(Open::Conv(conv)),
                    },
                }
            }
            Node::Root | Node::Tcp | Node::Conv(..) => file.clone(),
        };
        Ok(Opened {
            qid: file.node.qid(),
            iounit: 0,
        })
    }

    async fn read(&self, _cx: &Cx, file: &NetFile, offset: u64, count: u32) -> Result<Bytes> {
        match (&file.node, &file.open) {
            (Node::Cs, Some(Open::Cs(answers))) => Ok(answers
                .lock()
                .pop_front()
                .map(Bytes::from)
                .unwrap_or_default()),
            (Node::File(_, _, part), Some(Open::Conv(conv))) => {
                let text = match part {
                    Part::Data => {
                        conv.check_data()?;
                        return Ok(conv.stream.read(count as usize).await);
                    }
                    Part::Ctl | Part::Listen => conv.n.to_string(),
                    Part::Local => conv.local(),
                    Part::Remote => conv.remote(),
                    Part::Status => conv.status(),
                    Part::Err => conv.err(),
                };
                Ok(text_at(&text, offset, count))
            }
            _ => Err(not_open()),
        }
    }

    async fn write(&self, _cx: &Cx, file: &NetFile, _offset: u64, data: Bytes) -> Result<u32> {
        let len = data.len() as u32;
        let text = || {
            std::str::from_utf8(&data)
                .map_err(|_| Error::new("ctl messages are text"))
                .map(str::trim)
        };
        match (&file.node, &file.open) {
            (Node::Cs, Some(Open::Cs(answers))) => {
                let found = cs::translate(text()?).await?;
                *answers.lock() = found.into();
                Ok(len)
            }
            (Node::File(_, _, Part::Data), Some(Open::Conv(conv))) => {
                conv::write_data(conv, data.clone()).await
            }
            (Node::File(_, _, Part::Ctl), Some(Open::Conv(conv))) => {
                conv.ctl(&self.rules, text()?).await?;
                Ok(len)
            }
            (_, Some(_)) => Err(Error::prohibited("write")),
            _ => Err(not_open()),
        }
    }

    async fn read_dir(&self, cx: &Cx, dir: &NetFile) -> Result<Vec<DirEntry>> {
        let nodes: Vec<Node> = match &dir.node {
            Node::Root => vec![Node::Cs, Node::Tcp],
            Node::Tcp => std::iter::once(Node::Clone)
                .chain(self.convs.live().into_iter().filter_map(|n| {
                    let conv = self.convs.get(n)?;
                    Some(Node::Conv(n, Arc::downgrade(&conv)))
                }))
                .collect(),
            Node::Conv(n, conv) => PARTS
                .iter()
                .map(|(part, _)| Node::File(*n, conv.clone(), *part))
                .collect(),
            _ => return Err(Error::not_dir()),
        };
        Ok(nodes
            .iter()
            .filter_map(|node| {
                Some(DirEntry {
                    name: Name::new(node.name()).ok()?,
                    attr: self.attr(node, &cx.user),
                })
            })
            .collect())
    }
}
