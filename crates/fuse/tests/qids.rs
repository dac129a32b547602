//! A mount of a server whose qid.paths do not tell files apart: some number
//! the root and the first file alike, a buggy one gives two files one path.
//! Each file must still be its own, and the mount must keep serving.

mod support;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use ninep_fuse::Cache;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, DirEntry, Filesystem, Opened, Result, User};
use ninep_transport::Addr;
use ninep_wire::{Dialect, Name, Qid};

/// The synthetic tree with each qid.path passed through `path`.
struct Renumbered {
    tree: Tree,
    path: fn(u64) -> u64,
}

impl Renumbered {
    fn qid(&self, qid: Qid) -> Qid {
        Qid {
            path: (self.path)(qid.path),
            ..qid
        }
    }

    fn attr(&self, attr: Attr) -> Attr {
        Attr {
            qid: self.qid(attr.qid),
            ..attr
        }
    }
}

impl Filesystem for Renumbered {
    type File = TreeFile;

    async fn attach(&self, user: &User) -> Result<(TreeFile, Qid)> {
        let (file, qid) = self.tree.attach(user).await?;
        Ok((file, self.qid(qid)))
    }

    async fn walk(&self, cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        let (file, qid) = self.tree.walk(cx, dir, name).await?;
        Ok((file, self.qid(qid)))
    }

    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        Ok(self.attr(self.tree.getattr(cx, file).await?))
    }

    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        let opened = self.tree.open(cx, file, flags).await?;
        Ok(Opened {
            qid: self.qid(opened.qid),
            ..opened
        })
    }

    async fn read(&self, cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        self.tree.read(cx, file, offset, count).await
    }

    async fn read_dir(&self, cx: &Cx, dir: &TreeFile) -> Result<Vec<DirEntry>> {
        let entries = self.tree.read_dir(cx, dir).await?;
        Ok(entries
            .into_iter()
            .map(|e| DirEntry {
                attr: self.attr(e.attr),
                ..e
            })
            .collect())
    }
}

/// The tree served to every mount here; the synthetic tree numbers it in
/// order: / 0, a 1, b 2, c 3, d 4, d/e 5.
fn tree() -> Tree {
    Tree::new(
        Dir::new()
            .file("a", "contents of a\n")
            .file("b", "contents of b\n")
            .file("c", "contents of c\n")
            .dir("d", Dir::new().file("e", "contents of d/e\n")),
    )
}

/// A mount of the tree with its paths renumbered by `path`; the session
/// unmounts when dropped.
async fn mounted(
    name: &str,
    dialect: Dialect,
    path: fn(u64) -> u64,
) -> (PathBuf, support::Mounted) {
    let base = std::env::temp_dir().join(format!("ninep-fuse-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    support::serve(Renumbered { tree: tree(), path }, &addr).await;
    let mnt = base.join("mnt");
    let session = support::mount(&addr, dialect, &support::options(Cache::None), &mnt).await;
    (mnt, session)
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("ls {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// Lists, reads and stats every file twice over, checking each is its own.
fn each_file_is_its_own(mnt: &Path) {
    let root = std::fs::metadata(mnt).unwrap();
    assert!(root.is_dir());
    for _ in 0..2 {
        assert_eq!(
            listing(mnt),
            BTreeSet::from(["a", "b", "c", "d"].map(String::from))
        );
        assert_eq!(listing(&mnt.join("d")), BTreeSet::from(["e".to_owned()]));
        let mut inos = BTreeSet::from([root.ino()]);
        for file in ["a", "b", "c", "d/e"] {
            let at = mnt.join(file);
            let read = std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("read {file}: {e}"));
            assert_eq!(read, format!("contents of {file}\n"));
            let meta = std::fs::metadata(&at).unwrap();
            assert!(meta.is_file(), "{file} is a file");
            assert!(
                inos.insert(meta.ino()),
                "{file}: inode {} given twice",
                meta.ino()
            );
        }
        let d = std::fs::metadata(mnt.join("d")).unwrap();
        assert!(d.is_dir(), "d is a directory");
        assert!(inos.insert(d.ino()), "d: inode {} given twice", d.ino());
        let again = std::fs::metadata(mnt).unwrap();
        assert!(again.is_dir(), "the root is still a directory");
        assert_eq!(again.ino(), root.ino(), "the root keeps its inode");
    }
}

async fn check(name: &str, path: fn(u64) -> u64) {
    for dialect in [Dialect::L, Dialect::U, Dialect::Base] {
        let (mnt, session) = mounted(&format!("{name}-{dialect:?}"), dialect, path).await;
        let at = mnt.clone();
        tokio::task::spawn_blocking(move || each_file_is_its_own(&at))
            .await
            .unwrap();
        drop(session);
        let _ = std::fs::remove_dir_all(mnt.parent().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_and_a_file_share_a_path() {
    // a and d/e are numbered 0, as the root is.
    check(
        "root-path",
        |path| if path == 1 || path == 5 { 0 } else { path },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_share_a_path() {
    // b, c and the directory d are all numbered 2.
    check(
        "shared-path",
        |path| if path == 3 || path == 4 { 2 } else { path },
    )
    .await;
}
