//! Drives a whole server session over an in-memory pipe: a ramfs, an export
//! of a scratch directory, or a mux over a ramfs, spoken to in any dialect
//! by a peer that sends structured requests (fids, tags, names and offsets
//! from small pools, so that sessions reach deep states), flushes, stream
//! credit and data, new Tversions and raw garbage frames.
//!
//! The peer keeps a model of what it has outstanding, tag by tag, and checks
//! every reply against it: each is well formed in the dialect agreed and
//! answers something outstanding on its tag; nothing answers a request after
//! the Rflush that flushed it or the Rversion that reset the session; a read
//! stream never sends more than its credit; every request is answered (a
//! sync step waits for all of them); the server ends when the peer hangs up
//! and then holds no file descriptor of the session; and an export leaves
//! the directory beside it untouched.
//!
//! SESSION_TRACE=1 prints each frame sent and each reply.

#![no_main]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::Arbitrary;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use ninep_export::{Export, Options as ExportOptions};
use ninep_mux::{Config, Mux, nsfile};
use ninep_ramfs::RamFs;
use ninep_server::{Filesystem, Limits, Server, StreamLimits};
use ninep_transport::{Addr, FrameCodec};
use ninep_wire::*;
use parking_lot::Mutex;
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Notify;
use tokio_util::codec::FramedRead;

/// How long a request may go unanswered before the server counts as hung.
const PATIENCE: Duration = Duration::from_secs(10);
/// Most steps of one case: deep enough, and quick.
const MAX_STEPS: usize = 96;

const SERVER_MSIZE: u32 = 64 * 1024 + IOHDRSZ;

const VERSIONS: &[&str] = &[
    "9P2000.L",
    "9P2000.u",
    "9P2000",
    "9P2000.L.stream",
    "9P2000.u.stream",
    "9P2000.stream",
    "9P2000.L.x",
    "9P1999",
    "",
];
const MSIZES: &[u32] = &[
    SERVER_MSIZE,
    8192 + IOHDRSZ,
    256,
    300,
    1024,
    255,
    0,
    u32::MAX,
];
const TAGS: &[u16] = &[0, 1, 2, 3, 4, 5, 6, 7, NOTAG];
const FIDS: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 0xffff_ffff];
const NAMES: &[&str] = &[
    "a", "b", "sub", "..", ".", "", "c", "#ns", "link", "n", "ram", "ü",
];
const TARGETS: &[&str] = &[
    "a",
    "../outside/secret",
    "/etc/passwd",
    "..",
    "sub/../..",
    "/",
];
const UNAMES: &[&str] = &["root", "none", "glenda", ""];
const XATTRS: &[&str] = &[
    "user.a",
    "user.b",
    "",
    "trusted.x",
    "system.posix_acl_access",
];
const OFFSETS: &[u64] = &[
    0,
    1,
    5,
    100,
    4096,
    1 << 31,
    1 << 40,
    u64::MAX - 10,
    u64::MAX,
];
const COUNTS: &[u32] = &[0, 1, 7, 100, 1000, 4096, 8192, 65536, u32::MAX];

fn pick<T: Copy>(pool: &[T], i: u8) -> T {
    pool[usize::from(i) % pool.len()]
}

fn fid(i: u8) -> Fid {
    Fid(pick(FIDS, i))
}

fn name(i: u8) -> Name {
    Name::new(pick(NAMES, i)).expect("the pool's names are valid")
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Backend {
    Ramfs,
    Export,
    Mux,
}

#[derive(Arbitrary, Debug)]
struct Case {
    backend: Backend,
    version: u8,
    msize: u8,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    Request {
        tag: u8,
        req: Req,
    },
    Flush {
        tag: u8,
        oldtag: u8,
    },
    Credit {
        tag: u8,
        credit: u8,
    },
    Data {
        tag: u8,
        len: u8,
    },
    Version {
        tag: u8,
        version: u8,
        msize: u8,
    },
    Garbage {
        tag: u8,
        ty: u8,
        body: Vec<u8>,
    },
    /// Waits until every request but the streams is answered.
    Sync,
    /// A frame larger than msize: the server hangs up.
    Oversize,
}

#[derive(Arbitrary, Debug)]
enum Req {
    Attach {
        fid: u8,
        uname: u8,
        aname: u8,
    },
    Walk {
        fid: u8,
        newfid: u8,
        names: Vec<u8>,
    },
    Open {
        fid: u8,
        mode: u8,
    },
    Create {
        fid: u8,
        name: u8,
        perm: u32,
        mode: u8,
        ext: u8,
    },
    Lopen {
        fid: u8,
        flags: u32,
    },
    Lcreate {
        fid: u8,
        name: u8,
        flags: u32,
        mode: u32,
    },
    Read {
        fid: u8,
        offset: u8,
        count: u8,
    },
    Write {
        fid: u8,
        offset: u8,
        len: u8,
    },
    Clunk {
        fid: u8,
    },
    Remove {
        fid: u8,
    },
    Stat {
        fid: u8,
    },
    Wstat {
        fid: u8,
        name: Option<u8>,
        mode: Option<u32>,
        length: Option<u8>,
    },
    Statfs {
        fid: u8,
    },
    Symlink {
        fid: u8,
        name: u8,
        target: u8,
    },
    Mknod {
        fid: u8,
        name: u8,
        mode: u32,
    },
    Rename {
        fid: u8,
        dfid: u8,
        name: u8,
    },
    Readlink {
        fid: u8,
    },
    Getattr {
        fid: u8,
        mask: u64,
    },
    Setattr {
        fid: u8,
        valid: u32,
        mode: u32,
        size: u8,
    },
    Xattrwalk {
        fid: u8,
        newfid: u8,
        name: u8,
    },
    Xattrcreate {
        fid: u8,
        name: u8,
        size: u8,
        flags: u32,
    },
    Readdir {
        fid: u8,
        offset: u8,
        count: u8,
    },
    Fsync {
        fid: u8,
    },
    Lock {
        fid: u8,
        ty: u8,
        flags: u32,
        start: u8,
        length: u8,
    },
    Getlock {
        fid: u8,
        ty: u8,
        start: u8,
        length: u8,
    },
    Link {
        dfid: u8,
        fid: u8,
        name: u8,
    },
    Mkdir {
        dfid: u8,
        name: u8,
        mode: u32,
    },
    Renameat {
        olddir: u8,
        oldname: u8,
        newdir: u8,
        newname: u8,
    },
    Unlinkat {
        dir: u8,
        name: u8,
        flags: u32,
    },
    Sread {
        fid: u8,
        offset: u8,
        count: u8,
        credit: u8,
    },
    Swrite {
        fid: u8,
        offset: u8,
    },
}

/// `len` bytes of a recognisable pattern.
fn data(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>().into()
}

impl Req {
    fn msg(&self) -> Msg {
        match *self {
            Req::Attach {
                fid: f,
                uname,
                aname,
            } => Tattach {
                fid: fid(f),
                afid: Fid::NOFID,
                uname: pick(UNAMES, uname).into(),
                aname: pick(&["", "/", "sub"], aname).into(),
                n_uname: 0,
            }
            .into(),
            Req::Walk {
                fid: f,
                newfid,
                ref names,
            } => Twalk {
                fid: fid(f),
                newfid: fid(newfid),
                wname: names.iter().take(17).map(|&n| name(n)).collect(),
            }
            .into(),
            Req::Open { fid: f, mode } => Topen { fid: fid(f), mode }.into(),
            Req::Create {
                fid: f,
                name: n,
                perm,
                mode,
                ext,
            } => Tcreate {
                fid: fid(f),
                name: name(n),
                perm,
                mode,
                extension: pick(TARGETS, ext).into(),
            }
            .into(),
            Req::Lopen { fid: f, flags } => Tlopen { fid: fid(f), flags }.into(),
            Req::Lcreate {
                fid: f,
                name: n,
                flags,
                mode,
            } => Tlcreate {
                fid: fid(f),
                name: name(n),
                flags,
                mode,
                gid: 0,
            }
            .into(),
            Req::Read {
                fid: f,
                offset,
                count,
            } => Tread {
                fid: fid(f),
                offset: pick(OFFSETS, offset),
                count: pick(COUNTS, count),
            }
            .into(),
            Req::Write {
                fid: f,
                offset,
                len,
            } => Twrite {
                fid: fid(f),
                offset: pick(OFFSETS, offset),
                data: data(pick(COUNTS, len).min(SERVER_MSIZE) as usize),
            }
            .into(),
            Req::Clunk { fid: f } => Tclunk { fid: fid(f) }.into(),
            Req::Remove { fid: f } => Tremove { fid: fid(f) }.into(),
            Req::Stat { fid: f } => Tstat { fid: fid(f) }.into(),
            Req::Wstat {
                fid: f,
                name: n,
                mode,
                length,
            } => {
                let mut stat = Stat::dont_touch();
                if let Some(n) = n {
                    stat.name = name(n).into_string();
                }
                if let Some(mode) = mode {
                    stat.mode = mode;
                }
                if let Some(length) = length {
                    stat.length = pick(OFFSETS, length);
                }
                Twstat { fid: fid(f), stat }.into()
            }
            Req::Statfs { fid: f } => Tstatfs { fid: fid(f) }.into(),
            Req::Symlink {
                fid: f,
                name: n,
                target,
            } => Tsymlink {
                fid: fid(f),
                name: name(n),
                symtgt: pick(TARGETS, target).into(),
                gid: 0,
            }
            .into(),
            Req::Mknod {
                fid: f,
                name: n,
                mode,
            } => Tmknod {
                dfid: fid(f),
                name: name(n),
                mode,
                major: 1,
                minor: 3,
                gid: 0,
            }
            .into(),
            Req::Rename {
                fid: f,
                dfid,
                name: n,
            } => Trename {
                fid: fid(f),
                dfid: fid(dfid),
                name: name(n),
            }
            .into(),
            Req::Readlink { fid: f } => Treadlink { fid: fid(f) }.into(),
            Req::Getattr { fid: f, mask } => Tgetattr {
                fid: fid(f),
                request_mask: mask,
            }
            .into(),
            Req::Setattr {
                fid: f,
                valid,
                mode,
                size,
            } => Tsetattr {
                fid: fid(f),
                valid,
                mode,
                uid: 0,
                gid: 0,
                size: pick(OFFSETS, size),
                atime_sec: 0,
                atime_nsec: 0,
                mtime_sec: 0,
                mtime_nsec: 0,
            }
            .into(),
            Req::Xattrwalk {
                fid: f,
                newfid,
                name: n,
            } => Txattrwalk {
                fid: fid(f),
                newfid: fid(newfid),
                name: pick(XATTRS, n).into(),
            }
            .into(),
            Req::Xattrcreate {
                fid: f,
                name: n,
                size,
                flags,
            } => Txattrcreate {
                fid: fid(f),
                name: pick(XATTRS, n).into(),
                attr_size: pick(OFFSETS, size),
                flags,
            }
            .into(),
            Req::Readdir {
                fid: f,
                offset,
                count,
            } => Treaddir {
                fid: fid(f),
                offset: pick(OFFSETS, offset),
                count: pick(COUNTS, count),
            }
            .into(),
            Req::Fsync { fid: f } => Tfsync {
                fid: fid(f),
                datasync: Some(0),
            }
            .into(),
            Req::Lock {
                fid: f,
                ty,
                flags,
                start,
                length,
            } => Tlock {
                fid: fid(f),
                ty: ty % 4,
                flags,
                start: pick(OFFSETS, start),
                length: pick(OFFSETS, length),
                proc_id: 1,
                client_id: "fuzz".into(),
            }
            .into(),
            Req::Getlock {
                fid: f,
                ty,
                start,
                length,
            } => Tgetlock {
                fid: fid(f),
                ty: ty % 4,
                start: pick(OFFSETS, start),
                length: pick(OFFSETS, length),
                proc_id: 2,
                client_id: "fuzz".into(),
            }
            .into(),
            Req::Link {
                dfid,
                fid: f,
                name: n,
            } => Tlink {
                dfid: fid(dfid),
                fid: fid(f),
                name: name(n),
            }
            .into(),
            Req::Mkdir {
                dfid,
                name: n,
                mode,
            } => Tmkdir {
                dfid: fid(dfid),
                name: name(n),
                mode,
                gid: 0,
            }
            .into(),
            Req::Renameat {
                olddir,
                oldname,
                newdir,
                newname,
            } => Trenameat {
                olddirfid: fid(olddir),
                oldname: name(oldname),
                newdirfid: fid(newdir),
                newname: name(newname),
            }
            .into(),
            Req::Unlinkat {
                dir,
                name: n,
                flags,
            } => Tunlinkat {
                dirfid: fid(dir),
                name: name(n),
                flags,
            }
            .into(),
            Req::Sread {
                fid: f,
                offset,
                count,
                credit,
            } => Tsread {
                fid: fid(f),
                offset: pick(OFFSETS, offset),
                count: u64::from(pick(COUNTS, count)),
                credit: pick(COUNTS, credit),
            }
            .into(),
            Req::Swrite { fid: f, offset } => Tswrite {
                fid: fid(f),
                offset: pick(OFFSETS, offset),
            }
            .into(),
        }
    }
}

/// What the peer waits for on a tag.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// A request of this type: its reply, or an error.
    Plain(u8),
    /// An error only.
    Refused,
    /// Rflush; then nothing older on `oldtag`.
    Flush { oldtag: u16 },
    /// Rversion or an error; then nothing older on any tag.
    Version,
    /// Pieces of a read stream within `credit` bytes, ended by an empty
    /// one or an error.
    Read { credit: u64 },
    /// Rscredit, then Rswrite or an error.
    Write,
}

impl Expect {
    fn is_stream(self) -> bool {
        matches!(self, Expect::Read { .. } | Expect::Write)
    }
}

#[derive(Debug)]
struct Entry {
    seq: u64,
    expect: Expect,
}

/// What is outstanding on one tag.
#[derive(Debug, Default)]
struct Tag {
    /// In the order sent.
    entries: Vec<Entry>,
    /// Errors received for some of them.
    errors: usize,
}

impl Tag {
    /// How many of the entries an error may answer.
    fn can_fail(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| !matches!(e.expect, Expect::Flush { .. }))
            .count()
    }

    /// True while a request other than a stream, sent before `stream`
    /// (the first stream still open, if any), may wait for its reply.
    fn waiting(&self, stream: Option<u64>) -> bool {
        let plain = self
            .entries
            .iter()
            .filter(|e| !e.expect.is_stream() && stream.is_none_or(|s| e.seq < s))
            .count();
        plain > self.errors
    }
}

/// The peer's view of the session.
#[derive(Debug)]
struct Model {
    seq: u64,
    outstanding: HashMap<u16, Tag>,
    /// What the server decodes requests in and encodes replies in.
    protocol: Protocol,
    negotiated: bool,
    /// Largest frame the server reads (its framing keeps the last msize
    /// agreed) and largest reply it may send.
    frame_limit: u32,
    reply_limit: u32,
    /// The msize of the Tversion in flight.
    asked_msize: u32,
    closed: bool,
}

impl Model {
    fn new() -> Model {
        Model {
            seq: 0,
            outstanding: HashMap::new(),
            protocol: Dialect::Base.into(),
            negotiated: false,
            frame_limit: SERVER_MSIZE,
            reply_limit: SERVER_MSIZE,
            asked_msize: 0,
            closed: false,
        }
    }

    fn busy(&self, tag: u16) -> bool {
        self.outstanding
            .get(&tag)
            .is_some_and(|t| !t.entries.is_empty())
    }

    /// True while a request other than a stream waits for its reply. A
    /// request naming the fid of a stream still open runs once the stream
    /// ends (docs/streams.md), which may be never; requests sent after a
    /// stream opened may name its fid, so only those sent before any open
    /// stream must be answered.
    fn waiting(&self) -> bool {
        let stream = self
            .outstanding
            .values()
            .flat_map(|tag| &tag.entries)
            .filter(|e| e.expect.is_stream())
            .map(|e| e.seq)
            .min();
        self.outstanding.values().any(|tag| tag.waiting(stream))
    }

    /// What the server will make of `frame`, or None if the peer must not
    /// send it (a Tversion or a stream on a busy tag would make the model
    /// ambiguous).
    fn classify(&self, frame: &Bytes) -> Option<(u16, Option<Expect>)> {
        let tag = Header::decode(frame).ok()?.tag;
        let Ok(fcall) = Fcall::decode(frame.clone(), self.protocol) else {
            return Some((tag, Some(Expect::Refused)));
        };
        let expect = match &fcall.msg {
            // On a busy tag, its error could not be told from theirs.
            Msg::Tversion(_) if self.busy(tag) => return None,
            Msg::Tversion(_) => Expect::Version,
            _ if !self.negotiated || !fcall.msg.is_request() => Expect::Refused,
            Msg::Tflush(f) => Expect::Flush { oldtag: f.oldtag },
            Msg::Tscredit(_) | Msg::Tsdata(_) => return Some((tag, None)),
            Msg::Tsread(m) if !self.busy(tag) => Expect::Read {
                credit: u64::from(m.credit),
            },
            Msg::Tswrite(_) if !self.busy(tag) => Expect::Write,
            Msg::Tsread(_) | Msg::Tswrite(_) => return None,
            m => Expect::Plain(m.ty()),
        };
        Some((tag, Some(expect)))
    }

    /// Records a frame about to be sent.
    fn sent(&mut self, frame: &Bytes, tag: u16, expect: Option<Expect>) {
        self.seq += 1;
        match expect {
            Some(expect) => {
                if let Expect::Version = expect
                    && let Ok(fcall) = Fcall::decode(frame.clone(), self.protocol)
                    && let Msg::Tversion(v) = fcall.msg
                {
                    self.asked_msize = v.msize;
                }
                self.outstanding
                    .entry(tag)
                    .or_default()
                    .entries
                    .push(Entry {
                        seq: self.seq,
                        expect,
                    });
            }
            None => {
                if let Ok(Fcall {
                    msg: Msg::Tscredit(c),
                    ..
                }) = Fcall::decode(frame.clone(), self.protocol)
                    && let Some(read) = self.outstanding.get_mut(&tag).and_then(|t| {
                        t.entries
                            .iter_mut()
                            .find(|e| matches!(e.expect, Expect::Read { .. }))
                    })
                    && let Expect::Read { credit } = &mut read.expect
                {
                    *credit += u64::from(c.credit);
                }
            }
        }
    }

    /// Checks one reply against what is outstanding and updates the model.
    fn answer(&mut self, frame: Bytes) {
        assert!(
            frame.len() <= self.reply_limit as usize,
            "a reply of {} bytes exceeds msize {}",
            frame.len(),
            self.reply_limit
        );
        let fcall = match Fcall::decode(frame.clone(), self.protocol) {
            Ok(f) => f,
            Err(e) => panic!("undecodable reply in {}: {e}: {frame:02x?}", self.protocol),
        };
        assert!(
            !fcall.msg.is_request(),
            "the server sent a request: {fcall}"
        );
        if std::env::var_os("SESSION_TRACE").is_some() {
            eprintln!("<- {fcall}");
        }
        let tag = fcall.tag;
        let on_tag = self.outstanding.entry(tag).or_default();
        let is_error = matches!(fcall.msg, Msg::Rerror(_) | Msg::Rlerror(_));
        if is_error
            && let Some(at) = on_tag
                .entries
                .iter()
                .position(|e| e.expect == Expect::Version)
        {
            // Tversion goes only on a free tag: the error is its answer.
            let entry = on_tag.entries.remove(at);
            self.reset(entry.seq, &fcall.msg);
            return;
        }
        if is_error {
            // Which request an error answers is not known: requests run
            // concurrently, and the server refuses some as it reads them.
            // It answers one of those that can take an error.
            on_tag.errors += 1;
            assert!(
                on_tag.errors <= on_tag.can_fail(),
                "{fcall} answers nothing outstanding on its tag: {on_tag:?}"
            );
            return;
        }
        let ty = fcall.msg.ty();
        let at = on_tag.entries.iter().position(|e| match e.expect {
            Expect::Plain(t) => t + 1 == ty,
            Expect::Refused => false,
            Expect::Flush { .. } => ty == Rflush::TYPE,
            Expect::Version => ty == Rversion::TYPE,
            Expect::Read { .. } => ty == Rsread::TYPE,
            Expect::Write => ty == Rscredit::TYPE || ty == Rswrite::TYPE,
        });
        let Some(at) = at else {
            panic!("{fcall} answers nothing outstanding on its tag: {on_tag:?}");
        };
        let entry = &mut on_tag.entries[at];
        let done = match (&mut entry.expect, &fcall.msg) {
            (Expect::Read { credit }, Msg::Rsread(r)) => {
                let len = r.data.len() as u64;
                assert!(len <= *credit, "Rsread of {len} bytes past credit {credit}");
                *credit -= len;
                len == 0
            }
            (Expect::Write, Msg::Rscredit(_)) => false,
            _ => true,
        };
        if !done {
            return;
        }
        let entry = on_tag.entries.remove(at);
        assert!(
            on_tag.errors <= on_tag.can_fail(),
            "{fcall} answers a request that has had its error: {on_tag:?}"
        );
        match entry.expect {
            Expect::Flush { oldtag } => {
                // Rflush follows every reply to what was sent before it on
                // the old tag, and comes before any reply to what followed.
                let old = self.outstanding.entry(oldtag).or_default();
                old.entries.retain(|e| e.seq > entry.seq);
                old.errors = 0;
            }
            Expect::Version => self.reset(entry.seq, &fcall.msg),
            _ => {}
        }
    }

    /// The session was reset by the Tversion sent as `seq`, answered by
    /// `msg`: nothing sent before it is answered any more.
    fn reset(&mut self, seq: u64, msg: &Msg) {
        for on_tag in self.outstanding.values_mut() {
            on_tag.entries.retain(|e| e.seq > seq);
            on_tag.errors = 0;
        }
        self.version(msg);
    }

    /// A reply to Tversion: the session it settles.
    fn version(&mut self, msg: &Msg) {
        self.negotiated = false;
        self.protocol = Dialect::Base.into();
        let Msg::Rversion(v) = msg else { return };
        if v.version == "unknown" {
            return;
        }
        let protocol = Protocol::from_version(&v.version)
            .unwrap_or_else(|| panic!("Rversion with a version never asked: {v:?}"));
        assert!(
            v.msize <= self.asked_msize && v.msize <= SERVER_MSIZE,
            "Rversion msize {} above {} asked",
            v.msize,
            self.asked_msize
        );
        self.protocol = protocol;
        self.negotiated = true;
        self.frame_limit = v.msize;
        self.reply_limit = v.msize;
    }
}

/// The model and a bell rung on each change.
struct Shared {
    model: Mutex<Model>,
    changed: Notify,
}

impl Shared {
    /// Waits until `done` holds of the model; panics after PATIENCE.
    async fn until(&self, what: &str, done: impl Fn(&Model) -> bool) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if done(&self.model.lock()) {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(PATIENCE, wait).await.is_err() {
            panic!("{what}: no answer in {PATIENCE:?}: {:?}", self.model.lock());
        }
    }
}

async fn read_replies(reader: ReadHalf<DuplexStream>, shared: Arc<Shared>) {
    let mut frames = FramedRead::new(reader, FrameCodec::new(u32::MAX, Dialect::Base));
    while let Some(frame) = frames.next().await {
        let frame = frame.expect("the server's framing holds");
        shared.model.lock().answer(frame);
        shared.changed.notify_waiters();
    }
    shared.model.lock().closed = true;
    shared.changed.notify_waiters();
}

fn encode(tag: u16, msg: Msg, protocol: Protocol) -> Option<Bytes> {
    // A message the dialect lacks goes out in one that has it: the server
    // must refuse it as it decodes it.
    [
        protocol,
        Protocol {
            dialect: Dialect::L,
            streams: true,
            resume: true,
        },
        Protocol {
            dialect: Dialect::U,
            streams: true,
            resume: true,
        },
    ]
    .into_iter()
    .find_map(|p| Fcall::new(tag, msg.clone()).to_bytes(p).ok())
}

fn garbage(tag: u16, ty: u8, body: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u32_le((HEADER_LEN + body.len()) as u32);
    b.put_u8(ty);
    b.put_u16_le(tag);
    b.put_slice(body);
    b.freeze()
}

struct Peer {
    shared: Arc<Shared>,
    writer: WriteHalf<DuplexStream>,
}

impl Peer {
    /// Sends one frame if the model allows it; false once the server is gone.
    async fn send(&mut self, frame: Bytes) -> bool {
        let expect = {
            let mut model = self.shared.model.lock();
            if model.closed {
                return false;
            }
            if frame.len() > model.frame_limit as usize {
                return true;
            }
            let Some((tag, expect)) = model.classify(&frame) else {
                return true;
            };
            if std::env::var_os("SESSION_TRACE").is_some() {
                eprintln!("-> {} bytes tag {tag} {expect:?}", frame.len());
            }
            model.sent(&frame, tag, expect);
            expect
        };
        if self.writer.write_all(&frame).await.is_err() {
            return false;
        }
        if expect == Some(Expect::Version) {
            self.shared
                .until("Tversion", |m| {
                    m.closed
                        || !m
                            .outstanding
                            .values()
                            .flat_map(|t| &t.entries)
                            .any(|e| e.expect == Expect::Version)
                })
                .await;
        }
        true
    }

    fn protocol(&self) -> Protocol {
        self.shared.model.lock().protocol
    }

    async fn version(&mut self, tag: u16, version: u8, msize: u8) -> bool {
        let msg = Tversion {
            msize: pick(MSIZES, msize),
            version: pick(VERSIONS, version).into(),
        };
        let frame = encode(tag, msg.into(), self.protocol()).expect("Tversion encodes");
        self.send(frame).await
    }

    async fn step(&mut self, step: &Step) -> bool {
        let protocol = self.protocol();
        let frame = match step {
            Step::Request { tag, req } => encode(pick(TAGS, *tag), req.msg(), protocol),
            Step::Flush { tag, oldtag } => encode(
                pick(TAGS, *tag),
                Tflush {
                    oldtag: pick(TAGS, *oldtag),
                }
                .into(),
                protocol,
            ),
            Step::Credit { tag, credit } => encode(
                pick(TAGS, *tag),
                Tscredit {
                    credit: pick(COUNTS, *credit),
                }
                .into(),
                protocol,
            ),
            Step::Data { tag, len } => encode(
                pick(TAGS, *tag),
                Tsdata {
                    data: data(pick(COUNTS, *len).min(SERVER_MSIZE) as usize),
                }
                .into(),
                protocol,
            ),
            Step::Version {
                tag,
                version,
                msize,
            } => {
                return self.version(pick(TAGS, *tag), *version, *msize).await;
            }
            Step::Garbage { tag, ty, body } => Some(garbage(pick(TAGS, *tag), *ty, body)),
            Step::Sync => {
                self.shared
                    .until("sync", |m| m.closed || !m.waiting())
                    .await;
                return true;
            }
            Step::Oversize => {
                let limit = self.shared.model.lock().frame_limit;
                let _ = self.writer.write_all(&(limit + 1).to_le_bytes()).await;
                let _ = self.writer.write_all(&[Tclunk::TYPE, 0, 0]).await;
                self.shared.until("oversize frame", |m| m.closed).await;
                return false;
            }
        };
        match frame {
            Some(frame) => self.send(frame).await,
            None => true,
        }
    }
}

/// One backend's server, and what to check once the session is over.
struct Scene {
    dir: PathBuf,
    upstream: Option<ninep_server::Spawned>,
}

const SECRET: &[u8] = b"SECRET";

/// A scene leaves nothing in /tmp once the run is over.
impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Scene {
    fn new(backend: Backend) -> Scene {
        static BASE: OnceLock<PathBuf> = OnceLock::new();
        let dir = BASE
            .get_or_init(|| {
                std::env::temp_dir().join(format!("ninep-fuzz-session-{}", std::process::id()))
            })
            .clone();
        if matches!(backend, Backend::Export | Backend::Mux) {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("export/sub")).expect("scratch directory");
            std::fs::create_dir_all(dir.join("outside")).expect("scratch directory");
            std::fs::write(dir.join("outside/secret"), SECRET).expect("scratch file");
            std::fs::write(dir.join("export/a"), "inside").expect("scratch file");
        }
        Scene {
            dir,
            upstream: None,
        }
    }

    /// The directory beside the export is as it was.
    fn check_outside(&self) {
        let outside = self.dir.join("outside");
        let names: Vec<_> = std::fs::read_dir(&outside)
            .expect("outside is still there")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(names, ["secret"], "something was made outside the export");
        assert_eq!(
            std::fs::read(outside.join("secret")).expect("secret"),
            SECRET
        );
    }
}

/// A ramfs whose files stay small: the fuzzer runs under a memory limit,
/// and writes far out are what it tries first.
fn ramfs() -> RamFs {
    RamFs::with_limits(ninep_ramfs::Limits {
        max_file_size: 1 << 20,
        ..ninep_ramfs::Limits::default()
    })
}

fn limits() -> Limits {
    Limits {
        msize: SERVER_MSIZE,
        fids: 6,
        requests: 12,
        connections: 4,
        // Sessions run over an in-memory pipe, which nothing is spliced into.
        spliced_reads: 2,
    }
}

fn stream_limits() -> StreamLimits {
    StreamLimits {
        streams: 2,
        read_window: 64 * 1024,
        write_window: 16 * 1024,
    }
}

fn spawn<F: Filesystem>(fs: F, link: DuplexStream) -> tokio::task::JoinHandle<()> {
    let server = Server::with_stream_limits(fs, limits(), stream_limits());
    tokio::spawn(async move {
        server
            .serve_stream(Box::new(link), std::future::pending())
            .await
    })
}

async fn mux_over_ramfs(scene: &mut Scene) -> Mux {
    let addr = Addr::Unix(scene.dir.join("ramfs.sock"));
    let listener = addr.listen().await.expect("listen on a scratch socket");
    let server = Server::with_stream_limits(ramfs(), limits(), stream_limits());
    scene.upstream = Some(server.spawn(listener));
    let mux = Mux::new(Config::default());
    let ns = nsfile::parse(&format!("mount -c {addr} /")).expect("a namespace line");
    mux.apply(ns).await.expect("the mux mounts the ramfs");
    mux
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

async fn run(case: Case) {
    let mut scene = Scene::new(case.backend);
    let fds = open_fds();
    let (ours, theirs) = tokio::io::duplex(16 * 1024);
    let server = match case.backend {
        Backend::Ramfs => spawn(ramfs(), theirs),
        Backend::Export => {
            let export = Export::new(scene.dir.join("export"), ExportOptions::default())
                .expect("export the scratch directory");
            spawn(export, theirs)
        }
        Backend::Mux => spawn(mux_over_ramfs(&mut scene).await, theirs),
    };
    let (reader, writer) = tokio::io::split(ours);
    let shared = Arc::new(Shared {
        model: Mutex::new(Model::new()),
        changed: Notify::new(),
    });
    let replies = tokio::spawn(read_replies(reader, shared.clone()));
    let mut peer = Peer { shared, writer };

    let mut live = peer.version(0xffff, case.version, case.msize).await;
    for step in case.steps.iter().take(MAX_STEPS) {
        if !live {
            break;
        }
        live = peer.step(step).await;
    }
    peer.step(&Step::Sync).await;
    // The pipe stays open while our reading half lives: say goodbye.
    let _ = peer.writer.shutdown().await;
    let ended = async {
        replies.await.expect("the replies are all good");
        server.await.expect("the session ends cleanly");
    };
    tokio::time::timeout(PATIENCE, ended)
        .await
        .expect("the server ends when its peer hangs up");
    if let Some(upstream) = scene.upstream.take() {
        upstream.stop().await;
    }
    if matches!(case.backend, Backend::Export) {
        scene.check_outside();
    }
    // Tasks of the session close what they hold as they notice its end
    // (and those of an earlier case may close theirs meanwhile).
    let settled = async {
        while open_fds() > fds {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(2), settled)
        .await
        .is_err()
    {
        panic!(
            "{} file descriptors open after the session, {fds} before",
            open_fds()
        );
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // As the main of every Rust program does (libFuzzer's main is not
        // Rust's): a write to a socket whose peer has gone (the mux's unix
        // socket to its upstream) fails with EPIPE rather than killing the
        // process.
        // SAFETY: sets a signal's disposition to ignore, before any thread
        // of the runtime exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|case: Case| {
    runtime().block_on(run(case));
});
