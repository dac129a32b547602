//! Dialling through a /net served by `ninep serve net`: a 9P session with
//! a ramfs reached only through the gateway's files.

#[path = "../../transport/tests/support/certs.rs"]
mod certs;
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use certs::Certs;
use ninep_client::{Dialer, Options};
use ninep_devices::dial::{self, Gateways};
use ninep_devices::net::{NetFs, Options as NetOptions};
use ninep_ramfs::RamFs;
use ninep_server::auth::{CertNames, NoUsers};
use ninep_server::{Limits, Policy, Server, StreamLimits};
use ninep_testkit::{Password, read_frame, tag};
use ninep_transport::{Addr, TlsClient, TlsServer};
use ninep_wire::consts::dotl::O_RDWR;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use common::{attach, names, start};

#[tokio::test]
async fn a_9p_session_through_the_gateways_net() {
    let (_ramfs, ram_addr) = start(RamFs::new()).await;
    let (_gateway, gw_addr) = start(NetFs::new(NetOptions::default())).await;
    let ram_port = ram_addr.rsplit('!').next().unwrap();
    let watch = attach(&gw_addr, "glenda", "").await;

    for through in [
        // cs translates.
        format!("{gw_addr}:/tcp!127.0.0.1!{ram_port}"),
        format!("{gw_addr}:/net!localhost!{ram_port}"),
        // Through the gateway, and through it again from there.
        format!(
            "{gw_addr}:/tcp!{}:/tcp!127.0.0.1!{ram_port}",
            gw_addr.replace("tcp!", "")
        ),
    ] {
        let client = dial::connect(&through, &Dialer::default(), Options::default(), "glenda")
            .await
            .unwrap();
        let fsys = client.attach("glenda", "").await.unwrap();
        let file = fsys.create("greeting", 0o644, O_RDWR).await.unwrap();
        file.write_all_at(0, Bytes::from_static(b"hello through the gateway"))
            .await
            .unwrap();
        file.close().await.unwrap();
        assert_eq!(
            fsys.read_to_string("greeting").await.unwrap(),
            "hello through the gateway",
            "{through}"
        );
        fsys.remove("greeting").await.unwrap();
        let convs = names(&watch, "tcp").await;
        assert!(
            convs.len() > 1,
            "the call is a conversation on the gateway: {convs:?}"
        );
        fsys.close().await;
    }
}

#[tokio::test]
async fn a_refused_call_says_why() {
    let (_gateway, gw_addr) = start(NetFs::new(NetOptions::default())).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let through = format!("{gw_addr}:/tcp!127.0.0.1!{port}");
    let e = dial::connect(&through, &Dialer::default(), Options::default(), "glenda")
        .await
        .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
}

/// How long the link to the gateway holds each reply, in the round trip
/// count below: long beside the time anything takes on loopback, so that
/// what a client sends at once stays in one round.
const LATENCY: Duration = Duration::from_millis(20);

/// A proxy to a 9P server that holds each reply back for [`LATENCY`] and
/// counts round trips: a request's round is one past that of the latest
/// reply the client had when the request came.
struct Rounds {
    addr: String,
    /// The highest round of the replies let through.
    delivered: Arc<AtomicU32>,
}

impl Rounds {
    async fn to(server: &str) -> Rounds {
        let server = server.replace("tcp!", "").replace('!', ":");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("tcp!127.0.0.1!{}", listener.local_addr().unwrap().port());
        let delivered = Arc::new(AtomicU32::new(0));
        let counted = delivered.clone();
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let upstream = TcpStream::connect(&server).await.unwrap();
                Rounds::carry(client, upstream, counted.clone());
            }
        });
        Rounds { addr, delivered }
    }

    fn carry(client: TcpStream, server: TcpStream, delivered: Arc<AtomicU32>) {
        let (mut from_client, mut to_client) = client.into_split();
        let (mut from_server, mut to_server) = server.into_split();
        let rounds = Arc::new(Mutex::new(HashMap::new()));
        let (held, mut due) = mpsc::unbounded_channel();
        let requests = rounds.clone();
        let seen = delivered.clone();
        tokio::spawn(async move {
            while let Some(frame) = read_frame(&mut from_client).await {
                requests
                    .lock()
                    .insert(tag(&frame), seen.load(Ordering::SeqCst) + 1);
                if to_server.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(frame) = read_frame(&mut from_server).await {
                let round = rounds.lock().remove(&tag(&frame)).unwrap_or(0);
                let _ = held.send((Instant::now() + LATENCY, round, frame));
            }
        });
        tokio::spawn(async move {
            while let Some((at, round, frame)) = due.recv().await {
                sleep_until(at).await;
                delivered.fetch_max(round, Ordering::SeqCst);
                if to_client.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
    }

    /// The highest round of the replies let through so far.
    fn round(&self) -> u32 {
        self.delivered.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_call_takes_three_round_trips() {
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = target.local_addr().unwrap().port();
    // localhost may be ::1 first, which must answer as well for the count.
    let targets = [Some(target), TcpListener::bind(("::1", port)).await.ok()];
    for target in targets.into_iter().flatten() {
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((tcp, _)) = target.accept().await {
                held.push(tcp);
            }
        });
    }
    let (_gateway, gw_addr) = start(NetFs::new(NetOptions::default())).await;
    let link = Rounds::to(&gw_addr).await;
    let fsys = attach(&link.addr, "glenda", "").await;
    for (dial, most) in [
        (format!("tcp!127.0.0.1!{port}"), 3),
        // cs's walk and open, its write and its first answer come first.
        (format!("net!localhost!{port}"), 6),
    ] {
        let before = link.round();
        let call = dial::call(&fsys, "/", &dial).await.unwrap();
        let rounds = link.round() - before;
        assert!(rounds <= most, "{dial}: {rounds} round trips");
        drop(call);
    }
}

#[tokio::test]
async fn writes_to_a_call_do_not_wait_a_round_trip_each() {
    const WRITES: usize = 32;
    let sink = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = sink.local_addr().unwrap().port();
    let received = tokio::spawn(async move {
        let (mut tcp, _) = sink.accept().await.unwrap();
        let mut all = Vec::new();
        tcp.read_to_end(&mut all).await.unwrap();
        all.len()
    });
    let (_gateway, gw_addr) = start(NetFs::new(NetOptions::default())).await;
    let link = Rounds::to(&gw_addr).await;
    let fsys = attach(&link.addr, "glenda", "").await;
    let mut call = dial::call(&fsys, "/", &format!("tcp!127.0.0.1!{port}"))
        .await
        .unwrap();
    let before = link.round();
    let block = vec![7u8; 64 << 10];
    for _ in 0..WRITES {
        call.write_all(&block).await.unwrap();
    }
    call.flush().await.unwrap();
    let rounds = link.round() - before;
    assert!(rounds <= 4, "{WRITES} writes took {rounds} round trips");
    drop(call);
    assert_eq!(received.await.unwrap(), WRITES * block.len());
}

/// A /net on `addr` whose attaches `policy` must prove: its address.
async fn gateway(addr: &str, policy: Policy) -> (ninep_server::Spawned, String) {
    let listener = addr.parse::<Addr>().unwrap().listen().await.unwrap();
    let bound = listener.local_addr().unwrap().to_string();
    let fs = NetFs::new(NetOptions::default());
    let server = Server::with_policy(fs, Limits::default(), StreamLimits::default(), policy);
    (server.spawn(listener), bound)
}

/// Reads the root of the ramfs at `ram` through `gw`, attaching to the
/// gateway as `gateways` says.
async fn through(gw: &str, ram: &str, gateways: Gateways<'_>) -> Result<(), ninep_client::Error> {
    let port = ram.rsplit('!').next().unwrap();
    let addr = format!("{gw}:/tcp!127.0.0.1!{port}");
    let client = dial::connect_as(&addr, &Dialer::default(), Options::default(), gateways).await?;
    let fsys = client.attach("glenda", "").await?;
    fsys.read_dir("/").await.map(drop)
}

#[tokio::test]
async fn a_gateway_that_asks_for_tauth_takes_only_a_proven_dial() {
    let (_ramfs, ram) = start(RamFs::new()).await;
    let policy = Policy::required(Arc::new(NoUsers)).with_scheme(Arc::new(Password));
    let (_gateway, gw) = gateway("tcp!127.0.0.1!0", policy).await;

    let e = through(&gw, &ram, Gateways::as_user("glenda"))
        .await
        .unwrap_err();
    assert_eq!(e.errno(), ninep_wire::Errno::EPERM, "{e}");
    let proven = Gateways {
        uname: "glenda",
        prover: Some(&Password),
    };
    through(&gw, &ram, proven).await.unwrap();
}

#[tokio::test]
async fn a_peercred_gateway_takes_a_dial_over_its_unix_socket_only() {
    let (_ramfs, ram) = start(RamFs::new()).await;
    let dir = std::env::temp_dir().join(format!("ninep-devices-peercred-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = format!("unix!{}", dir.join("gw").display());
    let policy = || Policy::required(Arc::new(NoUsers)).with_peercred();
    let (_by_tcp, tcp_gw) = gateway("tcp!127.0.0.1!0", policy()).await;
    let (_by_unix, _) = gateway(&sock, policy()).await;

    let user = Gateways::as_user("glenda");
    let e = through(&tcp_gw, &ram, user).await.unwrap_err();
    assert_eq!(e.errno(), ninep_wire::Errno::EPERM, "{e}");
    through(&sock, &ram, user).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A gateway served over TLS that asks for client certificates takes a
/// dial from the holder of one, attaching as the certificate's user, and
/// none from a dialler without one or as another user.
#[tokio::test]
async fn a_tls_gateway_takes_a_dial_with_a_client_certificate_only() {
    let (_ramfs, ram) = start(RamFs::new()).await;
    let certs = Certs::make("devices-gateway", &["glenda"]);
    let (cert, key) = certs.pair("server");
    let tls = TlsServer::from_files(&cert, &key, Some(&certs.ca())).unwrap();
    let at: Addr = "tls!127.0.0.1!0".parse().unwrap();
    let listener = at.listen_with(Some(tls)).await.unwrap();
    let gw = listener.local_addr().unwrap().to_string();
    let policy = Policy::required(Arc::new(NoUsers)).with_tls(CertNames::same());
    let fs = NetFs::new(NetOptions::default());
    let server = Server::with_policy(fs, Limits::default(), StreamLimits::default(), policy);
    let _gateway = server.spawn(listener);
    let port = ram.rsplit('!').next().unwrap();
    let addr = format!("{gw}:/tcp!127.0.0.1!{port}");
    let dialer = |who: Option<&str>| {
        let pair = who.map(|w| certs.pair(w));
        let identity = pair.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
        Dialer::with_tls(TlsClient::from_files(&certs.ca(), identity).unwrap())
    };
    let dial = async |who: Option<&str>, uname: &str| {
        let gateways = Gateways::as_user(uname);
        let client = dial::connect_as(&addr, &dialer(who), Options::default(), gateways).await?;
        let fsys = client.attach("glenda", "").await?;
        fsys.read_dir("/").await.map(drop)
    };
    dial(Some("glenda"), "glenda").await.unwrap();
    let e = dial(Some("glenda"), "other").await.unwrap_err();
    assert_eq!(e.errno(), ninep_wire::Errno::EPERM, "{e}");
    dial(None, "glenda").await.unwrap_err();
}
