//! `ninep cp SRC DST`: copies a file between the local file system and a 9P
//! server, or between two servers. A 9P file is written `ADDR:/PATH`: the
//! dial string up to the first `:/` (`tcp!host!564:/big`,
//! `localhost:564:/big`); anything else is a local path, `-` standard input
//! or output.
//!
//! The 9P side moves data as `--mode` says: a stream where the server speaks
//! the extension, else pipelined requests where the file allows, else one
//! request at a time (`auto`); or forced, for measurement. A progress bar is
//! drawn on a terminal, a one-line summary printed otherwise.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use ninep_client::{File, Fsys, Mode, RangeRead, RangeWrite, Transfer};
use ninep_wire::Errno;
use ninep_wire::consts::dotl::{O_RDONLY, O_TRUNC, O_WRONLY};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::args::{Place, RecoverArgs, ServerArgs, place};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    conn: ServerArgs,
    #[command(flatten)]
    recover: RecoverArgs,
    /// How the 9P side moves data.
    #[arg(long, value_enum, default_value_t = HowArg::Auto)]
    mode: HowArg,
    /// Most bytes in flight: the pipelining window, or a stream's credit;
    /// both grow to twice the measured bandwidth-delay product up to this.
    #[arg(long, default_value_t = Transfer::default().max_window)]
    window: u64,
    /// Never draw a progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Source: ADDR:/PATH, a local path, or - for standard input.
    src: String,
    /// Destination: ADDR:/PATH, a local path, or - for standard output.
    dst: String,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum HowArg {
    /// A stream if the server agrees, else pipelining where safe.
    Auto,
    /// One request in flight at a time.
    One,
    /// A window of requests in flight.
    Pipeline,
    /// The stream extension (falls back as auto does without it).
    Stream,
}

/// Where the bytes come from.
enum Source<'f> {
    Local(Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    Remote(Box<RangeRead<'f>>),
}

impl Source<'_> {
    async fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>> {
        match self {
            Source::Remote(r) => Ok(r.next().await?),
            Source::Local(input) => {
                buf.reserve(1 << 20);
                match input.read_buf(buf).await? {
                    0 => Ok(None),
                    _ => Ok(Some(buf.split().freeze())),
                }
            }
        }
    }
}

/// Where the bytes go.
enum Sink<'f> {
    Local(LocalSink),
    Remote(RangeWrite<'f>),
}

impl Sink<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        match self {
            Sink::Remote(w) => Ok(w.write(data).await?),
            Sink::Local(out) => Ok(out.write(data).await?),
        }
    }

    async fn finish(self) -> Result<()> {
        match self {
            Sink::Remote(w) => w.finish().await.map(drop).map_err(Into::into),
            Sink::Local(out) => Ok(out.finish().await?),
        }
    }
}

/// Pieces waiting for a local sink's thread: at most this many messages'
/// worth of memory.
const LOCAL_QUEUE: usize = 4;

/// A local file (or standard output) written on a thread of its own, so
/// that the copy receives the next piece while one is written, and no
/// piece is copied on its way (tokio's file copies each write into a
/// buffer of its own before handing it to a thread).
struct LocalSink {
    pieces: mpsc::Sender<Bytes>,
    writer: JoinHandle<io::Result<()>>,
}

impl LocalSink {
    fn spawn(mut out: impl Write + Send + 'static) -> Self {
        let (pieces, mut queued) = mpsc::channel::<Bytes>(LOCAL_QUEUE);
        let writer = tokio::task::spawn_blocking(move || {
            while let Some(piece) = queued.blocking_recv() {
                out.write_all(&piece)?;
            }
            out.flush()
        });
        Self { pieces, writer }
    }

    async fn write(&mut self, piece: Bytes) -> io::Result<()> {
        if self.pieces.send(piece).await.is_ok() {
            return Ok(());
        }
        // The thread stopped, on an error that its result holds.
        (&mut self.writer).await??;
        Err(io::Error::other("the writing thread stopped"))
    }

    async fn finish(self) -> io::Result<()> {
        drop(self.pieces);
        self.writer.await?
    }
}

/// The 9P file an argument names, opened for reading or writing (created
/// or truncated).
async fn open_remote(args: &Args, addr: &str, path: &str, write: bool) -> Result<(Fsys, File)> {
    let conn = &args.conn;
    let fsys = conn
        .attach_recovering(addr, conn.n_uname(), args.recover.recovery())
        .await?;
    let file = loop {
        let file = if write {
            match fsys.open(path, O_WRONLY | O_TRUNC).await {
                Err(e) if e.errno() == Errno::ENOENT => fsys.create(path, 0o644, O_WRONLY).await,
                other => other,
            }
        } else {
            fsys.open(path, O_RDONLY).await
        };
        match file {
            // A truncation or create cut off with the connection is made
            // again: nothing was copied yet, so once more means the same.
            Err(e) if e.is_interrupted() => fsys.client().ready().await?,
            file => break file.with_context(|| format!("{addr}:{path}"))?,
        }
    };
    if write {
        // The copy alone writes it, each byte at its own offset.
        file.vouch_writes_repeatable();
    }
    Ok((fsys, file))
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let how = Transfer {
        mode: match args.mode {
            HowArg::Auto => Mode::Auto,
            HowArg::One => Mode::OneAtATime,
            HowArg::Pipeline => Mode::Pipelined,
            HowArg::Stream => Mode::Streamed,
        },
        max_window: args.window,
    };
    let (src, dst) = (place(&args.src), place(&args.dst));
    if let (Place::Local(a), Place::Local(b)) = (&src, &dst) {
        bail!("{a} and {b} are both local: one side must be ADDR:/PATH");
    }

    let remote_src = match &src {
        Place::Remote { addr, path } => Some(open_remote(&args, addr, path, false).await?),
        Place::Local(_) => None,
    };
    let remote_dst = match &dst {
        Place::Remote { addr, path } => Some(open_remote(&args, addr, path, true).await?),
        Place::Local(_) => None,
    };

    let (mut source, size, from) = match (&remote_src, &src) {
        (Some((_, file)), _) => {
            let size = file.stat().await?.size;
            let r = file.read_range(0, None, how).await?;
            let mode = r.mode();
            (Source::Remote(Box::new(r)), Some(size), Some(mode))
        }
        (None, Place::Local(path)) if *path == "-" => {
            (Source::Local(Box::new(tokio::io::stdin())), None, None)
        }
        (None, Place::Local(path)) => {
            let file = tokio::fs::File::open(path)
                .await
                .with_context(|| path.to_string())?;
            let size = file.metadata().await?.len();
            (Source::Local(Box::new(file)), Some(size), None)
        }
        (None, Place::Remote { .. }) => unreachable!("a remote source was opened above"),
    };
    let (mut sink, to) = match (&remote_dst, &dst) {
        (Some((_, file)), _) => {
            let w = file.write_range(0, how).await?;
            let mode = w.mode();
            (Sink::Remote(w), Some(mode))
        }
        (None, Place::Local(path)) if *path == "-" => {
            (Sink::Local(LocalSink::spawn(std::io::stdout())), None)
        }
        (None, Place::Local(path)) => {
            let file = tokio::fs::File::create(path)
                .await
                .with_context(|| path.to_string())?;
            (Sink::Local(LocalSink::spawn(file.into_std().await)), None)
        }
        (None, Place::Remote { .. }) => unreachable!("a remote destination was opened above"),
    };

    let bar = (!args.quiet && std::io::stderr().is_terminal()).then(|| progress(size));
    let start = Instant::now();
    let mut copied = 0u64;
    let mut buf = BytesMut::new();
    while let Some(piece) = source.next(&mut buf).await.context(args.src.clone())? {
        copied += piece.len() as u64;
        sink.write(piece).await.context(args.dst.clone())?;
        if let Some(bar) = &bar {
            bar.set_position(copied);
        }
    }
    sink.finish().await.context(args.dst.clone())?;
    let elapsed = start.elapsed();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let modes: Vec<String> = [("read", from), ("write", to)]
        .into_iter()
        .filter_map(|(what, mode)| mode.map(|m| format!("{what} {}", mode_name(m))))
        .collect();
    eprintln!("{}", summary(copied, elapsed, &modes.join(", ")));
    drop(source);
    for (fsys, file) in [remote_src, remote_dst].into_iter().flatten() {
        drop(file);
        let _ = tokio::time::timeout(Duration::from_secs(5), fsys.close()).await;
    }
    Ok(ExitCode::SUCCESS)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Auto => "auto",
        Mode::OneAtATime => "one at a time",
        Mode::Pipelined => "pipelined",
        Mode::Streamed => "streamed",
    }
}

/// `cp: 104857600 bytes in 1.234 s (85.0 MB/s; read streamed)`.
fn summary(bytes: u64, elapsed: Duration, modes: &str) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    format!(
        "cp: {bytes} bytes in {secs:.3} s ({:.1} MB/s; {modes})",
        bytes as f64 / secs / 1e6
    )
}

fn progress(size: Option<u64>) -> indicatif::ProgressBar {
    let style = "{bytes}/{total_bytes} {wide_bar} {binary_bytes_per_sec} eta {eta}";
    match size {
        Some(size) => indicatif::ProgressBar::new(size).with_style(
            indicatif::ProgressStyle::with_template(style)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
        None => indicatif::ProgressBar::new_spinner(),
    }
}
