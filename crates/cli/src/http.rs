//! `ninep http`: an HTTP (and WebDAV) door on a 9P tree, which is a
//! server's (`ADDR`, or a directory in it, `ADDR:/PATH`) or a name space
//! built in this process from a namespace file, as `ninep mux` builds one.
//! The door itself is the ninep-http crate.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use ninep_client::{Client, Fid, Options};
use ninep_http::{Door, Limits};
use ninep_mux::Config;
use ninep_server::Server;

use crate::args::{Place, ServerArgs, place};

#[derive(clap::Args)]
pub struct Args {
    /// What to serve: a 9P server's address (ADDR, or ADDR:/PATH for a
    /// directory in it) or a namespace file; default: the -a address.
    source: Option<String>,
    /// Address and port to listen on.
    #[arg(short, long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Allow PUT, DELETE and MKCOL (and with --dav, the WebDAV methods
    /// that change files).
    #[arg(long)]
    writable: bool,
    /// Speak WebDAV (classes 1 and 2 with --writable).
    #[arg(long)]
    dav: bool,
    /// Most bytes of a file read ahead of one HTTP client.
    #[arg(long, default_value_t = ninep_http::Options::default().window)]
    window: u64,
    /// Most bytes of files kept in memory and sent again while a
    /// walk shows them unchanged (0 keeps none).
    #[arg(long, default_value_t = ninep_http::Options::default().cache_bytes)]
    cache_bytes: usize,
    /// Most HTTP connections served at once.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Most bytes of request headers.
    #[arg(long, default_value_t = Limits::default().max_header_bytes)]
    max_header_bytes: usize,
    /// Most bytes of a request body.
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    max_body_bytes: u64,
    #[command(flatten)]
    conn: ServerArgs,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let source = args.source.as_deref().unwrap_or(&args.conn.addr);
    let root = match place(source) {
        Place::Local(file) if Path::new(file).is_file() => namespace(file, &args.conn).await?,
        Place::Local(addr) => args
            .conn
            .attach_to(addr, args.conn.n_uname())
            .await?
            .into_root(),
        Place::Remote { addr, path } => {
            let fsys = args.conn.attach_to(addr, args.conn.n_uname()).await?;
            fsys.walk(path).await.with_context(|| source.to_owned())?
        }
    };
    let options = ninep_http::Options {
        writable: args.writable,
        dav: args.dav,
        window: args.window,
        cache_bytes: args.cache_bytes,
        limits: Limits {
            max_connections: args.max_connections,
            max_header_bytes: args.max_header_bytes,
            max_body_bytes: args.max_body_bytes,
            ..Limits::default()
        },
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    let bound = listener.local_addr()?;
    eprintln!("ninep: serving http on {bound}");
    Door::new(root, options)
        .serve(listener, crate::shutdown_signal())
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// The root of a mux built from the namespace file `file`, served in this
/// process over an in-memory pipe.
async fn namespace(file: &str, conn: &ServerArgs) -> Result<Fid> {
    let config = Config {
        uname: conn.uname.clone(),
        n_uname: conn
            .n_uname
            .unwrap_or_else(|| rustix::process::getuid().as_raw()),
        ..Config::default()
    };
    let mux = crate::mux::build(Some(Path::new(file)), config).await?;
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(async move {
        Server::new(mux)
            .serve_stream(Box::new(theirs), std::future::pending())
            .await;
    });
    let client = Client::over(Box::new(ours), Options::default()).await?;
    Ok(client.attach(&conn.uname, "").await?.into_root())
}

/// Bytes the pipe between the door and its mux holds each way.
const PIPE_BYTES: usize = 4 << 20;
