//! `PipedFile::is_cached`: what decides whether a spliced read may be made
//! where the request is served or must wait on the blocking pool.

use std::io::Write;
use std::os::fd::AsFd;

use ninep_transport::PipedFile;

const TMPFS_MAGIC: i64 = 0x0102_1994;

#[test]
fn a_range_is_cached_until_its_pages_are_dropped() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("is-cached-{}", std::process::id()));
    let mut file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.write_all(&vec![7u8; 1 << 20]).unwrap();
    file.sync_all().unwrap();
    let fd = file.as_fd();

    assert!(PipedFile::is_cached(fd, 0, 1 << 20), "a file just written");
    assert!(PipedFile::is_cached(fd, 4096, 8192), "a range inside it");
    // Past the end there is nothing to hold: the last byte is not cached.
    assert!(
        !PipedFile::is_cached(fd, 0, 2 << 20),
        "a range past its end"
    );
    // Offsets preadv2 would take for "the file's own position".
    assert!(!PipedFile::is_cached(fd, u64::MAX, 1));
    assert!(!PipedFile::is_cached(fd, i64::MAX as u64, 2));

    let on_tmpfs = rustix::fs::fstatfs(fd).unwrap().f_type as i64 == TMPFS_MAGIC;
    if !on_tmpfs {
        // Clean pages go when asked; tmpfs keeps them, its only copy.
        rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(!PipedFile::is_cached(fd, 0, 1 << 20), "pages dropped");
    }
    drop(file);
    std::fs::remove_file(&path).unwrap();
}
