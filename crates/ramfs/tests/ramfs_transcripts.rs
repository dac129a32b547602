//! ramfs under the framework's file rules: create, append-only and
//! exclusive-use files, ORCLOSE, and remove.

#[path = "../../server/tests/transcript/mod.rs"]
mod transcript;

use ninep_ramfs::RamFs;
use transcript::limits;

#[tokio::test]
async fn create_append_exclusive_and_rclose() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        -> Tattach tag 1 fid 0 afid -1 uname glenda aname
        <- Rattach tag 1 qid (0000000000000001 1 d)
        # an append-only, exclusive-use file
        -> Twalk tag 2 fid 0 newfid 1 nwname 0
        <- Rwalk tag 2 nwqid 0
        -> Tcreate tag 3 fid 1 name log perm alrw-rw-rw- mode 1
        <- Rcreate tag 3 qid (0000000000000002 1 al) iounit 8168
        -> Twrite tag 4 fid 1 offset 0 count 3 'abc'
        <- Rwrite tag 4 count 3
        -> Twrite tag 5 fid 1 offset 0 count 3 'def'
        <- Rwrite tag 5 count 3
        -> Twalk tag 6 fid 0 newfid 2 nwname 1 0:log
        <- Rwalk tag 6 nwqid 1 0:(0000000000000002 3 al)
        -> Topen tag 7 fid 2 mode 0
        <- Rerror tag 7 ename exclusive use file already open
        -> Tclunk tag 8 fid 1
        <- Rclunk tag 8
        -> Topen tag 9 fid 2 mode 0
        <- Ropen tag 9 qid (0000000000000002 3 al) iounit 8168
        -> Tread tag 10 fid 2 offset 0 count 100
        <- Rread tag 10 count 6 'abcdef'
        -> Tstat tag 11 fid 2
        <- Rstat tag 11 stat 'log' 'glenda' 'none' 'glenda' q (0000000000000002 3 al) m 014000000666 at * mt * l 6 t 0 d 0
        # a file removed when its fid is clunked
        -> Twalk tag 12 fid 0 newfid 3 nwname 0
        <- Rwalk tag 12 nwqid 0
        -> Tcreate tag 13 fid 3 name tmp perm --rw-rw-rw- mode 65
        <- Rcreate tag 13 qid (0000000000000003 1 ) iounit 8168
        -> Tclunk tag 14 fid 3
        <- Rclunk tag 14
        -> Twalk tag 15 fid 0 newfid 4 nwname 1 0:tmp
        <- Rerror tag 15 ename file does not exist
        # names that create nothing
        -> Twalk tag 16 fid 0 newfid 4 nwname 0
        <- Rwalk tag 16 nwqid 0
        -> Tcreate tag 17 fid 4 name log perm --rw-rw-rw- mode 1
        <- Rerror tag 17 ename file already exists
        -> Tcreate tag 18 fid 4 name .. perm --rw-rw-rw- mode 1
        <- Rerror tag 18 ename illegal name
        -> Tcreate tag 19 fid 4 name d perm d-rwxr-xr-x mode 1
        <- Rerror tag 19 ename is a directory
        -> Tcreate tag 20 fid 4 name d perm d-rwxr-xr-x mode 0
        <- Rcreate tag 20 qid (0000000000000004 1 d) iounit 8168
        # a directory with something in it stays
        -> Twalk tag 21 fid 0 newfid 5 nwname 0
        <- Rwalk tag 21 nwqid 0
        -> Tremove tag 22 fid 0
        <- Rerror tag 22 ename cannot remove the root
        -> Twalk tag 23 fid 5 newfid 6 nwname 1 0:d
        <- Rwalk tag 23 nwqid 1 0:(0000000000000004 1 d)
        -> Tcreate tag 24 fid 6 name f perm --rw-rw-rw- mode 1
        <- Rcreate tag 24 qid (0000000000000005 1 ) iounit 8168
        -> Twalk tag 25 fid 5 newfid 7 nwname 1 0:d
        <- Rwalk tag 25 nwqid 1 0:(0000000000000004 2 d)
        -> Tremove tag 26 fid 7
        <- Rerror tag 26 ename directory not empty
    ";
    transcript::play(RamFs::new(), limits(), script).await;
}
