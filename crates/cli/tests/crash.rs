//! Crash consistency of `ninep serve DIR`: the server is killed (SIGKILL)
//! in the middle of a write load, and every file whose Tfsync was answered
//! before the kill is on disk exactly as written. Writes not yet synced may
//! be anywhere; synced ones may not.

mod common;

use bytes::Bytes;
use ninep_client::Client;
use ninep_wire::consts::dotl::O_RDWR;

use common::{noise, serve_on_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_synced_before_a_kill_are_intact() {
    let dir = std::env::temp_dir().join(format!("ninep-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (mut server, addr) = serve_on_port("tcp", &[dir.to_str().unwrap()]).await;

    // Writers make files of 256 KiB in 16 KiB writes, each file fsync'd
    // once written; the server is killed once some are synced and the
    // rest are under way.
    const KILL_AFTER: usize = 12;
    let synced = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (enough, mut enough_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for w in 0..4 {
        let fsys = Client::connect(&addr)
            .await
            .unwrap()
            .attach_as("root", 0, "")
            .await
            .unwrap();
        let synced = synced.clone();
        let enough = enough.clone();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                let data = noise(256 * 1024 + w * 977 + i);
                let Ok(file) = fsys.create(&name, 0o644, O_RDWR).await else {
                    return;
                };
                for (n, piece) in data.chunks(16 * 1024).enumerate() {
                    let at = (n * 16 * 1024) as u64;
                    if file
                        .write_all_at(at, Bytes::copy_from_slice(piece))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if file.fsync(false).await.is_err() {
                    return;
                }
                let count = {
                    let mut synced = synced.lock();
                    synced.push((name, data));
                    synced.len()
                };
                if count == KILL_AFTER {
                    let _ = enough.send(());
                }
            }
        }));
    }
    enough_rx.recv().await.expect("some files synced");
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }

    let synced = synced.lock();
    assert!(synced.len() >= KILL_AFTER);
    for (name, data) in synced.iter() {
        let on_disk = std::fs::read(dir.join(name)).unwrap();
        assert!(on_disk == *data, "{name}: synced, but not as written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
