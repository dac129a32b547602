//! `ninep serve --auth tls`: a client certificate's name is its user.
//! The CLI's clients, the mount and the mux speak TLS with certificates;
//! an attach as another user than the certificate's, a client without a
//! certificate, plaintext, and a thousand handshakes left half-way are
//! refused, and the server goes on serving and lets go of what they held.
//! A mux attaching per user passes its clients' proven users on, and
//! `ninep ns` proves its user as the verbs do.

#[path = "../../transport/tests/support/certs.rs"]
mod certs;
mod common;

use std::process::Output;
use std::time::Duration;

use certs::Certs;
use common::{Background, NINEP, port, serve_on_port, start_on_port};
use tokio::io::AsyncReadExt;

/// The flags of a server whose clients prove their users with
/// certificates of `certs`' CA.
fn tls_server_flags(certs: &Certs) -> Vec<String> {
    let (cert, key) = certs.pair("server");
    let flags = [
        ("--tls-cert", cert),
        ("--tls-key", key),
        ("--tls-client-ca", certs.ca()),
    ];
    let mut args = vec!["--auth".to_owned(), "tls".to_owned()];
    for (flag, path) in flags {
        args.extend([flag.to_owned(), Certs::arg(&path).to_owned()]);
    }
    args
}

/// `ninep serve ramfs --auth tls` with the certificates of `certs`, a
/// handshake timeout of `timeout` seconds, and a file `motd`.
async fn serve(certs: &Certs, timeout: &str) -> (tokio::process::Child, String) {
    let flags = tls_server_flags(certs);
    let mut args = vec!["ramfs", "--tls-handshake-timeout", timeout];
    args.extend(flags.iter().map(String::as_str));
    let served = serve_on_port("tls", &args).await;
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
    command.args(args).args(["--uname", uname]);
    present(&mut command, certs, who);
    command.output().unwrap()
}

/// Adds to `command` the flags that trust `certs`' CA and present `who`'s
/// certificate.
fn present(command: &mut std::process::Command, certs: &Certs, who: Option<&str>) {
    command.arg("--tls-ca").arg(certs.ca());
    if let Some(who) = who {
        let (cert, key) = certs.pair(who);
        command
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key);
    }
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

/// `ninep mux ARGS... NSFILE` with `lines` as its namespace file, serving
/// TLS clients whose certificates name their users.
async fn mux(certs: &Certs, lines: &str, args: &[&str]) -> (tokio::process::Child, String) {
    let nsfile = certs.path(&format!("ns-{}", port_hint(lines)));
    std::fs::write(&nsfile, lines).unwrap();
    let flags = tls_server_flags(certs);
    let mut all = vec!["mux", Certs::arg(&nsfile)];
    all.extend(flags.iter().map(String::as_str));
    all.extend(args);
    start_on_port("tls", &all).await
}

/// A file name that tells namespace files apart.
fn port_hint(lines: &str) -> String {
    lines.chars().filter(char::is_ascii_digit).collect()
}

/// A mux whose clients and server both speak TLS: it proves itself to the
/// server with its own certificate, its clients prove themselves to it,
/// and `ninep mount` reaches the server through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mux_speaks_tls_to_its_clients_and_its_servers() {
    let certs = Certs::make("mux", &["alice", "mux"]);
    let (_server, server_addr) = serve(&certs, "10").await;
    let (mux_cert, mux_key) = certs.pair("mux");
    let ca = certs.ca();
    let (_mux, mux_addr) = mux(
        &certs,
        &format!("mount -c {server_addr} /\n"),
        &[
            "--uname",
            "mux",
            "--upstream-tls-ca",
            Certs::arg(&ca),
            "--upstream-tls-cert",
            Certs::arg(&mux_cert),
            "--upstream-tls-key",
            Certs::arg(&mux_key),
        ],
    )
    .await;
    let ls = ninep(&certs, Some("alice"), "alice", &["ls", "-a", &mux_addr]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout).trim(), "motd", "{ls:?}");
    let refused = ninep(&certs, Some("alice"), "bob", &["ls", "-a", &mux_addr]);
    assert!(!refused.status.success(), "{refused:?}");

    let (alice_cert, alice_key) = certs.pair("alice");
    let mnt = certs.path("mnt");
    let mount = Background::mount(
        &mux_addr,
        &mnt,
        &[
            "--uname",
            "alice",
            "--tls-ca",
            Certs::arg(&ca),
            "--tls-cert",
            Certs::arg(&alice_cert),
            "--tls-key",
            Certs::arg(&alice_key),
        ],
    );
    std::fs::write(mount.mnt.join("through-the-mount"), "over TLS twice\n").unwrap();
    let cat = ninep(
        &certs,
        Some("alice"),
        "alice",
        &["cat", "-a", &server_addr, "through-the-mount"],
    );
    assert_eq!(
        String::from_utf8_lossy(&cat.stdout),
        "over TLS twice\n",
        "{cat:?}"
    );
}

/// With `--access user`, a mux attaches to its server as each client's
/// proven user: the server (ramfs, which records owners) sees alice and
/// bob, not the mux. The server takes the mux's word because the mux runs
/// as root on its unix socket (`--auth peercred`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mux_with_access_user_attaches_as_each_client() {
    let certs = Certs::make("peruser", &["alice", "bob"]);
    let sock = certs.path("ramfs.sock");
    let _ramfs = common::serve(&sock, &["ramfs", "--auth", "peercred"]).await;
    let ram = format!("unix!{}", sock.display());
    let (_mux, mux_addr) = mux(
        &certs,
        &format!("mount -c {ram} /\n"),
        &["--access", "user"],
    )
    .await;
    for user in ["alice", "bob"] {
        let out = ninep(
            &certs,
            Some(user),
            user,
            &["mkdir", "-a", &mux_addr, &format!("made-by-{user}")],
        );
        assert!(out.status.success(), "{user}: {out:?}");
    }
    // Alice's certificate attaching as bob is refused by the mux.
    let out = ninep(
        &certs,
        Some("alice"),
        "bob",
        &["mkdir", "-a", &mux_addr, "x"],
    );
    assert!(!out.status.success(), "{out:?}");
    // Straight to the server (as root): who made what, by name (9P2000.u).
    let ls = std::process::Command::new(NINEP)
        .args([
            "ls",
            "-l",
            "-a",
            &ram,
            "--uname",
            "root",
            "--dialect",
            "9P2000.u",
        ])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&ls.stdout);
    for user in ["alice", "bob"] {
        let line = listing
            .lines()
            .find(|l| l.ends_with(&format!("made-by-{user}")))
            .unwrap_or_else(|| panic!("made-by-{user} not in {listing}"));
        assert!(line.contains(&format!(" {user} ")), "{line}");
    }
    assert!(!listing.contains(" x\n"), "{listing}");
}

/// `ninep ns` proves its user to a `tls!` server with the flags the other
/// verbs take, and without a certificate mounts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_space_mounts_a_tls_server_with_a_certificate() {
    let certs = Certs::make("cli-ns", &["alice"]);
    let (_server, addr) = serve(&certs, "10").await;
    let dir = certs.dir.join("ns");
    let mnt = dir.join("n");
    std::fs::create_dir_all(&mnt).unwrap();
    let nsfile = dir.join("namespace");
    std::fs::write(&nsfile, format!("mount {addr} {}\n", mnt.display())).unwrap();
    let ns = |who: Option<&str>| {
        let mut command = std::process::Command::new(NINEP);
        command.args(["ns", "--uname", "alice"]);
        present(&mut command, &certs, who);
        command.arg(&nsfile).args(["--", "ls"]).arg(&mnt);
        command.output().unwrap()
    };
    let out = ns(Some("alice"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "motd",
        "{out:?}"
    );
    let out = ns(None);
    assert!(
        !out.status.success(),
        "mounted without a certificate: {out:?}"
    );
}
