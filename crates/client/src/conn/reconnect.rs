//! Losing the connection and getting back to work on a new one
//! (docs/resume.md): which requests in flight fail and which wait, the
//! dialling again, then the session taken over or the fids made again, and
//! the waiting requests sent on the new connection. It runs from the moment
//! the reader meets the end of the connection until requests flow again.
//!
//! A child of `conn` because it rewrites the connection's state (tags,
//! waiters, the writer) that no other module may touch. What is known of
//! each fid, and the new connection's first exchanges, are in `recover.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use ninep_transport::{Addr, Dialer, Writer};
use ninep_wire::*;

use super::{Inner, Options, State, Waiter, interrupted_stream, spawn_reader};
use crate::error::Error;
use crate::recover::{Fresh, Recovery};

/// What a client dials again when its connection is lost.
pub(super) struct Redial {
    pub(super) addr: Addr,
    pub(super) dialer: Dialer,
    pub(super) options: Options,
    pub(super) recovery: Recovery,
}

impl Inner {
    /// The connection is gone: without a way to dial again, every request
    /// fails; with one, the recovery starts. A session the server keeps
    /// (the resume extension) loses only its streams until the server says
    /// what it received; otherwise requests that may be sent again wait
    /// for the next connection and the others fail now.
    pub(super) fn lost(self: &Arc<Self>) {
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
        for tag in state.tags_in_order() {
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
        let options = Options {
            dialect: Some(self.dialect()),
            ..redial.options.clone()
        };
        let (mut fresh, msize) = Fresh::start(stream, &options, true).await?;
        if msize < self.msize() {
            let what = format!("msize {msize} now, {} before", self.msize());
            return Err(Error::protocol(what));
        }
        let protocol = fresh.protocol;
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
        for tag in state.tags_in_order() {
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
        for tag in state.tags_in_order() {
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
