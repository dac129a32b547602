//! One connection to a server: tags, and the tasks that write requests and
//! route replies back to whoever is waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_transport::{Addr, Dialer, Frame, FrameCodec, Stream, Writer};
use ninep_wire::*;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use crate::error::Error;
use crate::fsys::Fsys;
use crate::recover::{Fids, Fresh, Recovery};
use crate::reply::{FlushOnDrop, Reply, StreamTag};
use crate::stream::{Inbox, ends_stream};
use crate::version::negotiate;

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

/// What a client dials again when its connection is lost.
struct Redial {
    addr: Addr,
    dialer: Dialer,
    options: Options,
    recovery: Recovery,
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
            payload,
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

    /// The connection is gone: without a way to dial again, every request
    /// fails; with one, the recovery starts. A session the server keeps
    /// (the resume extension) loses only its streams until the server says
    /// what it received; otherwise requests that may be sent again wait
    /// for the next connection and the others fail now.
    fn lost(self: &Arc<Self>) {
        let Some(redial) = &self.redial else {
            self.close();
            return;
        };
        let mut state = self.lock();
        if state.closed || state.recovering {
            return;
        }
        state.recovering = true;
        if self.token.lock().is_some() {
            let streams: Vec<u16> = state
                .pending
                .iter()
                .filter(|(_, w)| matches!(w, Waiter::Stream { .. }))
                .map(|(&tag, _)| tag)
                .collect();
            for tag in streams {
                if let Some(Waiter::Stream { inbox, .. }) = state.pending.remove(&tag) {
                    inbox.end_with(interrupted_stream());
                }
                state.free(tag);
            }
        } else {
            self.cut_off(&mut state);
        }
        let waiting = state.pending.len();
        drop(state);
        if waiting == 0 {
            self.idle.notify_waiters();
        }
        tracing::warn!(
            "connection to {} lost; dialling again ({waiting} requests wait)",
            redial.addr,
        );
        tokio::spawn(recover(Arc::downgrade(self)));
    }

    /// Sorts the requests that were sent on a connection now lost, whose
    /// session is lost too: those that may be sent again wait for the next
    /// connection, the others fail (a Tclunk is done: the server forgot
    /// the fid). Requests made since the loss just wait.
    fn cut_off(&self, state: &mut State) {
        let mut fids = self.fids.lock();
        fids.connection_lost();
        let tags: Vec<u16> = state.pending.keys().copied().collect();
        for tag in tags {
            if !state.sent_at.contains_key(&tag)
                && matches!(state.pending.get(&tag), Some(Waiter::Reply { .. }))
            {
                continue;
            }
            let Some(waiter) = state.pending.remove(&tag) else {
                continue;
            };
            match waiter {
                Waiter::Reply {
                    tx,
                    msg: Msg::Tclunk(_),
                    ..
                } => {
                    let _ = tx.send(Ok(Rclunk {}.into()));
                }
                Waiter::Reply { request, tx, msg } => match fids.unrepeatable(&msg) {
                    None => {
                        state
                            .pending
                            .insert(tag, Waiter::Reply { request, tx, msg });
                        continue;
                    }
                    Some(why) => {
                        tracing::warn!("{why}");
                        let _ = tx.send(Err(Error::Interrupted(why)));
                    }
                },
                Waiter::Stream { inbox, .. } => inbox.end_with(interrupted_stream()),
                Waiter::Clunk(fid) => self.free_fid(fid),
                Waiter::Flushing | Waiter::Flush { .. } => {}
            }
            state.free(tag);
        }
    }

    /// One attempt to dial again: a new connection in the same dialect;
    /// then the session taken over if the server kept it, or else the fids
    /// made again on it; and the waiting requests sent on it.
    async fn reconnect(self: &Arc<Self>) -> Result<(), Error> {
        let redial = self
            .redial
            .as_ref()
            .expect("only a client that dials recovers");
        let stream = redial.dialer.dial(&redial.addr).await?;
        let (reader, writer) = tokio::io::split(stream);
        let (writer, _) = Writer::spawn(writer, usize::MAX);
        let options = Options {
            dialect: Some(self.dialect()),
            ..redial.options.clone()
        };
        let mut frames = FramedRead::new(reader, FrameCodec::new(options.msize, Dialect::Base));
        let (protocol, msize) = negotiate(&writer, &mut frames, &options, true).await?;
        if msize < self.msize() {
            let what = format!("msize {msize} now, {} before", self.msize());
            return Err(Error::protocol(what));
        }
        frames.decoder_mut().set_msize(msize);
        let mut fresh = Fresh {
            writer,
            frames,
            protocol,
        };
        let token = *self.token.lock();
        if let Some(token) = token {
            let refusal = if protocol == self.protocol() && msize == self.msize() {
                match fresh.resume(token).await? {
                    Ok((received, held, next)) => {
                        *self.token.lock() = Some(next);
                        let Fresh { writer, frames, .. } = fresh;
                        self.resumed(writer, received, held);
                        spawn_reader(Arc::downgrade(self), frames, protocol);
                        return Ok(());
                    }
                    Err(refused) => refused.to_string(),
                }
            } else {
                format!("the server speaks {protocol} with msize {msize} now")
            };
            tracing::warn!("session not taken over ({refusal}); its fids are made again");
            *self.token.lock() = None;
            let mut state = self.lock();
            self.cut_off(&mut state);
        }
        let groups = self.fids.lock().to_remake();
        let spare = self.alloc_fid();
        let remade = fresh.remake(groups, spare).await;
        self.free_fid(spare);
        let (made, lost) = remade?;
        {
            let mut fids = self.fids.lock();
            for (fid, why) in lost {
                tracing::warn!("fid {fid} not made again: {why}");
                fids.lose(fid, why);
            }
        }
        // Last before the requests: the server counts from here.
        let token = match protocol.resume {
            true => Some(fresh.session().await?),
            false => None,
        };
        let Fresh {
            writer,
            frames,
            protocol,
        } = fresh;
        *self.token.lock() = token;
        self.resume(writer, protocol, &made);
        spawn_reader(Arc::downgrade(self), frames, protocol);
        Ok(())
    }

    /// Takes over the session the server kept, on a new connection: of
    /// the requests sent, those among the first `received` reached the
    /// server, whose replies are `held` or still to come; the others, and
    /// the requests made meanwhile, are sent now. Nothing runs twice.
    fn resumed(&self, writer: Writer, received: u64, held: Vec<Fcall>) {
        let mut state = self.lock();
        *self.writer.lock() = writer;
        state.recovering = false;
        // A held reply on a tag whose request did not reach the server
        // answers the request before it on the tag, received already.
        let answers: Vec<Fcall> = held
            .into_iter()
            .filter(|f| state.reached(f.tag, received))
            .collect();
        let mut again: Vec<(u16, Msg)> = Vec::new();
        let tags: Vec<u16> = state.pending.keys().copied().collect();
        for tag in tags {
            let reached = state.reached(tag, received);
            let msg: Msg = match state.pending.get(&tag) {
                Some(Waiter::Flushing) if reached => {
                    let flushed = state
                        .pending
                        .values()
                        .any(|w| matches!(w, Waiter::Flush { old } if *old == tag));
                    // Given up on while the connection was away.
                    if !flushed && let Some(flush) = Self::alloc_tag(&mut state) {
                        state.pending.insert(flush, Waiter::Flush { old: tag });
                        again.push((flush, Tflush { oldtag: tag }.into()));
                    }
                    continue;
                }
                _ if reached => continue,
                Some(Waiter::Reply { msg, .. }) => msg.clone(),
                Some(Waiter::Clunk(fid)) => Tclunk { fid: *fid }.into(),
                Some(Waiter::Flush { old }) => Tflush { oldtag: *old }.into(),
                Some(Waiter::Flushing) => {
                    let flushed = state
                        .pending
                        .values()
                        .any(|w| matches!(w, Waiter::Flush { old } if *old == tag));
                    if !flushed {
                        state.pending.remove(&tag);
                        state.free(tag);
                    }
                    continue;
                }
                Some(Waiter::Stream { .. }) | None => continue,
            };
            again.push((tag, msg));
        }
        state.sent = received;
        let mut frames = Vec::new();
        for (tag, msg) in again {
            match self.encode(&Fcall { tag, msg }) {
                Ok(frame) => frames.push((tag, frame)),
                Err(e) => {
                    if let Some(Waiter::Reply { tx, .. }) = state.pending.remove(&tag) {
                        let _ = tx.send(Err(e));
                    }
                    state.free(tag);
                }
            }
        }
        tracing::info!(
            "session taken over; {} replies held, {} requests sent again",
            answers.len(),
            frames.len()
        );
        let writer = self.writer.lock();
        for (tag, frame) in frames {
            state.sending(Some(tag));
            writer.queue(frame);
        }
        drop(writer);
        drop(state);
        for fcall in answers {
            self.dispatch(fcall);
        }
        if self.lock().pending.is_empty() {
            self.idle.notify_waiters();
        }
        self.recovered.notify_waiters();
    }

    /// Takes the new connection into use: the requests waiting are sent on
    /// it, but those on fids that were not made again, which fail, and the
    /// clunks of such fids, which are done.
    fn resume(&self, writer: Writer, protocol: Protocol, made: &[u32]) {
        let mut state = self.lock();
        *self.writer.lock() = writer;
        self.streams.store(protocol.streams, Ordering::Relaxed);
        self.resume.store(protocol.resume, Ordering::Relaxed);
        state.recovering = false;
        // A new session: the server counts from its Rsession.
        state.sent = 0;
        state.sent_at.clear();
        let fids = self.fids.lock();
        let mut frames = Vec::new();
        // Fids made again whose Tclunk or Tremove is among those sent.
        let mut ending = Vec::new();
        let tags: Vec<u16> = state.pending.keys().copied().collect();
        for tag in tags {
            let Some(waiter) = state.pending.remove(&tag) else {
                continue;
            };
            let (waiter, msg): (Waiter, Msg) = match waiter {
                Waiter::Reply {
                    tx,
                    msg: Msg::Tclunk(t),
                    ..
                } if !made.contains(&t.fid.0) => {
                    let _ = tx.send(Ok(Rclunk {}.into()));
                    state.free(tag);
                    continue;
                }
                Waiter::Reply { request, tx, msg } => match fids.lost(&msg) {
                    Some(why) => {
                        let _ = tx.send(Err(Error::Lost(why)));
                        state.free(tag);
                        continue;
                    }
                    None => (
                        Waiter::Reply {
                            request,
                            tx,
                            msg: msg.clone(),
                        },
                        msg,
                    ),
                },
                other => {
                    state.pending.insert(tag, other);
                    continue;
                }
            };
            if let Msg::Tclunk(Tclunk { fid }) | Msg::Tremove(Tremove { fid }) = &msg {
                ending.push(fid.0);
            }
            match self.encode(&Fcall { tag, msg }) {
                Ok(frame) => {
                    state.pending.insert(tag, waiter);
                    frames.push((tag, frame));
                }
                Err(e) => {
                    if let Waiter::Reply { tx, .. } = waiter {
                        let _ = tx.send(Err(e));
                    }
                    state.free(tag);
                }
            }
        }
        // Made again, but clunked while that was under way.
        let unwanted: Vec<u32> = made
            .iter()
            .copied()
            .filter(|&fid| !fids.knows(fid) && !ending.contains(&fid))
            .collect();
        drop(fids);
        tracing::info!("connection recovered; {} requests sent again", frames.len());
        let writer = self.writer.lock();
        for (tag, frame) in frames {
            state.sending(Some(tag));
            writer.queue(frame);
        }
        drop(writer);
        let idle = state.pending.is_empty();
        drop(state);
        if idle {
            self.idle.notify_waiters();
        }
        self.recovered.notify_waiters();
        for fid in unwanted {
            self.clunk_detached(Fid(fid));
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
fn spawn_reader<R>(weak: Weak<Inner>, mut frames: FramedRead<R, FrameCodec>, protocol: Protocol)
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

/// Dials again, with a growing wait between attempts, until a connection
/// is recovered or the deadline passes.
async fn recover(weak: Weak<Inner>) {
    let began = Instant::now();
    let mut wait = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let redial = inner
            .redial
            .as_ref()
            .expect("only a client that dials recovers");
        let Recovery {
            deadline,
            backoff,
            max_backoff,
        } = redial.recovery;
        let left = deadline.saturating_sub(began.elapsed());
        match tokio::time::timeout(left, inner.reconnect()).await {
            Ok(Ok(())) => {
                let ms = began.elapsed().as_millis();
                tracing::info!("connection to {} recovered after {ms} ms", redial.addr);
                return;
            }
            Ok(Err(e)) => tracing::debug!("dialling {} again failed: {e}", redial.addr),
            Err(_) => {}
        }
        let next = wait.map_or(backoff, |w: std::time::Duration| (w * 2).min(max_backoff));
        wait = Some(next);
        if began.elapsed() + next >= deadline {
            tracing::warn!(
                "connection to {} not recovered in {deadline:?}",
                redial.addr
            );
            inner.close();
            return;
        }
        drop(inner);
        tokio::time::sleep(next).await;
    }
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
        let (reader, writer) = tokio::io::split(stream);
        // No limit: the requests are the client's own, bounded by its tags.
        let (writer, _) = Writer::spawn(writer, usize::MAX);
        let mut frames = FramedRead::new(reader, FrameCodec::new(options.msize, Dialect::Base));
        // Only a client that dials again can take a session over: others
        // would only keep theirs on the server past their end.
        let (protocol, msize) = negotiate(&writer, &mut frames, &options, redial.is_some()).await?;
        frames.decoder_mut().set_msize(msize);
        let mut fresh = Fresh {
            writer,
            frames,
            protocol,
        };
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

    /// True once the connection is gone: every request fails from then on.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// The msize the server agreed to.
    pub fn msize(&self) -> u32 {
        self.inner.msize()
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
