//! The protocol rules the framework enforces, as transcripts against a small
//! synthetic tree: version and msize, attach, walk, open modes, directory
//! offsets, tags, flush, the order of fid changes, limits and bad input.

mod transcript;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ninep_server::tree::{Dir, Tree, TreeFile};
use ninep_server::{
    Attr, Cx, DirEntry, Error, Filesystem, Limits, Opened, Result, StreamLimits, User,
};
use ninep_wire::{Name, Qid};
use transcript::{HELLO_9P2000, limits, play};

/// A tree whose file `block` never answers a read: a stand-in for a pipe
/// with no writer. Counts reads that were cancelled.
struct Slow {
    tree: Tree,
    cancelled: Arc<AtomicUsize>,
}

struct CountOnDrop(Arc<AtomicUsize>);

impl Drop for CountOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn slow() -> (Slow, Arc<AtomicUsize>) {
    let root = Dir::new()
        .file("hello", "hello, world\n")
        .file("block", "")
        .write("ctl", |_, data| match data {
            b"ok" => Ok(()),
            _ => Err(Error::new("unknown ctl command")),
        })
        .dir(
            "sub",
            Dir::new().file("a", "A").file("b", "B").file("c", "C"),
        );
    let cancelled = Arc::new(AtomicUsize::new(0));
    let fs = Slow {
        tree: Tree::new(root),
        cancelled: cancelled.clone(),
    };
    (fs, cancelled)
}

impl Filesystem for Slow {
    type File = TreeFile;

    async fn attach(&self, user: &User) -> Result<(TreeFile, Qid)> {
        self.tree.attach(user).await
    }
    async fn walk(&self, cx: &Cx, dir: &TreeFile, name: &Name) -> Result<(TreeFile, Qid)> {
        self.tree.walk(cx, dir, name).await
    }
    async fn getattr(&self, cx: &Cx, file: &TreeFile) -> Result<Attr> {
        self.tree.getattr(cx, file).await
    }
    async fn open(&self, cx: &Cx, file: &mut TreeFile, flags: u32) -> Result<Opened> {
        self.tree.open(cx, file, flags).await
    }
    async fn read(&self, cx: &Cx, file: &TreeFile, offset: u64, count: u32) -> Result<Bytes> {
        if self.tree.getattr(cx, file).await?.name == "block" {
            let _guard = CountOnDrop(self.cancelled.clone());
            std::future::pending::<()>().await;
        }
        self.tree.read(cx, file, offset, count).await
    }
    async fn write(&self, cx: &Cx, file: &TreeFile, offset: u64, data: Bytes) -> Result<u32> {
        self.tree.write(cx, file, offset, data).await
    }
    async fn read_dir(&self, cx: &Cx, dir: &TreeFile) -> Result<Vec<DirEntry>> {
        self.tree.read_dir(cx, dir).await
    }
}

#[tokio::test]
async fn version_negotiation() {
    let script = "
        # msize is clamped to the server's; suffixes beyond a dialect are dropped
        -> Tversion tag 65535 msize 1000000000 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        -> Tversion tag 65535 msize 4096 version '9P2000.L.Google.7'
        <- Rversion tag 65535 msize 4096 version '9P2000.L'
        -> Tversion tag 65535 msize 4096 version '9P2000.u'
        <- Rversion tag 65535 msize 4096 version '9P2000.u'
        -> Tversion tag 65535 msize 4096 version 'Q9P'
        <- Rversion tag 65535 msize 4096 version 'unknown'
        # no session: nothing but Tversion is served
        -> Tattach tag 1 fid 0 afid -1 uname glenda aname
        <- Rerror tag 1 ename version not negotiated
        -> Tversion tag 65535 msize 100 version '9P2000'
        <- Rerror tag 65535 ename msize too small
    ";
    play(slow().0, limits(), script).await;
}

#[tokio::test]
async fn tversion_resets_the_session() {
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:sub
        <- Rwalk tag 2 nwqid 1 0:(0000000000000004 0 d)
        -> Tversion tag 65535 msize 8192 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        -> Tstat tag 3 fid 1
        <- Rerror tag 3 ename unknown fid
        -> Tattach tag 4 fid 1 afid -1 uname glenda aname
        <- Rattach tag 4 qid (0000000000000000 0 d)
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn attach_and_auth() {
    let script = format!(
        "{HELLO_9P2000}
        -> Tattach tag 1 fid 0 afid -1 uname glenda aname
        <- Rerror tag 1 ename fid in use
        -> Tauth tag 2 afid 5 uname glenda aname
        <- Rerror tag 2 ename authentication not required
        -> Tattach tag 3 fid 1 afid 5 uname glenda aname
        <- Rerror tag 3 ename authentication not required
        -> Tattach tag 4 fid -1 afid -1 uname glenda aname
        <- Rerror tag 4 ename fid in use
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn walk_rules() {
    let script = format!(
        "{HELLO_9P2000}
        # nwname 0 clones
        -> Twalk tag 2 fid 0 newfid 1 nwname 0
        <- Rwalk tag 2 nwqid 0
        # a walk that stops part-way answers the steps taken, and makes no fid
        -> Twalk tag 3 fid 0 newfid 2 nwname 2 0:sub 1:nothing
        <- Rwalk tag 3 nwqid 1 0:(0000000000000004 0 d)
        -> Tclunk tag 4 fid 2
        <- Rerror tag 4 ename unknown fid
        # a first step that fails is an error
        -> Twalk tag 5 fid 0 newfid 2 nwname 1 0:nothing
        <- Rerror tag 5 ename file does not exist
        # .. at the root is the root
        -> Twalk tag 6 fid 0 newfid 2 nwname 1 0:..
        <- Rwalk tag 6 nwqid 1 0:(0000000000000000 0 d)
        -> Twalk tag 7 fid 0 newfid 2 nwname 1 0:hello
        <- Rerror tag 7 ename fid in use
        -> Twalk tag 8 fid 0 newfid 3 nwname 1 0:hello
        <- Rwalk tag 8 nwqid 1 0:(0000000000000001 0 )
        -> Twalk tag 9 fid 3 newfid 4 nwname 1 0:x
        <- Rerror tag 9 ename walk in non-directory
        -> Topen tag 10 fid 3 mode 0
        <- Ropen tag 10 qid (0000000000000001 0 ) iounit 8168
        -> Twalk tag 11 fid 3 newfid 4 nwname 0
        <- Rerror tag 11 ename cannot walk an open fid
        # fid == newfid moves the fid itself
        -> Twalk tag 12 fid 1 newfid 1 nwname 2 0:sub 1:a
        <- Rwalk tag 12 nwqid 2 0:(0000000000000004 0 d) 1:(0000000000000005 0 )
        -> Tstat tag 13 fid 1
        <- Rstat tag 13 stat 'a' 'glenda' 'glenda' 'glenda' q (0000000000000005 0 ) m 0444 at * mt * l 1 t 0 d 0
        # .. climbs back
        -> Twalk tag 14 fid 1 newfid 5 nwname 2 0:.. 1:..
        <- Rerror tag 14 ename walk in non-directory
        -> Twalk tag 15 fid 2 newfid 5 nwname 3 0:sub 1:.. 2:sub
        <- Rwalk tag 15 nwqid 3 0:(0000000000000004 0 d) 1:(0000000000000000 0 d) 2:(0000000000000004 0 d)
        # names with '/' never reach the file server
        -> raw 16000000 6e 1000 00000000 06000000 0100 0300 612f62
        <- Rerror tag 16 ename bad 9P message: name contains '/'
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn open_modes_and_io() {
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:sub
        <- Rwalk tag 1 nwqid 1 0:(0000000000000004 0 d)
        -> Topen tag 2 fid 1 mode 1
        <- Rerror tag 2 ename is a directory
        -> Topen tag 2 fid 1 mode 64
        <- Rerror tag 2 ename is a directory
        -> Tread tag 3 fid 1 offset 0 count 100
        <- Rerror tag 3 ename fid not open
        -> Topen tag 4 fid 1 mode 0
        <- Ropen tag 4 qid (0000000000000004 0 d) iounit 8168
        -> Topen tag 5 fid 1 mode 0
        <- Rerror tag 5 ename fid already open
        -> Twalk tag 6 fid 0 newfid 2 nwname 1 0:hello
        <- Rwalk tag 6 nwqid 1 0:(0000000000000001 0 )
        -> Topen tag 7 fid 2 mode 2
        <- Rerror tag 7 ename permission denied
        -> Topen tag 8 fid 2 mode 0
        <- Ropen tag 8 qid (0000000000000001 0 ) iounit 8168
        -> Tread tag 9 fid 2 offset 7 count 100
        <- Rread tag 9 count 6 'world\\n'
        -> Tread tag 10 fid 2 offset 100 count 100
        <- Rread tag 10 count 0 ''
        -> Tread tag 11 fid 2 offset 18446744073709551615 count 4294967295
        <- Rread tag 11 count 0 ''
        -> Twrite tag 12 fid 2 offset 0 count 2 'hi'
        <- Rerror tag 12 ename fid not open for writing
        -> Twalk tag 13 fid 0 newfid 3 nwname 1 0:ctl
        <- Rwalk tag 13 nwqid 1 0:(0000000000000003 0 )
        -> Topen tag 14 fid 3 mode 1
        <- Ropen tag 14 qid (0000000000000003 0 ) iounit 8168
        -> Twrite tag 15 fid 3 offset 0 count 4 'fail'
        <- Rerror tag 15 ename unknown ctl command
        -> Twrite tag 16 fid 3 offset 0 count 2 'ok'
        <- Rwrite tag 16 count 2
        -> Tclunk tag 17 fid 3
        <- Rclunk tag 17
        -> Tclunk tag 18 fid 3
        <- Rerror tag 18 ename unknown fid
        # the tree is read-only
        -> Tcreate tag 19 fid 1 name new perm --rw-r--r-- mode 1
        <- Rerror tag 19 ename fid already open
        -> Twalk tag 20 fid 0 newfid 4 nwname 0
        <- Rwalk tag 20 nwqid 0
        -> Tcreate tag 21 fid 4 name new perm --rw-r--r-- mode 1
        <- Rerror tag 21 ename create prohibited
        -> Tremove tag 22 fid 4
        <- Rerror tag 22 ename remove prohibited
        # the remove failed, but the fid is gone
        -> Tclunk tag 23 fid 4
        <- Rerror tag 23 ename unknown fid
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn directory_reads_keep_their_offsets() {
    // Each entry of sub/ is a 68-byte stat: 49 fixed bytes, a one-letter
    // name and three six-letter user names.
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:sub
        <- Rwalk tag 1 nwqid 1 0:(0000000000000004 0 d)
        -> Topen tag 2 fid 1 mode 0
        <- Ropen tag 2 qid (0000000000000004 0 d) iounit 8168
        -> Tread tag 3 fid 1 offset 0 count 100
        <- Rread tag 3 count 68 '*'
        -> Tread tag 4 fid 1 offset 68 count 1000
        <- Rread tag 4 count 136 '*'
        -> Tread tag 5 fid 1 offset 10 count 1000
        <- Rerror tag 5 ename bad offset in directory read
        -> Tread tag 6 fid 1 offset 204 count 1000
        <- Rread tag 6 count 0 ''
        # back to the start
        -> Tread tag 7 fid 1 offset 0 count 50
        <- Rerror tag 7 ename read count too small for a directory entry
        -> Tread tag 8 fid 1 offset 0 count 1000
        <- Rread tag 8 count 204 '*'
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn flush_cancels_a_blocked_request() {
    let (fs, cancelled) = slow();
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:block
        <- Rwalk tag 1 nwqid 1 0:(0000000000000002 0 )
        -> Topen tag 2 fid 1 mode 0
        <- Ropen tag 2 qid (0000000000000002 0 ) iounit 8168
        -> Tread tag 3 fid 1 offset 0 count 10
        <- none
        # a tag still in flight cannot be used again
        -> Tstat tag 3 fid 0
        <- Rerror tag 3 ename duplicate tag
        # other requests are not held up by the blocked one
        -> Tstat tag 4 fid 0
        <- Rstat tag 4 stat '/' *
        -> Tflush tag 5 oldtag 3
        <- Rflush tag 5
        <- none
        # flushing what is not in flight is answered at once
        -> Tflush tag 6 oldtag 3
        <- Rflush tag 6
        -> Tflush tag 7 oldtag 999
        <- Rflush tag 7
        # the tag is free again
        -> Tstat tag 3 fid 0
        <- Rstat tag 3 stat '/' *
        "
    );
    play(fs, limits(), &script).await;
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the blocked read was not cancelled"
    );
}

#[tokio::test]
async fn fid_changes_take_effect_in_arrival_order() {
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:hello
        <- Rwalk tag 1 nwqid 1 0:(0000000000000001 0 )
        # the fid is reused before its Rclunk comes back
        -> Tclunk tag 2 fid 1
        -> Twalk tag 3 fid 0 newfid 1 nwname 1 0:sub
        <~ Rclunk tag 2
        <~ Rwalk tag 3 nwqid 1 0:(0000000000000004 0 d)
        -> Tstat tag 4 fid 1
        <- Rstat tag 4 stat 'sub' *
        # a request naming a fid still being walked to waits for the walk
        -> Twalk tag 5 fid 0 newfid 2 nwname 1 0:hello
        -> Topen tag 6 fid 2 mode 0
        -> Tread tag 7 fid 2 offset 0 count 5
        <~ Rwalk tag 5 nwqid 1 0:(0000000000000001 0 )
        <~ Ropen tag 6 qid (0000000000000001 0 ) iounit 8168
        <~ Rread tag 7 count 5 'hello'
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn limits_answer_errors_and_the_connection_lives() {
    let small = Limits {
        msize: 8192,
        fids: 2,
        requests: 1,
        connections: 1,
        ..Limits::default()
    };
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 1 fid 0 newfid 1 nwname 1 0:block
        <- Rwalk tag 1 nwqid 1 0:(0000000000000002 0 )
        -> Twalk tag 2 fid 0 newfid 2 nwname 0
        <- Rerror tag 2 ename too many fids
        -> Topen tag 3 fid 1 mode 0
        <- Ropen tag 3 qid (0000000000000002 0 ) iounit 8168
        -> Tread tag 4 fid 1 offset 0 count 10
        -> Tstat tag 5 fid 0
        <- Rerror tag 5 ename too many requests in flight
        -> Tflush tag 6 oldtag 4
        <- Rflush tag 6
        -> Tstat tag 7 fid 0
        <- Rstat tag 7 stat '/' *
        "
    );
    play(slow().0, small, &script).await;
}

#[tokio::test]
async fn bad_input_is_answered_on_its_tag() {
    let script = format!(
        "{HELLO_9P2000}
        # an unknown type, a truncated body, a reply sent to the server
        -> raw 0b000000 c8 0900 01000000
        <- Rerror tag 9 ename operation not supported
        -> raw 0a000000 78 0a00 010000
        <- Rerror tag 10 ename bad 9P message: message truncated
        -> raw 07000000 79 0b00
        <- Rerror tag 11 ename reply sent to a server
        # a 9P2000.L message in a 9P2000 session
        -> raw 0f000000 0c 0c00 00000000 00000000
        <- Rerror tag 12 ename operation not supported
        -> Tstat tag 13 fid 0
        <- Rstat tag 13 stat '/' *
        # a frame larger than msize loses the framing: the server hangs up
        -> raw 00000100 6e 0e00
        <- closed
        "
    );
    play(slow().0, limits(), &script).await;
}

#[tokio::test]
async fn dotl_getattr_and_readdir() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.L'
        <- Rversion tag 65535 msize 8192 version '9P2000.L'
        -> Tattach tag 1 fid 0 afid -1 uname glenda aname '' n_uname 1000
        <- Rattach tag 1 qid (0000000000000000 0 d)
        -> Tgetattr tag 2 fid 0 request_mask 0x7ff
        <- Rgetattr tag 2 valid 0x7ff qid (0000000000000000 0 d) mode 040555 uid 1000 gid 1000 nlink 1 *
        # Tstat is not a 9P2000.L message
        -> raw 0b000000 7c 0300 00000000
        <- Rlerror tag 3 ecode 95
        -> Twalk tag 4 fid 0 newfid 1 nwname 0
        <- Rwalk tag 4 nwqid 0
        -> Tlopen tag 5 fid 1 flags 0x18000
        <- Rlopen tag 5 qid (0000000000000000 0 d) iounit 8168
        -> Treaddir tag 6 fid 1 offset 0 count 1000
        <- Rreaddir tag 6 count * 0:. 1:.. 2:hello 3:block 4:ctl 5:sub
        -> Treaddir tag 7 fid 1 offset 3 count 1000
        <- Rreaddir tag 7 count * 0:block 1:ctl 2:sub
        -> Treaddir tag 8 fid 1 offset 6 count 1000
        <- Rreaddir tag 8 count 0
        -> Treaddir tag 9 fid 1 offset 0 count 30
        <- Rreaddir tag 9 count 25 0:.
        -> Treaddir tag 10 fid 1 offset 0 count 10
        <- Rlerror tag 10 ecode 22
        -> Twalk tag 11 fid 0 newfid 2 nwname 1 0:hello
        <- Rwalk tag 11 nwqid 1 0:(0000000000000001 0 )
        -> Tread tag 12 fid 2 offset 0 count 5
        <- Rlerror tag 12 ecode 9
        -> Tlopen tag 13 fid 2 flags 0x0
        <- Rlopen tag 13 qid (0000000000000001 0 ) iounit 8168
        -> Tread tag 14 fid 2 offset 0 count 5
        <- Rread tag 14 count 5 'hello'
        -> Tunlinkat tag 15 dirfid 0 name hello flags 0x0
        <- Rlerror tag 15 ecode 1
    ";
    play(slow().0, limits(), script).await;
}

const HELLO_STREAMS: &str = "
-> Tversion tag 65535 msize 8192 version '9P2000.stream'
<- Rversion tag 65535 msize 8192 version '9P2000.stream'
-> Tattach tag 1 fid 0 afid -1 uname glenda aname
<- Rattach tag 1 qid (0000000000000000 0 d)
";

fn with_streams(streams: usize, window: u32) -> ninep_server::Server<Slow> {
    let stream_limits = StreamLimits {
        streams,
        read_window: window,
        write_window: window,
    };
    ninep_server::Server::with_stream_limits(slow().0, limits(), stream_limits)
}

#[tokio::test]
async fn the_stream_extension_is_negotiated_or_left_out() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.L.stream'
        <- Rversion tag 65535 msize 8192 version '9P2000.L.stream'
        -> Tversion tag 65535 msize 8192 version '9P2000.u.stream'
        <- Rversion tag 65535 msize 8192 version '9P2000.u.stream'
        # any other suffix is no extension of ours
        -> Tversion tag 65535 msize 8192 version '9P2000.L.streams'
        <- Rversion tag 65535 msize 8192 version '9P2000.L'
        # and without it, its messages are unknown
        -> raw 0b000000 a6 0500 00000100
        <- Rlerror tag 5 ecode 95
    ";
    play(slow().0, limits(), script).await;
    // A server with the extension turned off answers the plain dialect.
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.L.stream'
        <- Rversion tag 65535 msize 8192 version '9P2000.L'
    ";
    transcript::play_server(with_streams(0, 1 << 20), script).await;
}

#[tokio::test]
async fn a_read_stream_sends_what_its_credit_allows() {
    let script = format!(
        "{HELLO_STREAMS}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:hello
        <- Rwalk tag 2 *
        -> Topen tag 3 fid 1 mode 0
        <- Ropen tag 3 *
        -> Tsread tag 4 fid 1 offset 0 count -1 credit 5
        <- Rsread tag 4 count 5 'hello'
        <- none
        -> Tscredit tag 4 credit 4
        <- Rsread tag 4 count 4 ', wo'
        <- none
        # credit for no stream, or on another request's tag, is dropped
        -> Tscredit tag 9 credit 100
        <- none
        -> Tscredit tag 4 credit 100
        <- Rsread tag 4 count 4 'rld\\n'
        <- Rsread tag 4 count 0 ''
        # a range, from an offset
        -> Tsread tag 4 fid 1 offset 7 count 3 credit 100
        <- Rsread tag 4 count 3 'wor'
        <- Rsread tag 4 count 0 ''
        # only an open fid streams
        -> Tsread tag 5 fid 0 offset 0 count -1 credit 100
        <- Rerror tag 5 ename fid not open
        "
    );
    transcript::play_server(with_streams(16, 1 << 20), &script).await;
}

#[tokio::test]
async fn a_flushed_stream_sends_nothing_more() {
    let (fs, cancelled) = slow();
    let script = format!(
        "{HELLO_STREAMS}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:hello
        <- Rwalk tag 2 *
        -> Topen tag 3 fid 1 mode 0
        <- Ropen tag 3 *
        -> Tsread tag 4 fid 1 offset 0 count -1 credit 5
        <- Rsread tag 4 count 5 'hello'
        -> Tflush tag 5 oldtag 4
        <- Rflush tag 5
        -> Tscredit tag 4 credit 100
        <- none
        # a stream blocked in the file server is cancelled
        -> Twalk tag 6 fid 0 newfid 2 nwname 1 0:block
        <- Rwalk tag 6 *
        -> Topen tag 7 fid 2 mode 0
        <- Ropen tag 7 *
        -> Tsread tag 8 fid 2 offset 0 count -1 credit 100
        <- none
        -> Tflush tag 9 oldtag 8
        <- Rflush tag 9
        <- none
        -> Tstat tag 8 fid 0
        <- Rstat tag 8 stat '/' *
        "
    );
    play(fs, limits(), &script).await;
    assert_eq!(cancelled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn stream_limits_hold() {
    let script = format!(
        "{HELLO_STREAMS}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:hello
        <- Rwalk tag 2 *
        -> Topen tag 3 fid 1 mode 0
        <- Ropen tag 3 *
        # credit past the window (4 bytes) is not honoured
        -> Tsread tag 4 fid 1 offset 0 count -1 credit 100
        <- Rsread tag 4 count 4 'hell'
        <- none
        # one stream per connection
        -> Tsread tag 5 fid 1 offset 0 count -1 credit 100
        <- Rerror tag 5 ename too many streams
        -> Tscredit tag 4 credit 100
        <- Rsread tag 4 count 4 'o, w'
        -> Tflush tag 6 oldtag 4
        <- Rflush tag 6
        # a write stream is granted the window, and no more
        -> Twalk tag 7 fid 0 newfid 2 nwname 1 0:ctl
        <- Rwalk tag 7 *
        -> Topen tag 8 fid 2 mode 1
        <- Ropen tag 8 *
        -> Tswrite tag 9 fid 2 offset 0
        <- Rscredit tag 9 credit 4
        -> Tsdata tag 9 count 5 'okay!'
        <- Rerror tag 9 ename write stream past its credit
        # data for the stream that ended is dropped
        -> Tsdata tag 9 count 2 'ok'
        <- none
        "
    );
    transcript::play_server(with_streams(1, 4), &script).await;
}

#[tokio::test]
async fn a_write_stream_writes_and_counts() {
    let script = format!(
        "{HELLO_STREAMS}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:ctl
        <- Rwalk tag 2 *
        -> Topen tag 3 fid 1 mode 1
        <- Ropen tag 3 *
        -> Tswrite tag 4 fid 1 offset 0
        <- Rscredit tag 4 credit 1048576
        -> Tsdata tag 4 count 2 'ok'
        -> Tsdata tag 4 count 2 'ok'
        -> Tsdata tag 4 count 0 ''
        <- Rswrite tag 4 count 4
        # an error from the file server ends the stream
        -> Tswrite tag 5 fid 1 offset 0
        <- Rscredit tag 5 credit 1048576
        -> Tsdata tag 5 count 3 'bad'
        <- Rerror tag 5 ename unknown ctl command
        # only a fid open for writing takes a write stream
        -> Twalk tag 6 fid 0 newfid 2 nwname 1 0:hello
        <- Rwalk tag 6 *
        -> Topen tag 7 fid 2 mode 0
        <- Ropen tag 7 *
        -> Tswrite tag 8 fid 2 offset 0
        <- Rerror tag 8 ename fid not open for writing
        "
    );
    transcript::play_server(with_streams(16, 1 << 20), &script).await;
}
