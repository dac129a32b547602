//! A mount line whose address goes through a gateway's /net.

mod support;

use ninep_devices::net::{NetFs, Options};
use ninep_server::Limits;
use ninep_wire::consts::dotl::O_RDWR;
use support::{ramfs, serve, serve_mux};

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
