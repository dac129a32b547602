//! `ninep trace`: an interposing proxy that forwards bytes unchanged and
//! prints every message in Plan 9 text form, with a timestamp, the
//! connection, the direction and, for replies, how long the request took.
//!
//! Forwarding never waits on the output: a paused terminal or a slow pipe
//! costs trace lines, which are dropped and counted, never traffic.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use parking_lot::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::BytesMut;
use ninep_transport::{Addr, FrameCodec};
use ninep_wire::{Dialect, Fcall, Msg, Protocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::Decoder;

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on for clients.
    #[arg(short, long)]
    listen: String,
    /// Address of the server to forward to.
    #[arg(short, long)]
    to: String,
}

/// What both directions of one connection know: the protocol and when each
/// outstanding tag was sent.
struct Shared {
    conn: u64,
    protocol: Protocol,
    sent: HashMap<u16, Instant>,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let listen: Addr = args.listen.parse().map_err(anyhow::Error::msg)?;
    let upstream: Addr = args.to.parse().map_err(anyhow::Error::msg)?;
    let listener = listen
        .listen()
        .await
        .with_context(|| format!("listen on {listen}"))?;
    eprintln!(
        "ninep: tracing {} -> {upstream}",
        listener.local_addr().unwrap_or(listen)
    );
    let out = Output::start()?;
    let mut next = 0;
    let shutdown = crate::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (client, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => {
                out.drain(DRAIN_LIMIT).await;
                return Ok(ExitCode::SUCCESS);
            }
        };
        next += 1;
        let conn = next;
        let upstream = upstream.clone();
        let out = out.clone();
        tokio::spawn(async move {
            let server = match upstream.dial().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("ninep: c{conn}: {upstream}: {e}");
                    return;
                }
            };
            out.line(&format!("c{conn} connected from {peer}"));
            let shared = Arc::new(Mutex::new(Shared {
                conn,
                protocol: Dialect::Base.into(),
                sent: HashMap::new(),
            }));
            let (cr, cw) = tokio::io::split(client);
            let (sr, sw) = tokio::io::split(server);
            let up = tokio::spawn(pump(cr, sw, shared.clone(), out.clone(), true));
            let down = tokio::spawn(pump(sr, cw, shared, out.clone(), false));
            let _ = tokio::join!(up, down);
            out.line(&format!("c{conn} closed"));
        });
    }
}

/// Copies one direction, printing each whole frame it sees.
async fn pump(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
    shared: Arc<Mutex<Shared>>,
    out: Arc<Output>,
    requests: bool,
) {
    let mut codec = FrameCodec::new(u32::MAX, Dialect::Base);
    let mut pending = BytesMut::new();
    let mut parsing = true;
    let mut buf = vec![0; 256 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Print before forwarding, so a request is shown before its reply.
        if parsing {
            pending.extend_from_slice(&buf[..n]);
        }
        while parsing {
            match codec.decode(&mut pending) {
                Ok(Some(frame)) => show(&shared, &out, frame, requests),
                Ok(None) => break,
                Err(e) => {
                    let conn = shared.lock().conn;
                    out.line(&format!(
                        "c{conn} framing lost ({e}); forwarding without tracing"
                    ));
                    parsing = false;
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

fn show(shared: &Mutex<Shared>, out: &Output, frame: bytes::Bytes, request: bool) {
    let mut s = shared.lock();
    let arrow = if request { "->" } else { "<-" };
    let len = frame.len();
    // Before Rversion settles the dialect, a reply may be in any of them
    // (diod answers a Tversion it does not speak with an Rlerror).
    let decoded = Fcall::decode(frame.clone(), s.protocol).or_else(|e| {
        Dialect::ALL
            .iter()
            .find_map(|d| Fcall::decode(frame.clone(), *d).ok())
            .ok_or(e)
    });
    match decoded {
        Ok(fcall) => {
            let mut text = format!("c{} {arrow} {fcall}", s.conn);
            if request {
                s.sent.insert(fcall.tag, Instant::now());
            } else if let Some(at) = s.sent.remove(&fcall.tag) {
                text.push_str(&format!(" ({:.3} ms)", at.elapsed().as_secs_f64() * 1e3));
            }
            match &fcall.msg {
                Msg::Tversion(_) => s.sent.retain(|tag, _| *tag == fcall.tag),
                Msg::Rversion(v) => {
                    s.protocol = Protocol::from_version(&v.version).unwrap_or(Dialect::Base.into())
                }
                _ => {}
            }
            out.line(&text);
        }
        Err(e) => out.line(&format!(
            "c{} {arrow} bad frame of {len} bytes: {e}",
            s.conn
        )),
    }
}

/// Lines waiting for the output; beyond them lines are dropped.
const QUEUE: usize = 4096;

/// How long a trace that ends waits for its last lines to be written.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What goes to the writer: a line, or a request to say when every line
/// before it is written.
enum Item {
    Line(String),
    Drained(std::sync::mpsc::Sender<()>),
}

/// Where trace lines go: a thread of its own writes them to stdout, fed
/// through a bounded queue. When the queue is full a line is dropped and
/// counted, and the count goes out as a line of its own once there is room.
struct Output {
    queue: SyncSender<Item>,
    dropped: AtomicU64,
}

impl Output {
    fn start() -> Result<Arc<Output>> {
        let (queue, lines) = std::sync::mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("trace output".into())
            .spawn(move || write_lines(lines))
            .context("start the output thread")?;
        Ok(Arc::new(Output {
            queue,
            dropped: AtomicU64::new(0),
        }))
    }

    /// Waits until the lines queued so far are written, for at most
    /// `limit`: a trace that ends shows all it saw, unless its reader has
    /// stopped reading.
    async fn drain(&self, limit: std::time::Duration) {
        let (done, written) = tokio::sync::oneshot::channel();
        let queue = self.queue.clone();
        // A thread of its own, not the runtime's blocking pool, whose
        // shutdown would wait for it if stdout never drains.
        let waiter = std::thread::Builder::new().spawn(move || {
            let (ack, acked) = std::sync::mpsc::channel();
            if queue.send(Item::Drained(ack)).is_ok() && acked.recv().is_ok() {
                let _ = done.send(());
            }
        });
        if waiter.is_ok() {
            let _ = tokio::time::timeout(limit, written).await;
        }
    }

    /// Queues one line with a wall-clock timestamp, or counts it dropped.
    fn line(&self, text: &str) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let notice = format!("{dropped} lines dropped: the output fell behind");
            if self.queue.try_send(Item::Line(stamped(&notice))).is_err() {
                self.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
                return;
            }
        }
        if self.queue.try_send(Item::Line(stamped(text))).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Writes lines as they come, flushing whenever none are waiting. A line
/// that cannot be written (stdout closed) is lost like a dropped one.
fn write_lines(items: Receiver<Item>) {
    let mut out = BufWriter::new(std::io::stdout().lock());
    while let Ok(item) = items.recv() {
        for item in std::iter::once(item).chain(items.try_iter()) {
            match item {
                Item::Line(line) => {
                    let _ = writeln!(out, "{line}");
                }
                Item::Drained(ack) => {
                    let _ = out.flush();
                    let _ = ack.send(());
                }
            }
        }
        let _ = out.flush();
    }
}

/// `text` after the wall-clock time.
fn stamped(text: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02}.{:06} {text}", now.subsec_micros())
}
