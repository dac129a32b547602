//! One connection: reading requests, running them concurrently, and writing
//! replies as they finish.
//!
//! The reader owns the protocol's ordering rules (version, tags, the fid
//! table, flush); each request then runs as its own task, so a slow request
//! never holds up the others. A reply leaves through the in-flight table: a
//! request removes its own entry as it queues its reply, and Tflush removes
//! the entry of the request it flushes and queues Rflush under the same lock,
//! so no reply to a flushed tag can follow its Rflush.
//!
//! A session with a resume token (the resume extension, [`resume`])
//! outlives its connection: when the connection is lost it is detached
//! rather than reset, and a new connection may take it over.
//!
//! Memory held for a peer is bounded even if it never reads: at most
//! `Limits::requests` requests run at once, and at most as many replies wait
//! for the socket. Past that, a finished request waits for room before it
//! queues its reply, and the reader waits before it answers anything
//! itself, so it stops reading the peer's requests. Nothing of this is
//! shared between connections: a peer that stalls stalls only itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use ninep_transport::{
    Frame, FrameCodec, FrameReader, Payload, Peer, PipedFile, Room, Stream, Writer,
};
use ninep_wire::*;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::AuthFid;
use crate::clunk::{self, Ending};
use crate::dispatch::{Answer, Handler, Reply, Resolved};
use crate::error::Error;
use crate::fids::{Entry, Fids, Pending, Refusal};
use crate::fs::{Filesystem, PipeLeave, User};
use crate::server::Shared;
use crate::stream::{self, StreamIo};

pub(crate) mod resume;

use resume::{Kept, detach, keep, take_over};

/// The smallest msize accepted: room for a header and a useful payload.
pub const MIN_MSIZE: u32 = 256;

/// What Tversion settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Session {
    pub dialect: Dialect,
    pub msize: u32,
    /// The stream extension (docs/streams.md) was agreed.
    pub stream_extension: bool,
    /// The resume extension (docs/resume.md) was agreed.
    pub resume_extension: bool,
}

impl Session {
    fn protocol(self) -> Protocol {
        Protocol {
            dialect: self.dialect,
            streams: self.stream_extension,
            resume: self.resume_extension,
        }
    }
}

struct Inflight {
    id: u64,
    abort: Option<AbortHandle>,
    /// How Tscredit and Tsdata reach the request, if it is a stream.
    stream_io: Option<StreamIo>,
}

/// The state of one session shared with its request tasks: of one
/// connection, or of several one after the other if it is taken over.
pub(crate) struct Conn<F: Filesystem> {
    pub shared: Arc<Shared<F>>,
    /// Who is at the other end, as the transport tells (of the first
    /// connection, if the session was taken over).
    pub peer: Peer,
    pub fids: Fids<F::File>,
    /// Numbers the qids of authentication fids.
    next_afid: AtomicU64,
    live: Mutex<Live>,
    /// Woken when the session is detached from its connection.
    detached: Notify,
    next_id: AtomicU64,
    /// The reader holds bytes of requests read but not yet handled.
    more: AtomicBool,
    /// The requests running as tasks, and the ends of fids (see
    /// [`clunk`]): a reset waits for them all.
    pub tasks: TaskTracker,
    /// This session's share of the server's spliced reads.
    spliced_reads: Arc<Semaphore>,
}

/// What the reader and the request tasks of a session change under one
/// lock: so a reply is held (for a take-over) in the same step as it is
/// sent, and goes to the connection the session has at that moment.
struct Live {
    inflight: HashMap<u16, Inflight>,
    /// The writer of the session's connection; while it has none, one that
    /// drops what it is given.
    replies: Arc<Writer>,
    /// What a take-over needs, once Tsession gave the session a token.
    kept: Option<Kept>,
}

impl Live {
    /// Sends `frame`, the reply on `tag`, at once if it is `alone`, else
    /// queues it; a session with a token holds it too. One on a
    /// connection that holds more than `limit` replies (a client that uses
    /// that many tags) gives up its token rather than hold more; a detached
    /// one holds at most the replies of the requests it had in flight
    /// besides.
    fn post(&mut self, room: Room<'_>, tag: u16, frame: Frame, alone: bool, limit: usize) {
        let mut frame = frame;
        if let Some(kept) = self.kept.as_mut() {
            // A read spliced before Tsession asked to keep replies: what is
            // kept must be sent again, so it goes from memory.
            match frame.unpiped() {
                Ok(whole) => {
                    frame = whole;
                    kept.held.insert(tag, frame.clone());
                }
                // Reading the pipe emptied it: the frame fails the
                // connection, and a session without its reply cannot resume.
                Err(e) if kept.hangup.is_some() => {
                    tracing::warn!("a spliced read could not be kept: {e}");
                    self.kept = None;
                }
                Err(e) => tracing::warn!("a spliced read could not be kept: {e}"),
            }
            if let Some(kept) = self.kept.as_ref()
                && kept.held.len() > limit
                && kept.hangup.is_some()
            {
                tracing::warn!("a session holds replies on {limit} tags: it can no longer resume");
                self.kept = None;
            }
        }
        if alone {
            room.send(frame);
        } else {
            room.queue(frame);
        }
    }
}

/// The connection a session is served on, as a take-over needs it.
struct Link {
    writer: Arc<Writer>,
    /// Cuts the connection (when another takes its session over).
    hangup: CancellationToken,
}

impl<F: Filesystem> Conn<F> {
    /// Waits for room in the reply queue of the session's connection, then
    /// runs `put` with the room and the locked state; if the session moved
    /// to another connection meanwhile, it waits for room there instead.
    async fn with_room<T>(&self, put: impl FnOnce(&mut Live, Room<'_>) -> T) -> T {
        loop {
            let writer = self.live.lock().replies.clone();
            let room = writer.room().await;
            let mut live = self.live.lock();
            if Arc::ptr_eq(&live.replies, &writer) {
                return put(&mut live, room);
            }
        }
    }

    /// Sends a reply the reader makes itself, once there is room for it.
    async fn send(&self, session: Session, tag: u16, msg: Msg) {
        let limit = self.shared.limits.requests;
        self.with_room(|live, room| {
            let alone = self.alone(&live.inflight);
            live.post(
                room,
                tag,
                encode_reply(Fcall { tag, msg }, session),
                alone,
                limit,
            );
        })
        .await
    }

    /// True if no other reply is on its way to share a write with one
    /// sent now: no request is in flight and none is waiting to be read.
    /// Such a reply is written at once; others are queued and go out
    /// together.
    fn alone(&self, inflight: &HashMap<u16, Inflight>) -> bool {
        inflight.is_empty() && !self.more.load(Ordering::Relaxed)
    }

    /// Queues one of several replies of stream `id` (a piece, a credit;
    /// piped data goes as an Rsread) unless it was flushed; false if it was.
    pub(crate) async fn send_piece(
        &self,
        session: Session,
        tag: u16,
        id: u64,
        piece: Reply,
    ) -> bool {
        self.with_room(|live, room| {
            let going = live.inflight.get(&tag).is_some_and(|e| e.id == id);
            if going {
                // More pieces follow: no hurry.
                room.queue(match piece {
                    Reply::Msg(msg) => encode_reply(Fcall { tag, msg }, session),
                    Reply::Piped(data) => piped(Rsread::head(tag, data.len() as u32), data),
                });
            }
            going
        })
        .await
    }

    /// Queues the reply of request `id` unless it was flushed. The room is
    /// taken first, so that a flush cannot come between the check and the
    /// send.
    async fn finish(&self, session: Session, tag: u16, id: u64, reply: Reply) {
        let limit = self.shared.limits.requests;
        self.with_room(|live, room| {
            if live.inflight.get(&tag).is_some_and(|e| e.id == id) {
                live.inflight.remove(&tag);
                let alone = self.alone(&live.inflight);
                let frame = match reply {
                    Reply::Msg(msg) => encode_reply(Fcall { tag, msg }, session),
                    Reply::Piped(data) => piped(Rread::head(tag, data.len() as u32), data),
                };
                live.post(room, tag, frame, alone, limit);
            }
        })
        .await
    }

    /// Leave to answer a read with data spliced from a pipe, while the
    /// connection is a plain socket and the reply will not be kept for a
    /// resume to send again (the pipe would be read into memory for it);
    /// the pipe itself is taken within the session's and the server's share
    /// (see [`PipeLeave`]).
    pub(crate) fn pipe_leave(&self, answer: Answer) -> Option<PipeLeave> {
        let live = self.live.lock();
        let kept = answer == Answer::Read && live.kept.is_some();
        if kept || !live.replies.splices() {
            return None;
        }
        Some(PipeLeave::new(
            self.spliced_reads.clone(),
            self.shared.spliced_reads.clone(),
        ))
    }
}

/// The error reply for `err` in `dialect`.
pub(crate) fn error_reply(err: &Error, dialect: Dialect) -> Msg {
    match dialect {
        Dialect::L => Rlerror {
            ecode: err.errno().0,
        }
        .into(),
        Dialect::U => Rerror {
            ename: err.ename().to_owned(),
            errno: err.errno().0,
        }
        .into(),
        Dialect::Base => Rerror {
            ename: err.ename().to_owned(),
            errno: 0,
        }
        .into(),
    }
}

/// Serves one connection from `peer`, over `link` (a socket, a pipe),
/// until the peer hangs up, framing is lost, or `shutdown` is cancelled.
pub(crate) async fn serve<F: Filesystem>(
    shared: Arc<Shared<F>>,
    link: Box<dyn Stream>,
    peer: Peer,
    shutdown: CancellationToken,
) {
    let socket = link.splice_target();
    let (reader, writer) = tokio::io::split(link);
    let (replies, flusher) = Writer::spawn_on_socket(writer, socket, shared.limits.requests);
    let link = Link {
        writer: Arc::new(replies),
        hangup: CancellationToken::new(),
    };
    let limits = shared.limits.clone();
    let mut conn = Arc::new(Conn {
        fids: Fids::new(shared.limits.fids),
        next_afid: AtomicU64::new(0),
        peer,
        shared,
        live: Mutex::new(Live {
            inflight: HashMap::new(),
            replies: link.writer.clone(),
            kept: None,
        }),
        detached: Notify::new(),
        next_id: AtomicU64::new(0),
        more: AtomicBool::new(false),
        tasks: TaskTracker::new(),
        spliced_reads: Arc::new(Semaphore::new(
            limits.spliced_reads.div_ceil(4).min(Semaphore::MAX_PERMITS),
        )),
    });
    let mut frames = FrameReader::new(reader, FrameCodec::new(limits.msize, Dialect::Base));
    let mut session: Option<Session> = None;
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            () = shutdown.cancelled() => break,
            () = link.hangup.cancelled() => break,
        };
        let frame = match frame {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::debug!("closing connection: {e}");
                break;
            }
            None => break,
        };
        let more = frames.has_buffered();
        conn.more.store(more, Ordering::Relaxed);
        // The reader may wait for room for a reply; shutdown ends that too.
        let turn = tokio::select! {
            turn = receive(&conn, &mut session, frame, &link) => turn,
            () = shutdown.cancelled() => break,
            () = link.hangup.cancelled() => break,
        };
        match turn {
            Some(Turn::Version(new)) => {
                frames.codec_mut().set_msize(new.msize);
                frames.codec_mut().set_dialect(new.dialect);
            }
            Some(Turn::TakenOver(kept)) => conn = kept,
            None => {}
        }
    }
    if shutdown.is_cancelled() || !detach(&conn).await {
        let dialect = session.map_or(Dialect::Base, |s| s.dialect);
        reset(&conn, dialect).await;
    }
    drop(conn);
    drop(link);
    // The replies left go out, unless the peer does not read them and the
    // server is stopping.
    tokio::select! {
        _ = flusher => {}
        () = shutdown.cancelled() => {}
    }
}

/// What a frame changed for the connection's reader.
enum Turn<F: Filesystem> {
    /// A Tversion settled a new session.
    Version(Session),
    /// A Tresume handed the connection this kept session.
    TakenOver(Arc<Conn<F>>),
}

/// Handles one frame.
async fn receive<F: Filesystem>(
    conn: &Arc<Conn<F>>,
    session: &mut Option<Session>,
    frame: Bytes,
    link: &Link,
) -> Option<Turn<F>> {
    let current = session.unwrap_or(Session {
        dialect: Dialect::Base,
        msize: conn.shared.limits.msize,
        stream_extension: false,
        resume_extension: false,
    });
    let header = match Header::decode(&frame) {
        Ok(h) => h,
        Err(_) => return None, // the framing codec already checked the size
    };
    if let Some(kept) = conn.live.lock().kept.as_mut() {
        let in_stream = header.ty == Tsdata::TYPE || header.ty == Tscredit::TYPE;
        kept.received(header.tag, !in_stream);
    }
    let fcall = match Fcall::decode(frame, current.protocol()) {
        Ok(fcall) => fcall,
        Err(e) => {
            let err = match e.kind {
                DecodeErrorKind::UnknownType(_) => Error::not_supported(),
                DecodeErrorKind::NameTooLong(_) => Error::from_errno(Errno::ENAMETOOLONG),
                _ => Error::with_errno(Errno::EBADMSG, format!("bad 9P message: {}", e.kind)),
            };
            conn.send(current, header.tag, error_reply(&err, current.dialect))
                .await;
            return None;
        }
    };
    let tag = fcall.tag;
    if let Msg::Tversion(v) = &fcall.msg {
        reset(conn, current.dialect).await;
        let offered = Protocol {
            dialect: current.dialect,
            streams: conn.shared.stream_limits.streams > 0,
            resume: conn.shared.sessions.offered(),
        };
        let (reply, new) = version(v, conn.shared.limits.msize, offered);
        *session = new;
        conn.send(new.unwrap_or(current), tag, reply).await;
        return new.map(Turn::Version);
    }
    let Some(current) = *session else {
        let err = Error::with_errno(Errno::EPROTO, "version not negotiated");
        conn.send(current, tag, error_reply(&err, current.dialect))
            .await;
        return None;
    };
    if !fcall.msg.is_request() {
        let err = Error::with_errno(Errno::EPROTO, "reply sent to a server");
        conn.send(current, tag, error_reply(&err, current.dialect))
            .await;
        return None;
    }
    if let Msg::Tflush(f) = &fcall.msg {
        flush(conn, current, tag, f.oldtag).await;
        return None;
    }
    if let Msg::Tsession(_) = &fcall.msg {
        keep(conn, current, tag, link).await;
        return None;
    }
    if let Msg::Tresume(t) = &fcall.msg {
        return match take_over(conn, current, tag, t.token, link).await {
            Ok(kept) => Some(Turn::TakenOver(kept)),
            Err(err) => {
                conn.send(current, tag, error_reply(&err, current.dialect))
                    .await;
                None
            }
        };
    }
    if let Msg::Tscredit(_) | Msg::Tsdata(_) = &fcall.msg {
        if let Some(Some(io)) = conn.live.lock().inflight.get(&tag).map(|e| &e.stream_io) {
            io.deliver(fcall.msg);
        }
        return None;
    }
    let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
    let (stream_io, stream_task) = match stream::open(&fcall.msg, &conn.shared.stream_limits) {
        Some((io, task)) => (Some(io), Some(task)),
        None => (None, None),
    };
    // Admitted before its fids are touched, as lib9p does: a Tclunk
    // refused for its tag must not have taken its fid out of the table.
    if let Err(err) = admit(conn, tag, id, stream_io) {
        conn.send(current, tag, error_reply(&err, current.dialect))
            .await;
        return None;
    }
    let resolved = match resolve(conn, &fcall.msg) {
        Ok(r) => r,
        Err(err) => {
            let reply = error_reply(&err, current.dialect).into();
            conn.finish(current, tag, id, reply).await;
            return None;
        }
    };
    let task_conn = conn.clone();
    let mut request = Box::pin(async move {
        let handler = Handler {
            conn: &task_conn,
            session: current,
        };
        let reply = match stream_task {
            Some(task) => handler
                .stream(task, tag, id, fcall.msg, resolved)
                .await
                .map(Reply::Msg),
            None => handler.run(fcall.msg, resolved).await,
        };
        let reply = reply.unwrap_or_else(|e| error_reply(&e, current.dialect).into());
        task_conn.finish(current, tag, id, reply).await;
    });
    // Most requests finish without waiting for anything: run them here and
    // save a task and a hop between threads. One that must wait becomes a
    // task of its own, so the connection goes on reading.
    let finished =
        std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx).is_ready())).await;
    if finished {
        return None;
    }
    let task = conn.tasks.spawn(request);
    if let Some(entry) = conn.live.lock().inflight.get_mut(&tag)
        && entry.id == id
    {
        entry.abort = Some(task.abort_handle());
    }
    None
}

/// Enters request `id` in the in-flight table under `tag`, within the
/// limits.
fn admit<F: Filesystem>(
    conn: &Conn<F>,
    tag: u16,
    id: u64,
    stream_io: Option<StreamIo>,
) -> Result<(), Error> {
    let mut live = conn.live.lock();
    let inflight = &mut live.inflight;
    if inflight.contains_key(&tag) {
        return Err(Error::with_errno(Errno::EPROTO, "duplicate tag"));
    }
    if inflight.len() >= conn.shared.limits.requests {
        return Err(Error::with_errno(
            Errno::EAGAIN,
            "too many requests in flight",
        ));
    }
    let streams = inflight.values().filter(|e| e.stream_io.is_some()).count();
    if stream_io.is_some() && streams >= conn.shared.stream_limits.streams {
        return Err(Error::with_errno(Errno::EAGAIN, "too many streams"));
    }
    inflight.insert(
        tag,
        Inflight {
            id,
            abort: None,
            stream_io,
        },
    );
    Ok(())
}

/// Tversion: picks the dialect and msize, and the extensions asked for and
/// `offered`, or answers `unknown`.
fn version(v: &Tversion, max_msize: u32, offered: Protocol) -> (Msg, Option<Session>) {
    let msize = v.msize.min(max_msize);
    match Protocol::from_version(&v.version) {
        // Too small to carry anything useful: refuse, as lib9p does.
        Some(_) if msize < MIN_MSIZE => {
            let err = Error::with_errno(Errno::EINVAL, "msize too small");
            (error_reply(&err, Dialect::Base), None)
        }
        Some(asked) => {
            let p = asked.within(offered);
            let session = Session {
                dialect: p.dialect,
                msize,
                stream_extension: p.streams,
                resume_extension: p.resume,
            };
            let reply = Rversion {
                msize,
                version: p.version(),
            };
            (reply.into(), Some(session))
        }
        None => (
            Rversion {
                msize,
                version: "unknown".into(),
            }
            .into(),
            None,
        ),
    }
}

/// Tflush: cancels `oldtag` if it is still running, then answers.
async fn flush<F: Filesystem>(conn: &Conn<F>, session: Session, tag: u16, oldtag: u16) {
    let limit = conn.shared.limits.requests;
    conn.with_room(|live, room| {
        if let Some(entry) = live.inflight.remove(&oldtag)
            && let Some(abort) = entry.abort
        {
            abort.abort();
        }
        let alone = conn.alone(&live.inflight);
        let frame = encode_reply(Fcall::new(tag, Rflush {}), session);
        live.post(room, tag, frame, alone, limit);
    })
    .await
}

/// Ends the session: cancels every request, waits until each has ended
/// (an end of a fid among them runs to its end), then ends every fid left.
/// Nothing of the old session then runs on into the next: no request holds
/// a fid, and every file it held for exclusive use is free.
pub(crate) async fn reset<F: Filesystem>(conn: &Arc<Conn<F>>, dialect: Dialect) {
    let cancelled: Vec<Inflight> = {
        let mut live = conn.live.lock();
        live.kept = None;
        live.inflight.drain().map(|(_, e)| e).collect()
    };
    conn.shared.sessions.forget(conn);
    for entry in cancelled {
        if let Some(abort) = entry.abort {
            abort.abort();
        }
    }
    conn.tasks.close();
    conn.tasks.wait().await;
    conn.tasks.reopen();
    // All ends start before any is awaited: if the reset is cut short
    // (by shutdown), each goes on by itself.
    let ends: Vec<_> = conn
        .fids
        .drain()
        .into_iter()
        .map(|slot| clunk::end(&conn.tasks, &conn.shared, slot, dialect, Ending::Clunk))
        .collect();
    for end in ends {
        let _ = end.await;
    }
}

/// Looks up, reserves and removes the fids a request names, in arrival order.
fn resolve<F: Filesystem>(conn: &Conn<F>, msg: &Msg) -> Result<Resolved<F::File>, Error> {
    let get = |fid: Fid| {
        conn.fids
            .get(fid)
            .ok_or_else(|| Error::with_errno(Errno::EBADF, "unknown fid"))
    };
    let reserve =
        |fid: Fid| -> Result<Pending<F::File>, Error> { conn.fids.reserve(fid).map_err(refusal) };
    let mut r = Resolved::default();
    match msg {
        Msg::Tattach(m) => {
            if m.afid != Fid::NOFID {
                if conn.shared.policy.is_open() {
                    return Err(Error::with_errno(
                        Errno::EINVAL,
                        "authentication not required",
                    ));
                }
                r.afid = Some(match conn.fids.entry(m.afid) {
                    Some(Entry::Auth(afid)) => afid,
                    Some(Entry::File(_)) => {
                        return Err(Error::with_errno(
                            Errno::EINVAL,
                            "afid is not an authentication fid",
                        ));
                    }
                    None => return Err(Error::with_errno(Errno::EBADF, "unknown afid")),
                });
            }
            r.new = Some(reserve(m.fid)?);
        }
        Msg::Tauth(m) => {
            let claim = User {
                uname: m.uname.clone(),
                n_uname: m.n_uname,
                aname: m.aname.clone(),
            };
            let exchange = conn.shared.policy.start(&claim)?;
            let path = conn.next_afid.fetch_add(1, Ordering::Relaxed);
            let afid = Arc::new(AuthFid::new(path, claim, exchange));
            conn.fids
                .insert_auth(m.afid, afid.clone())
                .map_err(refusal)?;
            r.afid = Some(afid);
        }
        Msg::Twalk(m) => {
            r.fid = Some(get(m.fid)?);
            if m.newfid != m.fid {
                r.new = Some(reserve(m.newfid)?);
            }
        }
        Msg::Txattrwalk(m) => {
            r.fid = Some(get(m.fid)?);
            r.new = Some(reserve(m.newfid)?);
        }
        Msg::Tclunk(Tclunk { fid }) | Msg::Tremove(Tremove { fid }) => {
            match conn.fids.remove(*fid) {
                Some(Entry::File(slot)) => r.fid = Some(slot),
                Some(Entry::Auth(afid)) => r.afid = Some(afid),
                None => return Err(Error::with_errno(Errno::EBADF, "unknown fid")),
            }
        }
        Msg::Trename(m) => {
            r.fid = Some(get(m.fid)?);
            r.other = Some(get(m.dfid)?);
        }
        Msg::Tlink(m) => {
            r.fid = Some(get(m.dfid)?);
            r.other = Some(get(m.fid)?);
        }
        Msg::Trenameat(m) => {
            r.fid = Some(get(m.olddirfid)?);
            r.other = Some(get(m.newdirfid)?);
        }
        other => {
            let fid = match other {
                Msg::Topen(m) => m.fid,
                Msg::Tcreate(m) => m.fid,
                Msg::Tread(m) => m.fid,
                Msg::Twrite(m) => m.fid,
                Msg::Tstat(m) => m.fid,
                Msg::Twstat(m) => m.fid,
                Msg::Tstatfs(m) => m.fid,
                Msg::Tlopen(m) => m.fid,
                Msg::Tlcreate(m) => m.fid,
                Msg::Tsymlink(m) => m.fid,
                Msg::Tmknod(m) => m.dfid,
                Msg::Treadlink(m) => m.fid,
                Msg::Tgetattr(m) => m.fid,
                Msg::Tsetattr(m) => m.fid,
                Msg::Txattrcreate(m) => m.fid,
                Msg::Treaddir(m) => m.fid,
                Msg::Tfsync(m) => m.fid,
                Msg::Tlock(m) => m.fid,
                Msg::Tgetlock(m) => m.fid,
                Msg::Tmkdir(m) => m.dfid,
                Msg::Tunlinkat(m) => m.dirfid,
                Msg::Tsread(m) => m.fid,
                Msg::Tswrite(m) => m.fid,
                _ => return Err(Error::not_supported()),
            };
            match conn.fids.entry(fid) {
                Some(Entry::File(slot)) => r.fid = Some(slot),
                Some(Entry::Auth(afid)) if matches!(other, Msg::Tread(_) | Msg::Twrite(_)) => {
                    r.afid = Some(afid)
                }
                Some(Entry::Auth(_)) => {
                    let what = format!("{} of an authentication fid", other.name());
                    return Err(Error::with_errno(Errno::EINVAL, what));
                }
                None => return Err(Error::with_errno(Errno::EBADF, "unknown fid")),
            }
        }
    }
    Ok(r)
}

/// The error for a fid number that cannot be taken.
fn refusal(r: Refusal) -> Error {
    match r {
        Refusal::InUse => Error::with_errno(Errno::EBADF, "fid in use"),
        Refusal::TooMany => Error::with_errno(Errno::EMFILE, "too many fids"),
    }
}

/// Encodes a reply. One that cannot be sent within msize becomes an error
/// reply.
fn encode_reply(fcall: Fcall, session: Session) -> Frame {
    let Session { dialect, msize, .. } = session;
    let mut head = BytesMut::new();
    match fcall.encode_head(session.protocol(), &mut head) {
        Ok(payload) if head.len() + payload.as_ref().map_or(0, Bytes::len) <= msize as usize => {
            return Frame {
                head: head.freeze(),
                payload: payload.into(),
            };
        }
        Ok(_) => head.clear(),
        Err(e) => tracing::warn!("cannot encode {}: {e}", fcall.msg.name()),
    }
    let err = Error::from_errno(Errno::EMSGSIZE);
    let reply = Fcall::new(fcall.tag, error_reply(&err, dialect));
    // An error reply always fits: msize is at least MIN_MSIZE.
    let _ = reply.encode(dialect, &mut head);
    Frame {
        head: head.freeze(),
        payload: Payload::None,
    }
}

/// A frame of `head` and the data in the pipe `data`.
fn piped(head: Bytes, data: PipedFile) -> Frame {
    Frame {
        head,
        payload: data.into(),
    }
}

/// Answers the first message of a connection over the limit with an error,
/// then hangs up.
pub(crate) async fn refuse(link: Box<dyn Stream>, why: &'static str) {
    let (reader, mut writer) = tokio::io::split(link);
    let mut frames = FrameReader::new(reader, FrameCodec::new(MIN_MSIZE * 64, Dialect::Base));
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), frames.next()).await;
    if let Ok(Some(Ok(frame))) = first
        && let Ok(header) = Header::decode(&frame)
    {
        let err = Error::with_errno(Errno::EAGAIN, why);
        let reply = Fcall::new(header.tag, error_reply(&err, Dialect::Base));
        if let Ok(bytes) = reply.to_bytes(Dialect::Base) {
            let _ = writer.write_all(&bytes).await;
        }
    }
    let _ = writer.shutdown().await;
}
