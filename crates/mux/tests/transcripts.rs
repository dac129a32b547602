//! The name space's semantics as transcripts: walks through unions and
//! across mount points, `..` back across them, where creates go, and what
//! may not be removed. The mux is served over an in-memory stream; its
//! servers are ramfs instances on loopback.
//!
//! Qids as clients see them: the mux's own directories have prefix 0 (`/`
//! is 1, then its directories in the order made: /n 2, /n/a 3, /n/b 4,
//! /bin 5); server A's files prefix 1, server B's prefix 2, in the order
//! the name space first met them. ramfs numbers files from 1 (its root) in
//! the order made.

mod support;
#[path = "../../server/tests/transcript/mod.rs"]
mod transcript;

use support::*;
use transcript::{limits, play};

const START: &str = "
    -> Tversion tag 65535 msize 8192 version '9P2000'
    <- Rversion tag 65535 msize 8192 version '9P2000'
    -> Tattach tag 1 fid 0 afid -1 uname glenda aname
    <- Rattach tag 1 qid (0000000000000001 0 d)
";

/// Server A: bin (2) holding ls (3) and cat (4); B: bin (2) holding rc (3),
/// ls (4) and directory sub (5). /bin is A's bin, then B's, where creates
/// go.
async fn union_of_two() -> (Running, Running, ninep_mux::Mux) {
    let a = ramfs_with(&["bin/", "bin/ls", "bin/cat"]).await;
    let b = ramfs_with(&["bin/", "bin/rc", "bin/ls", "bin/sub/"]).await;
    let mux = mux(&format!(
        "mount {} /n/a\n\
         mount {} /n/b\n\
         bind /n/a/bin /bin\n\
         bind -ac /n/b/bin /bin\n",
        a.addr, b.addr
    ))
    .await;
    (a, b, mux)
}

#[tokio::test]
async fn walks_through_unions_and_back_across_mount_points() {
    let (_a, _b, mux) = union_of_two().await;
    let script = format!(
        "{START}
        # rc is not in A's bin: the walk fails there and goes on in B's.
        -> Twalk tag 2 fid 0 newfid 1 nwname 2 0:bin 1:rc
        <- Rwalk tag 2 nwqid 2 0:(0001000000000002 * d) 1:(0002000000000003 *)
        # .. from B's sub is the union, not B's bin; ls there is A's.
        -> Twalk tag 3 fid 0 newfid 2 nwname 4 0:bin 1:sub 2:.. 3:ls
        <- Rwalk tag 3 nwqid 4 0:(0001000000000002 * d) 1:(0002000000000005 * d) 2:(0001000000000002 * d) 3:(0001000000000003 *)
        # The union's .. is the root, whose .. is itself; a file has none.
        -> Twalk tag 4 fid 0 newfid 3 nwname 5 0:bin 1:sub 2:.. 3:.. 4:..
        <- Rwalk tag 4 nwqid 5 0:(0001000000000002 * d) 1:(0002000000000005 * d) 2:(0001000000000002 * d) 3:(0000000000000001 0 d) 4:(0000000000000001 0 d)
        -> Twalk tag 19 fid 0 newfid 9 nwname 3 0:bin 1:rc 2:..
        <- Rwalk tag 19 nwqid 2 0:(0001000000000002 * d) 1:(0002000000000003 *)
        # Into a mounted tree and back out across its mount point.
        -> Twalk tag 5 fid 0 newfid 4 nwname 5 0:n 1:a 2:bin 3:.. 4:..
        <- Rwalk tag 5 nwqid 5 0:(0000000000000002 0 d) 1:(0001000000000001 * d) 2:(0001000000000002 * d) 3:(0001000000000001 * d) 4:(0000000000000002 0 d)
        -> Twalk tag 6 fid 4 newfid 5 nwname 3 0:b 1:bin 2:ls
        <- Rwalk tag 6 nwqid 3 0:(0002000000000001 * d) 1:(0002000000000002 * d) 2:(0002000000000004 *)
        # A walk that fails part-way says how far it got; at once, an error.
        -> Twalk tag 7 fid 0 newfid 6 nwname 3 0:n 1:a 2:nothing
        <- Rwalk tag 7 nwqid 2 0:(0000000000000002 0 d) 1:(0001000000000001 * d)
        -> Twalk tag 8 fid 0 newfid 6 nwname 1 0:nothing
        <- Rerror tag 8 ename nothing: file does not exist
        -> Twalk tag 9 fid 0 newfid 6 nwname 2 0:bin 1:nothing
        <- Rwalk tag 9 nwqid 1 0:(0001000000000002 * d)
        -> Tclunk tag 10 fid 6
        <- Rerror tag 10 ename unknown fid
    "
    );
    play(mux, limits(), &script).await;
}

#[tokio::test]
async fn creates_go_to_the_create_member_and_mount_points_stay() {
    let (_a, _b, mux) = union_of_two().await;
    let script = format!(
        "{START}
        # -c is on B's bin, second in the union: the file is made there.
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:bin
        <- Rwalk tag 2 nwqid 1 0:(0001000000000002 * d)
        -> Tcreate tag 3 fid 1 name new perm --rw-r--r-- mode 1
        <- Rcreate tag 3 qid (0002000000000006 * ) iounit 8168
        -> Twalk tag 4 fid 0 newfid 2 nwname 4 0:n 1:b 2:bin 3:new
        <- Rwalk tag 4 nwqid 4 0:(0000000000000002 0 d) 1:(0002000000000001 * d) 2:(0002000000000002 * d) 3:(0002000000000006 * )
        # A mount without -c forbids creation at its top, not below it.
        -> Twalk tag 5 fid 0 newfid 3 nwname 2 0:n 1:a
        <- Rwalk tag 5 nwqid 2 0:(0000000000000002 0 d) 1:(0001000000000001 * d)
        -> Tcreate tag 6 fid 3 name x perm --rw-r--r-- mode 1
        <- Rerror tag 6 ename mounted directory forbids creation
        -> Twalk tag 7 fid 0 newfid 6 nwname 3 0:n 1:a 2:bin
        <- Rwalk tag 7 nwqid 3 0:(0000000000000002 0 d) 1:(0001000000000001 * d) 2:(0001000000000002 * d)
        -> Tcreate tag 8 fid 6 name x perm --rw-r--r-- mode 1
        <- Rcreate tag 8 qid (0001000000000005 * ) iounit 8168
        # The mux's own directories make nothing.
        -> Twalk tag 9 fid 0 newfid 4 nwname 1 0:n
        <- Rwalk tag 9 nwqid 1 0:(0000000000000002 0 d)
        -> Tcreate tag 10 fid 4 name x perm --rw-r--r-- mode 1
        <- Rerror tag 10 ename create prohibited
        # Mount points are not removed, nor are the mux's directories;
        # files below a mount point are.
        -> Twalk tag 11 fid 0 newfid 5 nwname 2 0:n 1:a
        <- Rwalk tag 11 nwqid 2 0:(0000000000000002 0 d) 1:(0001000000000001 * d)
        -> Tremove tag 12 fid 5
        <- Rerror tag 12 ename mount point
        -> Twalk tag 13 fid 0 newfid 5 nwname 1 0:bin
        <- Rwalk tag 13 nwqid 1 0:(0001000000000002 * d)
        -> Tremove tag 14 fid 5
        <- Rerror tag 14 ename mount point
        -> Tremove tag 15 fid 4
        <- Rerror tag 15 ename remove prohibited
        -> Twalk tag 16 fid 0 newfid 5 nwname 2 0:bin 1:new
        <- Rwalk tag 16 nwqid 2 0:(0001000000000002 * d) 1:(0002000000000006 * )
        -> Tremove tag 17 fid 5
        <- Rremove tag 17
        -> Twalk tag 18 fid 0 newfid 5 nwname 2 0:bin 1:new
        <- Rwalk tag 18 nwqid 1 0:(0001000000000002 * d)
    "
    );
    play(mux, limits(), &script).await;
}
