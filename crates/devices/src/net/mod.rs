//! The host's network as Plan 9's `/net` (ip(3), cs in ndb(8)):
//!
//! ```text
//! cs                  write net!host!service, read translations
//! tcp/clone           open: a new conversation, the fid its ctl
//!                     (udp/ the same, each read and write of data a
//!                     datagram; announced, with a header: see conv)
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
use ninep_server::{Attr, Cx, DirEntry, Error, Filesystem, Opened, PipeLeave, Result, User};
use ninep_transport::PipedFile;
use ninep_wire::consts::unix::{S_IFDIR, S_IFREG};
use ninep_wire::{Errno, Name, Qid, QidType};
use parking_lot::Mutex;

pub use allow::Allow;
use conv::{Conv, Proto, Rules};

use crate::files::{attr, text_at};

/// What a network server allows and holds to.
#[derive(Debug, Clone)]
pub struct Options {
    /// Conversations open at once, of each protocol.
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
    /// Of each protocol, in the order of [`Proto::ALL`].
    convs: [Conversations<Conv>; 2],
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
    Proto(Proto),
    Clone(Proto),
    Conv(Proto, usize, Weak<Conv>),
    File(Proto, usize, Weak<Conv>, Part),
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
        // A protocol's directory and clone file are 2 + 2p and 3 + 2p;
        // its conversation N's directory p << 32 | 0x100 * (N + 1), whose
        // files follow.
        let conv = |p: Proto, n: usize| ((p as u64) << 32) | (0x100 * (n as u64 + 1));
        let (dir, path) = match self {
            Node::Root => (true, 0),
            Node::Cs => (false, 1),
            Node::Proto(p) => (true, 2 + 2 * *p as u64),
            Node::Clone(p) => (false, 3 + 2 * *p as u64),
            Node::Conv(p, n, _) => (true, conv(*p, *n)),
            Node::File(p, n, _, part) => (false, conv(*p, *n) + 1 + *part as u64),
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
            Node::Proto(p) => p.name().into(),
            Node::Clone(_) => "clone".into(),
            Node::Conv(_, n, _) => n.to_string(),
            Node::File(_, _, _, part) => part_name(*part).into(),
        }
    }

    fn parent(&self) -> Node {
        match self {
            Node::Root | Node::Cs | Node::Proto(_) => Node::Root,
            Node::Clone(p) | Node::Conv(p, ..) => Node::Proto(*p),
            Node::File(p, n, conv, _) => Node::Conv(*p, *n, conv.clone()),
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
            convs: Proto::ALL.map(|_| Conversations::new(options.conversations)),
            queue: options.queue,
            rules: Rules {
                dial: options.dial,
                announce: options.announce,
            },
            modules: Modules::default(),
        }
    }

    fn convs(&self, proto: Proto) -> &Conversations<Conv> {
        &self.convs[proto as usize]
    }

    fn attr(&self, node: &Node, user: &User) -> Attr {
        let (mode, owner) = match node {
            Node::Root | Node::Proto(_) => (S_IFDIR | 0o555, user.uname.clone()),
            Node::Cs | Node::Clone(_) => (S_IFREG | 0o666, user.uname.clone()),
            Node::Conv(_, _, conv) => (S_IFDIR | 0o555, owner(conv, user)),
            Node::File(_, _, conv, part) => {
                let mode = match part {
                    Part::Ctl | Part::Data | Part::Listen => 0o660,
                    _ => 0o444,
                };
                (S_IFREG | mode, owner(conv, user))
            }
        };
        attr(node.qid(), &node.name(), mode, &owner)
    }

    /// A new `proto` conversation for `user`, and the fid on its ctl.
    fn clone_conv(&self, proto: Proto, user: &User) -> Result<NetFile> {
        let conv = self
            .convs(proto)
            .alloc(|n| Conv::new(n, proto, &user.uname, self.queue, self.modules.clone()))?;
        Ok(ctl_of(conv))
    }

    /// Waits for a call on announced conversation `conv`; the fid on the
    /// ctl of the conversation made for it.
    async fn listen(&self, conv: &Conv, user: &User) -> Result<NetFile> {
        let listener = conv.listener()?;
        let (tcp, _) = listener.accept().await?;
        let file = self.clone_conv(conv.proto, user)?;
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
        node: Node::File(conv.proto, conv.n, Arc::downgrade(&conv), Part::Ctl),
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
            (Node::Root, name) => Proto::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .map(Node::Proto)
                .ok_or_else(Error::not_found)?,
            (Node::Proto(p), "clone") => Node::Clone(*p),
            (Node::Proto(p), n) => {
                let n: usize = n.parse().map_err(|_| Error::not_found())?;
                let conv = self.convs(*p).get(n).ok_or_else(Error::not_found)?;
                Node::Conv(*p, n, Arc::downgrade(&conv))
            }
            (Node::Conv(p, n, conv), name) => {
                let part = PARTS
                    .iter()
                    .find(|(_, p)| *p == name)
                    .ok_or_else(Error::not_found)?
                    .0;
                Node::File(*p, *n, conv.clone(), part)
            }
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
            Node::Clone(p) => self.clone_conv(*p, &cx.user)?,
            Node::Cs => NetFile {
                node: Node::Cs,
                open: Some(Open::Cs(Arc::default())),
            },
            Node::File(_, _, conv, part) => {
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
            Node::Root | Node::Proto(_) | Node::Conv(..) => file.clone(),
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
            (Node::File(_, _, _, part), Some(Open::Conv(conv))) => {
                let text = match part {
                    Part::Data => return conv.read_data(count as usize).await,
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

    async fn read_piped(
        &self,
        _cx: &Cx,
        file: &NetFile,
        count: usize,
        leave: &PipeLeave,
    ) -> Option<PipedFile> {
        match (&file.node, &file.open) {
            (Node::File(_, _, _, Part::Data), Some(Open::Conv(conv))) => {
                conv.read_piped(count, leave).await
            }
            _ => None,
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
            (Node::File(_, _, _, Part::Data), Some(Open::Conv(conv))) => {
                conv.write_data(&self.rules, data.clone()).await
            }
            (Node::File(_, _, _, Part::Ctl), Some(Open::Conv(conv))) => {
                conv.ctl(&self.rules, text()?).await?;
                Ok(len)
            }
            (_, Some(_)) => Err(Error::prohibited("write")),
            _ => Err(not_open()),
        }
    }

    async fn read_dir(&self, cx: &Cx, dir: &NetFile) -> Result<Vec<DirEntry>> {
        let nodes: Vec<Node> = match &dir.node {
            Node::Root => std::iter::once(Node::Cs)
                .chain(Proto::ALL.map(Node::Proto))
                .collect(),
            Node::Proto(p) => std::iter::once(Node::Clone(*p))
                .chain(self.convs(*p).live().into_iter().filter_map(|n| {
                    let conv = self.convs(*p).get(n)?;
                    Some(Node::Conv(*p, n, Arc::downgrade(&conv)))
                }))
                .collect(),
            Node::Conv(p, n, conv) => PARTS
                .iter()
                .map(|(part, _)| Node::File(*p, *n, conv.clone(), *part))
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
