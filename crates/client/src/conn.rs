//! One connection to a server: tags, and the tasks that write requests and
//! route replies back to whoever is waiting. Losing the connection and
//! getting it back is in [`reconnect`].

mod reconnect;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use ninep_transport::{Addr, Dialer, Frame, FrameReader, Payload, Stream, Writer};
use ninep_wire::*;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::fsys::Fsys;
use crate::recover::{Fids, Fresh, Recovery};
use crate::reply::{FlushOnDrop, Reply, StreamTag};
use crate::stream::{Inbox, ends_stream};
use reconnect::Redial;

/// How to connect.
#[derive(Debug, Clone)]
pub struct Options {
    /// The msize to ask for; the server may lower it.
    pub msize: u32,
    /// The dialect to insist on, or `None` to try 9P2000.L, then 9P2000.u,
    /// then 9P2000.
    pub dialect: Option<Dialect>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            msize: 1024 * 1024 + IOHDRSZ,
            dialect: None,
        }
    }
}

/// A connection to a 9P server. Cheap to clone; all clones share it.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("dialect", &self.dialect())
            .field("msize", &self.msize())
            .finish()
    }
}

pub(crate) struct Inner {
    state: Mutex<State>,
    /// The current connection's writer; a recovered connection's replaces it.
    writer: Mutex<Writer>,
    /// How each fid was made, to make it again on a new connection.
    fids: Mutex<Fids>,
    redial: Option<Redial>,
    /// Woken when a recovery ends, either way.
    recovered: tokio::sync::Notify,
    pub(crate) dialect: Mutex<Dialect>,
    /// The stream extension was agreed.
    pub(crate) streams: AtomicBool,
    /// The resume extension was agreed.
    resume: AtomicBool,
    /// The token that takes the session over on a new connection, while
    /// the server may keep it. Lock order: after `state`.
    token: Mutex<Option<Token>>,
    pub(crate) msize: AtomicU32,
    next_fid: AtomicU32,
    free_fids: Mutex<Vec<u32>>,
    /// Woken when the last outstanding request is answered.
    idle: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    pending: HashMap<u16, Waiter>,
    free_tags: Vec<u16>,
    next_tag: u16,
    /// Numbers requests, so a tag reused by a later one is told apart.
    next_request: u64,
    closed: bool,
    /// The connection was lost and is being made again: requests wait
    /// unsent in `pending`.
    recovering: bool,
    /// Frames sent in this session since Rsession, which the server counts
    /// too (the resume extension).
    sent: u64,
    /// For each tag that awaits an answer, the number of the frame last
    /// sent on it.
    sent_at: HashMap<u16, u64>,
}

impl State {
    fn free(&mut self, tag: u16) {
        self.free_tags.push(tag);
        self.sent_at.remove(&tag);
    }

    /// Counts a frame as it is written, on `tag` if it awaits an answer
    /// there.
    fn sending(&mut self, tag: Option<u16>) {
        if let Some(tag) = tag {
            self.sent_at.insert(tag, self.sent);
        }
        self.sent += 1;
    }

    /// The tags awaiting answers, requests in the order they were first
    /// made and then the rest: sent again on a new connection, a request
    /// sent behind the walk or open of its fid (`Fid::walk_open_read`) must
    /// still follow it.
    fn tags_in_order(&self) -> Vec<u16> {
        let mut tags: Vec<(u64, u16)> = self
            .pending
            .iter()
            .map(|(&tag, waiter)| match waiter {
                Waiter::Reply { request, .. } => (*request, tag),
                _ => (u64::MAX, tag),
            })
            .collect();
        tags.sort_unstable();
        tags.into_iter().map(|(_, tag)| tag).collect()
    }

    /// True if the request on `tag` reached a server that says it
    /// received `received` frames.
    fn reached(&self, tag: u16, received: u64) -> bool {
        self.sent_at.get(&tag).is_some_and(|&n| n < received)
    }
}

enum Waiter {
    /// Request number `request`, whose caller waits for the reply; `msg`
    /// is kept to be sent again on a recovered connection.
    Reply {
        request: u64,
        tx: oneshot::Sender<Result<Msg, Error>>,
        msg: Msg,
    },
    /// A request given up on, whose Tflush is in flight.
    Flushing,
    /// A Tflush for `old`; its Rflush frees both tags.
    Flush { old: u16 },
    /// A Tclunk nobody waits for; its reply frees the fid number.
    Clunk(Fid),
    /// A stream (docs/streams.md): every reply on its tag, until the last.
    Stream { request: u64, inbox: Arc<Inbox> },
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    pub(crate) fn dialect(&self) -> Dialect {
        *self.dialect.lock()
    }

    pub(crate) fn msize(&self) -> u32 {
        self.msize.load(Ordering::Relaxed)
    }

    pub(crate) fn protocol(&self) -> Protocol {
        Protocol {
            dialect: self.dialect(),
            streams: self.streams.load(Ordering::Relaxed),
            resume: self.resume.load(Ordering::Relaxed),
        }
    }

    fn alloc_tag(state: &mut State) -> Option<u16> {
        if let Some(tag) = state.free_tags.pop() {
            return Some(tag);
        }
        if state.next_tag == NOTAG {
            return None;
        }
        let tag = state.next_tag;
        state.next_tag += 1;
        Some(tag)
    }

    pub(crate) fn alloc_fid(&self) -> Fid {
        if let Some(fid) = self.free_fids.lock().pop() {
            return Fid(fid);
        }
        Fid(self.next_fid.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn free_fid(&self, fid: Fid) {
        self.free_fids.lock().push(fid.0);
    }

    fn encode(&self, fcall: &Fcall) -> Result<Frame, Error> {
        let mut head = BytesMut::new();
        let payload = fcall
            .encode_head(self.protocol(), &mut head)
            .map_err(|e| Error::refused(e.errno(), e.to_string()))?;
        let size = head.len() + payload.as_ref().map_or(0, Bytes::len);
        if size > self.msize() as usize {
            return Err(Error::protocol(format!(
                "{} of {size} bytes exceeds msize",
                fcall.msg.name()
            )));
        }
        Ok(Frame {
            head: head.freeze(),
            payload: payload.into(),
        })
    }

    /// Sends a request whose waiter is registered on its tag; while the
    /// connection is being recovered, it waits there to be sent on the
    /// next.
    pub(crate) fn send(&self, fcall: &Fcall) -> Result<(), Error> {
        let frame = self.encode(fcall)?;
        let mut state = self.lock();
        if state.closed {
            return Err(Error::Closed);
        }
        if state.recovering {
            // A stream cannot wait: what it sends next would be lost.
            if matches!(state.pending.get(&fcall.tag), Some(Waiter::Stream { .. }))
                && let Some(Waiter::Stream { inbox, .. }) = state.pending.remove(&fcall.tag)
            {
                state.free(fcall.tag);
                inbox.end_with(interrupted_stream());
            }
            return Ok(());
        }
        let alone = Self::alone(&state);
        self.post(&mut state, Some(fcall.tag), frame, alone);
        Ok(())
    }

    /// Alone on the connection, a request goes at once; with others in
    /// flight the server is busy anyway, and requests share writes.
    fn alone(state: &State) -> bool {
        state.pending.len() <= 1
    }

    /// Writes `frame`, counted, with the state locked so that frames are
    /// counted in the order they go out.
    fn post(&self, state: &mut State, tag: Option<u16>, frame: Frame, alone: bool) {
        state.sending(tag);
        let writer = self.writer.lock();
        if alone {
            writer.send(frame);
        } else {
            writer.queue(frame);
        }
    }

    /// Sends `msg` (Tscredit, Tsdata) on the tag of stream number `request`
    /// while the stream has it, and drops it once the stream is over.
    pub(crate) fn send_in_stream(&self, tag: u16, request: u64, msg: Msg) -> Result<(), Error> {
        let frame = self.encode(&Fcall { tag, msg })?;
        let mut state = self.lock();
        if state.closed {
            return Err(Error::Closed);
        }
        if state.recovering {
            return Err(interrupted_stream());
        }
        if matches!(state.pending.get(&tag), Some(Waiter::Stream { request: r, .. }) if *r == request)
        {
            // Posted with the lock held: a later request on this tag, once
            // the stream's end frees it, cannot go before it and get it.
            let alone = Self::alone(&state);
            self.post(&mut state, None, frame, alone);
        }
        Ok(())
    }

    /// Sends any request answered by one reply and waits for the reply,
    /// which must be of the type that answers it. An error reply becomes
    /// [`Error::Remote`]. Dropping the future flushes the request.
    pub(crate) async fn rpc(self: &Arc<Self>, msg: Msg) -> Result<Msg, Error> {
        let Some(want) = msg.reply_type() else {
            let what = format!("{} is not a request answered by one reply", msg.name());
            return Err(Error::refused(Errno::EINVAL, what));
        };
        let asked = msg.name();
        let reply = self.send_request(msg, Ok)?.await?;
        if reply.ty() != want {
            let what = format!("{} in reply to {asked}", reply.name());
            return Err(Error::protocol(what));
        }
        Ok(reply)
    }

    /// Sends a request and waits for its reply, as the request's own reply
    /// type. An error reply becomes [`Error::Remote`].
    pub(crate) async fn call<R: Request>(self: &Arc<Self>, request: R) -> Result<R::Reply, Error> {
        self.start(request)?.await
    }

    /// Sends the request that starts a stream; its replies, up to the last
    /// one, go to `inbox`.
    pub(crate) fn start_stream(
        self: &Arc<Self>,
        msg: Msg,
        inbox: Arc<Inbox>,
    ) -> Result<StreamTag, Error> {
        self.fids.lock().sending(&msg)?;
        let (tag, request) = self.register(|request| Waiter::Stream { request, inbox })?;
        if let Err(e) = self.send(&Fcall { tag, msg }) {
            self.release(tag);
            return Err(e);
        }
        Ok(StreamTag {
            guard: FlushOnDrop {
                inner: self.clone(),
                tag,
                request,
                armed: true,
            },
        })
    }

    /// Takes a free tag and a request number for the waiter `make` makes.
    fn register(&self, make: impl FnOnce(u64) -> Waiter) -> Result<(u16, u64), Error> {
        let mut state = self.lock();
        if state.closed {
            return Err(Error::Closed);
        }
        let tag = Self::alloc_tag(&mut state)
            .ok_or_else(|| Error::protocol("all 65535 tags are in use"))?;
        let request = state.next_request;
        state.next_request += 1;
        state.pending.insert(tag, make(request));
        Ok((tag, request))
    }

    /// Sends a request now and returns its reply to come: many requests can
    /// be started before any is awaited. Dropping the [`Reply`] unanswered
    /// flushes the request.
    pub(crate) fn start<R: Request>(
        self: &Arc<Self>,
        request: R,
    ) -> Result<Reply<R::Reply>, Error> {
        self.send_request(request.into(), |reply| {
            R::reply(reply).map_err(|e| Error::protocol(e.to_string()))
        })
    }

    /// Sends `msg`; its reply is to be turned into what the caller awaits
    /// by `accept`.
    fn send_request<T>(
        self: &Arc<Self>,
        msg: Msg,
        accept: fn(Msg) -> Result<T, Error>,
    ) -> Result<Reply<T>, Error> {
        self.fids.lock().sending(&msg)?;
        let (tx, rx) = oneshot::channel();
        let kept = msg.clone();
        let (tag, request) = self.register(|request| Waiter::Reply {
            request,
            tx,
            msg: kept,
        })?;
        if let Err(e) = self.send(&Fcall { tag, msg }) {
            self.release(tag);
            return Err(e);
        }
        Ok(Reply {
            rx,
            accept,
            guard: FlushOnDrop {
                inner: self.clone(),
                tag,
                request,
                armed: true,
            },
        })
    }

    fn release(&self, tag: u16) {
        let mut state = self.lock();
        state.pending.remove(&tag);
        state.free(tag);
    }

    /// Gives up on request number `request`, sent on `tag`: sends Tflush;
    /// both tags are freed at Rflush. Nothing is sent if its reply has come
    /// already, even though the tag may carry a later request by now.
    pub(crate) fn flush(&self, tag: u16, request: u64) {
        let mut state = self.lock();
        let waiting = match state.pending.get(&tag) {
            Some(Waiter::Reply { request: r, .. } | Waiter::Stream { request: r, .. }) => {
                *r == request
            }
            _ => false,
        };
        if state.closed || !waiting {
            return;
        }
        if state.recovering {
            if self.token.lock().is_some() && state.sent_at.contains_key(&tag) {
                // It may have reached the server, which keeps the session:
                // it is flushed once the session is taken over.
                state.pending.insert(tag, Waiter::Flushing);
            } else {
                // Unsent yet: forgetting it is enough.
                state.pending.remove(&tag);
                state.free(tag);
            }
            return;
        }
        let Some(flush_tag) = Self::alloc_tag(&mut state) else {
            // No tag to flush with: the request runs its course and its reply
            // is dropped when it comes.
            state.pending.insert(tag, Waiter::Flushing);
            return;
        };
        state.pending.insert(tag, Waiter::Flushing);
        state.pending.insert(flush_tag, Waiter::Flush { old: tag });
        drop(state);
        let _ = self.send(&Fcall::new(flush_tag, Tflush { oldtag: tag }));
    }

    /// Routes one reply to its waiter.
    fn dispatch(&self, fcall: Fcall) {
        let tag = fcall.tag;
        let mut state = self.lock();
        let Some(waiter) = state.pending.remove(&tag) else {
            tracing::debug!("reply to unknown tag: {fcall}");
            return;
        };
        let (mut reply_to, mut clunked, mut piece_to) = (None, None, None);
        match waiter {
            Waiter::Stream { request, inbox } => {
                if ends_stream(&fcall.msg) {
                    state.free(tag);
                } else {
                    let inbox = inbox.clone();
                    state.pending.insert(tag, Waiter::Stream { request, inbox });
                }
                piece_to = Some((inbox, request));
            }
            Waiter::Reply { tx, msg, .. } => {
                state.free(tag);
                self.fids.lock().answered(&msg, &fcall.msg);
                reply_to = Some(tx);
            }
            // The reply beat the Rflush: the tag stays taken until the Rflush.
            Waiter::Flushing => {
                state.pending.insert(tag, Waiter::Flushing);
            }
            Waiter::Flush { old } => {
                state.free(tag);
                if state.pending.remove(&old).is_some() {
                    state.free(old);
                }
            }
            Waiter::Clunk(fid) => {
                state.free(tag);
                clunked = Some(fid);
            }
        }
        let idle = state.pending.is_empty();
        drop(state);
        if let Some(tx) = reply_to {
            let _ = tx.send(Ok(fcall.msg));
        } else if let Some((inbox, request)) = piece_to
            && !inbox.deliver(fcall.msg)
        {
            // The server broke the stream's rules: the stream has ended for
            // its transfer, and the server is told to end it too.
            self.flush(tag, request);
        }
        if let Some(fid) = clunked {
            self.free_fid(fid);
        }
        if idle {
            self.idle.notify_waiters();
        }
    }

    /// A reply that is framed but does not decode (`e`): the request on its
    /// tag fails with a protocol error and the connection goes on, the
    /// frame's size keeping it in step. False where only closing the
    /// connection settles it: a stream's tag, a flush or clunk, or a
    /// request making a fid the server may or may not now hold.
    fn fail_malformed(&self, frame: &[u8], e: &DecodeError) -> bool {
        let Ok(Header { tag, ty, .. }) = Header::decode(frame) else {
            return false;
        };
        let mut state = self.lock();
        match state.pending.get(&tag) {
            // Nobody waits for it: dropped, as any stray reply.
            None | Some(Waiter::Flushing) => {
                tracing::debug!("undecodable reply to tag {tag}, dropped: {e}");
                return true;
            }
            Some(Waiter::Reply { msg, .. }) if !makes_fid(msg) => {}
            Some(_) => return false,
        }
        let Some(Waiter::Reply { tx, msg, .. }) = state.pending.remove(&tag) else {
            return false;
        };
        state.free_tags.push(tag);
        let idle = state.pending.is_empty();
        drop(state);
        let name = Msg::type_name(ty, self.dialect()).unwrap_or("reply");
        tracing::warn!("undecodable {name} to {}: {e}", msg.name());
        let _ = tx.send(Err(Error::protocol(format!("undecodable {name}: {e}"))));
        if idle {
            self.idle.notify_waiters();
        }
        true
    }

    /// See [`crate::File::vouch_writes_repeatable`].
    pub(crate) fn vouch(&self, fid: Fid) {
        self.fids.lock().vouch(fid);
    }

    /// Sends Tclunk for `fid` without waiting; the fid number is reused once
    /// the server has answered. Safe to call from `Drop`.
    pub(crate) fn clunk_detached(&self, fid: Fid) {
        if self.fids.lock().sending(&Tclunk { fid }.into()).is_err() {
            // A lost fid: the server has no such fid.
            self.free_fid(fid);
            return;
        }
        let tag = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            // A session the server keeps has the fid still: its Tclunk is
            // sent once the session is taken over.
            if state.recovering && self.token.lock().is_none() {
                // Gone with the connection; if the recovery makes it again
                // meanwhile, it is clunked then.
                drop(state);
                self.free_fid(fid);
                return;
            }
            let Some(tag) = Self::alloc_tag(&mut state) else {
                return;
            };
            state.pending.insert(tag, Waiter::Clunk(fid));
            tag
        };
        if self.send(&Fcall::new(tag, Tclunk { fid })).is_err() {
            self.release(tag);
        }
    }

    /// Waits until no request is outstanding, or the connection is gone.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            {
                let state = self.lock();
                if state.pending.is_empty() || state.closed {
                    return;
                }
            }
            notified.await;
        }
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.recovering = false;
        for (_, waiter) in state.pending.drain() {
            match waiter {
                Waiter::Reply { tx, .. } => {
                    let _ = tx.send(Err(Error::Closed));
                }
                Waiter::Stream { inbox, .. } => inbox.close(),
                _ => {}
            }
        }
        drop(state);
        self.idle.notify_waiters();
        self.recovered.notify_waiters();
    }
}

impl Drop for Inner {
    /// A client gone for good ends its session at once with a Tversion
    /// (9P's reset), the last frame its writer sends: a session with a
    /// resume token would otherwise be kept for a take-over that will not
    /// come, taking a place among the detached sessions the server keeps.
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if state.closed || state.recovering || self.token.get_mut().is_none() {
            return;
        }
        let plain = Protocol {
            dialect: *self.dialect.get_mut(),
            streams: false,
            resume: false,
        };
        let tversion = Fcall::new(
            NOTAG,
            Tversion {
                msize: *self.msize.get_mut(),
                version: plain.version(),
            },
        );
        if let Ok(head) = tversion.to_bytes(Dialect::Base) {
            self.writer.get_mut().send(Frame {
                head,
                payload: Payload::None,
            });
        }
    }
}

/// The error of a stream cut off by a lost connection that is being
/// recovered: its transfer may start again from where it got to.
fn interrupted_stream() -> Error {
    Error::Interrupted("a stream was cut off with the connection".into())
}

/// Whether `msg` makes a fid: were its reply lost, the server might or
/// might not hold the fid, and its number could not be used again.
fn makes_fid(msg: &Msg) -> bool {
    matches!(
        msg,
        Msg::Twalk(_) | Msg::Tattach(_) | Msg::Tauth(_) | Msg::Txattrwalk(_)
    )
}

/// Reads replies and routes them until the connection is lost.
fn spawn_reader<R>(weak: Weak<Inner>, mut frames: FrameReader<R>, protocol: Protocol)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        while let Some(frame) = frames.next().await {
            let Some(inner) = weak.upgrade() else { return };
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => {
                    tracing::debug!("connection lost: {e}");
                    break;
                }
            };
            match Fcall::decode(frame.clone(), protocol) {
                Ok(fcall) => inner.dispatch(fcall),
                Err(e) => {
                    if !inner.fail_malformed(&frame, &e) {
                        tracing::warn!("undecodable reply: {e}");
                        inner.close();
                        return;
                    }
                }
            }
        }
        if let Some(inner) = weak.upgrade() {
            inner.lost();
        }
    });
}

impl Client {
    /// Connects to `addr` (a dial string) with default options.
    pub async fn connect(addr: &str) -> Result<Client, Error> {
        Self::connect_with(addr, Options::default()).await
    }

    /// Connects to `addr` (a dial string) with `options`.
    pub async fn connect_with(addr: &str, options: Options) -> Result<Client, Error> {
        Self::dial(addr, &Dialer::default(), options).await
    }

    /// Connects to `addr` (a dial string) as `dialer` does (with its TLS,
    /// say), with `options`. Once the connection is lost, every request
    /// fails.
    pub async fn dial(addr: &str, dialer: &Dialer, options: Options) -> Result<Client, Error> {
        Self::dial_as(addr, dialer, options, None).await
    }

    /// As [`Client::dial`], but a lost connection is recovered as
    /// `recovery` says (docs/resume.md): `addr` is dialled again and the
    /// fids in use are made again, while requests wait.
    pub async fn dial_recovering(
        addr: &str,
        dialer: &Dialer,
        options: Options,
        recovery: Recovery,
    ) -> Result<Client, Error> {
        Self::dial_as(addr, dialer, options, Some(recovery)).await
    }

    async fn dial_as(
        addr: &str,
        dialer: &Dialer,
        options: Options,
        recovery: Option<Recovery>,
    ) -> Result<Client, Error> {
        let addr: Addr = addr.parse().map_err(|e: String| {
            Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })?;
        let stream = dialer.dial(&addr).await?;
        let redial = recovery.map(|recovery| Redial {
            addr,
            dialer: dialer.clone(),
            options: options.clone(),
            recovery,
        });
        Self::start(stream, options, redial).await
    }

    /// Speaks 9P over an already connected stream.
    pub async fn over(stream: Box<dyn Stream>, options: Options) -> Result<Client, Error> {
        Self::start(stream, options, None).await
    }

    async fn start(
        stream: Box<dyn Stream>,
        options: Options,
        redial: Option<Redial>,
    ) -> Result<Client, Error> {
        // Only a client that dials again can take a session over: others
        // would only keep theirs on the server past their end.
        let (mut fresh, msize) = Fresh::start(stream, &options, redial.is_some()).await?;
        let protocol = fresh.protocol;
        let token = match protocol.resume {
            true => Some(fresh.session().await?),
            false => None,
        };
        let Fresh { writer, frames, .. } = fresh;
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            writer: Mutex::new(writer),
            fids: Mutex::new(Fids::default()),
            redial,
            recovered: tokio::sync::Notify::new(),
            dialect: Mutex::new(protocol.dialect),
            streams: AtomicBool::new(protocol.streams),
            resume: AtomicBool::new(protocol.resume),
            token: Mutex::new(token),
            msize: AtomicU32::new(msize),
            next_fid: AtomicU32::new(0),
            free_fids: Mutex::new(Vec::new()),
            idle: tokio::sync::Notify::new(),
        });
        spawn_reader(Arc::downgrade(&inner), frames, protocol);
        Ok(Client { inner })
    }

    /// True if the client dials again when its connection is lost.
    pub fn recovers(&self) -> bool {
        self.inner.redial.is_some()
    }

    /// Waits while a lost connection is being recovered: `Ok` once requests
    /// go out again, [`Error::Closed`] if they never will.
    pub async fn ready(&self) -> Result<(), Error> {
        loop {
            let notified = self.inner.recovered.notified();
            {
                let state = self.inner.lock();
                if state.closed {
                    return Err(Error::Closed);
                }
                if !state.recovering {
                    return Ok(());
                }
            }
            notified.await;
        }
    }

    /// The dialect the server agreed to.
    pub fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    /// True if the server agreed to the stream extension (docs/streams.md).
    pub fn streams(&self) -> bool {
        self.inner.protocol().streams
    }

    /// True if the server runs the requests naming a fid in the order they
    /// arrive, so that a request may go behind the walk or open that its
    /// fid awaits without waiting for its reply. ninep's server does, and
    /// speaks its extensions (streams, resume); a server that runs requests
    /// side by side (diod) may run one on a fid a walk is still making, on
    /// the directory the walk has reached so far.
    pub fn runs_in_order(&self) -> bool {
        let p = self.inner.protocol();
        p.streams || p.resume
    }

    /// True once the connection is gone: every request fails from then on.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// The msize the server agreed to.
    pub fn msize(&self) -> u32 {
        self.inner.msize()
    }

    /// Requests made on this client so far, each counted once however
    /// often it is sent (a recovered connection sends some again).
    pub fn requests(&self) -> u64 {
        self.inner.lock().next_request
    }

    /// Waits until every request sent so far has been answered (the clunks
    /// of dropped fids among them), or the connection is gone.
    pub async fn idle(&self) {
        self.inner.idle().await
    }

    /// Sends a request and returns its reply (an error reply as an error).
    pub async fn call<R: Request>(&self, request: R) -> Result<R::Reply, Error> {
        self.inner.call(request).await
    }

    /// Sends any request answered by one reply and returns the reply,
    /// whatever its type (an error reply as an error): for tools that pass
    /// messages through. The stream extension's messages, answered by many
    /// replies or none, are refused: `File::read_range` and `write_range`
    /// speak them.
    pub async fn rpc(&self, msg: impl Into<Msg>) -> Result<Msg, Error> {
        self.inner.rpc(msg.into()).await
    }

    /// Attaches to the tree `aname` as `uname`.
    pub async fn attach(&self, uname: &str, aname: &str) -> Result<Fsys, Error> {
        self.attach_as(uname, NONUNAME, aname).await
    }

    /// Attaches as a user given by name and (9P2000.u, .L) numeric id.
    pub async fn attach_as(&self, uname: &str, n_uname: u32, aname: &str) -> Result<Fsys, Error> {
        self.attach_through(None, uname, n_uname, aname).await
    }

    /// Attaches through the authentication fid `afid`, if any.
    pub(crate) async fn attach_through(
        &self,
        afid: Option<Fid>,
        uname: &str,
        n_uname: u32,
        aname: &str,
    ) -> Result<Fsys, Error> {
        let fid = self.inner.alloc_fid();
        let msg = Tattach {
            fid,
            afid: afid.unwrap_or(Fid::NOFID),
            uname: uname.to_owned(),
            aname: aname.to_owned(),
            n_uname,
        };
        match self.inner.call(msg).await {
            Ok(r) => Ok(Fsys::new(crate::fsys::Fid::new(self.clone(), fid, r.qid))),
            Err(e) => {
                self.inner.free_fid(fid);
                Err(e)
            }
        }
    }
}
