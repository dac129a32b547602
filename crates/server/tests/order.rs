//! Requests a client sends behind the one that makes or opens their fid,
//! without waiting for its reply, run after it where they need it: a walk,
//! the open of the fid it makes, a stat and a read all go in one round
//! trip (the client's `walk_open_read`), however long the walk and the
//! open take. (The stat waits for the open too, but its reply may leave
//! first: both are made once the open is done.)

mod transcript;

use std::time::Duration;

use bytes::Bytes;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{Attr, Cx, Filesystem, Opened, Result, User};
use ninep_wire::{Name, Qid};
use transcript::{HELLO_9P2000, limits, play};

/// A tree whose walks and opens take their time, as a disk's would.
struct Slow(Tree);

impl Filesystem for Slow {
    type File = TreeFile;

    async fn attach(&self, user: &User) -> Result<(TreeFile, Qid)> {
        self.0.attach(user).await
    }
    async fn walk(&self, cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.0.walk(cx, dir, name).await
    }
    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        self.0.getattr(cx, file).await
    }
    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.0.open(cx, file, flags).await
    }
    async fn read(&self, cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        self.0.read(cx, file, offset, count).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_open_stat_and_read_sent_at_once_run_in_order() {
    let fs = Slow(Tree::new(Dir::new().file("file", "hello")));
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:file
        -> Topen tag 2 fid 1 mode 0
        -> Tstat tag 3 fid 1
        -> Tread tag 4 fid 1 offset 0 count 10
        <- Rwalk tag 1 nwqid 1 0:*
        <~ Ropen tag 2 *
        <~ Rstat tag 3 *
        <~ Rread tag 4 count 5 'hello'
        # an open behind a clunk of the same fid finds it gone
        -> Tclunk tag 5 fid 1
        -> Topen tag 6 fid 1 mode 0
        <- Rclunk tag 5
        <- Rerror tag 6 ename unknown fid
        "
    );
    play(fs, limits(), &script).await;
}
