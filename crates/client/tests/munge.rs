//! Our client proves who it is to diod running with MUNGE authentication
//! (no `-n`), as diod's own tools do: Tauth, a credential written to the
//! afid, Tattach. Each test starts its own munged and diod (which sees the
//! munged as MUNGE's default one) and stops both by PID.

#[path = "support/diod.rs"]
mod diod_server;
#[path = "support/munged.rs"]
mod munged;

use std::time::Duration;

use ninep_client::{Client, Munge};
use ninep_wire::Dialect;

use diod_server::{Diod, binary, start_with};
use munged::{Munged, Written, assert_refused};

fn start(tag: &str) -> (Munged, Diod) {
    let munged = Munged::start(tag);
    let diod = start_with(tag, munged.command(binary()));
    (munged, diod)
}

async fn connect(diod: &Diod) -> Client {
    let options = ninep_client::Options {
        dialect: Some(Dialect::L),
        ..Default::default()
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        Client::connect_with(&diod.addr(), options),
    )
    .await
    .expect("connecting to diod timed out")
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_proves_its_user_to_diod() {
    let (munged, diod) = start("ours");
    std::fs::write(diod.on_disk("motd"), "proven\n").unwrap();
    let munge = Munge {
        socket: Some(munged.socket()),
    };
    // Unproven, diod refuses.
    let client = connect(&diod).await;
    assert_refused(client.attach_as("root", 0, diod.aname()).await, "no afid");
    let fsys = client
        .attach_proven("root", 0, diod.aname(), &munge)
        .await
        .unwrap_or_else(|e| panic!("attach: {e}; {}", diod.log_text()));
    assert_eq!(fsys.read_to_string("motd").await.unwrap(), "proven\n");

    // (Once a user is proven, diod serves its unproven attaches on the same
    // connection too.)
    // A credential once used is a replay.
    let cred = munged.credential(0, 300);
    let replay = Written(cred);
    let first = client.attach_proven("root", 0, diod.aname(), &replay).await;
    assert!(first.is_ok(), "{first:?}");
    assert_refused(
        client.attach_proven("root", 0, diod.aname(), &replay).await,
        "replayed credential",
    );
    // Garbage in the exchange.
    let garbage = Written("MUNGE:garbage:".into());
    assert_refused(
        client
            .attach_proven("root", 0, diod.aname(), &garbage)
            .await,
        "garbage",
    );
    // Root's credential does not prove uid 1000.
    let roots = Written(munged.credential(0, 300));
    assert_refused(
        client.attach_proven("", 1000, diod.aname(), &roots).await,
        "another user's credential",
    );
    assert!(
        diod.log_text().contains("munge cred"),
        "{}",
        diod.log_text()
    );
}
