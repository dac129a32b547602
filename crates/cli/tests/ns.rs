//! `ninep ns`: mounts visible inside the private name space, invisible
//! outside, gone after the command exits.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

mod common;
use common::{NINEP, is_mounted, serve_ramfs};

#[tokio::test]
async fn private_name_space() {
    let dir = std::env::temp_dir().join(format!("ninep-ns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["n", "also"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let sock = dir.join("sock");
    let addr = format!("unix!{}", sock.display());
    let bin = NINEP;
    let mut server = serve_ramfs(&sock).await;
    let (n, also) = (dir.join("n"), dir.join("also"));
    let nsfile = dir.join("ns");
    std::fs::write(
        &nsfile,
        format!(
            "# test name space\nmount {addr} {}\nbind {} {}\n",
            n.display(),
            n.display(),
            also.display()
        ),
    )
    .unwrap();
    // Inside: write through the mount, read through the bind, see both
    // mounts, then linger so the outside can be checked meanwhile.
    let script = format!(
        "echo inside > {n}/x && cat {also}/x && grep -c ' {n} \\| {also} ' /proc/self/mountinfo && sleep 1",
        n = n.display(),
        also = also.display()
    );
    let child = Command::new(bin)
        .arg("ns")
        .arg(&nsfile)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !is_mounted(&n) && !is_mounted(&also),
        "the mounts leaked out"
    );
    assert_eq!(std::fs::read_dir(&n).unwrap().count(), 0);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("exit")
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "inside\n2\n");
    // Gone after exit, and what was written went to the server.
    assert!(!is_mounted(&n) && !is_mounted(&also));
    let cat = std::process::Command::new(bin)
        .args(["cat", "-a", &addr, "x"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "inside\n");
    // The command's exit status is passed on.
    let status = std::process::Command::new(bin)
        .args(["ns", "--", "sh", "-c", "exit 3"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let _ = server.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
