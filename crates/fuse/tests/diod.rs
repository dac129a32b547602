//! The mount against diod, an independent 9P2000.L server (Debian's `diod`
//! package): diod exports a fresh directory, ninep_fuse mounts it, and
//! ordinary system calls on the mount (std::fs, from a blocking thread) must
//! have the same effect as on the exported directory itself, which the test
//! reads directly on the host after every step.
//!
//! diod must be installed (without it this fails, it does not skip), and
//! /dev/fuse and fusermount3 must be there.

#[path = "../../client/tests/support/diod.rs"]
mod diod_server;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ninep_client::{Client, Options};
use ninep_wire::{Dialect, Errno};

/// The mount point's directory, removed when done.
struct Scene {
    base: PathBuf,
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

/// The mount (`mnt`) and the directory diod exports (`host`).
struct Sides {
    mnt: PathBuf,
    host: PathBuf,
}

impl Sides {
    fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    fn h(&self, rel: &str) -> PathBuf {
        self.host.join(rel)
    }

    /// `rel` has the same contents through the mount as on the host, and
    /// they are `want`.
    fn contents(&self, rel: &str, want: &[u8]) {
        let through = fs::read(self.m(rel)).unwrap_or_else(|e| panic!("read {rel} via mount: {e}"));
        let on_host = fs::read(self.h(rel)).unwrap_or_else(|e| panic!("read {rel} on host: {e}"));
        assert!(
            on_host == want,
            "{rel} on host: {} bytes, want {} ({})",
            on_host.len(),
            want.len(),
            first_difference(&on_host, want)
        );
        assert!(
            through == want,
            "{rel} via mount: {} bytes, want {} ({})",
            through.len(),
            want.len(),
            first_difference(&through, want)
        );
    }

    /// `rel` on the host (only) has contents `want`.
    fn contents_on_host(&self, rel: &str, want: &[u8]) {
        let on_host = fs::read(self.h(rel)).unwrap_or_else(|e| panic!("read {rel} on host: {e}"));
        assert!(
            on_host == want,
            "{rel} on host: {}",
            first_difference(&on_host, want)
        );
    }

    /// lstat of `rel` through the mount agrees with lstat on the host.
    fn same_meta(&self, rel: &str) {
        let m = fs::symlink_metadata(self.m(rel))
            .unwrap_or_else(|e| panic!("lstat {rel} via mount: {e}"));
        let h = fs::symlink_metadata(self.h(rel))
            .unwrap_or_else(|e| panic!("lstat {rel} on host: {e}"));
        let kind = |t: fs::FileType| {
            (
                t.is_file(),
                t.is_dir(),
                t.is_symlink(),
                t.is_fifo(),
                t.is_socket(),
            )
        };
        assert_eq!(kind(m.file_type()), kind(h.file_type()), "{rel}: type");
        assert_eq!(
            format!("{:o}", m.mode()),
            format!("{:o}", h.mode()),
            "{rel}: mode"
        );
        assert_eq!(m.len(), h.len(), "{rel}: size");
        assert_eq!(m.nlink(), h.nlink(), "{rel}: nlink");
        assert_eq!((m.uid(), m.gid()), (h.uid(), h.gid()), "{rel}: owner");
        assert_eq!(
            (m.mtime(), m.mtime_nsec()),
            (h.mtime(), h.mtime_nsec()),
            "{rel}: mtime"
        );
        assert_eq!(m.blocks(), h.blocks(), "{rel}: blocks");
    }

    /// The whole tree through the mount agrees with the host's: the same
    /// names in every directory, the same attributes, the same contents and
    /// link targets.
    fn same_tree(&self) {
        self.same_dir("");
    }

    fn same_dir(&self, rel: &str) {
        let through = listing(&self.m(rel));
        let on_host = listing(&self.h(rel));
        assert_eq!(
            through.keys().collect::<Vec<_>>(),
            on_host.keys().collect::<Vec<_>>(),
            "names in {rel:?}: via mount vs on host"
        );
        for (name, is_dir) in &on_host {
            let sub = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            assert_eq!(
                through[name], *is_dir,
                "{sub}: directory or not, in readdir"
            );
            self.same_meta(&sub);
            let t = fs::symlink_metadata(self.h(&sub)).unwrap().file_type();
            if t.is_dir() {
                self.same_dir(&sub);
            } else if t.is_symlink() {
                assert_eq!(
                    fs::read_link(self.m(&sub)).unwrap(),
                    fs::read_link(self.h(&sub)).unwrap(),
                    "{sub}: link target"
                );
            } else if t.is_file() {
                self.contents(&sub, &fs::read(self.h(&sub)).unwrap());
            }
        }
    }
}

/// A directory's names (each once: a repeated name fails), and whether each
/// is a directory by readdir's d_type.
fn listing(dir: &Path) -> BTreeMap<String, bool> {
    let mut names = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()));
        let name = entry.file_name().into_string().unwrap();
        let is_dir = entry.file_type().unwrap().is_dir();
        assert!(
            names.insert(name.clone(), is_dir).is_none(),
            "{}: {name:?} listed twice",
            dir.display()
        );
    }
    names
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("first difference at byte {i}"),
        None if a.len() == b.len() => "equal".into(),
        None => format!("equal for the first {} bytes", a.len().min(b.len())),
    }
}

/// Deterministic bytes that are not periodic over small distances.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x: u32 = 0x2545_f491 ^ seed.wrapping_mul(0x9e37_79b9);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// The errno of a failed call; a success fails the test.
#[track_caller]
fn expect_errno<T: std::fmt::Debug>(result: io::Result<T>, want: Errno, what: &str) {
    match result {
        Ok(v) => panic!("{what}: succeeded ({v:?}), expected {want}"),
        Err(e) => assert_eq!(
            e.raw_os_error(),
            Some(want.0 as i32),
            "{what}: {e} (expected {want})"
        ),
    }
}

/// Create, write, read back; create_new on an existing file.
fn files(s: &Sides) {
    fs::write(s.m("small"), b"hello, diod\n").unwrap();
    s.contents("small", b"hello, diod\n");
    s.same_meta("small");
    // Rewriting an existing file truncates it (open with O_TRUNC).
    fs::write(s.m("small"), b"hi\n").unwrap();
    s.contents("small", b"hi\n");
    // An empty file.
    File::create(s.m("empty")).unwrap();
    s.contents("empty", b"");
    s.same_meta("empty");
    expect_errno(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(s.m("small")),
        Errno::EEXIST,
        "create_new over an existing file",
    );
    // A file made on the host shows through the mount.
    fs::write(s.h("from-host"), b"made on the host\n").unwrap();
    s.contents("from-host", b"made on the host\n");
    s.same_meta("from-host");
}

/// A file of several MiB, written in one write(2) and read back in pieces.
fn big_file(s: &Sides) {
    let big = pattern(6 * 1024 * 1024 + 12_345, 1);
    fs::write(s.m("big"), &big).unwrap();
    assert_eq!(fs::metadata(s.h("big")).unwrap().len(), big.len() as u64);
    s.contents("big", &big);
    s.same_meta("big");
    // Reads of odd sizes at odd offsets.
    let mut f = File::open(s.m("big")).unwrap();
    for (at, len) in [
        (0, 1),
        (1, 4095),
        (4097, 65_537),
        (1_000_003, 300_000),
        (6_270_000, 33_000),
    ] {
        let mut buf = vec![0; len];
        f.seek(SeekFrom::Start(at as u64)).unwrap();
        f.read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("read {len} at {at}: {e}"));
        assert!(buf == big[at..at + len], "read {len} at {at}");
    }
    // At and past the end: nothing.
    f.seek(SeekFrom::Start(big.len() as u64)).unwrap();
    let mut rest = Vec::new();
    assert_eq!(f.read_to_end(&mut rest).unwrap(), 0);
    f.seek(SeekFrom::Start(big.len() as u64 + 10_000)).unwrap();
    assert_eq!(f.read(&mut [0; 16]).unwrap(), 0);
    // A short read at the tail.
    f.seek(SeekFrom::End(-100)).unwrap();
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).unwrap();
    assert!(tail == big[big.len() - 100..]);
}

/// Seek and overwrite, a write past the end (a hole), append, truncate.
fn overwrite_and_truncate(s: &Sides) {
    let mut want = pattern(2 * 1024 * 1024, 2);
    fs::write(s.m("rw"), &want).unwrap();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(s.m("rw"))
        .unwrap();
    // Overwrite inside the file.
    f.seek(SeekFrom::Start(1_000_003)).unwrap();
    f.write_all(b"XYZ").unwrap();
    want[1_000_003..1_000_006].copy_from_slice(b"XYZ");
    // Overwrite across the end: the file grows.
    let len = want.len();
    f.seek(SeekFrom::Start(len as u64 - 2)).unwrap();
    f.write_all(b"across").unwrap();
    want.truncate(len - 2);
    want.extend_from_slice(b"across");
    s.contents("rw", &want);
    // Read back through the same open file.
    let mut buf = [0; 3];
    f.seek(SeekFrom::Start(1_000_003)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"XYZ");
    // A write well past the end leaves a hole of zeros.
    let hole_at = want.len() as u64 + 100_000;
    f.seek(SeekFrom::Start(hole_at)).unwrap();
    f.write_all(b"after the hole").unwrap();
    want.resize(hole_at as usize, 0);
    want.extend_from_slice(b"after the hole");
    s.contents("rw", &want);
    assert_eq!(f.metadata().unwrap().len(), want.len() as u64);
    // ftruncate shorter, then longer (zeros).
    f.set_len(100_000).unwrap();
    want.truncate(100_000);
    s.contents("rw", &want);
    assert_eq!(f.metadata().unwrap().len(), 100_000);
    f.set_len(150_000).unwrap();
    want.resize(150_000, 0);
    s.contents("rw", &want);
    s.same_meta("rw");
    // The file position is the caller's: a write now lands where it was
    // left, past the new end.
    let pos = f.stream_position().unwrap();
    f.write_all(b"!").unwrap();
    want.resize(pos as usize, 0);
    want.push(b'!');
    s.contents("rw", &want);
    drop(f);
    // O_APPEND: each write goes to the end, whatever the offset.
    let mut f = OpenOptions::new().append(true).open(s.m("rw")).unwrap();
    f.write_all(b"one").unwrap();
    f.write_all(b"two").unwrap();
    drop(f);
    want.extend_from_slice(b"onetwo");
    s.contents("rw", &want);
    // O_TRUNC on open.
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(s.m("rw"))
        .unwrap();
    assert_eq!(fs::metadata(s.h("rw")).unwrap().len(), 0);
    f.write_all(b"short").unwrap();
    drop(f);
    s.contents("rw", b"short");
    s.same_meta("rw");
    // Writing to a file opened read-only fails.
    let mut f = File::open(s.m("rw")).unwrap();
    expect_errno(f.write(b"no"), Errno::EBADF, "write to a read-only open");
    s.contents("rw", b"short");
}

/// mkdir, nested, EEXIST, files inside.
/// mkdir, nested, EEXIST, files inside.
fn directories(s: &Sides) {
    fs::write(s.m("small"), b"a file\n").unwrap();
    fs::create_dir(s.m("d")).unwrap();
    assert!(fs::metadata(s.h("d")).unwrap().is_dir());
    s.same_meta("d");
    expect_errno(fs::create_dir(s.m("d")), Errno::EEXIST, "mkdir d again");
    expect_errno(
        fs::create_dir(s.m("small")),
        Errno::EEXIST,
        "mkdir over a file",
    );
    std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700)
        .create(s.m("d/private"))
        .unwrap();
    assert_eq!(
        fs::metadata(s.h("d/private")).unwrap().mode() & 0o777,
        0o700
    );
    s.same_meta("d/private");
    fs::create_dir_all(s.m("d/a/b/c")).unwrap();
    assert!(s.h("d/a/b/c").is_dir());
    fs::write(s.m("d/a/b/c/deep"), b"deep\n").unwrap();
    s.contents("d/a/b/c/deep", b"deep\n");
    assert_eq!(fs::metadata(s.m("d/a")).unwrap().nlink(), 3);
    // A directory made on the host shows through the mount.
    fs::create_dir(s.h("d/host-made")).unwrap();
    fs::write(s.h("d/host-made/f"), b"f").unwrap();
    s.contents("d/host-made/f", b"f");
    expect_errno(
        fs::read(s.m("small/child")),
        Errno::ENOTDIR,
        "a file used as a directory",
    );
}

/// A directory of 1,000 entries, long-named so that listing it takes many
/// Treaddir and FUSE readdir requests: each name exactly once.
fn thousand_entries(s: &Sides) {
    fs::create_dir(s.m("many")).unwrap();
    let pad = "n".repeat(100);
    let all: Vec<String> = (0..1000).map(|i| format!("entry-{i:04}-{pad}")).collect();
    for (i, name) in all.iter().enumerate() {
        if i % 10 == 0 {
            fs::create_dir(s.m(&format!("many/{name}"))).unwrap();
        } else {
            fs::write(s.m(&format!("many/{name}")), name.as_bytes()).unwrap();
        }
    }
    assert_eq!(fs::read_dir(s.h("many")).unwrap().count(), 1000);
    let through = listing(&s.m("many"));
    let want: BTreeMap<String, bool> = all
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i % 10 == 0))
        .collect();
    assert_eq!(through.len(), 1000, "entries listed via the mount");
    assert!(through == want, "listing of many/ via the mount");
    assert_eq!(through, listing(&s.h("many")));
    // readdir's inode numbers are those stat gives, and distinct.
    let mut inos = std::collections::HashSet::new();
    for entry in fs::read_dir(s.m("many")).unwrap() {
        let entry = entry.unwrap();
        let ino = std::os::unix::fs::DirEntryExt::ino(&entry);
        assert!(inos.insert(ino), "inode {ino} given twice");
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(&format!("7-{pad}")) {
            assert_eq!(
                fs::symlink_metadata(entry.path()).unwrap().ino(),
                ino,
                "{name}: readdir's inode vs stat's"
            );
        }
    }
    s.contents(&format!("many/{}", all[577]), all[577].as_bytes());
    // Listing while reading each file (lookups between readdir calls).
    let mut seen = 0;
    for entry in fs::read_dir(s.m("many")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let name = entry.file_name().into_string().unwrap();
            assert_eq!(fs::read(entry.path()).unwrap(), name.as_bytes());
        }
        seen += 1;
    }
    assert_eq!(seen, 1000);
    // The directory itself, with 100 subdirectories.
    assert_eq!(fs::metadata(s.m("many")).unwrap().nlink(), 102);
}

// rename(2). diod has only Trename; the mount falls back to it from
// Trenameat. Each case looks the file up (so the kernel holds its inode)
// before renaming it, as any program that has touched the file has.

/// A file renamed in its directory is read and stat'ed by its new name.
fn rename_in_place(s: &Sides) {
    fs::write(s.m("r1"), b"first\n").unwrap();
    s.same_meta("r1");
    fs::rename(s.m("r1"), s.m("r1.renamed")).unwrap();
    assert!(!s.h("r1").exists());
    s.contents_on_host("r1.renamed", b"first\n");
    expect_errno(fs::metadata(s.m("r1")), Errno::ENOENT, "stat old name");
    s.same_meta("r1.renamed");
    s.contents("r1.renamed", b"first\n");
}

/// A file moved to another directory.
fn rename_across_directories(s: &Sides) {
    fs::create_dir(s.m("d")).unwrap();
    fs::write(s.m("r1"), b"first\n").unwrap();
    s.same_meta("r1");
    fs::rename(s.m("r1"), s.m("d/r1")).unwrap();
    assert!(!s.h("r1").exists());
    s.contents_on_host("d/r1", b"first\n");
    s.same_meta("d/r1");
    s.contents("d/r1", b"first\n");
}

/// A file renamed over an existing one, which goes.
fn rename_over_existing(s: &Sides) {
    fs::write(s.m("r2"), b"second\n").unwrap();
    fs::write(s.m("victim"), b"replaced\n").unwrap();
    s.same_meta("r2");
    s.same_meta("victim");
    fs::rename(s.m("r2"), s.m("victim")).unwrap();
    assert!(!s.h("r2").exists());
    s.contents_on_host("victim", b"second\n");
    s.same_meta("victim");
    s.contents("victim", b"second\n");
}

/// A file renamed while open: the open file is the same file still, for
/// fstat, read and write.
fn rename_open_file(s: &Sides) {
    fs::write(s.m("open"), b"second\n").unwrap();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(s.m("open"))
        .unwrap();
    fs::rename(s.m("open"), s.m("moved-open")).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(b"more\n").unwrap();
    s.contents_on_host("moved-open", b"second\nmore\n");
    let mut back = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"second\nmore\n");
    assert_eq!(f.metadata().expect("fstat after rename").len(), 12);
    drop(f);
    s.contents("moved-open", b"second\nmore\n");
}

/// A directory with files in it, moved: its files are reached by the new
/// path, and new files made in it.
fn rename_directory(s: &Sides) {
    fs::create_dir(s.m("d")).unwrap();
    fs::create_dir(s.m("rdir")).unwrap();
    fs::write(s.m("rdir/inside"), b"inside\n").unwrap();
    s.same_meta("rdir/inside");
    fs::rename(s.m("rdir"), s.m("d/rdir-moved")).unwrap();
    assert!(!s.h("rdir").exists());
    s.contents_on_host("d/rdir-moved/inside", b"inside\n");
    s.same_meta("d/rdir-moved");
    s.same_meta("d/rdir-moved/inside");
    s.contents("d/rdir-moved/inside", b"inside\n");
    fs::write(s.m("d/rdir-moved/new"), b"new\n").unwrap();
    s.contents("d/rdir-moved/new", b"new\n");
}

/// A file renamed on the host, behind the mount's back, is found by its new
/// name.
fn rename_on_host(s: &Sides) {
    fs::write(s.m("h1"), b"host renames\n").unwrap();
    s.same_meta("h1");
    fs::rename(s.h("h1"), s.h("h2")).unwrap();
    expect_errno(fs::metadata(s.m("h1")), Errno::ENOENT, "stat old name");
    s.same_meta("h2");
    s.contents("h2", b"host renames\n");
}

/// rename(2)'s errors.
fn rename_errors(s: &Sides) {
    fs::create_dir_all(s.m("d/x")).unwrap();
    fs::create_dir_all(s.m("e/y")).unwrap();
    fs::write(s.m("f"), b"f").unwrap();
    expect_errno(
        fs::rename(s.m("no-such"), s.m("whatever")),
        Errno::ENOENT,
        "rename a missing file",
    );
    assert!(!s.h("whatever").exists());
    expect_errno(
        fs::rename(s.m("d"), s.m("e")),
        Errno::ENOTEMPTY,
        "rename a directory over a non-empty one",
    );
    expect_errno(
        fs::rename(s.m("f"), s.m("d")),
        Errno::EISDIR,
        "rename a file over a directory",
    );
    expect_errno(
        fs::rename(s.m("d"), s.m("f")),
        Errno::ENOTDIR,
        "rename a directory over a file",
    );
    assert!(s.h("d/x").is_dir() && s.h("e/y").is_dir() && s.h("f").is_file());
}

/// symlink(2) and readlink(2).
fn symlinks(s: &Sides) {
    fs::create_dir_all(s.m("d/a/b/c")).unwrap();
    fs::write(s.m("d/a/b/c/deep"), b"deep\n").unwrap();
    fs::write(s.m("small"), b"small\n").unwrap();
    std::os::unix::fs::symlink("d/a/b/c/deep", s.m("sym")).unwrap();
    assert_eq!(
        fs::read_link(s.h("sym")).unwrap(),
        Path::new("d/a/b/c/deep")
    );
    assert_eq!(
        fs::read_link(s.m("sym")).unwrap(),
        Path::new("d/a/b/c/deep")
    );
    assert!(fs::symlink_metadata(s.m("sym")).unwrap().is_symlink());
    s.same_meta("sym");
    // Followed: the target's contents.
    assert_eq!(fs::read(s.m("sym")).unwrap(), b"deep\n");
    // A dangling link, and one to a directory.
    std::os::unix::fs::symlink("nowhere", s.m("dangling")).unwrap();
    assert_eq!(
        fs::read_link(s.m("dangling")).unwrap(),
        Path::new("nowhere")
    );
    expect_errno(
        fs::read(s.m("dangling")),
        Errno::ENOENT,
        "read a dangling link",
    );
    std::os::unix::fs::symlink("d/a", s.m("dirlink")).unwrap();
    assert!(s.m("dirlink/b/c/deep").is_file());
    // A long target.
    let long = format!("{}/end", "x".repeat(1000));
    std::os::unix::fs::symlink(&long, s.m("long")).unwrap();
    assert_eq!(fs::read_link(s.m("long")).unwrap(), Path::new(&long));
    assert_eq!(fs::read_link(s.h("long")).unwrap(), Path::new(&long));
    expect_errno(
        fs::read_link(s.m("small")),
        Errno::EINVAL,
        "readlink of a regular file",
    );
    expect_errno(
        std::os::unix::fs::symlink("x", s.m("small")),
        Errno::EEXIST,
        "symlink over an existing name",
    );
    // A link made on the host.
    std::os::unix::fs::symlink("small", s.h("host-sym")).unwrap();
    assert_eq!(fs::read_link(s.m("host-sym")).unwrap(), Path::new("small"));
    assert_eq!(fs::read(s.m("host-sym")).unwrap(), b"small\n");
    // Removing a link leaves its target.
    fs::remove_file(s.m("sym")).unwrap();
    assert!(!s.h("sym").exists() && s.h("d/a/b/c/deep").exists());
}

/// link(2): one file, two names.
fn hard_links(s: &Sides) {
    fs::create_dir(s.m("d")).unwrap();
    fs::write(s.m("small"), b"small\n").unwrap();
    fs::write(s.m("orig"), b"linked\n").unwrap();
    fs::hard_link(s.m("orig"), s.m("d/hard")).unwrap();
    let h = fs::metadata(s.h("orig")).unwrap();
    assert_eq!(h.nlink(), 2);
    assert_eq!(h.ino(), fs::metadata(s.h("d/hard")).unwrap().ino());
    let (a, b) = (
        fs::metadata(s.m("orig")).unwrap(),
        fs::metadata(s.m("d/hard")).unwrap(),
    );
    assert_eq!(a.nlink(), 2);
    assert_eq!(a.ino(), b.ino(), "two names of one file, one inode");
    s.same_meta("orig");
    s.same_meta("d/hard");
    // A write by one name is read by the other.
    fs::write(s.m("d/hard"), b"changed by the other name\n").unwrap();
    s.contents("orig", b"changed by the other name\n");
    expect_errno(
        fs::hard_link(s.m("orig"), s.m("small")),
        Errno::EEXIST,
        "link over an existing name",
    );
    expect_errno(
        fs::hard_link(s.m("no-such"), s.m("x")),
        Errno::ENOENT,
        "link a missing file",
    );
    // One name goes, the other stays.
    fs::remove_file(s.m("orig")).unwrap();
    assert!(!s.h("orig").exists());
    assert_eq!(fs::metadata(s.m("d/hard")).unwrap().nlink(), 1);
    s.contents("d/hard", b"changed by the other name\n");
    s.same_meta("d/hard");
}

/// chmod(2) and fchmod(2), of files, directories and through symlinks.
fn chmod(s: &Sides) {
    fs::write(s.m("small"), b"small\n").unwrap();
    fs::write(s.m("big"), pattern(300_000, 3)).unwrap();
    fs::create_dir(s.m("d")).unwrap();
    for (rel, mode) in [
        ("small", 0o600),
        ("small", 0o4755),
        ("small", 0o2710),
        ("d", 0o711),
        ("d", 0o1777),
        ("big", 0o444),
        ("big", 0o000),
    ] {
        fs::set_permissions(s.m(rel), fs::Permissions::from_mode(mode)).unwrap();
        let on_host = fs::metadata(s.h(rel)).unwrap().mode() & 0o7777;
        assert_eq!(on_host, mode, "{rel}: chmod {mode:o}, on host {on_host:o}");
        let through = fs::metadata(s.m(rel)).unwrap().mode() & 0o7777;
        assert_eq!(
            through, mode,
            "{rel}: chmod {mode:o}, via mount {through:o}"
        );
        s.same_meta(rel);
    }
    fs::set_permissions(s.m("big"), fs::Permissions::from_mode(0o644)).unwrap();
    // chmod of a symlink changes its target.
    std::os::unix::fs::symlink("small", s.m("sym")).unwrap();
    fs::set_permissions(s.m("sym"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(s.h("small")).unwrap().mode() & 0o7777, 0o640);
    assert!(fs::symlink_metadata(s.h("sym")).unwrap().is_symlink());
    // chmod of an open file (fchmod).
    let f = File::open(s.m("big")).unwrap();
    f.set_permissions(fs::Permissions::from_mode(0o612))
        .unwrap();
    assert_eq!(fs::metadata(s.h("big")).unwrap().mode() & 0o7777, 0o612);
    drop(f);
    s.same_meta("big");
}

/// Times set with futimens(2), and mtime moving on a write.
fn times(s: &Sides) {
    fs::write(s.m("small"), b"small\n").unwrap();
    let when = SystemTime::UNIX_EPOCH + Duration::new(1_234_567_890, 123_456_789);
    let f = OpenOptions::new().write(true).open(s.m("small")).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(when).set_accessed(when))
        .unwrap();
    drop(f);
    let h = fs::metadata(s.h("small")).unwrap();
    assert_eq!((h.mtime(), h.mtime_nsec()), (1_234_567_890, 123_456_789));
    assert_eq!((h.atime(), h.atime_nsec()), (1_234_567_890, 123_456_789));
    assert_eq!(
        fs::metadata(s.m("small")).unwrap().modified().unwrap(),
        when
    );
    s.same_meta("small");
    // A write moves mtime on.
    fs::write(s.m("small"), b"changed\n").unwrap();
    assert!(fs::metadata(s.m("small")).unwrap().modified().unwrap() > when);
    s.same_meta("small");
}

/// Several threads writing and reading their own files at once, over the
/// one connection.
fn concurrent_writers(s: &Sides) {
    fs::create_dir(s.m("par")).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8u32 {
            scope.spawn(move || {
                let rel = format!("par/f{t}");
                let data = pattern(1024 * 1024 + t as usize * 777, 100 + t);
                let mut f = File::create(s.m(&rel)).unwrap();
                for chunk in data.chunks(40_000 + t as usize * 1000) {
                    f.write_all(chunk).unwrap();
                }
                f.sync_all().unwrap();
                drop(f);
                s.contents(&rel, &data);
            });
        }
    });
    assert_eq!(fs::read_dir(s.h("par")).unwrap().count(), 8);
}

/// ENOENT from every kind of call on a name that is not there.
fn enoent(s: &Sides) {
    fs::create_dir(s.m("d")).unwrap();
    expect_errno(fs::metadata(s.m("missing")), Errno::ENOENT, "stat");
    expect_errno(fs::symlink_metadata(s.m("missing")), Errno::ENOENT, "lstat");
    expect_errno(File::open(s.m("missing")), Errno::ENOENT, "open");
    expect_errno(
        OpenOptions::new().write(true).open(s.m("missing")),
        Errno::ENOENT,
        "open for writing without O_CREAT",
    );
    expect_errno(fs::read_dir(s.m("missing")), Errno::ENOENT, "opendir");
    expect_errno(fs::remove_file(s.m("missing")), Errno::ENOENT, "unlink");
    expect_errno(fs::remove_dir(s.m("missing")), Errno::ENOENT, "rmdir");
    expect_errno(fs::read_link(s.m("missing")), Errno::ENOENT, "readlink");
    expect_errno(
        fs::set_permissions(s.m("missing"), fs::Permissions::from_mode(0o600)),
        Errno::ENOENT,
        "chmod",
    );
    expect_errno(
        fs::write(s.m("missing-dir/file"), b"x"),
        Errno::ENOENT,
        "create in a missing directory",
    );
    expect_errno(
        fs::create_dir(s.m("missing-dir/sub")),
        Errno::ENOENT,
        "mkdir in a missing directory",
    );
    expect_errno(
        fs::metadata(s.m("d/missing/deeper")),
        Errno::ENOENT,
        "stat below a missing directory",
    );
    // A file removed on the host is gone through the mount.
    fs::write(s.m("host-removes"), b"x").unwrap();
    s.same_meta("host-removes");
    fs::remove_file(s.h("host-removes")).unwrap();
    expect_errno(
        fs::metadata(s.m("host-removes")),
        Errno::ENOENT,
        "stat a file removed on the host",
    );
    assert!(listing(&s.mnt).keys().eq(["d"]));
}

/// unlink(2) and rmdir(2), with their errors, until the export is empty.
fn removal(s: &Sides) {
    // A tree to remove: files, directories, links, 200 entries in one.
    fs::create_dir_all(s.m("d/a/b")).unwrap();
    fs::write(s.m("d/a/b/f"), b"f").unwrap();
    fs::write(s.m("small"), b"small\n").unwrap();
    fs::create_dir(s.m("many")).unwrap();
    for i in 0..200 {
        fs::write(s.m(&format!("many/{i:03}")), b"x").unwrap();
    }
    std::os::unix::fs::symlink("small", s.m("sym")).unwrap();
    fs::hard_link(s.m("small"), s.m("d/hard")).unwrap();
    fs::write(s.m("open"), b"still readable\n").unwrap();
    s.same_tree();

    expect_errno(
        fs::remove_dir(s.m("many")),
        Errno::ENOTEMPTY,
        "rmdir a non-empty directory",
    );
    expect_errno(
        fs::remove_file(s.m("d")),
        Errno::EISDIR,
        "unlink a directory",
    );
    expect_errno(fs::remove_dir(s.m("small")), Errno::ENOTDIR, "rmdir a file");
    assert!(s.h("many").is_dir() && s.h("d").is_dir() && s.h("small").is_file());
    // An unlinked open file stays readable through its descriptor.
    let mut f = File::open(s.m("open")).unwrap();
    fs::remove_file(s.m("open")).unwrap();
    assert!(!s.h("open").exists());
    expect_errno(fs::metadata(s.m("open")), Errno::ENOENT, "stat unlinked");
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"still readable\n");
    drop(f);
    // A symlink goes, not its target.
    fs::remove_file(s.m("sym")).unwrap();
    assert!(!s.h("sym").exists() && s.h("small").exists());
    // Everything else, depth first, through the mount.
    remove_tree(s, "");
    assert_eq!(fs::read_dir(&s.host).unwrap().count(), 0, "host dir empty");
    assert!(listing(&s.mnt).is_empty());
}

fn remove_tree(s: &Sides, rel: &str) {
    for (name, is_dir) in listing(&s.m(rel)) {
        let sub = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if is_dir {
            remove_tree(s, &sub);
            fs::remove_dir(s.m(&sub)).unwrap_or_else(|e| panic!("rmdir {sub}: {e}"));
        } else {
            fs::remove_file(s.m(&sub)).unwrap_or_else(|e| panic!("unlink {sub}: {e}"));
        }
        assert!(
            fs::symlink_metadata(s.h(&sub)).is_err(),
            "{sub} still on the host"
        );
    }
}

/// Starts diod exporting a fresh directory, mounts it, and runs `check` on a
/// thread of its own (the file system calls block, and the mount answers
/// them on this runtime); then the whole tree must look the same through the
/// mount as on the host. A hung call fails the test after a while instead
/// of hanging it.
async fn through_the_mount(tag: &str, check: fn(&Sides)) {
    mount_and_check(tag, check, false).await;
}

/// As [`through_the_mount`]; `per_user`: with an attach per calling user.
async fn mount_and_check(tag: &str, check: fn(&Sides), per_user: bool) {
    let diod = diod_server::start(&format!("fuse-{tag}"));
    let base = std::env::temp_dir().join(format!("ninep-fuse-diod-{}-{tag}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(base.join("mnt")).unwrap();
    let scene = Scene { base };
    let mnt = scene.base.join("mnt");

    let options = Options {
        dialect: Some(Dialect::L),
        ..Options::default()
    };
    let client = tokio::time::timeout(
        Duration::from_secs(10),
        Client::connect_with(&diod.addr(), options),
    )
    .await
    .expect("connecting to diod timed out")
    .unwrap();
    let fsys = client
        .attach_as("root", 0, diod.aname())
        .await
        .unwrap_or_else(|e| panic!("attach to {}: {e}; {}", diod.aname(), diod.log_text()));
    let session = ninep_fuse::mount(
        fsys,
        &mnt,
        &ninep_fuse::Options {
            source: "ninep-diod-test".into(),
            access: if per_user {
                ninep_fuse::Access::User {
                    aname: diod.aname().into(),
                    uid: 0,
                }
            } else {
                ninep_fuse::Access::Single
            },
            ..Default::default()
        },
    )
    .expect("mount (is /dev/fuse there and fusermount3 installed?)");

    let sides = Sides {
        mnt: mnt.clone(),
        host: diod.dir.clone(),
    };
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(|| {
            // The root is the exported directory, empty.
            assert!(fs::metadata(&sides.mnt).unwrap().is_dir());
            assert!(listing(&sides.mnt).is_empty());
            check(&sides);
            sides.same_tree();
        });
        let _ = done.send(result);
    });
    match tokio::time::timeout(Duration::from_secs(120), finished).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(panic))) => std::panic::resume_unwind(panic),
        Ok(Err(_)) => panic!("the thread making the calls went away"),
        Err(_) => panic!("file system calls on the mount hung for 120 s"),
    }

    drop(session);
    // Unmounted: the mount point is an empty directory again.
    assert_eq!(fs::read_dir(&mnt).unwrap().count(), 0);
    diod.check_log();
}

/// Each user acts as themselves: diod, not the mount, decides what they may
/// do (with an attach per user).
fn users(s: &Sides) {
    fs::set_permissions(&s.host, fs::Permissions::from_mode(0o1777)).unwrap();
    let as_user = |id: u32, script: &str| {
        std::process::Command::new("setpriv")
            .args([&format!("--reuid={id}"), &format!("--regid={id}")])
            .args(["--clear-groups", "sh", "-c"])
            .arg(format!("cd {} && {script}", s.mnt.display()))
            .status()
            .unwrap()
            .success()
    };
    assert!(as_user(
        4242,
        "echo one > mine && mkdir private && chmod 700 private"
    ));
    for name in ["mine", "private"] {
        let meta = fs::metadata(s.h(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4242), "{name}");
    }
    for script in ["echo two >> mine", "ls private", "rm -f mine"] {
        assert!(!as_user(4343, script), "{script} succeeded as another user");
    }
    assert!(as_user(4343, "cat mine >/dev/null && echo theirs > own"));
    assert_eq!(fs::metadata(s.h("own")).unwrap().uid(), 4343);
    s.contents_on_host("mine", b"one\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn diod_mounted_per_user() {
    mount_and_check("per-user", users, true).await;
}

/// One test, with its own diod and mount, for each check above.
macro_rules! tests {
    ($($check:ident),* $(,)?) => {
        mod diod_mounted {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $check() {
                    super::through_the_mount(stringify!($check), super::$check).await;
                }
            )*
        }
    };
}

tests!(
    files,
    big_file,
    overwrite_and_truncate,
    directories,
    thousand_entries,
    rename_in_place,
    rename_across_directories,
    rename_over_existing,
    rename_open_file,
    rename_directory,
    rename_on_host,
    rename_errors,
    symlinks,
    hard_links,
    chmod,
    times,
    concurrent_writers,
    enoent,
    removal,
);
