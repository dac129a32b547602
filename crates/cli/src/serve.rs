//! `ninep serve`: a file server (a host directory, ramfs, taskbag, or a
//! device: pipe, net) on a listening socket or on stdin/stdout.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ninep_export::users::UserDb;
use ninep_export::{Export, Identity, Options};
use ninep_ramfs::{RamFs, Taskbag};
use ninep_server::{Filesystem, Limits, ResumeLimits, Server, StreamLimits};
use ninep_transport::{Addr, Listener};
use rustix::process::{PidfdFlags, PidfdGetfdFlags};

use crate::auth::PolicyArgs;

#[derive(clap::Args)]
pub struct Args {
    /// What to serve: a directory, ramfs (an empty in-memory tree),
    /// taskbag, pipe (data and data1; the tree name names the pipe) or net
    /// (this host's TCP as Plan 9's /net). A directory named like those is
    /// given with a path (./ramfs).
    tree: String,
    /// Refuse every change to an exported directory.
    #[arg(long)]
    readonly: bool,
    /// Run each request as the attaching user (needs root).
    #[arg(long, conflicts_with = "squash")]
    multiuser: bool,
    /// Run every request as USER (needs root); by default requests run as
    /// the server.
    #[arg(long, value_name = "USER")]
    squash: Option<String>,
    /// Open device nodes, fifos and sockets in an exported directory.
    #[arg(long)]
    allow_special: bool,
    /// Address to listen on: tcp!host!port, tls!host!port, unix!/path or
    /// host:port. Under systemd socket activation (LISTEN_FDS), the TCP
    /// socket passed instead.
    #[arg(short, long, default_value = "tcp!127.0.0.1!564")]
    listen: String,
    /// Serve one client on standard input and output instead of listening.
    #[arg(long)]
    stdio: bool,
    #[command(flatten)]
    auth: PolicyArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    devices: crate::devices::DeviceArgs,
    /// Largest file of a ramfs (or taskbag), in bytes: a write or
    /// truncation past it is refused (EFBIG).
    #[arg(long, default_value_t = ninep_ramfs::MAX_FILE_SIZE, value_name = "BYTES")]
    ramfs_max_file_size: u64,
    /// Most bytes all files of a ramfs hold together, past which writes
    /// are refused (ENOSPC); by default half of the machine's memory.
    #[arg(long, value_name = "BYTES")]
    ramfs_max_bytes: Option<u64>,
}

/// The limits of a server, as flags.
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Largest message, in bytes.
    #[arg(long, default_value_t = Limits::default().msize)]
    msize: u32,
    /// Most fids per connection.
    #[arg(long, default_value_t = Limits::default().fids)]
    max_fids: usize,
    /// Most requests in flight per connection.
    #[arg(long, default_value_t = Limits::default().requests)]
    max_requests: usize,
    /// Most connections at once.
    #[arg(long, default_value_t = Limits::default().connections)]
    max_connections: usize,
    /// Most reads answered at once by splicing a file's pages into the
    /// socket, uncopied (each holds a pipe); 0 copies every read.
    #[arg(long, default_value_t = Limits::default().spliced_reads)]
    max_spliced_reads: usize,
    /// Most streams (docs/streams.md) per connection; 0 turns them off.
    #[arg(long, default_value_t = StreamLimits::default().streams)]
    max_streams: usize,
    /// Most credit a read stream keeps: how far the server may read ahead
    /// of the client (cover the link's bandwidth-delay product).
    #[arg(long, default_value_t = StreamLimits::default().read_window)]
    stream_read_window: u32,
    /// Most bytes of one write stream held by the server at once.
    #[arg(long, default_value_t = StreamLimits::default().write_window)]
    stream_write_window: u32,
    /// Most sessions kept after their connection was lost, for their
    /// clients to take over (the resume extension, docs/resume.md); 0
    /// turns the extension off.
    #[arg(long, default_value_t = ResumeLimits::default().sessions)]
    resume_sessions: usize,
    /// Seconds a session whose connection was lost waits to be taken over.
    #[arg(long, value_name = "SECONDS", default_value_t = ResumeLimits::default().grace.as_secs())]
    resume_grace: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            msize: self.msize.max(ninep_server::MIN_MSIZE),
            fids: self.max_fids,
            requests: self.max_requests,
            connections: self.max_connections,
            spliced_reads: self.max_spliced_reads,
        }
    }

    pub fn resume_limits(&self) -> ResumeLimits {
        ResumeLimits {
            sessions: self.resume_sessions,
            grace: std::time::Duration::from_secs(self.resume_grace),
        }
    }

    pub fn stream_limits(&self) -> StreamLimits {
        StreamLimits {
            streams: self.max_streams,
            read_window: self.stream_read_window.max(ninep_server::MIN_MSIZE),
            write_window: self.stream_write_window.max(ninep_server::MIN_MSIZE),
        }
    }
}

impl Args {
    /// The limits a ramfs (or taskbag) is held to.
    fn ramfs_limits(&self) -> ninep_ramfs::Limits {
        let defaults = ninep_ramfs::Limits::default();
        ninep_ramfs::Limits {
            max_file_size: self.ramfs_max_file_size,
            max_bytes: self.ramfs_max_bytes.unwrap_or(defaults.max_bytes),
        }
    }
}

/// Raises this process's limit on open descriptors to the most it may
/// have: each fid of an export holds one, and each open file one more, so
/// the 1024 a shell usually allows is soon used.
fn allow_all_descriptors() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!("open descriptors left at their limit: {e}");
        }
    }
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let limits = args.limits.limits();
    match args.tree.as_str() {
        "ramfs" => serve(RamFs::with_limits(args.ramfs_limits()), limits, &args).await,
        "taskbag" => serve(Taskbag::with_limits(args.ramfs_limits()), limits, &args).await,
        "pipe" => serve(args.devices.pipe(), limits, &args).await,
        "net" => serve(args.devices.net()?, limits, &args).await,
        dir => {
            if !std::path::Path::new(dir).is_dir() {
                bail!("{dir}: not a directory (nor ramfs, taskbag, pipe or net)");
            }
            let root = rustix::process::geteuid().is_root();
            let identity = if args.multiuser {
                if !root {
                    bail!("--multiuser needs root");
                }
                Identity::Multiuser
            } else if let Some(user) = &args.squash {
                if !root {
                    bail!("--squash needs root");
                }
                let users = UserDb::default();
                users.refresh().await;
                let creds = users.resolve(user, ninep_wire::NONUNAME)?;
                Identity::Squash(creds)
            } else {
                Identity::Server
            };
            let options = Options {
                readonly: args.readonly,
                identity,
                allow_special: args.allow_special,
            };
            let export = Export::new(dir, options).with_context(|| dir.to_owned())?;
            allow_all_descriptors();
            serve(export, limits, &args).await
        }
    }
}

async fn serve<F: Filesystem>(fs: F, limits: Limits, args: &Args) -> Result<ExitCode> {
    let policy = args.auth.policy()?;
    let server = Server::with_policy(fs, limits, args.limits.stream_limits(), policy);
    server.set_resume_limits(args.limits.resume_limits());
    if args.stdio {
        let stdio = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
        server
            .serve_stream(Box::new(stdio), crate::shutdown_signal())
            .await;
        return Ok(ExitCode::SUCCESS);
    }
    listen(&server, &args.listen, &args.auth, &args.tree).await
}

/// Serves `what` on `listen` (with the TLS `auth` says), or on the socket
/// systemd passed, until SIGINT or SIGTERM, after saying where on standard
/// error (scripts read the port from that line).
pub async fn listen<F: Filesystem>(
    server: &Server<F>,
    listen: &str,
    auth: &PolicyArgs,
    what: &str,
) -> Result<ExitCode> {
    let addr: Addr = listen.parse().map_err(anyhow::Error::msg)?;
    let listener = match activated(&addr, auth)? {
        Some(listener) => listener,
        None => addr
            .listen_with(auth.tls()?)
            .await
            .with_context(|| format!("listen on {addr}"))?,
    };
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!("ninep: serving {what} on {bound}");
    server
        .serve_listener(listener, crate::shutdown_signal())
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// The listening TCP socket systemd passed this process (socket activation:
/// LISTEN_PID is ours, LISTEN_FDS is 1, the socket is descriptor 3), if
/// any. A `tls!` `listen` address takes its connections with TLS.
fn activated(listen: &Addr, auth: &PolicyArgs) -> Result<Option<Listener>> {
    let pid = rustix::process::getpid().as_raw_nonzero().get().to_string();
    if std::env::var("LISTEN_PID").ok() != Some(pid) {
        return Ok(None);
    }
    let count = std::env::var("LISTEN_FDS").unwrap_or_default();
    if count != "1" {
        bail!("LISTEN_FDS={count:?}: want exactly one socket");
    }
    // Owning a descriptor by its number takes unsafe code; a copy of it
    // fetched through a pidfd of our own process does not.
    let me = rustix::process::pidfd_open(rustix::process::getpid(), PidfdFlags::empty())
        .context("pidfd_open")?;
    let fd = rustix::process::pidfd_getfd(&me, SD_LISTEN_FDS_START, PidfdGetfdFlags::empty())
        .context("the socket systemd passed (descriptor 3)")?;
    let socket = std::net::TcpListener::from(fd);
    // A Unix socket's address is no TCP one.
    socket
        .local_addr()
        .context("the socket systemd passed is not a TCP socket (ListenStream=PORT)")?;
    socket.set_nonblocking(true)?;
    let socket = tokio::net::TcpListener::from_std(socket)?;
    Ok(Some(match listen {
        Addr::Tls { .. } => Listener::Tls(
            socket,
            auth.tls()?.context("tls! needs --tls-cert and --tls-key")?,
        ),
        _ => Listener::Tcp(socket),
    }))
}

/// The first descriptor systemd passes (sd_listen_fds(3)).
const SD_LISTEN_FDS_START: rustix::fd::RawFd = 3;
