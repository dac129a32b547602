//! `ninep serve --auth tls`: a client certificate's name is its user.
//! The CLI's clients, the mount and the mux speak TLS with certificates;
//! an attach as another user than the certificate's, a client without a
//! certificate, plaintext, and a thousand handshakes left half-way are
//! refused, and the server goes on serving and lets go of what they held.

#[path = "../../transport/tests/support/certs.rs"]
mod certs;
mod common;

use std::process::Output;
use std::time::Duration;

use certs::Certs;
use common::{NINEP, port, serve_on_port};
use tokio::io::AsyncReadExt;

/// `ninep serve ramfs --auth tls` with the certificates of `certs`, a
/// handshake timeout of `timeout` seconds, and a file `motd`.
async fn serve(certs: &Certs, timeout: &str) -> (tokio::process::Child, String) {
    let (cert, key) = certs.pair("server");
    let ca = certs.ca();
    let served = serve_on_port(
        "tls",
        &[
            "ramfs",
            "--auth",
            "tls",
            "--tls-cert",
            Certs::arg(&cert),
            "--tls-key",
            Certs::arg(&key),
            "--tls-client-ca",
            Certs::arg(&ca),
            "--tls-handshake-timeout",
            timeout,
        ],
    )
    .await;
    let out = ninep(
        certs,
        Some("alice"),
        "alice",
        &["create", "-a", &served.1, "motd"],
    );
    assert!(out.status.success(), "{out:?}");
    served
}

/// Runs `ninep ARGS` as `uname`, presenting `who`'s certificate.
fn ninep(certs: &Certs, who: Option<&str>, uname: &str, args: &[&str]) -> Output {
    let mut command = std::process::Command::new(NINEP);
    command
        .args(args)
        .args(["--uname", uname, "--tls-ca"])
        .arg(certs.ca());
    if let Some(who) = who {
        let (cert, key) = certs.pair(who);
        command
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key);
    }
    command.output().unwrap()
}

fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_proves_its_own_user_only() {
    let certs = Certs::make("cli", &["alice", "bob"]);
    let (_server, addr) = serve(&certs, "10").await;
    let ls = ninep(&certs, Some("alice"), "alice", &["ls", "-a", &addr]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout).trim(), "motd", "{ls:?}");

    // Alice's certificate, attaching as bob.
    let out = ninep(&certs, Some("alice"), "bob", &["ls", "-a", &addr]);
    assert!(!out.status.success());
    assert!(said(&out).contains("not permitted"), "{}", said(&out));
    // No certificate, another CA's, an expired one: no session at all.
    for who in [None, Some("stranger"), Some("expired")] {
        let out = ninep(&certs, who, "alice", &["ls", "-a", &addr]);
        assert!(!out.status.success(), "{who:?}: {out:?}");
        assert!(out.stdout.is_empty());
    }
    // Plaintext to the TLS port: told what it speaks.
    let plain = format!("tcp!127.0.0.1!{}", port(&addr));
    let out = std::process::Command::new(NINEP)
        .args(["ls", "-a", &plain])
        .output()
        .unwrap();
    assert!(
        said(&out).contains("this port speaks TLS"),
        "{}",
        said(&out)
    );
    // Bob, with his own.
    let out = ninep(&certs, Some("bob"), "bob", &["stat", "-a", &addr, "motd"]);
    assert!(out.status.success(), "{out:?}");
}

/// The descriptors a process holds.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_handshakes_hold_nothing_past_the_timeout() {
    let certs = Certs::make("half", &["alice"]);
    let (server, addr) = serve(&certs, "1").await;
    let pid = server.id().unwrap();
    let before = descriptors(pid);
    let port = port(&addr);
    let mut half = Vec::new();
    for i in 0..1000 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        if i % 2 == 0 {
            // Half of them begin a handshake record and stop.
            use tokio::io::AsyncWriteExt;
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).await.unwrap();
        }
        half.push(s);
    }
    // Meanwhile, others are served.
    let ls = ninep(
        &certs,
        Some("alice"),
        "alice",
        &["cat", "-a", &addr, "motd"],
    );
    assert!(ls.status.success(), "{ls:?}");
    // Past the timeout, each of the thousand is hung up on...
    for mut s in half {
        let mut rest = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(end.is_ok(), "a half-open connection is still held");
    }
    // ...and the server holds no more than before.
    common::until("the server to let go", || descriptors(pid) <= before).await;
}
