//! `ninep trace`: an interposing proxy that forwards bytes unchanged and
//! prints every message in Plan 9 text form, with a timestamp, the
//! connection, the direction and, for replies, how long the request took.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
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
    let mut next = 0;
    let shutdown = crate::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (client, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => return Ok(ExitCode::SUCCESS),
        };
        next += 1;
        let conn = next;
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let server = match upstream.dial().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("ninep: c{conn}: {upstream}: {e}");
                    return;
                }
            };
            line(&format!("c{conn} connected from {peer}"));
            let shared = Arc::new(Mutex::new(Shared {
                conn,
                protocol: Dialect::Base.into(),
                sent: HashMap::new(),
            }));
            let (cr, cw) = tokio::io::split(client);
            let (sr, sw) = tokio::io::split(server);
            let up = tokio::spawn(pump(cr, sw, shared.clone(), true));
            let down = tokio::spawn(pump(sr, cw, shared, false));
            let _ = tokio::join!(up, down);
            line(&format!("c{conn} closed"));
        });
    }
}

/// Copies one direction, printing each whole frame it sees.
async fn pump(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
    shared: Arc<Mutex<Shared>>,
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
                Ok(Some(frame)) => show(&shared, frame, requests),
                Ok(None) => break,
                Err(e) => {
                    let conn = shared.lock().map(|s| s.conn).unwrap_or(0);
                    line(&format!(
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

fn show(shared: &Mutex<Shared>, frame: bytes::Bytes, request: bool) {
    let Ok(mut s) = shared.lock() else { return };
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
            line(&text);
        }
        Err(e) => line(&format!(
            "c{} {arrow} bad frame of {len} bytes: {e}",
            s.conn
        )),
    }
}

/// Prints one line with a wall-clock timestamp.
fn line(text: &str) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{h:02}:{m:02}:{s:02}.{:06} {text}",
        now.subsec_micros()
    );
    let _ = out.flush();
}
