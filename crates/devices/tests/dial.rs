//! Dialling through a /net served by `ninep serve net`: a 9P session with
//! a ramfs reached only through the gateway's files.

mod common;

use bytes::Bytes;
use ninep_client::{Dialer, Options};
use ninep_devices::dial;
use ninep_devices::net::{NetFs, Options as NetOptions};
use ninep_ramfs::RamFs;
use ninep_wire::consts::dotl::O_RDWR;

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
