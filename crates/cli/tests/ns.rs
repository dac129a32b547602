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

/// A user who is not root gets a private name space too, inside a user
/// name space of their own, keeping their uid.
#[tokio::test]
async fn private_name_space_without_root() {
    const USER: u32 = 4242;
    let fuse = std::fs::metadata("/dev/fuse").expect("/dev/fuse");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&fuse.permissions()) & 0o666,
        0o666,
        "FUSE mounts by users need /dev/fuse open to all (crw-rw-rw-), as Debian's udev \
         rule makes it; scripts/setup sets it"
    );
    let dir = std::env::temp_dir().join(format!("ninep-ns-user-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (tree, n) = (dir.join("tree"), dir.join("n"));
    for d in [&tree, &n] {
        std::fs::create_dir_all(d).unwrap();
    }
    // The user's own tree, served by a server the user can reach.
    rustix::fs::chmod(&dir, rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
    let owner = Some(rustix::process::Uid::from_raw(USER));
    let group = Some(rustix::process::Gid::from_raw(USER));
    for d in [&tree, &n] {
        rustix::fs::chown(d, owner, group).unwrap();
    }
    let sock = dir.join("sock");
    let _server = common::serve(&sock, &[tree.to_str().unwrap()]).await;
    rustix::fs::chmod(&sock, rustix::fs::Mode::from_raw_mode(0o777)).unwrap();
    let nsfile = dir.join("ns");
    std::fs::write(
        &nsfile,
        format!("mount unix!{} {}\n", sock.display(), n.display()),
    )
    .unwrap();

    let script = format!(
        "id -u && echo mine > {n}/made && grep -c ' {n} ' /proc/self/mountinfo",
        n = n.display()
    );
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            NINEP,
            "ns",
        ])
        .arg(&nsfile)
        .args(["--", "sh", "-c", &script])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{USER}\n1\n"));
    // Written through the mount; the mount itself never showed outside.
    assert_eq!(
        std::fs::read_to_string(tree.join("made")).unwrap(),
        "mine\n"
    );
    assert!(!is_mounted(&n));
    assert_eq!(std::fs::read_dir(&n).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
