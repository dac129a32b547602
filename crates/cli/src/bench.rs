//! `ninep bench`: measurements against a live server. The measuring is in
//! the ninep-bench crate; this turns flags into its configuration and prints
//! its report.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use ninep_bench::rtt::{self, ClientKind, Config};
use ninep_wire::{Dialect, NONUNAME};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Bench,
}

#[derive(clap::Subcommand)]
enum Bench {
    /// Null operations (Tgetattr or Tstat of the root) per second and their
    /// latency on 1 and more connections, beside a TCP ping-pong of the same
    /// sizes on loopback.
    Rtt(RttArgs),
}

#[derive(clap::Args)]
struct RttArgs {
    /// Server address: tcp!host!port, unix!/path or host:port.
    #[arg(
        short = 'a',
        long = "addr",
        env = "NINEP_ADDR",
        default_value = "tcp!127.0.0.1!564"
    )]
    addr: String,
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Connection counts to measure after 1, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    conns: Vec<usize>,
    /// Runs per connection count; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Most operations in one run, across its connections.
    #[arg(long, default_value_t = Config::default().max_ops)]
    max_ops: u64,
    /// Dialect to insist on (9P2000, 9P2000.u, 9P2000.L); else the best offered.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// User name to attach as.
    #[arg(long, env = "USER", default_value = "none")]
    uname: String,
    /// Numeric user id to attach as (9P2000.u and .L).
    #[arg(long)]
    n_uname: Option<u32>,
    /// Tree to attach to.
    #[arg(long, default_value = "")]
    aname: String,
    /// Client: ninep (the client library) or raw (a bare socket loop, to
    /// separate the server's cost from the client's).
    #[arg(long, default_value = "ninep")]
    client: ClientKind,
    /// Skip the TCP ping-pong baseline.
    #[arg(long)]
    no_baseline: bool,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    Dialect::ALL
        .into_iter()
        .find(|d| d.version() == s)
        .ok_or_else(|| format!("unknown dialect {s:?} (9P2000, 9P2000.u or 9P2000.L)"))
}

pub async fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Bench::Rtt(args) => rtt(args).await,
    }
}

async fn rtt(args: RttArgs) -> Result<ExitCode> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        bail!("--seconds {}: want more than 0, at most 3600", args.seconds);
    }
    let config = Config {
        addr: args.addr,
        dialect: args.dialect,
        uname: args.uname,
        n_uname: args.n_uname.unwrap_or(NONUNAME),
        aname: args.aname,
        duration: Duration::from_secs_f64(args.seconds),
        conns: args.conns,
        repeats: args.repeats,
        max_ops: args.max_ops,
        client: args.client,
        baseline: !args.no_baseline,
    };
    let report = rtt::run(&config, &mut |line| eprintln!("{line}")).await?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}
