//! `ninep serve` as a process: over stdin/stdout, and stopping on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use ninep_client::{Client, Options};
use ninep_wire::consts::dotl::O_RDWR;
use tokio::process::Command;

#[tokio::test]
async fn serves_over_stdin_and_stdout() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .args(["serve", "--stdio", "ramfs"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let stream = tokio::io::join(
        child.stdout.take().expect("stdout"),
        child.stdin.take().expect("stdin"),
    );
    let client = Client::over(Box::new(stream), Options::default())
        .await
        .expect("connect");
    let fsys = client.attach("glenda", "").await.expect("attach");
    let file = fsys.create("note", 0o644, O_RDWR).await.expect("create");
    file.write_all_at(0, "over a pipe\n".into())
        .await
        .expect("write");
    drop(file);
    assert_eq!(
        fsys.read_to_string("note").await.expect("read"),
        "over a pipe\n"
    );
    drop(fsys);
    drop(client);
    // End of input ends the server.
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit")
        .expect("wait");
    assert!(status.success());
}

#[tokio::test]
async fn stops_cleanly_on_sigterm() {
    let path = std::env::temp_dir().join(format!("ninep-sigterm-{}.sock", std::process::id()));
    let addr = format!("unix!{}", path.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .args(["serve", "ramfs", "--listen", &addr])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) = Client::connect(&addr).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fsys = client
        .expect("server listening")
        .attach("glenda", "")
        .await
        .expect("attach");
    fsys.mkdir("d", 0o755).await.expect("mkdir");
    let pid = child.id().expect("pid").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit")
        .expect("wait");
    assert!(status.success(), "{status}");
    assert!(!path.exists(), "the socket file is removed");
    // The connection was closed by the server.
    assert!(fsys.stat("d").await.is_err());
}

/// The version `ninep serve --stdio ramfs ARGS` answers to a Tversion
/// asking for 9P2000.L with streams and resumable sessions.
async fn agreed_version(args: &[&str]) -> String {
    use ninep_wire::{Dialect, Fcall, Msg, NOTAG, Tversion};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .args(["serve", "--stdio", "ramfs"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let ask = Tversion {
        msize: 8192,
        version: "9P2000.L.stream.resume".into(),
    };
    let frame = Fcall::new(NOTAG, ask).to_bytes(Dialect::L).unwrap();
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&frame).await.unwrap();
    let mut stdout = child.stdout.take().expect("stdout");
    let mut size = [0; 4];
    stdout.read_exact(&mut size).await.unwrap();
    let mut reply = vec![0; u32::from_le_bytes(size) as usize];
    reply[..4].copy_from_slice(&size);
    stdout.read_exact(&mut reply[4..]).await.unwrap();
    match Fcall::decode(reply.into(), Dialect::L).unwrap().msg {
        Msg::Rversion(r) => r.version,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn resumable_sessions_are_offered_unless_turned_off() {
    assert_eq!(agreed_version(&[]).await, "9P2000.L.stream.resume");
    assert_eq!(
        agreed_version(&["--resume-sessions", "0"]).await,
        "9P2000.L.stream"
    );
}
