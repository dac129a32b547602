//! A mount line whose address goes through a gateway's /net.

mod support;

use std::sync::Arc;

use ninep_devices::net::{NetFs, Options};
use ninep_mux::Config;
use ninep_server::auth::NoUsers;
use ninep_server::{Limits, Policy, Server, StreamLimits};
use ninep_testkit::Password;
use ninep_wire::consts::dotl::O_RDWR;
use support::{mux_with, ramfs, serve, serve_mux};

#[tokio::test]
async fn a_mount_through_a_gateways_net() {
    let ram = ramfs().await;
    let gateway = serve(NetFs::new(Options::default()), Limits::default()).await;
    let port = ram.addr.rsplit('!').next().unwrap();
    let through = format!("{}:/tcp!127.0.0.1!{port}", gateway.addr);
    let served = serve_mux(&format!("mount -c {through} /n/far")).await;
    let fsys = ninep_client::Client::connect(&served.addr)
        .await
        .unwrap()
        .attach("glenda", "")
        .await
        .unwrap();
    let file = fsys.create("n/far/note", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, "far away".into()).await.unwrap();
    file.close().await.unwrap();
    assert_eq!(fsys.read_to_string("n/far/note").await.unwrap(), "far away");
    // The mux's connection to the ramfs is a conversation of the gateway.
    let net = ninep_client::Client::connect(&gateway.addr)
        .await
        .unwrap()
        .attach("none", "")
        .await
        .unwrap();
    let remote = net.read_to_string("tcp/0/remote").await.unwrap();
    assert_eq!(remote, format!("127.0.0.1!{port}\n"));
}

/// A gateway that asks for Tauth is attached to as the mux's user, proven
/// as the mux proves itself to its servers.
#[tokio::test]
async fn a_gateway_that_asks_for_proof_is_met_with_the_muxs_prover() {
    let ram = ramfs().await;
    let policy = Policy::required(Arc::new(NoUsers)).with_scheme(Arc::new(Password));
    let listener = "tcp!127.0.0.1!0"
        .parse::<ninep_transport::Addr>()
        .unwrap()
        .listen()
        .await
        .unwrap();
    let gateway = listener.local_addr().unwrap().to_string();
    let net = NetFs::new(Options::default());
    let _gateway = Server::with_policy(net, Limits::default(), StreamLimits::default(), policy)
        .spawn(listener);
    let port = ram.addr.rsplit('!').next().unwrap();
    let line = format!("mount -c {gateway}:/tcp!127.0.0.1!{port} /n/far");
    let unproven = ninep_mux::Mux::new(Config::default());
    let lines = ninep_mux::nsfile::parse(&line).unwrap();
    let refused = unproven.apply(lines).await.unwrap_err();
    assert_eq!(
        refused.errno(),
        ninep_wire::Errno::EPERM,
        "{}",
        refused.ename()
    );
    let config = Config {
        uname: "glenda".into(),
        prover: Some(Arc::new(Password)),
        ..Config::default()
    };
    // Attaching per user, the mux lends no client its own user at the
    // gateway: it meets gateways as nobody in particular.
    let per_user = ninep_mux::Mux::new(Config {
        attach_per_user: true,
        ..config.clone()
    });
    let lines = ninep_mux::nsfile::parse(&line).unwrap();
    let refused = per_user.apply(lines).await.unwrap_err();
    assert_eq!(
        refused.errno(),
        ninep_wire::Errno::EPERM,
        "{}",
        refused.ename()
    );
    let mux = mux_with(config, &line).await;
    let served = serve(mux, Limits::default()).await;
    let fsys = support::attach(&served.addr, ninep_wire::Dialect::L).await;
    let file = fsys.create("n/far/note", 0o644, O_RDWR).await.unwrap();
    file.write_all_at(0, "proven".into()).await.unwrap();
    file.close().await.unwrap();
    assert_eq!(fsys.read_to_string("n/far/note").await.unwrap(), "proven");
}
