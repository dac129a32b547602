//! What a mount reads ahead of a file never outlives a write to the file or
//! a change of its size: fsx's sequence that found it, replayed through a
//! mount under strict caching (writes behind, reads ahead), each read
//! checked against what was written.

mod support;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use ninep_fuse::Cache;
use ninep_ramfs::RamFs;
use ninep_transport::Addr;
use ninep_wire::Dialect;

/// A file beside what it must hold.
struct Checked {
    file: File,
    want: Vec<u8>,
}

impl Checked {
    fn create(path: &Path) -> Checked {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        Checked {
            file,
            want: Vec::new(),
        }
    }

    fn write(&mut self, offset: usize, len: usize) {
        let data: Vec<u8> = (offset..offset + len).map(|i| (i % 251) as u8).collect();
        self.file.write_all_at(&data, offset as u64).unwrap();
        if self.want.len() < offset + len {
            self.want.resize(offset + len, 0);
        }
        self.want[offset..offset + len].copy_from_slice(&data);
    }

    fn truncate(&mut self, len: usize) {
        self.file.set_len(len as u64).unwrap();
        self.want.resize(len, 0);
    }

    fn read(&self, offset: usize, len: usize) {
        let mut got = vec![0; len];
        self.file.read_exact_at(&mut got, offset as u64).unwrap();
        assert!(
            got == self.want[offset..offset + len],
            "{len} bytes at {offset:#x} differ from what was written"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_after_writes_and_truncations_see_them() {
    let base = std::env::temp_dir().join(format!("ninep-fuse-ahead-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    support::serve(RamFs::new(), &addr).await;
    let mnt = base.join("mnt");
    let session = support::mount(&addr, Dialect::L, &support::options(Cache::Strict), &mnt).await;
    let path = mnt.join("fsx");
    tokio::task::spawn_blocking(move || {
        let mut f = Checked::create(&path);
        f.write(0x314eb, 0x2820);
        f.write(0x2efad, 0xa4d3);
        f.write(0x1ee6e, 0x2d2f);
        f.write(0x33ea0, 0x4964);
        f.truncate(0x24b42);
        // Reads the kernel sends in order: the mount reads ahead.
        f.read(0x342f, 0x2acb);
        f.read(0x110da, 0x7ced);
        f.read(0x557, 0x4fe5);
        f.truncate(0x31c70);
        f.write(0x546c, 0xfa6a);
        f.read(0x7f29, 0xd5fa);
        f.file.sync_data().unwrap();
        f.write(0x2b3db, 0x5ab4);
        f.read(0x30024, 0x1c4c);
    })
    .await
    .unwrap();
    drop(session);
    let _ = std::fs::remove_dir_all(&base);
}
