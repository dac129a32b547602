//! However a fid ends, its end runs in full: the exclusive-use claim on its
//! file is let go and the file server hears the clunk. And a Tclunk the
//! session refuses (a tag in use, too many requests) ends nothing.

mod transcript;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, Filesystem, Limits, Opened, Result, User};
use ninep_wire::{Name, Qid, QidType};
use parking_lot::Mutex;
use transcript::{HELLO_9P2000, limits, play};

type Clunks = Arc<Mutex<HashMap<String, usize>>>;

/// A tree with an exclusive-use (DMEXCL) file `excl`, which counts the
/// clunks of each file by name and serves the count of `excl`'s in
/// `clunks`. Reads of other files never answer.
struct Exclusive {
    tree: Tree,
    clunks: Clunks,
}

fn exclusive() -> (Exclusive, Clunks) {
    let clunks = Clunks::default();
    let counted = clunks.clone();
    let root = Dir::new()
        .file("excl", "mine")
        .file("block", "")
        .read("clunks", move |_| {
            let n = counted.lock().get("excl").copied().unwrap_or(0);
            Ok(n.to_string())
        });
    let fs = Exclusive {
        tree: Tree::new(root),
        clunks: clunks.clone(),
    };
    (fs, clunks)
}

/// `qid` marked exclusive-use if it is the qid of `excl`.
fn mark(name: &str, qid: Qid) -> Qid {
    if name != "excl" {
        return qid;
    }
    Qid {
        ty: qid.ty | QidType::EXCL,
        ..qid
    }
}

impl Filesystem for Exclusive {
    type File = TreeFile;

    async fn attach(&self, user: &User) -> Result<(TreeFile, Qid)> {
        self.tree.attach(user).await
    }
    async fn walk(&self, cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        let (file, qid) = self.tree.walk(cx, dir, name).await?;
        Ok((file, mark(name.as_str(), qid)))
    }
    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        let attr = self.tree.getattr(cx, file).await?;
        Ok(Attr {
            qid: mark(&attr.name, attr.qid),
            ..attr
        })
    }
    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        let name = self.tree.getattr(cx, file).await?.name;
        let opened = self.tree.open(cx, file, flags).await?;
        Ok(Opened {
            qid: mark(&name, opened.qid),
            ..opened
        })
    }
    async fn read(&self, cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        if self.tree.getattr(cx, file).await?.name != "clunks" {
            std::future::pending::<()>().await;
        }
        self.tree.read(cx, file, offset, count).await
    }
    async fn clunk(&self, cx: &Cx, file: TreeFile) -> Result<()> {
        let name = self.tree.getattr(cx, &file).await?.name;
        // A clunk that takes its time, as one that writes back would.
        if name == "excl" {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        }
        *self.clunks.lock().entry(name).or_default() += 1;
        Ok(())
    }
}

/// Fid 1 open on `excl`, fid 2 open on `block`, fid 3 walked to `excl`
/// but refused its open.
const OPENED: &str = "
-> Twalk tag 1 fid 0 newfid 1 nwname 1 0:excl
<- Rwalk tag 1 nwqid 1 0:(0000000000000001 0 l)
-> Topen tag 2 fid 1 mode 0
<- Ropen tag 2 qid (0000000000000001 0 l) iounit 8168
-> Twalk tag 3 fid 0 newfid 2 nwname 1 0:block
<- Rwalk tag 3 nwqid 1 0:(0000000000000002 0 )
-> Topen tag 4 fid 2 mode 0
<- Ropen tag 4 qid (0000000000000002 0 ) iounit 8168
-> Twalk tag 5 fid 0 newfid 3 nwname 1 0:excl
<- Rwalk tag 5 nwqid 1 0:(0000000000000001 0 l)
-> Topen tag 6 fid 3 mode 0
<- Rerror tag 6 ename exclusive use file already open
";

/// A new session, in which `clunks` says that `excl` was clunked twice
/// before Rversion.
const TVERSION_AFTER_TWO_CLUNKS: &str = "
-> Tversion tag 65535 msize 8192 version '9P2000'
<- Rversion tag 65535 msize 8192 version '9P2000'
-> Tattach tag 1 fid 0 afid -1 uname glenda aname
<- Rattach tag 1 qid (0000000000000000 0 d)
-> Twalk tag 2 fid 0 newfid 1 nwname 1 0:clunks
<- Rwalk tag 2 nwqid 1 0:(0000000000000003 0 )
-> Topen tag 3 fid 1 mode 0
<- Ropen tag 3 qid (0000000000000003 0 ) iounit 8168
-> Tread tag 4 fid 1 offset 0 count 10
<- Rread tag 4 count 1 '2'
";

#[tokio::test]
async fn a_clunk_on_a_tag_in_use_leaves_the_fid_and_its_claim() {
    let (fs, clunks) = exclusive();
    let script = format!(
        "{HELLO_9P2000}{OPENED}
        -> Tread tag 7 fid 2 offset 0 count 10
        -> Tclunk tag 7 fid 1
        <- Rerror tag 7 ename duplicate tag
        # fid 1 is still open, and still holds excl
        -> Topen tag 8 fid 3 mode 0
        <- Rerror tag 8 ename exclusive use file already open
        -> Tclunk tag 9 fid 1
        <- Rclunk tag 9
        -> Topen tag 10 fid 3 mode 0
        <- Ropen tag 10 qid (0000000000000001 0 l) iounit 8168
        "
    );
    play(fs, limits(), &script).await;
    // fid 1 at its Tclunk, fid 3 when the connection ended.
    assert_eq!(clunks.lock().get("excl"), Some(&2));
}

#[tokio::test]
async fn a_clunk_past_the_request_limit_leaves_the_fid_and_its_claim() {
    let (fs, clunks) = exclusive();
    let one_request = Limits {
        requests: 1,
        ..limits()
    };
    let script = format!(
        "{HELLO_9P2000}{OPENED}
        -> Tread tag 7 fid 2 offset 0 count 10
        -> Tclunk tag 8 fid 1
        <- Rerror tag 8 ename too many requests in flight
        -> Tflush tag 9 oldtag 7
        <- Rflush tag 9
        -> Topen tag 10 fid 3 mode 0
        <- Rerror tag 10 ename exclusive use file already open
        -> Tclunk tag 11 fid 1
        <- Rclunk tag 11
        -> Topen tag 12 fid 3 mode 0
        <- Ropen tag 12 qid (0000000000000001 0 l) iounit 8168
        "
    );
    play(fs, one_request, &script).await;
    assert_eq!(clunks.lock().get("excl"), Some(&2));
}

#[tokio::test]
async fn a_clunk_cut_short_by_tversion_still_ends_the_fid() {
    let (fs, clunks) = exclusive();
    let script = format!(
        "{HELLO_9P2000}{OPENED}
        -> Tclunk tag 7 fid 3
        <- Rclunk tag 7
        # the read holds fid 1, so its Tclunk waits for the read to end;
        # Tversion cancels both
        -> Tread tag 7 fid 1 offset 0 count 10
        -> Tclunk tag 8 fid 1
        {TVERSION_AFTER_TWO_CLUNKS}
        -> Twalk tag 5 fid 0 newfid 2 nwname 1 0:excl
        <- Rwalk tag 5 nwqid 1 0:(0000000000000001 0 l)
        -> Topen tag 6 fid 2 mode 0
        <- Ropen tag 6 qid (0000000000000001 0 l) iounit 8168
        "
    );
    play(fs, limits(), &script).await;
    // fid 3 and fid 1 of the first session, fid 2 of the second.
    assert_eq!(clunks.lock().get("excl"), Some(&3));
}

#[tokio::test]
async fn a_flushed_clunk_still_ends_the_fid() {
    let (fs, clunks) = exclusive();
    let script = format!(
        "{HELLO_9P2000}{OPENED}
        -> Tclunk tag 7 fid 3
        <- Rclunk tag 7
        -> Tread tag 7 fid 1 offset 0 count 10
        -> Tclunk tag 8 fid 1
        -> Tflush tag 9 oldtag 8
        <- Rflush tag 9
        -> Tflush tag 10 oldtag 7
        <- Rflush tag 10
        # Tversion waits for what is left of the clunk
        {TVERSION_AFTER_TWO_CLUNKS}
        "
    );
    play(fs, limits(), &script).await;
    assert_eq!(clunks.lock().get("excl"), Some(&2));
}
