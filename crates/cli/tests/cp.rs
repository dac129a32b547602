//! `ninep cp` between the local file system and two `ninep serve DIR`
//! processes on loopback, one of them with the stream extension turned off:
//! every mode, every direction, byte for byte.

mod common;

use std::path::{Path, PathBuf};

use common::{NINEP, noise, serve_on_port};
use tokio::process::{Child, Command};

/// A `ninep serve DIR` on a free loopback port; killed when dropped.
struct Served {
    child: Child,
    dir: PathBuf,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn serve(name: &str, extra: &[&str]) -> Served {
    let dir = std::env::temp_dir().join(format!("ninep-cp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Port 0, with the address the server reports: a port probed free and
    // then handed over can be taken by a server of a test running beside.
    let (child, addr) = serve_on_port("tcp", &[&[dir.to_str().unwrap()], extra].concat()).await;
    Served { child, dir, addr }
}

/// Runs `ninep cp` and returns its summary line.
async fn cp(args: &[&str]) -> String {
    let out = Command::new(NINEP)
        .arg("cp")
        .args(args)
        .output()
        .await
        .expect("run ninep cp");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ninep cp {args:?}: {err}");
    err
}

fn same(a: &Path, want: &[u8]) {
    let got = std::fs::read(a).unwrap();
    assert!(got == want, "{} differs ({} bytes)", a.display(), got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_in_every_mode_and_direction() {
    let streams = serve("streams", &[]).await;
    let plain = serve("plain", &["--max-streams", "0"]).await;
    let local = std::env::temp_dir().join(format!("ninep-cp-{}-local", std::process::id()));
    let data = noise(9 << 20 | 17);
    std::fs::write(&local, &data).unwrap();
    let local_s = local.to_str().unwrap();
    let back = local.with_extension("back");
    let back_s = back.to_str().unwrap();

    // A copy that would not recover a lost connection streams its writes;
    // one that would pipelines them, since a write stream cut off leaves
    // unknown what reached the file.
    let to_big = format!("{}:/big", streams.addr);
    let line = cp(&["--recover", "0", local_s, &to_big]).await;
    assert!(
        line.starts_with(&format!("cp: {} bytes in", data.len())),
        "{line}"
    );
    assert!(line.contains("write streamed"), "{line}");
    same(&streams.dir.join("big"), &data);
    let line = cp(&[local_s, &to_big]).await;
    assert!(line.contains("write pipelined"), "{line}");
    same(&streams.dir.join("big"), &data);

    for (mode, via_streams, via_plain) in [
        ("auto", "read streamed", "write pipelined"),
        ("stream", "read streamed", "write pipelined"),
        ("pipeline", "read pipelined", "write pipelined"),
        ("one", "read one at a time", "write one at a time"),
    ] {
        let to = format!("{}:/copy-{mode}", plain.addr);
        let line = cp(&["--mode", mode, &format!("{}:/big", streams.addr), &to]).await;
        assert!(
            line.contains(via_streams) && line.contains(via_plain),
            "{mode}: {line}"
        );
        same(&plain.dir.join(format!("copy-{mode}")), &data);
        let _ = std::fs::remove_file(&back);
        cp(&["--mode", mode, &to, back_s]).await;
        same(&back, &data);
    }
    // Over an existing file, which is truncated first.
    std::fs::write(plain.dir.join("copy-auto"), noise(20 << 20)).unwrap();
    cp(&[local_s, &format!("{}:/copy-auto", plain.addr)]).await;
    same(&plain.dir.join("copy-auto"), &data);

    let _ = std::fs::remove_file(&local);
    let _ = std::fs::remove_file(&back);
}

#[tokio::test]
async fn refuses_two_local_paths_and_missing_files() {
    let out = Command::new(NINEP)
        .args(["cp", "a", "b"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("both local"));
    let served = serve("missing", &[]).await;
    let out = Command::new(NINEP)
        .args(["cp", &format!("{}:/nothing", served.addr), "/dev/null"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("ninep: "));
}

#[tokio::test]
async fn a_local_destination_that_cannot_be_written_fails_the_copy() {
    let served = serve("full", &[]).await;
    std::fs::write(served.dir.join("f"), noise(3 << 20)).unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Command::new(NINEP)
            .args(["cp", &format!("{}:/f", served.addr), "/dev/full"])
            .output(),
    )
    .await
    .expect("cp into a full device ends")
    .unwrap();
    assert!(!out.status.success(), "a copy into /dev/full succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left"), "{err}");
}
