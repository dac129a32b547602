//! `ninep serve` under systemd socket activation: it serves the listening
//! socket passed as descriptor 3 (LISTEN_FDS, LISTEN_PID) rather than
//! binding --listen.

use std::process::Stdio;

use ninep_client::Client;
use ninep_wire::consts::dotl::O_RDWR;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Binds a loopback port, prints it, and becomes `ninep ARGS...` with the
/// socket as descriptor 3 and the variables systemd sets.
const ACTIVATE: &str = r#"
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
os.set_inheritable(3, True)
os.environ["LISTEN_FDS"] = "1"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[tokio::test]
async fn serves_the_socket_systemd_passes() {
    // An address no host here has: binding it would fail.
    let mut child = Command::new("python3")
        .args(["-c", ACTIVATE, env!("CARGO_BIN_EXE_ninep")])
        .args(["serve", "ramfs", "--listen", "tcp!192.0.2.1!564"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start python3");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = out.next_line().await.unwrap().expect("the port");
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let said = err.next_line().await.unwrap().expect("a line on stderr");
    assert_eq!(
        said,
        format!("ninep: serving ramfs on tcp!127.0.0.1!{port}")
    );

    let fsys = Client::connect(&format!("tcp!127.0.0.1!{port}"))
        .await
        .expect("connect to the passed socket")
        .attach("glenda", "")
        .await
        .expect("attach");
    let file = fsys.create("note", 0o644, O_RDWR).await.expect("create");
    file.write_all_at(0, "activated\n".into()).await.unwrap();
    drop(file);
    assert_eq!(fsys.read_to_string("note").await.unwrap(), "activated\n");
}

#[tokio::test]
async fn another_process_socket_is_not_taken() {
    // LISTEN_PID names some other process: --listen is used.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .args(["serve", "ramfs", "--listen", "tcp!127.0.0.1!0"])
        .env("LISTEN_FDS", "1")
        .env("LISTEN_PID", "1")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let said = err.next_line().await.unwrap().expect("a line on stderr");
    assert!(
        said.starts_with("ninep: serving ramfs on tcp!127.0.0.1!"),
        "{said}"
    );
}
