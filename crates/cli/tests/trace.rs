//! `ninep trace` between a client and a server: bytes pass unchanged and
//! every message is printed with its latency.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ninep_client::Client;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

mod common;
use common::{NINEP, serve_ramfs};

async fn wait_for(addr: &str) -> Client {
    for _ in 0..100 {
        if let Ok(c) = Client::connect(addr).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{addr} never answered");
}

/// `ninep trace` in front of `ninep serve ramfs`, on unix sockets in a
/// directory of their own; both end, and the directory goes, on drop.
struct Traced {
    dir: PathBuf,
    _server: Child,
    /// The trace, its stdout a pipe.
    trace: Child,
}

impl Traced {
    /// Starts both, and a client connected through the trace.
    async fn start(name: &str) -> (Traced, Client) {
        let dir = std::env::temp_dir().join(format!("ninep-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make the test's directory");
        let server_addr = format!("unix!{}", dir.join("server").display());
        let trace_addr = format!("unix!{}", dir.join("trace").display());
        let server = serve_ramfs(&dir.join("server")).await;
        let trace = Command::new(NINEP)
            .args(["trace", "--listen", &trace_addr, "--to", &server_addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start ninep trace");
        let client = wait_for(&trace_addr).await;
        let traced = Traced {
            dir,
            _server: server,
            trace,
        };
        (traced, client)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn traces_a_session() {
    let (mut traced, client) = Traced::start("trace").await;
    let mut lines = tokio::io::BufReader::new(traced.trace.stdout.take().unwrap()).lines();
    let fsys = client.attach("glenda", "").await.unwrap();
    fsys.mkdir("traced", 0o755).await.unwrap();
    assert!(fsys.stat("traced").await.unwrap().is_dir());
    fsys.close().await;
    let mut seen = Vec::new();
    let want = [
        "-> Tversion",
        "<- Rversion",
        "-> Tattach",
        "<- Rattach",
        "-> Tmkdir",
        "<- Rmkdir",
        "<- Rgetattr",
    ];
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line);
            if want.iter().all(|w| seen.iter().any(|l| l.contains(w))) {
                return;
            }
        }
    })
    .await;
    assert!(found.is_ok(), "trace printed only {seen:#?}");
    // Replies carry the request's latency in milliseconds.
    let reply = seen.iter().find(|l| l.contains("<- Rmkdir")).unwrap();
    assert!(reply.ends_with(" ms)"), "{reply}");
}

#[tokio::test]
async fn a_trace_whose_output_nobody_reads_still_forwards() {
    let (mut traced, client) = Traced::start("trace-unread").await;
    // Open but unread: once the pipe is full, every write to it waits.
    let stdout = traced.trace.stdout.take().unwrap();
    let fsys = client.attach("glenda", "").await.unwrap();
    // Each stat is a few messages of about a hundred bytes each: far more
    // than the pipe and the trace's queue of lines hold together.
    let traffic = async {
        for _ in 0..3000 {
            fsys.stat("").await.unwrap();
        }
    };
    let forwarded = tokio::time::timeout(Duration::from_secs(20), traffic).await;
    assert!(
        forwarded.is_ok(),
        "traffic stalled behind the unread output"
    );

    // Once the output is read again, the next line that finds room brings
    // the count of those dropped.
    let mut reader = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(" lines dropped") {
                return Some(line);
            }
        }
        None
    });
    let notice = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            tokio::select! {
                notice = &mut reader => break notice.unwrap(),
                stat = fsys.stat("") => { stat.unwrap(); }
            }
        }
    })
    .await
    .expect("no line counted the dropped ones")
    .expect("the trace's output ended");
    let count: u64 = notice
        .split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {notice:?}"));
    assert!(count > 0, "{notice}");
}
