//! `ninep trace` between a client and a server: bytes pass unchanged and
//! every message is printed with its latency.

use std::process::Stdio;
use std::time::Duration;

use ninep_client::Client;
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

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

#[tokio::test]
async fn traces_a_session() {
    let dir = std::env::temp_dir().join(format!("ninep-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server_addr = format!("unix!{}", dir.join("server").display());
    let trace_addr = format!("unix!{}", dir.join("trace").display());
    let bin = NINEP;
    let mut server = serve_ramfs(&dir.join("server")).await;
    let mut trace = Command::new(bin)
        .args(["trace", "--listen", &trace_addr, "--to", &server_addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(trace.stdout.take().unwrap()).lines();
    let client = wait_for(&trace_addr).await;
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
    let _ = trace.kill().await;
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
