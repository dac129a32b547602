//! The resume extension (docs/resume.md): sessions that outlive their
//! connection, for a new connection to take over.
//!
//! A session gets a token at Tsession. From then on it counts the requests
//! it receives and holds the last reply on each tag until a new request on
//! the tag shows that the client received it. When its connection is lost,
//! the session is detached instead of ended: its fids, open files, locks
//! and requests running stay as they are, and replies that finish are held.
//! A connection that presents the token in Tresume takes the session over;
//! one left alone for the grace period, or the oldest of too many, ends as
//! a hang-up would have ended it.
//!
//! A child of `session` because Tsession, Tresume and the detachment
//! rewrite a connection's state (its replies, its requests in flight) that
//! no other module may touch.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use ninep_transport::{Frame, Writer};
use ninep_wire::{Errno, Fcall, Rresume, Rsession, Token};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::{Conn, Link, Session, encode_reply, error_reply, reset};
use crate::error::Error;
use crate::fs::Filesystem;

/// How many sessions a server keeps for their client to take over, and
/// for how long.
#[derive(Debug, Clone, Copy)]
pub struct ResumeLimits {
    /// Most sessions kept detached at once; past it, the one detached
    /// longest ends. 0 turns the extension off.
    pub sessions: usize,
    /// How long a detached session waits to be taken over before it ends.
    pub grace: Duration,
}

impl Default for ResumeLimits {
    fn default() -> Self {
        ResumeLimits {
            sessions: 64,
            grace: Duration::from_secs(60),
        }
    }
}

/// The sessions a server holds a resume token for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumableSessions {
    /// All of them, with a connection or without.
    pub total: usize,
    /// Those whose connection was lost, waiting to be taken over.
    pub detached: usize,
}

/// What a session with a token keeps for a take-over.
pub(crate) struct Kept {
    /// What Tversion settled, which a connection taking over must match.
    pub session: Session,
    /// Requests received since Rsession, on every connection of the session.
    pub received: u64,
    /// The last reply on each tag, until a new request on the tag arrives.
    pub held: HashMap<u16, Frame>,
    /// Cuts the session's connection, while it has one.
    pub hangup: Option<CancellationToken>,
    /// The detachment under way, numbered, while the session has no
    /// connection: the end of a grace period ends only its own.
    pub detached: Option<u64>,
}

impl Kept {
    /// Counts a request with `tag` received; a new request (not a piece of
    /// a write stream on its tag) shows that the reply before it on the tag
    /// was received.
    pub fn received(&mut self, tag: u16, new_request: bool) {
        self.received += 1;
        if new_request {
            self.held.remove(&tag);
        }
    }
}

/// A fresh token from the operating system's random source.
pub(crate) fn new_token() -> std::io::Result<Token> {
    let mut token = [0; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut token)?;
    Ok(Token(token))
}

/// The sessions of a server that have a token.
pub(crate) struct Sessions<F: Filesystem> {
    limits: Mutex<ResumeLimits>,
    /// Each with its token. Lock order: this, then a session's own lock.
    kept: Mutex<Vec<(Token, Arc<Conn<F>>)>>,
    /// Numbers detachments, in order.
    detachments: Mutex<u64>,
}

impl<F: Filesystem> Sessions<F> {
    pub fn new(limits: ResumeLimits) -> Self {
        Sessions {
            limits: Mutex::new(limits),
            kept: Mutex::new(Vec::new()),
            detachments: Mutex::new(0),
        }
    }

    pub fn limits(&self) -> ResumeLimits {
        *self.limits.lock()
    }

    pub fn set_limits(&self, limits: ResumeLimits) {
        *self.limits.lock() = limits;
    }

    /// True if the extension is offered at Tversion.
    pub fn offered(&self) -> bool {
        self.limits().sessions > 0
    }

    pub fn add(&self, token: Token, conn: Arc<Conn<F>>) {
        self.kept.lock().push((token, conn));
    }

    /// The session of `token`. Every token is compared, each in constant
    /// time, so the time taken tells nothing of which matched.
    pub fn find(&self, token: &Token) -> Option<Arc<Conn<F>>> {
        let kept = self.kept.lock();
        let mut found = None;
        for (t, conn) in kept.iter() {
            if t == token {
                found = Some(conn.clone());
            }
        }
        found
    }

    /// Gives the session of `old` the token `new`, once `old` is spent on
    /// a take-over. False if no session has `old` (any more).
    pub fn renew(&self, old: &Token, new: Token) -> bool {
        let mut kept = self.kept.lock();
        let mut found = None;
        for (i, (t, _)) in kept.iter().enumerate() {
            if t == old {
                found = Some(i);
            }
        }
        match found {
            Some(i) => {
                kept[i].0 = new;
                true
            }
            None => false,
        }
    }

    pub fn count(&self) -> ResumableSessions {
        let kept = self.kept.lock();
        ResumableSessions {
            total: kept.len(),
            detached: kept
                .iter()
                .filter(|(_, c)| c.detachment().is_some())
                .count(),
        }
    }

    /// Forgets the session of `conn`, which has ended.
    pub fn forget(&self, conn: &Arc<Conn<F>>) {
        self.kept.lock().retain(|(_, c)| !Arc::ptr_eq(c, conn));
    }

    /// The number of a new detachment.
    pub fn next_detachment(&self) -> u64 {
        let mut n = self.detachments.lock();
        *n += 1;
        *n
    }

    /// Ends the session of `conn` if it is still in detachment `number`:
    /// its grace period is over.
    pub async fn expire(&self, conn: &Arc<Conn<F>>, number: u64) {
        if let Some(session) = conn.end_detached(|n| n == number) {
            tracing::debug!("a detached session was not taken over in time: ended");
            reset(conn, session.dialect).await;
        }
    }

    /// Ends the sessions detached longest while more than the limit are.
    pub async fn enforce_limit(&self) {
        let limit = self.limits().sessions;
        let mut ended = Vec::new();
        {
            let kept = self.kept.lock();
            let mut detached: Vec<(u64, &Arc<Conn<F>>)> = kept
                .iter()
                .filter_map(|(_, conn)| Some((conn.detachment()?, conn)))
                .collect();
            detached.sort_by_key(|&(n, _)| n);
            let excess = detached.len().saturating_sub(limit);
            for &(number, conn) in &detached[..excess] {
                if let Some(session) = conn.end_detached(|n| n == number) {
                    ended.push((conn.clone(), session));
                }
            }
        }
        for (conn, session) in ended {
            tracing::debug!("too many detached sessions: the oldest ended");
            reset(&conn, session.dialect).await;
        }
    }

    /// Ends every detached session: the server is stopping.
    pub async fn end_all(&self) {
        let ended: Vec<_> = {
            let kept = self.kept.lock();
            kept.iter()
                .filter_map(|(_, conn)| Some((conn.clone(), conn.end_detached(|_| true)?)))
                .collect()
        };
        for (conn, session) in ended {
            reset(&conn, session.dialect).await;
        }
    }
}

impl<F: Filesystem> Conn<F> {
    /// The number of the session's detachment under way, if it has no
    /// connection.
    pub(crate) fn detachment(&self) -> Option<u64> {
        self.live.lock().kept.as_ref()?.detached
    }

    /// Takes the token from a detached session whose detachment number
    /// `ends`, so that nothing takes it over any more; returns what its
    /// Tversion settled, for the reset that ends it.
    pub(crate) fn end_detached(&self, ends: impl Fn(u64) -> bool) -> Option<Session> {
        let mut live = self.live.lock();
        let number = live.kept.as_ref()?.detached?;
        if !ends(number) {
            return None;
        }
        live.kept.take().map(|kept| kept.session)
    }
}

/// Tsession: gives the session a token, and counts its requests and holds
/// its replies from then on.
pub(super) async fn keep<F: Filesystem>(
    conn: &Arc<Conn<F>>,
    current: Session,
    tag: u16,
    link: &Link,
) {
    let token = if conn.live.lock().kept.is_some() {
        Err(Error::with_errno(Errno::EINVAL, "the session has a token"))
    } else {
        new_token().map_err(|e| Error::with_errno(Errno::EIO, format!("no token: {e}")))
    };
    let token = match token {
        Ok(token) => token,
        Err(err) => {
            conn.send(current, tag, error_reply(&err, current.dialect))
                .await;
            return;
        }
    };
    // Sent before the session keeps anything: the count starts after it.
    conn.send(current, tag, Rsession { token }.into()).await;
    conn.live.lock().kept = Some(Kept {
        session: current,
        received: 0,
        held: HashMap::new(),
        hangup: Some(link.hangup.clone()),
        detached: None,
    });
    conn.shared.sessions.add(token, conn.clone());
}

/// Tresume: hands the session of `token` to this connection, which must
/// have done nothing since Tversion, in the same dialect, extensions and
/// msize. A session still on another connection is cut from it first
/// (the token is proof enough that its client asks). Rresume goes out on
/// the new connection, then every reply held, then what the requests still
/// running answer.
pub(super) async fn take_over<F: Filesystem>(
    fresh: &Arc<Conn<F>>,
    current: Session,
    tag: u16,
    token: Token,
    link: &Link,
) -> Result<Arc<Conn<F>>, Error> {
    let untouched = {
        let live = fresh.live.lock();
        live.kept.is_none() && live.inflight.is_empty()
    } && fresh.fids.is_empty();
    if !untouched {
        let why = "Tresume must come first after Tversion";
        return Err(Error::with_errno(Errno::EINVAL, why));
    }
    let refused = || Error::with_errno(Errno::EPERM, "resume refused: unknown or expired token");
    let conn = fresh.shared.sessions.find(&token).ok_or_else(refused)?;
    {
        let live = conn.live.lock();
        let kept = live.kept.as_ref().ok_or_else(refused)?;
        if kept.session != current {
            let s = kept.session;
            let why = format!(
                "resume refused: the session speaks {} with msize {}",
                s.protocol(),
                s.msize
            );
            return Err(Error::with_errno(Errno::EINVAL, why));
        }
    }
    // The token is spent: a copy of it taken on the way (or a take-over
    // replayed) finds nothing. The next one goes out with Rresume.
    let next = new_token().map_err(|e| Error::with_errno(Errno::EIO, format!("no token: {e}")))?;
    if !fresh.shared.sessions.renew(&token, next) {
        return Err(refused());
    }
    loop {
        let detached = conn.detached.notified();
        tokio::pin!(detached);
        detached.as_mut().enable();
        {
            let mut live = conn.live.lock();
            let live = &mut *live;
            let kept = live.kept.as_mut().ok_or_else(refused)?;
            match &kept.hangup {
                Some(other) => other.cancel(),
                None => {
                    kept.hangup = Some(link.hangup.clone());
                    kept.detached = None;
                    let held = u32::try_from(kept.held.len()).expect("held replies are bounded");
                    let reply = Rresume {
                        received: kept.received,
                        held,
                        token: next,
                    };
                    live.replies = link.writer.clone();
                    live.replies
                        .queue(encode_reply(Fcall::new(tag, reply), current));
                    for frame in kept.held.values() {
                        live.replies.queue(frame.clone());
                    }
                    tracing::debug!(
                        "session taken over by {}: {} requests received, {held} replies held",
                        fresh.peer,
                        kept.received
                    );
                    break;
                }
            }
        }
        // Its connection is being cut; it detaches at once.
        detached.await;
    }
    Ok(conn)
}

/// Keeps the session of a lost connection for a take-over if it has a
/// token: requests go on and their replies are held; streams end, since
/// they cannot go on without their connection. It ends after the grace
/// period unless taken over. False if it has no token.
pub(super) async fn detach<F: Filesystem>(conn: &Arc<Conn<F>>) -> bool {
    let sessions = &conn.shared.sessions;
    let number = sessions.next_detachment();
    let (sink, _) = Writer::spawn(tokio::io::sink(), conn.shared.limits.requests);
    {
        let mut live = conn.live.lock();
        let live = &mut *live;
        let Some(kept) = live.kept.as_mut() else {
            return false;
        };
        kept.hangup = None;
        kept.detached = Some(number);
        live.replies = Arc::new(sink);
        live.inflight.retain(|_, entry| {
            let stream = entry.stream_io.is_some();
            if stream && let Some(abort) = &entry.abort {
                abort.abort();
            }
            !stream
        });
    }
    conn.detached.notify_waiters();
    let grace = sessions.limits().grace;
    let timer = conn.clone();
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        timer.shared.sessions.expire(&timer, number).await;
    });
    sessions.enforce_limit().await;
    true
}
