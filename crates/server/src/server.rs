//! A 9P server: limits, listeners, connections, and shutdown.

use std::future::Future;
use std::sync::Arc;

use ninep_transport::{Addr, Established, Listener, Peer, Stream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::auth::Policy;
use crate::fids::ExclusiveFiles;
use crate::fs::Filesystem;
use crate::session;
use crate::session::resume::{ResumableSessions, ResumeLimits, Sessions};

/// The explicit limits of a server. Past one, the peer gets an error and
/// everyone else carries on.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest message either side may send; a client asking more gets this.
    pub msize: u32,
    /// Fids one connection may hold.
    pub fids: usize,
    /// Requests one connection may have in flight; as many replies at
    /// most wait for its socket. A peer that reads no replies thus holds
    /// at most twice this many messages of msize in the server.
    pub requests: usize,
    /// Connections served at once.
    pub connections: usize,
    /// Reads answered at once by splicing a host file's pages into the
    /// connection (see [`Filesystem::host_file`]), server-wide; a
    /// connection takes at most a quarter of them. Each holds a pipe (a
    /// descriptor, two while it fills) and up to msize of pages until its
    /// reply is written; past the limit, reads are copied. 0: always copy.
    pub spliced_reads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            msize: 1024 * 1024 + ninep_wire::IOHDRSZ,
            fids: 64 * 1024,
            requests: 1024,
            connections: 1024,
            spliced_reads: 32,
        }
    }
}

/// The limits of the stream extension (docs/streams.md).
#[derive(Debug, Clone)]
pub struct StreamLimits {
    /// Streams one connection may have at once; 0 turns the extension off.
    pub streams: usize,
    /// Most credit a read stream keeps: how far the server may read ahead
    /// of what the client consumed. Its pieces wait for room in the reply
    /// queue like any reply, so this bounds what the link and the client
    /// hold, not the server's memory; it must cover the link's
    /// bandwidth-delay product for a stream to fill the link.
    pub read_window: u32,
    /// Most credit granted to a write stream: the bytes of it that may be
    /// in the server's hands at once.
    pub write_window: u32,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            streams: 16,
            read_window: 256 << 20,
            write_window: 64 << 20,
        }
    }
}

/// What every connection of a server shares.
pub(crate) struct Shared<F: Filesystem> {
    pub fs: F,
    pub limits: Limits,
    pub stream_limits: StreamLimits,
    pub policy: Policy,
    pub exclusive: ExclusiveFiles,
    /// The sessions that may be taken over (the resume extension).
    pub sessions: Sessions<F>,
    /// Reads being spliced, bounded by `limits.spliced_reads`.
    pub spliced_reads: Arc<Semaphore>,
}

/// Serves a [`Filesystem`] over any number of connections.
pub struct Server<F: Filesystem> {
    shared: Arc<Shared<F>>,
}

impl<F: Filesystem> Clone for Server<F> {
    fn clone(&self) -> Self {
        Server {
            shared: self.shared.clone(),
        }
    }
}

impl<F: Filesystem> std::fmt::Debug for Server<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("limits", &self.shared.limits)
            .finish()
    }
}

impl<F: Filesystem> Server<F> {
    /// A server of `fs` with the default limits.
    pub fn new(fs: F) -> Self {
        Self::with_limits(fs, Limits::default())
    }

    /// A server of `fs` within `limits`.
    pub fn with_limits(fs: F, limits: Limits) -> Self {
        Self::with_stream_limits(fs, limits, StreamLimits::default())
    }

    /// A server with limits on the stream extension too.
    pub fn with_stream_limits(fs: F, limits: Limits, stream_limits: StreamLimits) -> Self {
        Self::with_policy(fs, limits, stream_limits, Policy::default())
    }

    /// A server that serves only the attaches `policy` allows.
    pub fn with_policy(fs: F, limits: Limits, stream_limits: StreamLimits, policy: Policy) -> Self {
        Server {
            shared: Arc::new(Shared {
                fs,
                stream_limits,
                policy,
                exclusive: ExclusiveFiles::default(),
                sessions: Sessions::new(ResumeLimits::default()),
                spliced_reads: Arc::new(Semaphore::new(
                    limits.spliced_reads.min(Semaphore::MAX_PERMITS),
                )),
                limits,
            }),
        }
    }

    /// Keeps sessions whose connection was lost as `limits` says, from now
    /// on (the resume extension, docs/resume.md); `sessions: 0` stops
    /// offering it.
    pub fn set_resume_limits(&self, limits: ResumeLimits) {
        self.shared.sessions.set_limits(limits);
    }

    /// The limits of the resume extension.
    pub fn resume_limits(&self) -> ResumeLimits {
        self.shared.sessions.limits()
    }

    /// The sessions kept for a take-over now, detached or not.
    pub fn resumable_sessions(&self) -> ResumableSessions {
        self.shared.sessions.count()
    }

    /// Who may attach.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// The limits it serves within.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// The limits of the stream extension.
    pub fn stream_limits(&self) -> &StreamLimits {
        &self.shared.stream_limits
    }

    /// The file server served.
    pub fn fs(&self) -> &F {
        &self.shared.fs
    }

    /// Listens on `addr` (a dial string such as `tcp!*!564`) and serves until
    /// `shutdown` completes.
    pub async fn serve(
        &self,
        addr: &str,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let addr: Addr = addr
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let listener = addr.listen().await?;
        self.serve_listener(listener, shutdown).await
    }

    /// Serves connections from `listener` until `shutdown` completes, then
    /// ends every connection (clunking its fids) and returns.
    pub async fn serve_listener(
        &self,
        listener: Listener,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let stop = CancellationToken::new();
        let slots = Arc::new(Semaphore::new(self.shared.limits.connections));
        let mut conns = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let incoming = tokio::select! {
                accepted = listener.incoming() => match accepted {
                    Ok(incoming) => incoming,
                    Err(e) => {
                        // Out of descriptors and the like: keep serving the others.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            };
            tracing::debug!("connection from {}", incoming.peer());
            // A connection holds its slot from its handshake on: one that
            // never finishes it holds the slot until the handshake times out.
            match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    let shared = self.shared.clone();
                    let stop = stop.child_token();
                    conns.spawn(async move {
                        let established = tokio::select! {
                            established = incoming.establish() => established,
                            () = stop.cancelled() => return,
                        };
                        match established {
                            Ok(Established::Ready(link, peer)) => {
                                session::serve(shared, link, peer, stop).await;
                            }
                            Ok(Established::NotTls(link, peer)) => {
                                tracing::debug!("{peer}: not TLS");
                                session::refuse(link, "this port speaks TLS: dial tls!host!port")
                                    .await;
                            }
                            Err(e) => tracing::debug!("handshake: {e}"),
                        }
                        drop(permit);
                    });
                }
                Err(_) => {
                    conns.spawn(async move {
                        if let Ok(Established::Ready(link, _)) = incoming.establish().await {
                            session::refuse(link, "too many connections").await;
                        }
                    });
                }
            }
        }
        stop.cancel();
        while conns.join_next().await.is_some() {}
        self.shared.sessions.end_all().await;
        Ok(())
    }

    /// Serves connections from `listener` in a task of its own until the
    /// returned handle is stopped or dropped.
    pub fn spawn(self, listener: Listener) -> Spawned {
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        let task = tokio::spawn(async move {
            let _ = self
                .serve_listener(listener, shutdown.cancelled_owned())
                .await;
        });
        Spawned {
            stop,
            task: Some(task),
        }
    }

    /// Serves one already-connected stream (standard input and output, say)
    /// until the peer hangs up or `shutdown` completes. Nothing is known
    /// of the peer.
    pub async fn serve_stream(&self, link: Box<dyn Stream>, shutdown: impl Future<Output = ()>) {
        self.serve_peer(link, Peer::named("stream"), shutdown).await
    }

    /// Serves one already-connected stream from `peer`, until the peer
    /// hangs up or `shutdown` completes.
    pub async fn serve_peer(
        &self,
        link: Box<dyn Stream>,
        peer: Peer,
        shutdown: impl Future<Output = ()>,
    ) {
        let stop = CancellationToken::new();
        let serving = session::serve(self.shared.clone(), link, peer, stop.clone());
        tokio::pin!(serving);
        tokio::select! {
            () = &mut serving => return,
            () = shutdown => stop.cancel(),
        }
        serving.await;
        self.shared.sessions.end_all().await;
    }
}

/// A server serving in a task of its own ([`Server::spawn`]); dropping it
/// stops the server without waiting.
#[derive(Debug)]
pub struct Spawned {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spawned {
    /// Stops the server and waits until every connection has ended.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
