//! Surviving a lost connection (docs/resume.md): what the client remembers
//! of each fid to make it again on a new connection, which requests may be
//! sent again without running twice, and the remaking of the fids.
//!
//! A fid is remembered by how it was reached: the attach it descends from,
//! the names walked from there, and how it was opened. On a new connection
//! each is attached, walked and opened again under its own number, so the
//! handles above ([`crate::Fid`], [`crate::File`]) never notice; a file that
//! is gone, or is another file now (a different qid.path), is not remade and
//! its fid fails from then on with [`Error::Lost`].
//!
//! What becomes of the connection's requests meanwhile, from the loss until
//! they flow again, is in `conn/reconnect.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ninep_transport::{Frame, FrameCodec, FrameReader, Stream, Writer};
use ninep_wire::consts::dotl::{O_APPEND, O_CREAT, O_EXCL, O_TRUNC};
use ninep_wire::consts::open::OTRUNC;
use ninep_wire::*;
use tokio::io::{AsyncRead, ReadHalf};

use crate::conn::Options;
use crate::error::Error;
use crate::reply::remote_error;
use crate::version::negotiate;

/// How a client recovers from a lost connection: see
/// [`crate::Client::dial_recovering`].
#[derive(Debug, Clone)]
pub struct Recovery {
    /// How long after the loss to keep trying before every request fails.
    pub deadline: Duration,
    /// The first wait between attempts to dial again; it doubles with each
    /// failed attempt, up to `max_backoff`.
    pub backoff: Duration,
    /// The longest wait between attempts: a server that comes back is
    /// found within this.
    pub max_backoff: Duration,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            deadline: Duration::from_secs(60),
            backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(500),
        }
    }
}

/// An attach, as the fids below it were reached from.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Attach {
    uname: String,
    aname: String,
    n_uname: u32,
}

/// How a fid was opened: Tlopen's flags or Topen's mode.
#[derive(Debug, Clone, Copy)]
enum Opened {
    Flags(u32),
    Mode(u8),
}

impl Opened {
    /// The same open, minus what must happen only once (truncation,
    /// creation).
    fn again(self) -> Opened {
        match self {
            Opened::Flags(flags) => Opened::Flags(flags & !(O_TRUNC | O_CREAT | O_EXCL)),
            Opened::Mode(mode) => Opened::Mode(mode & !OTRUNC),
        }
    }

    fn truncates(self) -> bool {
        match self {
            Opened::Flags(flags) => flags & O_TRUNC != 0,
            Opened::Mode(mode) => mode & OTRUNC != 0,
        }
    }

    fn request(self, fid: Fid) -> Msg {
        match self {
            Opened::Flags(flags) => Tlopen { fid, flags }.into(),
            Opened::Mode(mode) => Topen { fid, mode }.into(),
        }
    }
}

/// How one fid was made: enough to make it again.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    attach: Arc<Attach>,
    path: Vec<Name>,
    qid: Qid,
    opened: Option<Opened>,
    /// The client vouched that its writes at offsets of this file may be
    /// repeated, though the server gives the file no qid.version.
    vouched: bool,
}

impl Origin {
    fn below(&self, names: &[Name], qid: Qid) -> Origin {
        let mut path = self.path.clone();
        path.extend_from_slice(names);
        Origin {
            attach: self.attach.clone(),
            path,
            qid,
            opened: None,
            vouched: false,
        }
    }

    fn path_string(&self) -> String {
        let names: Vec<&str> = self.path.iter().map(|n| n.as_str()).collect();
        format!("/{}", names.join("/"))
    }

    /// Why a Twrite on this fid may not be sent again, if it may not: its
    /// effect depends on whether it ran before (an append), or the file's
    /// offsets mean nothing stable (a synthetic file, qid.version 0).
    fn unrepeatable_write(&self) -> Option<&'static str> {
        let appends = matches!(self.opened, Some(Opened::Flags(f)) if f & O_APPEND != 0)
            || self.qid.ty.contains(QidType::APPEND);
        if appends {
            Some("a write in append mode")
        } else if self.qid.ty != QidType::FILE || (self.qid.version == 0 && !self.vouched) {
            Some("a write to a file that is not a plain versioned file")
        } else {
            None
        }
    }
}

/// What the client knows of a fid it made.
#[derive(Debug, Clone)]
enum Known {
    Made(Origin),
    /// Usable on this connection only, for this reason.
    Here(String),
    /// Not remade on a new connection, for this reason.
    Lost(String),
}

/// Fids to make again, grouped by the attach they descend from.
pub(crate) type ToRemake = Vec<(Arc<Attach>, Vec<(u32, Origin)>)>;

/// Every fid the client made and has not clunked, and how to make it again.
#[derive(Debug, Default)]
pub(crate) struct Fids {
    known: HashMap<u32, Known>,
}

/// The fid a request acts on, if it names one.
fn fid_of(msg: &Msg) -> Option<Fid> {
    Some(match msg {
        Msg::Twalk(m) => m.fid,
        Msg::Topen(m) => m.fid,
        Msg::Tlopen(m) => m.fid,
        Msg::Tcreate(m) => m.fid,
        Msg::Tlcreate(m) => m.fid,
        Msg::Tread(m) => m.fid,
        Msg::Twrite(m) => m.fid,
        Msg::Tclunk(m) => m.fid,
        Msg::Tremove(m) => m.fid,
        Msg::Tstat(m) => m.fid,
        Msg::Twstat(m) => m.fid,
        Msg::Tgetattr(m) => m.fid,
        Msg::Tsetattr(m) => m.fid,
        Msg::Treaddir(m) => m.fid,
        Msg::Tfsync(m) => m.fid,
        Msg::Tstatfs(m) => m.fid,
        Msg::Treadlink(m) => m.fid,
        Msg::Tlock(m) => m.fid,
        Msg::Tgetlock(m) => m.fid,
        Msg::Txattrwalk(m) => m.fid,
        Msg::Txattrcreate(m) => m.fid,
        Msg::Tmkdir(m) => m.dfid,
        Msg::Tsymlink(m) => m.fid,
        Msg::Tmknod(m) => m.dfid,
        Msg::Trename(m) => m.fid,
        Msg::Trenameat(m) => m.olddirfid,
        Msg::Tunlinkat(m) => m.dirfid,
        Msg::Tlink(m) => m.dfid,
        Msg::Tsread(m) => m.fid,
        Msg::Tswrite(m) => m.fid,
        _ => return None,
    })
}

impl Fids {
    /// Checks `msg` before it is sent: a request on a lost fid fails here.
    /// A fid clunked or removed is forgotten now, so that a connection
    /// made meanwhile does not make it again.
    pub(crate) fn sending(&mut self, msg: &Msg) -> Result<(), Error> {
        let lost = self.lost(msg);
        if let Msg::Tclunk(Tclunk { fid }) | Msg::Tremove(Tremove { fid }) = msg {
            self.known.remove(&fid.0);
        }
        lost.map_or(Ok(()), |why| Err(Error::Lost(why)))
    }

    /// Why the fid `msg` acts on was lost, if it was.
    pub(crate) fn lost(&self, msg: &Msg) -> Option<String> {
        match self.known.get(&fid_of(msg)?.0) {
            Some(Known::Lost(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// Learns from a successful `reply` to `request` how a fid was made.
    pub(crate) fn answered(&mut self, request: &Msg, reply: &Msg) {
        match (request, reply) {
            (Msg::Tattach(t), Msg::Rattach(r)) => {
                let known = if t.afid != Fid::NOFID {
                    Known::Here(
                        "attached with authentication, which a new connection cannot repeat".into(),
                    )
                } else {
                    Known::Made(Origin {
                        attach: Arc::new(Attach {
                            uname: t.uname.clone(),
                            aname: t.aname.clone(),
                            n_uname: t.n_uname,
                        }),
                        path: Vec::new(),
                        qid: r.qid,
                        opened: None,
                        vouched: false,
                    })
                };
                self.known.insert(t.fid.0, known);
            }
            (Msg::Twalk(t), Msg::Rwalk(r)) if r.wqid.len() == t.wname.len() => {
                let known = match self.known.get(&t.fid.0) {
                    Some(Known::Made(from)) => {
                        let qid = r.wqid.last().copied().unwrap_or(from.qid);
                        Known::Made(from.below(&t.wname, qid))
                    }
                    Some(lost) => lost.clone(),
                    None => return,
                };
                self.known.insert(t.newfid.0, known);
            }
            (Msg::Tlopen(t), Msg::Rlopen(r)) => self.opened(t.fid, r.qid, Opened::Flags(t.flags)),
            (Msg::Topen(t), Msg::Ropen(r)) => self.opened(t.fid, r.qid, Opened::Mode(t.mode)),
            (Msg::Tlcreate(t), Msg::Rlcreate(r)) => {
                self.created(t.fid, &t.name, r.qid, Opened::Flags(t.flags))
            }
            (Msg::Tcreate(t), Msg::Rcreate(r)) => {
                self.created(t.fid, &t.name, r.qid, Opened::Mode(t.mode))
            }
            (Msg::Tauth(t), _) => self.not_remade(t.afid, "an authentication fid"),
            (Msg::Txattrwalk(t), _) => self.not_remade(t.newfid, "an extended attribute fid"),
            (Msg::Txattrcreate(t), _) => self.not_remade(t.fid, "an extended attribute fid"),
            (Msg::Trename(t), _) => {
                if let Some(Known::Made(dir)) = self.known.get(&t.dfid.0).cloned()
                    && let Some(Known::Made(file)) = self.known.get_mut(&t.fid.0)
                {
                    *file = Origin {
                        opened: file.opened,
                        vouched: file.vouched,
                        ..dir.below(std::slice::from_ref(&t.name), file.qid)
                    };
                }
            }
            (Msg::Trenameat(t), _) => self.renamed(t),
            // Sent behind the walk that made the fid, the clunk went out
            // before the walk's answer made it known.
            (Msg::Tclunk(t), Msg::Rclunk(_)) => {
                self.known.remove(&t.fid.0);
            }
            _ => {}
        }
    }

    fn opened(&mut self, fid: Fid, qid: Qid, opened: Opened) {
        if let Some(Known::Made(origin)) = self.known.get_mut(&fid.0) {
            origin.qid = qid;
            origin.opened = Some(opened.again());
        }
    }

    fn created(&mut self, fid: Fid, name: &Name, qid: Qid, opened: Opened) {
        if let Some(Known::Made(origin)) = self.known.get_mut(&fid.0) {
            origin.path.push(name.clone());
            origin.qid = qid;
            origin.opened = Some(opened.again());
        }
    }

    fn not_remade(&mut self, fid: Fid, what: &str) {
        let why = format!("{what} cannot be made again on a new connection");
        self.known.insert(fid.0, Known::Here(why));
    }

    /// Fids at or below the renamed file follow it to its new name.
    fn renamed(&mut self, t: &Trenameat) {
        let (Some(Known::Made(old)), Some(Known::Made(new))) = (
            self.known.get(&t.olddirfid.0).cloned(),
            self.known.get(&t.newdirfid.0).cloned(),
        ) else {
            return;
        };
        let from = old.below(std::slice::from_ref(&t.oldname), old.qid).path;
        let to = new.below(std::slice::from_ref(&t.newname), new.qid).path;
        for known in self.known.values_mut() {
            if let Known::Made(origin) = known
                && origin.attach == old.attach
                && origin.path.starts_with(&from)
            {
                let rest = origin.path.split_off(from.len());
                origin.path = to.iter().cloned().chain(rest).collect();
            }
        }
    }

    /// Why `msg`, sent on a connection that was then lost, may not be sent
    /// again on the next: it may have run, and running twice would differ
    /// from running once. `None` if it may.
    pub(crate) fn unrepeatable(&self, msg: &Msg) -> Option<String> {
        let origin = fid_of(msg).and_then(|fid| match self.known.get(&fid.0) {
            Some(Known::Made(origin)) => Some(origin),
            _ => None,
        });
        let why = match msg {
            Msg::Tattach(_)
            | Msg::Twalk(_)
            | Msg::Tstat(_)
            | Msg::Tgetattr(_)
            | Msg::Tread(_)
            | Msg::Treaddir(_)
            | Msg::Treadlink(_)
            | Msg::Tstatfs(_)
            | Msg::Tfsync(_)
            | Msg::Tgetlock(_)
            | Msg::Tsetattr(_) => return None,
            Msg::Tlopen(Tlopen { flags, .. }) if !Opened::Flags(*flags).truncates() => return None,
            Msg::Topen(Topen { mode, .. }) if !Opened::Mode(*mode).truncates() => return None,
            Msg::Twrite(_) => match origin.map(Origin::unrepeatable_write) {
                Some(None) => return None,
                Some(Some(why)) => why,
                None => "a write to a fid that cannot be made again",
            },
            _ => "it changes the file tree",
        };
        Some(format!(
            "{} was cut off with the connection and is not sent again ({why}): it may or may not have taken effect",
            msg.name()
        ))
    }

    /// Every fid to make again, grouped by the attach it descends from.
    pub(crate) fn to_remake(&self) -> ToRemake {
        let mut groups: HashMap<Arc<Attach>, Vec<(u32, Origin)>> = HashMap::new();
        for (&fid, known) in &self.known {
            if let Known::Made(origin) = known {
                let group = groups.entry(origin.attach.clone()).or_default();
                group.push((fid, origin.clone()));
            }
        }
        groups.into_iter().collect()
    }

    /// Takes the caller's word that writes at offsets of `fid`'s file may be
    /// repeated (see [`crate::File::vouch_writes_repeatable`]).
    pub(crate) fn vouch(&mut self, fid: Fid) {
        if let Some(Known::Made(origin)) = self.known.get_mut(&fid.0) {
            origin.vouched = true;
        }
    }

    /// Whether `fid` is one the client made and has not clunked.
    pub(crate) fn knows(&self, fid: u32) -> bool {
        self.known.contains_key(&fid)
    }

    /// The connection is gone, and with it the fids that live on it alone.
    pub(crate) fn connection_lost(&mut self) {
        for known in self.known.values_mut() {
            if let Known::Here(why) = known {
                *known = Known::Lost(std::mem::take(why));
            }
        }
    }

    /// Marks `fid` lost, unless it was clunked meanwhile.
    pub(crate) fn lose(&mut self, fid: u32, why: String) {
        if let Some(known) = self.known.get_mut(&fid) {
            *known = Known::Lost(why);
        }
    }
}

/// The end of a new connection, before it carries the client's requests.
pub(crate) struct Fresh<R> {
    pub writer: Writer,
    pub frames: FrameReader<R>,
    pub protocol: Protocol,
}

impl Fresh<ReadHalf<Box<dyn Stream>>> {
    /// A new connection over `stream`, its version negotiated as `options`
    /// say (the resume extension asked for too if `resume`); with the msize
    /// agreed.
    pub(crate) async fn start(
        stream: Box<dyn Stream>,
        options: &Options,
        resume: bool,
    ) -> Result<(Self, u32), Error> {
        let (reader, writer) = tokio::io::split(stream);
        // No limit: the requests are the client's own, bounded by its tags.
        let (writer, _) = Writer::spawn(writer, usize::MAX);
        let mut frames = FrameReader::new(reader, FrameCodec::new(options.msize, Dialect::Base));
        let (protocol, msize) = negotiate(&writer, &mut frames, options, resume).await?;
        frames.codec_mut().set_msize(msize);
        let fresh = Fresh {
            writer,
            frames,
            protocol,
        };
        Ok((fresh, msize))
    }
}

impl<R: AsyncRead + Unpin> Fresh<R> {
    /// One request and its reply, alone on the connection. The outer error
    /// is the connection's; the inner one the server's answer.
    async fn rpc(&mut self, msg: impl Into<Msg>) -> Result<Result<Msg, Error>, Error> {
        let mut head = bytes::BytesMut::new();
        let fcall = Fcall::new(0, msg);
        let payload = fcall
            .encode_head(self.protocol, &mut head)
            .map_err(|e| Error::protocol(e.to_string()))?;
        self.writer.send(Frame {
            head: head.freeze(),
            payload: payload.into(),
        });
        Ok(remote_error(self.next().await?.msg))
    }

    /// The next message from the server.
    async fn next(&mut self) -> Result<Fcall, Error> {
        let frame = match self.frames.next().await {
            Some(frame) => frame.map_err(|e| Error::protocol(e.to_string()))?,
            None => return Err(Error::Closed),
        };
        Fcall::decode(frame, self.protocol).map_err(|e| Error::protocol(e.to_string()))
    }

    /// Tsession: the token that lets a later connection take this session
    /// over (the resume extension).
    pub(crate) async fn session(&mut self) -> Result<Token, Error> {
        match self.rpc(Tsession {}).await?? {
            Msg::Rsession(r) => Ok(r.token),
            other => Err(Error::protocol(format!(
                "{} in reply to Tsession",
                other.name()
            ))),
        }
    }

    /// Tresume: takes the session of `token` over. Returns how many
    /// requests the server had received, the replies it held and the token
    /// for the next take-over; the inner error is the server's refusal.
    pub(crate) async fn resume(
        &mut self,
        token: Token,
    ) -> Result<Result<(u64, Vec<Fcall>, Token), Error>, Error> {
        let r = match self.rpc(Tresume { token }).await? {
            Ok(Msg::Rresume(r)) => r,
            Ok(other) => {
                let what = format!("{} in reply to Tresume", other.name());
                return Err(Error::protocol(what));
            }
            Err(refused) => return Ok(Err(refused)),
        };
        let mut held = Vec::new();
        for _ in 0..r.held {
            held.push(self.next().await?);
        }
        Ok(Ok((r.received, held, r.token)))
    }

    /// Makes every fid of `groups` again under its own number: attached,
    /// walked and opened as before. Returns the fids made and those that
    /// could not be, with why; fails only if the connection does.
    pub(crate) async fn remake(
        &mut self,
        groups: ToRemake,
        spare: Fid,
    ) -> Result<(Vec<u32>, Vec<(u32, String)>), Error> {
        let (mut made, mut lost) = (Vec::new(), Vec::new());
        for (attach, fids) in groups {
            let root = Tattach {
                fid: spare,
                afid: Fid::NOFID,
                uname: attach.uname.clone(),
                aname: attach.aname.clone(),
                n_uname: attach.n_uname,
            };
            if let Err(e) = self.rpc(root).await? {
                let why = format!("attaching again to {:?} failed: {e}", attach.aname);
                lost.extend(fids.into_iter().map(|(fid, _)| (fid, why.clone())));
                continue;
            }
            for (fid, origin) in fids {
                match self.remake_one(spare, Fid(fid), &origin).await? {
                    Ok(()) => made.push(fid),
                    Err(why) => lost.push((fid, why)),
                }
            }
            self.rpc(Tclunk { fid: spare }).await?.ok();
        }
        Ok((made, lost))
    }

    /// Walks from `root` to `origin` as `fid`, and opens it if it was.
    async fn remake_one(
        &mut self,
        root: Fid,
        fid: Fid,
        origin: &Origin,
    ) -> Result<Result<(), String>, Error> {
        let path = origin.path_string();
        let mut from = root;
        let mut qid = None;
        let mut chunks: Vec<&[Name]> = origin.path.chunks(MAXWELEM).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let walk = Twalk {
                fid: from,
                newfid: fid,
                wname: chunk.to_vec(),
            };
            let wqid = match self.rpc(walk).await? {
                Ok(Msg::Rwalk(r)) if r.wqid.len() == chunk.len() => r.wqid,
                Ok(_) => {
                    return self
                        .fail(from, fid, root, format!("{path} no longer exists"))
                        .await;
                }
                Err(e) => return self.fail(from, fid, root, format!("{path}: {e}")).await,
            };
            qid = wqid.last().copied().or(qid);
            from = fid;
        }
        if let Some(qid) = qid
            && qid.path != origin.qid.path
        {
            let why = format!(
                "{path} is another file now (qid.path {:#x}, was {:#x})",
                qid.path, origin.qid.path
            );
            return self.fail(fid, fid, root, why).await;
        }
        if let Some(opened) = origin.opened
            && let Err(e) = self.rpc(opened.request(fid)).await?
        {
            return self
                .fail(fid, fid, root, format!("opening {path} again failed: {e}"))
                .await;
        }
        Ok(Ok(()))
    }

    /// Gives up on making `fid` again, clunking it if a walk made it.
    async fn fail(
        &mut self,
        at: Fid,
        fid: Fid,
        root: Fid,
        why: String,
    ) -> Result<Result<(), String>, Error> {
        if at != root {
            self.rpc(Tclunk { fid }).await?.ok();
        }
        Ok(Err(why))
    }
}
