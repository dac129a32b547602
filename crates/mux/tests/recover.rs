//! A mux that recovers its upstream connections: its clients keep their
//! fids and open files across a restart of a server below a mount point.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ninep_client::Recovery;
use ninep_export::Export;
use ninep_mux::Config;
use ninep_server::Limits;
use ninep_wire::Dialect;
use ninep_wire::consts::dotl::O_RDWR;
use support::*;

#[tokio::test]
async fn open_files_below_a_mount_point_live_on_across_a_server_restart() {
    let dir = std::env::temp_dir().join(format!("ninep-mux-recover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f"), "before\n").unwrap();
    let export = || Export::new(&dir, ninep_export::Options::default()).unwrap();
    let up = serve(export(), Limits::default()).await;
    let up_addr = up.addr.clone();
    let config = Config {
        recovery: Some(Recovery {
            deadline: Duration::from_secs(10),
            ..Recovery::default()
        }),
        ..Config::default()
    };
    let mux = mux_with(config, &format!("mount {up_addr} /n/up\n")).await;
    let served = serve(mux, Limits::default()).await;
    let fsys = attach(&served.addr, Dialect::L).await;
    let file = fsys.open("n/up/f", O_RDWR).await.unwrap();
    assert_eq!(&file.read_at(0, 6).await.unwrap()[..], b"before");

    up.stop().await;
    let again = serve_on(&up_addr, export(), Limits::default()).await;

    assert_eq!(&file.read_at(0, 6).await.unwrap()[..], b"before");
    file.write_all_at(7, Bytes::from_static(b"after\n"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).unwrap(),
        "before\nafter\n"
    );
    assert_eq!(
        fsys.read_to_string("n/up/f").await.unwrap(),
        "before\nafter\n"
    );
    drop(again);
    std::fs::remove_dir_all(&dir).unwrap();
}
