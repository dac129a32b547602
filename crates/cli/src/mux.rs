//! `ninep mux`: a 9P server whose tree is built from other 9P servers with
//! mount and bind, each client in a name space of its own. The multiplexing
//! is in the ninep-mux crate; this reads the namespace file and serves.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use ninep_export::users::UserDb;
use ninep_mux::{Config, Mux, nsfile};
use ninep_server::Server;
use ninep_server::auth::Users;
use ninep_wire::NONUNAME;

use crate::args::RecoverArgs;
use crate::auth::{PolicyArgs, UpstreamArgs};
use crate::serve::LimitArgs;

#[derive(clap::Args)]
pub struct Args {
    /// Namespace file: the base name space every client starts from.
    file: Option<PathBuf>,
    /// Address to listen on: tcp!host!port, tls!host!port, unix!/path or
    /// host:port. Under systemd socket activation (LISTEN_FDS), the TCP
    /// socket passed instead.
    #[arg(short, long, default_value = "tcp!127.0.0.1!564")]
    listen: String,
    /// User the mux attaches to its servers as.
    #[arg(long, env = "USER", default_value = "none")]
    uname: String,
    /// Numeric user id sent with it (default: the uid of --uname on this
    /// host, or none if it has no such user).
    #[arg(long)]
    n_uname: Option<u32>,
    /// Whom the mux attaches to its servers as: single (--uname, for every
    /// client) or user (each client's own user, so each server decides what
    /// each may do; have clients prove who they are with --auth).
    #[arg(long, default_value = "single", value_parser = ["single", "user"])]
    access: String,
    /// Most requests in flight to one server; more wait their turn.
    #[arg(long, default_value_t = Config::default().window)]
    window: usize,
    /// Most bytes read ahead upstream for a file a client reads in order
    /// (cover the upstream link's bandwidth-delay product); 0 turns it off.
    #[arg(long, default_value_t = Config::default().read_ahead)]
    read_ahead: u64,
    /// Most bytes read ahead upstream for all open files together; a file
    /// read in order while they are in use is read only as asked.
    #[arg(long, default_value_t = Config::default().read_ahead_total)]
    read_ahead_total: u64,
    #[command(flatten)]
    auth: PolicyArgs,
    #[command(flatten)]
    upstream: UpstreamArgs,
    #[command(flatten)]
    recover: RecoverArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let n_uname = args
        .n_uname
        .or_else(|| UserDb::default().uid(&args.uname))
        .unwrap_or(NONUNAME);
    let config = Config {
        uname: args.uname,
        n_uname,
        window: args.window,
        read_ahead: args.read_ahead,
        read_ahead_total: args.read_ahead_total,
        attach_per_user: args.access == "user",
        dialer: args.upstream.dialer()?,
        prover: args
            .upstream
            .prover()
            .map(|p| Arc::new(p) as Arc<dyn ninep_client::Prover>),
        recovery: args.recover.recovery(),
        ..Config::default()
    };
    let mux = build(args.file.as_deref(), config).await?;
    let policy = args.auth.policy()?;
    let server = Server::with_policy(
        mux,
        args.limits.limits(),
        args.limits.stream_limits(),
        policy,
    );
    server.set_resume_limits(args.limits.resume_limits());
    crate::serve::listen(&server, &args.listen, &args.auth, "mux").await
}

/// A mux whose base name space is the namespace file at `file` (empty
/// without one), its servers mounted.
pub async fn build(file: Option<&Path>, config: Config) -> Result<Mux> {
    let entries = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
            nsfile::parse(&text).with_context(|| path.display().to_string())?
        }
        None => Vec::new(),
    };
    let mux = Mux::new(config);
    mux.apply(entries)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.ename()))?;
    Ok(mux)
}
