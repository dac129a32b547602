//! The export's user database follows its files: users added after the
//! export started can attach.
//!
//! Runs as root (multi-user mode takes on each attaching user's ids). The
//! export reads a passwd and a group file of the test's own, so the host's
//! are left alone.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use ninep_client::Client;
use ninep_export::users::UserDb;
use ninep_export::{Export, Identity, Options};
use ninep_server::Server;
use ninep_transport::Addr;
use ninep_wire::NONUNAME;
use ninep_wire::consts::dotl::O_RDWR;

const LATECOMER: &str = "ninep-latecomer";
const LATECOMER_ID: u32 = 4242;

#[tokio::test]
async fn a_user_added_after_the_first_attach_is_found_on_a_later_attach() {
    assert!(
        rustix::process::geteuid().is_root(),
        "multi-user mode takes on users' ids, which only root may do: run this test as root"
    );
    let base = std::env::temp_dir().join(format!("ninep-users-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let export = base.join("export");
    std::fs::create_dir_all(&export).unwrap();
    std::os::unix::fs::chown(&export, Some(LATECOMER_ID), Some(LATECOMER_ID)).unwrap();
    let (passwd, group) = (base.join("passwd"), base.join("group"));
    std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(&group, "root:x:0:\n").unwrap();

    let options = Options {
        identity: Identity::Multiuser,
        ..Options::default()
    };
    let fs = Export::with_users(&export, options, UserDb::from_files(&passwd, &group)).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    let listener = addr.listen().await.unwrap();
    tokio::spawn(async move {
        Server::new(fs)
            .serve_listener(listener, std::future::pending())
            .await
    });
    let client = Client::connect(&addr.to_string()).await.unwrap();

    client.attach_as("root", NONUNAME, "").await.unwrap();
    let refused = client.attach_as(LATECOMER, NONUNAME, "").await;
    assert!(
        refused.is_err_and(|e| e.is_remote()),
        "{LATECOMER} attached before the passwd file had them"
    );

    let mut lines = std::fs::read_to_string(&passwd).unwrap();
    lines.push_str(&format!(
        "{LATECOMER}:x:{LATECOMER_ID}:{LATECOMER_ID}::/nonexistent:/bin/false\n"
    ));
    std::fs::write(&passwd, lines).unwrap();
    // The export looks at its files at most once a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let latecomer = client
        .attach_as(LATECOMER, NONUNAME, "")
        .await
        .expect("a user added to the passwd file attaches");
    latecomer.create("mine", 0o644, O_RDWR).await.unwrap();
    let owner = std::fs::metadata(export.join("mine")).unwrap();
    assert_eq!((owner.uid(), owner.gid()), (LATECOMER_ID, LATECOMER_ID));
    let _ = std::fs::remove_dir_all(&base);
}
