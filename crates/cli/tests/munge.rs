//! diod's own tools prove who they are to `ninep serve --auth munge`, as
//! they do to diod; a credential replayed, expired, made for another user
//! or missing is refused, and the server goes on serving others; a mux
//! proves its user to diod and to ours. Each test starts its own munged
//! (which diod's tools see as MUNGE's default one) and stops it by PID.

mod common;
#[path = "../../client/tests/support/diod.rs"]
mod diod_server;
#[path = "../../client/tests/support/munged.rs"]
mod munged;

use std::process::Output;
use std::time::Duration;

use ninep_client::{AuthFid, BoxFuture, Client, Error, Munge, Prover};

use common::{NINEP, port, serve_on_port, start_on_port};
use munged::{Munged, Written, assert_refused};

/// A scratch directory with a file in it, removed when dropped.
struct Export(std::path::PathBuf);

impl Export {
    fn new(name: &str) -> Export {
        let dir = std::env::temp_dir().join(format!("ninep-munge-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("motd"), "proven by MUNGE\n").unwrap();
        Export(dir)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `ninep serve --auth munge` of `export`, asking `munged`.
async fn serve(export: &Export, munged: &Munged) -> (tokio::process::Child, String) {
    let socket = munged.socket();
    let socket = socket.to_str().unwrap();
    let args = [export.path(), "--auth", "munge", "--munge-socket", socket];
    serve_on_port("tcp", &args).await
}

fn diod_tool(munged: &Munged, tool: &str, port: u16, args: &[&str]) -> Output {
    munged
        .command(format!("/usr/sbin/{tool}"))
        .args(["-s", &format!("127.0.0.1:{port}"), "-a", "/", "-t", "10"])
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diods_tools_prove_their_user_to_our_server() {
    let munged = Munged::start("tools");
    let export = Export::new("tools");
    let socket = munged.socket();
    let (_server, addr) = serve(&export, &munged).await;
    let port = port(&addr);

    let cat = diod_tool(&munged, "diodcat", port, &["motd"]);
    let said = String::from_utf8_lossy(&cat.stderr);
    assert!(cat.status.success(), "diodcat: {said}");
    assert_eq!(cat.stdout, b"proven by MUNGE\n");
    let ls = diod_tool(&munged, "diodls", port, &[]);
    assert!(
        ls.status.success(),
        "diodls: {}",
        String::from_utf8_lossy(&ls.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ls.stdout).trim(), "motd");

    // Root's credential, in an attach as uid 1000: refused.
    let other = diod_tool(&munged, "diodcat", port, &["-u", "1000", "motd"]);
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("Operation not permitted"),
        "{other:?}"
    );
    // No munged to ask for a credential: nothing is served.
    let none = std::process::Command::new("/usr/sbin/diodcat")
        .args(["-s", &format!("127.0.0.1:{port}"), "-a", "/", "motd"])
        .output()
        .unwrap();
    assert!(!none.status.success() && none.stdout.is_empty(), "{none:?}");

    // The same through our client and command line.
    let cat = std::process::Command::new(common::NINEP)
        .args(["cat", "-a", &addr, "--uname", "root", "--auth", "munge"])
        .arg("--munge-socket")
        .arg(&socket)
        .arg("motd")
        .output()
        .unwrap();
    assert_eq!(cat.stdout, b"proven by MUNGE\n", "{cat:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_expired_and_missing_credentials_are_refused() {
    let munged = Munged::start("bad");
    let export = Export::new("bad");
    let socket = munged.socket();
    let (_server, addr) = serve(&export, &munged).await;
    let client = Client::connect(&addr).await.unwrap();
    let attach = |prover: Written| {
        let client = client.clone();
        async move { client.attach_proven("root", 0, "", &prover).await }
    };

    // Unproven.
    assert_refused(client.attach_as("root", 0, "").await, "no afid");
    // A credential that expires in a second, used after it has.
    let expiring = munged.credential(0, 1);
    // A credential, used twice.
    let cred = munged.credential(0, 300);
    assert!(attach(Written(cred.clone())).await.is_ok());
    assert_refused(attach(Written(cred)).await, "replayed");
    // Garbage, and nothing at all.
    assert_refused(attach(Written("MUNGE:garbage:".into())).await, "garbage");
    assert_refused(
        client.attach_proven("root", 0, "", &Nothing).await,
        "no credential",
    );
    // A credential of uid 1000's, in an attach as root.
    assert_refused(
        attach(Written(munged.credential(1000, 300))).await,
        "another user's",
    );
    // The credential's own lifetime, not a wait for an event.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_refused(attach(Written(expiring)).await, "expired");

    // The server went on serving: a good credential still works.
    let munge = Munge {
        socket: Some(socket),
    };
    let fsys = client.attach_proven("root", 0, "", &munge).await.unwrap();
    assert_eq!(
        fsys.read_to_string("motd").await.unwrap(),
        "proven by MUNGE\n"
    );
}

/// Writes nothing: the attach names an afid nobody wrote to.
#[derive(Debug)]
struct Nothing;

impl Prover for Nothing {
    fn prove<'a>(&'a self, _afid: &'a AuthFid, _: u32) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// A mux proves its user with MUNGE (`--upstream-auth munge`) to the
/// servers it mounts: diod with authentication on, and `ninep serve --auth
/// munge`. Without it both refuse the mux, which then does not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mux_proves_its_user_to_diod_and_to_ours() {
    let munged = Munged::start("mux");
    let diod = diod_server::start_with("mux", munged.command(diod_server::binary()));
    std::fs::write(diod.on_disk("motd"), "from diod\n").unwrap();
    let export = Export::new("mux");
    let (_ours, ours) = serve(&export, &munged).await;
    let socket = munged.socket();
    let socket = socket.to_str().unwrap();
    for (addr, aname) in [(diod.addr(), diod.aname()), (ours.clone(), "")] {
        let nsfile = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("ninep-munge-mux-{}.ns", port(&addr)));
        std::fs::write(&nsfile, format!("mount {addr} /n {aname}\n")).unwrap();
        let nsfile = nsfile.to_str().unwrap();
        let mux = ["mux", nsfile, "--uname", "root", "--n-uname", "0"];
        // Unproven: refused, so the mux cannot mount it.
        let out = std::process::Command::new(NINEP)
            .args(mux)
            .args(["--listen", "tcp!127.0.0.1!0"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{addr}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("not permitted"), "{addr}: {said}");
        let proven = [
            "--upstream-auth",
            "munge",
            "--upstream-munge-socket",
            socket,
        ];
        let (_mux, mux_addr) = start_on_port("tcp", &[&mux[..], &proven[..]].concat()).await;
        let cat = std::process::Command::new(NINEP)
            .args(["cat", "-a", &mux_addr, "n/motd"])
            .output()
            .unwrap();
        let expected = if addr == ours {
            "proven by MUNGE\n"
        } else {
            "from diod\n"
        };
        assert_eq!(
            String::from_utf8_lossy(&cat.stdout),
            expected,
            "{addr}: {cat:?}; {}",
            diod.log_text()
        );
    }
}
