//! The HTTP layer of ninep: a door through which browsers, curl, caches and
//! WebDAV clients reach any 9P tree.
//!
//! A [`Door`] serves the tree under one fid over HTTP/1.1 and HTTP/2 (on
//! hyper), every HTTP client through the same 9P connection. GET and HEAD
//! are its own ([`get`], [`listing`]): a file is one walk and one stat,
//! answered with ranges, an ETag made from the qid and the conditional
//! requests that depend on them ([`validators`]), files it has sent kept
//! and sent again while their qid holds ([`cache`]); a directory is an
//! HTML or JSON listing. With [`Options::writable`], PUT, DELETE and
//! MKCOL, and with [`Options::dav`] the WebDAV methods, are dav-server's,
//! on the tree as [`dav::NinepFs`] presents it. A request path never walks
//! outside the tree ([`path`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let fsys = ninep_client::Client::connect("tcp!localhost!564").await?.attach("glenda", "").await?;
//! let door = ninep_http::Door::new(fsys.into_root(), ninep_http::Options::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! door.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```

#![warn(clippy::unwrap_used)]

mod body;
pub mod cache;
pub mod dav;
pub mod get;
pub mod listing;
pub mod path;
mod status;
pub mod validators;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dav_server::{DavHandler, DavMethod, DavMethodSet, memls::MemLs};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use ninep_client::Fid;
use ninep_wire::consts::dotl::O_RDONLY;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use body::Body;
use cache::Cache;
use path::RequestPath;
use status::{failed, plain};

/// What a door lets clients do, and how much it lets them take.
#[derive(Debug, Clone)]
pub struct Options {
    /// Allow PUT, DELETE and MKCOL (and, with `dav`, PROPPATCH, COPY,
    /// MOVE, LOCK and UNLOCK).
    pub writable: bool,
    /// Speak WebDAV: PROPFIND and OPTIONS, and with `writable` the rest of
    /// classes 1 and 2.
    pub dav: bool,
    /// Most bytes of a file read ahead of one HTTP client.
    pub window: u64,
    /// Most bytes of files kept to be sent again (0 keeps none).
    pub cache_bytes: usize,
    /// Limits on clients.
    pub limits: Limits,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            writable: false,
            dav: false,
            window: 4 << 20,
            cache_bytes: 64 << 20,
            limits: Limits::default(),
        }
    }
}

/// Limits that keep one client from taking the door.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// Most bytes of request headers (431 beyond, for HTTP/1.1).
    pub max_header_bytes: usize,
    /// Most bytes of a request body (413 beyond).
    pub max_body_bytes: u64,
    /// Most bytes of a request path (400 beyond).
    pub max_path_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_header_bytes: 16 << 10,
            max_body_bytes: 64 << 30,
            max_path_bytes: 4096,
        }
    }
}

/// Methods other than GET and HEAD that change nothing in the tree.
const CHANGES_NOTHING: [&str; 2] = ["OPTIONS", "PROPFIND"];

/// How long a connection may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP door on the tree under a fid.
#[derive(Clone)]
pub struct Door {
    shared: Arc<Shared>,
}

struct Shared {
    root: Arc<Fid>,
    options: Options,
    dav: DavHandler,
    cache: Cache,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("root", &self.shared.root)
            .field("options", &self.shared.options)
            .finish()
    }
}

impl Door {
    /// A door on the tree under `root`.
    pub fn new(root: Fid, options: Options) -> Door {
        let root = Arc::new(root);
        let mut methods = DavMethodSet::none();
        let mut allow = |list: &[DavMethod]| {
            for &m in list {
                methods.add(m);
            }
        };
        if options.writable {
            allow(&[DavMethod::Put, DavMethod::Delete, DavMethod::MkCol]);
        }
        if options.dav {
            allow(&[DavMethod::Options, DavMethod::PropFind]);
        }
        if options.dav && options.writable {
            allow(&[
                DavMethod::PropPatch,
                DavMethod::Copy,
                DavMethod::Move,
                DavMethod::Lock,
                DavMethod::Unlock,
            ]);
        }
        let fs = dav::NinepFs::new(root.clone(), options.window);
        let mut config = DavHandler::builder()
            .filesystem(Box::new(fs))
            .methods(methods)
            .autoindex(false);
        if options.dav && options.writable {
            config = config.locksystem(MemLs::new());
        }
        Door {
            shared: Arc::new(Shared {
                root,
                cache: Cache::new(options.cache_bytes),
                options,
                dav: config.build_handler(),
            }),
        }
    }

    /// Serves connections from `listener` until `shutdown` completes; the
    /// connections still open then are dropped.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let limits = &self.shared.options.limits;
        let room = Arc::new(Semaphore::new(limits.max_connections));
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .max_buf_size(limits.max_header_bytes.max(8192));
        builder
            .http2()
            .max_header_list_size(limits.max_header_bytes.try_into().unwrap_or(u32::MAX));
        let builder = Arc::new(builder);
        let mut connections = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                permit = room.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                () = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors, say: the listener itself is fine.
                        tracing::warn!("accept: {e}");
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            let door = self.clone();
            let builder = builder.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let door = door.clone();
                    async move { Ok::<_, Infallible>(door.handle(req).await) }
                });
                if let Err(e) = builder
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!("{peer}: {e}");
                }
                drop(permit);
            });
            // Reap the connections that ended, so the set stays small.
            while connections.try_join_next().is_some() {}
        }
        Ok(())
    }

    /// Answers one request.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let shared = &self.shared;
        let limits = &shared.options.limits;
        let path = match RequestPath::parse(req.uri().path(), limits.max_path_bytes) {
            Ok(path) => path,
            Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        if req.method() == Method::GET || req.method() == Method::HEAD {
            let (parts, _) = req.into_parts();
            return self.get(&parts, &path).await;
        }
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limits.max_body_bytes) {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
        let max = usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX);
        let changes = shared.options.writable && !CHANGES_NOTHING.contains(&req.method().as_str());
        let req = req.map(|body| Limited::new(body, max).map_err(io::Error::other));
        let res = shared.dav.handle(req).await.map(BodyExt::boxed_unsync);
        // What the tree held may have changed under the names kept.
        if changes {
            shared.cache.clear();
        }
        res
    }

    async fn get(&self, req: &http::request::Parts, path: &RequestPath) -> Response<Body> {
        let shared = &self.shared;
        if !path.slash {
            return self.get_file(req, path).await;
        }
        let fid = match shared.root.walk(&path.names).await {
            Ok(fid) => fid,
            Err(e) => return failed(&e),
        };
        let url = req.uri.path();
        // The walk's qid tells a directory from a file.
        if !fid.qid().ty.is_dir() {
            return plain(StatusCode::NOT_FOUND, "not a directory");
        }
        listing::directory(&req.headers, req.method == Method::HEAD, url, &fid).await
    }

    /// GET or HEAD of a path without a final slash: a file, or a directory,
    /// sent to its URL with one.
    async fn get_file(&self, req: &http::request::Parts, path: &RequestPath) -> Response<Body> {
        let shared = &self.shared;
        let target = match self.reach(req, path).await {
            Ok(target) => target,
            Err(e) => return failed(&e),
        };
        if target.qid().ty.is_dir() {
            // Links in the listing are relative to the directory.
            let mut res = plain(StatusCode::MOVED_PERMANENTLY, "a directory");
            let to = format!("{}/", req.uri.path());
            if let Ok(to) = header::HeaderValue::from_str(&to) {
                res.headers_mut().insert(header::LOCATION, to);
            }
            return res;
        }
        let name = path.last().unwrap_or_default();
        get::file(req, name, target, shared.options.window).await
    }

    /// The file at `path` as far as `req` needs it: kept, if it opens with
    /// the qid the door kept it under; else walked to, and for a GET
    /// sure to send it from its start opened, stat'ed and its first piece
    /// read, and kept if it is worth keeping.
    async fn reach(
        &self,
        req: &http::request::Parts,
        path: &RequestPath,
    ) -> Result<get::Target, ninep_client::Error> {
        let shared = &self.shared;
        let key = path.joined();
        if let Some(kept) = shared.cache.get(&key) {
            // Opened as a GET of it would be: a permission taken away
            // shows though the qid holds.
            let opened = shared.root.walk_open_clunk(&path.names, O_RDONLY).await;
            if opened.as_ref().is_ok_and(|qid| *qid == kept.qid) {
                return Ok(get::Target::Kept(kept));
            }
            shared.cache.forget(&key);
            opened?;
        }
        if !get::sends_from_the_start(req) {
            return shared.root.walk(&path.names).await.map(get::Target::Walked);
        }
        let (file, info, first) = shared
            .root
            .walk_open_read(&path.names, O_RDONLY, u32::MAX)
            .await?;
        shared.cache.keep(&key, file.fid().qid(), &info, &first);
        Ok(get::Target::Read(file, Box::new(info), first))
    }
}
