//! `ninep bench`: measurements against a live server. The measuring is in
//! the ninep-bench crate; this turns flags into its configuration and prints
//! its report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ninep_bench::io::{self, Op, Target};
use ninep_bench::postmark;
use ninep_bench::rtt::{self, ClientKind, Config};

use crate::args::ServerArgs;

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
    /// Bulk transfers, one request of iounit size at a time: read a whole
    /// file, write one, or list a directory.
    Io(IoArgs),
    /// A PostMark-style small-file workload: create files, run transactions
    /// (read or append, then create or delete), delete everything.
    Postmark(PostmarkArgs),
    /// The multiplexer's scaling against clients, servers, mount points and
    /// union members, and its hop's cost to a null operation; prints the
    /// figures and writes SVG plots. Everything runs in this process.
    Mux(MuxArgs),
    /// Connection set-up and tear-down, whole-file reads by size, and 1 to
    /// 32 readers contending for files, each beside bare TCP or local reads
    /// of the same files (the network figures of the 9Back method).
    Remote(RemoteArgs),
    /// Draws figures a benchmark script wrote as CSV: column Y against
    /// column X, one curve per value of column BY, as SVG.
    Plot(PlotArgs),
    /// Every table of the papers ninep started from, measured here and
    /// written up as one report: runs scripts/bench-report of the source
    /// tree in the current directory with these arguments (--quick,
    /// --smoke, --out DIR, --only SECTIONS).
    Report {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args)]
struct PlotArgs {
    /// The CSV file (a header line, then rows).
    csv: std::path::PathBuf,
    /// The SVG file to write.
    #[arg(long)]
    out: std::path::PathBuf,
    #[arg(long)]
    x: String,
    #[arg(long)]
    y: String,
    /// The column whose values name the curves.
    #[arg(long)]
    by: String,
    /// Keep only rows where COLUMN has VALUE (may be repeated).
    #[arg(long = "where", value_name = "COLUMN=VALUE", value_parser = parse_where)]
    only: Vec<(String, String)>,
    #[arg(long, default_value = "")]
    title: String,
}

fn parse_where(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(c, v)| (c.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("want COLUMN=VALUE, not {s:?}"))
}

#[derive(clap::Args)]
struct MuxArgs {
    /// Directory for the plots.
    #[arg(long, default_value = "bench-mux")]
    out: std::path::PathBuf,
    /// Seconds each point runs.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// A few small points only, to see that it works.
    #[arg(long)]
    quick: bool,
    /// Only the hop: the null operation direct, through a forwarder and
    /// through the mux.
    #[arg(long)]
    hop: bool,
    /// Also write the figures as CSV (figure,x,us_per_message) to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
struct RemoteArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// Directory, relative to the attach root, whose files are read whole.
    #[arg(long)]
    sizes: String,
    /// Directory, relative to the attach root, of the files readers contend for.
    #[arg(long)]
    contend: String,
    /// The contended directory on the local disk, for the baseline.
    #[arg(long)]
    local: std::path::PathBuf,
    /// Connections made and torn down for the set-up figure.
    #[arg(long, default_value_t = 1000)]
    setups: usize,
    /// Reader counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    readers: Vec<usize>,
    /// Bytes of one read request when contending.
    #[arg(long, default_value_t = 4096)]
    chunk: u32,
    /// Seconds each contention point runs (and a quarter of it, at least
    /// one read, each file size).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Write the figures as CSV (figure,x,ninep,baseline,unit) to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// The bench target: the server flags as the bench crate takes them.
fn target(args: ServerArgs) -> Target {
    Target {
        n_uname: args.n_uname(),
        addr: args.addr,
        dialect: args.dialect,
        msize: args.msize,
        uname: args.uname,
        aname: args.aname,
    }
}

#[derive(clap::Args)]
struct IoArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// Runs, each on a connection of its own; the median is reported.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Print one line of key=value pairs instead of the report.
    #[arg(long)]
    kv: bool,
    #[command(subcommand)]
    op: IoOp,
}

#[derive(clap::Subcommand)]
enum IoOp {
    /// Read a whole file sequentially; report bytes/s.
    Read {
        /// File to read, relative to the attach root.
        path: String,
    },
    /// Create (or truncate) a file and write it sequentially; report bytes/s.
    Write {
        /// File to write, relative to the attach root.
        path: String,
        /// Bytes to write.
        #[arg(long)]
        size: u64,
        /// Remove the file after each run (untimed).
        #[arg(long)]
        remove: bool,
    },
    /// List a directory; report entries and time.
    List {
        /// Directory to list, relative to the attach root.
        path: String,
    },
}

#[derive(clap::Args)]
struct PostmarkArgs {
    #[command(flatten)]
    target: ServerArgs,
    /// Directory to work in, relative to the attach root (or to --bound's
    /// directory); made and removed if missing.
    #[arg(long)]
    dir: String,
    /// Instead of a 9P server, run the workload on this host directory
    /// through a loopback socket with no 9P: each request one round trip to
    /// a thread that makes only the file system calls it needs. The limit
    /// of any 9P client and server answering one request at a time on this
    /// machine. Of the server options only --msize counts (reads and writes
    /// are cut at its iounit).
    #[arg(long, value_name = "HOST_DIR")]
    bound: Option<PathBuf>,
    /// As --bound, but the thread makes no file system call and answers
    /// each request at once (a read with the bytes it asks): the limit of
    /// the round trips alone, whatever the file system.
    #[arg(long, conflicts_with = "bound")]
    round_trips: bool,
    /// Files created before the transactions.
    #[arg(long, default_value_t = postmark::Config::default().files)]
    files: usize,
    /// Smallest file, in bytes.
    #[arg(long, default_value_t = postmark::Config::default().min)]
    min: u64,
    /// Largest file, in bytes.
    #[arg(long, default_value_t = postmark::Config::default().max)]
    max: u64,
    /// Transactions: each a read or append, then a create or delete.
    #[arg(long, default_value_t = postmark::Config::default().transactions)]
    transactions: u64,
    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = postmark::Config::default().seed)]
    seed: u64,
    /// Percent of transactions that read rather than append.
    #[arg(long, default_value_t = postmark::Config::default().read_bias)]
    read_bias: u32,
    /// Percent of transactions that create rather than delete.
    #[arg(long, default_value_t = postmark::Config::default().create_bias)]
    create_bias: u32,
    /// Print one line of key=value pairs instead of the report.
    #[arg(long)]
    kv: bool,
}

#[derive(clap::Args)]
struct RttArgs {
    #[command(flatten)]
    server: ServerArgs,
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
    /// Client: ninep (the client library) or raw (a bare socket loop, to
    /// separate the server's cost from the client's).
    #[arg(long, default_value = "ninep")]
    client: ClientKind,
    /// Skip the TCP ping-pong baseline.
    #[arg(long)]
    no_baseline: bool,
    /// Also write the figures as CSV to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Bench::Rtt(args) => rtt(args).await,
        Bench::Io(args) => io(args).await,
        Bench::Postmark(args) => postmark(args).await,
        Bench::Mux(args) => mux(args).await,
        Bench::Remote(args) => remote(args).await,
        Bench::Plot(args) => plot(args),
        Bench::Report { args } => report(&args),
    }
}

/// The report is made by a script, since it drives other scripts and
/// peers' tools; it lives in the source tree, not in this binary.
fn report(args: &[String]) -> Result<ExitCode> {
    let script = std::path::Path::new("scripts/bench-report");
    if !script.is_file() {
        bail!(
            "{} not found: run this in a ninep source tree",
            script.display()
        );
    }
    let status = std::process::Command::new(script)
        .args(args)
        .status()
        .with_context(|| script.display().to_string())?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn plot(args: PlotArgs) -> Result<ExitCode> {
    let text =
        std::fs::read_to_string(&args.csv).with_context(|| args.csv.display().to_string())?;
    let mut chart =
        ninep_bench::plot::Chart::from_csv(&text, &args.x, &args.y, &args.by, &args.only)
            .with_context(|| args.csv.display().to_string())?;
    chart.title = args.title;
    chart.svg(&args.out)?;
    eprintln!("ninep: wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

async fn mux(args: MuxArgs) -> Result<ExitCode> {
    let mut config = ninep_bench::mux::Config {
        duration: seconds(args.seconds, 600.0)?,
        ..Default::default()
    };
    if args.quick {
        config.clients = vec![1, 8];
        config.servers = vec![1, 4];
        config.both = vec![1, 4];
        config.mounts = vec![1, 4, 16];
        config.members = vec![1, 8];
        config.hop_conns = vec![1];
    }
    if args.hop {
        let [direct, forwarded, muxed] =
            ninep_bench::mux::hop(&config, &mut |line| eprintln!("{line}")).await?;
        let mut table = String::new();
        ninep_bench::mux::hop_table(&mut table, &direct, &forwarded, &muxed)?;
        print!("{table}");
        return Ok(ExitCode::SUCCESS);
    }
    let report = ninep_bench::mux::run(&config, &mut |line| eprintln!("{line}")).await?;
    print!("{report}");
    if let Some(path) = &args.csv {
        write_csv(path, &report.csv())?;
    }
    for path in ninep_bench::mux::plot(&report, &args.out)? {
        eprintln!("ninep: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A --seconds flag as a duration: more than 0, at most `most`.
fn seconds(seconds: f64, most: f64) -> Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= most) {
        bail!("--seconds {seconds}: want more than 0, at most {most}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn write_csv(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| path.display().to_string())?;
    eprintln!("ninep: wrote {}", path.display());
    Ok(())
}

async fn remote(args: RemoteArgs) -> Result<ExitCode> {
    let config = ninep_bench::remote::Config {
        target: target(args.target),
        setups: args.setups,
        sizes: args.sizes,
        contend: args.contend,
        local: args.local,
        readers: args.readers,
        chunk: args.chunk,
        duration: seconds(args.seconds, 600.0)?,
    };
    let points = ninep_bench::remote::run(&config, &mut |line| eprintln!("{line}")).await?;
    let csv = ninep_bench::remote::csv(&points);
    print!("{csv}");
    if let Some(path) = &args.csv {
        write_csv(path, &csv)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn io(args: IoArgs) -> Result<ExitCode> {
    let op = match args.op {
        IoOp::Read { path } => Op::Read { path },
        IoOp::Write { path, size, remove } => Op::Write { path, size, remove },
        IoOp::List { path } => Op::List { path },
    };
    let target = target(args.target);
    let report = io::run(&target, &op, args.repeats, &mut |line| eprintln!("{line}")).await?;
    if args.kv {
        println!("{}", report.kv());
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn postmark(args: PostmarkArgs) -> Result<ExitCode> {
    let config = postmark::Config {
        target: target(args.target),
        dir: args.dir,
        files: args.files,
        min: args.min,
        max: args.max,
        transactions: args.transactions,
        seed: args.seed,
        read_bias: args.read_bias,
        create_bias: args.create_bias,
    };
    let report = match &args.bound {
        Some(root) => postmark::bound::run(&config, root).await?,
        None if args.round_trips => postmark::bound::round_trips(&config).await?,
        None => postmark::run(&config).await?,
    };
    if args.kv {
        println!("{}", report.kv());
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn rtt(args: RttArgs) -> Result<ExitCode> {
    let config = Config {
        n_uname: args.server.n_uname(),
        addr: args.server.addr,
        dialect: args.server.dialect,
        uname: args.server.uname,
        aname: args.server.aname,
        duration: seconds(args.seconds, 3600.0)?,
        conns: args.conns,
        repeats: args.repeats,
        max_ops: args.max_ops,
        client: args.client,
        baseline: !args.no_baseline,
    };
    let report = rtt::run(&config, &mut |line| eprintln!("{line}")).await?;
    print!("{report}");
    if let Some(path) = &args.csv {
        write_csv(path, &report.csv())?;
    }
    Ok(ExitCode::SUCCESS)
}
