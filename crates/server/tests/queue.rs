//! Plan 9 stream queues: delimited atomic writes, flow control by water
//! marks, hangup, modules and pipes, checked by polling futures by hand so
//! that "the writer waits" is an observed fact, not a timing.

use std::pin::pin;
use std::task::Poll;

use bytes::Bytes;
use futures::FutureExt;
use futures::poll;
use ninep_server::queue::{Block, Conversations, Limits, Modules, Queue, Stream};
use ninep_wire::{Errno, Fcall, Msg, Tversion};

fn limits(high_water: usize) -> Limits {
    Limits {
        high_water,
        blocks: 1024,
    }
}

fn put_now(q: &Queue, data: &'static [u8]) {
    q.put(Block::delimited(data))
        .now_or_never()
        .expect("room in the queue")
        .unwrap();
}

fn read_now(q: &Queue, count: usize) -> Bytes {
    q.read(count).now_or_never().expect("data waiting")
}

#[test]
fn a_read_returns_at_most_one_delimited_write() {
    let q = Queue::new(Limits::default());
    put_now(&q, b"hello");
    put_now(&q, b"world");
    assert_eq!(read_now(&q, 100), "hello");
    assert_eq!(read_now(&q, 3), "wor");
    assert_eq!(read_now(&q, 100), "ld");
    assert!(
        q.read(100).now_or_never().is_none(),
        "empty: the read waits"
    );
}

#[test]
fn undelimited_blocks_are_read_together() {
    let q = Queue::new(Limits::default());
    for piece in [&b"ab"[..], b"cd"] {
        let block = Block {
            data: Bytes::from_static(piece),
            delim: false,
        };
        q.put(block).now_or_never().unwrap().unwrap();
    }
    put_now(&q, b"e");
    put_now(&q, b"f");
    assert_eq!(read_now(&q, 100), "abcde");
    assert_eq!(read_now(&q, 100), "f");
}

#[tokio::test]
async fn a_writer_waits_at_high_water_and_wakes_below_half() {
    let q = Queue::new(limits(1000));
    for _ in 0..10 {
        put_now(&q, &[7; 100]);
    }
    assert_eq!(q.len(), 1000);
    let mut blocked = pin!(q.put(Block::delimited(vec![1; 100])));
    assert!(
        poll!(blocked.as_mut()).is_pending(),
        "full: the writer waits"
    );
    // Drained to half the high water mark: not yet below it.
    for _ in 0..5 {
        assert_eq!(read_now(&q, 100).len(), 100);
        assert!(poll!(blocked.as_mut()).is_pending(), "at {} bytes", q.len());
    }
    assert_eq!(q.len(), 500);
    assert_eq!(read_now(&q, 1).len(), 1);
    assert!(matches!(poll!(blocked.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(q.len(), 599);
    assert_eq!(q.peak(), 1000);
}

#[tokio::test]
async fn a_write_larger_than_the_queue_goes_in_pieces_within_the_mark() {
    let q = Queue::new(limits(1000));
    let big: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    let write = async {
        q.put(Block::delimited(big.clone())).await.unwrap();
        q.put(Block::delimited(&b"next"[..])).await.unwrap();
    };
    let read = async {
        let mut got = Vec::new();
        while got.len() < 2500 {
            got.extend_from_slice(&q.read(4096).await);
        }
        (got, q.read(4096).await)
    };
    let ((), (got, next)) = tokio::join!(write, read);
    assert_eq!(
        got, big,
        "one write, in order, and its delimiter at its end"
    );
    assert_eq!(next, "next");
    assert!(q.peak() <= 1000, "held {} bytes", q.peak());
}

#[tokio::test]
async fn a_flushed_read_takes_nothing() {
    let q = Queue::new(Limits::default());
    {
        let mut waiting = pin!(q.read(10));
        assert!(poll!(waiting.as_mut()).is_pending());
        // Dropped here, as a flushed request's future is.
    }
    put_now(&q, b"kept");
    assert_eq!(read_now(&q, 10), "kept");
}

#[tokio::test]
async fn hangup_drains_then_ends_and_refuses_writes() {
    let q = Queue::new(Limits::default());
    put_now(&q, b"last words");
    let full = Queue::new(limits(1));
    put_now(&full, b"x");
    let mut blocked = pin!(full.put(Block::delimited(&b"y"[..])));
    assert!(poll!(blocked.as_mut()).is_pending());
    full.hangup();
    let Poll::Ready(Err(e)) = poll!(blocked.as_mut()) else {
        panic!("a waiting writer fails at hangup");
    };
    assert_eq!(e.errno(), Errno::EPIPE);
    q.hangup();
    assert_eq!(read_now(&q, 100), "last words");
    assert_eq!(read_now(&q, 100), "", "then end of file");
    let refused = q
        .put(Block::delimited(&b"more"[..]))
        .now_or_never()
        .unwrap();
    assert_eq!(refused.unwrap_err().errno(), Errno::EPIPE);
}

fn tversion(msize: u32) -> Bytes {
    let msg: Msg = Tversion {
        msize,
        version: "9P2000".into(),
    }
    .into();
    Fcall::new(0xffff, msg)
        .to_bytes(ninep_wire::Dialect::Base)
        .unwrap()
}

#[tokio::test]
async fn fcall_delimits_9p_messages_coming_up() {
    let s = Stream::new(Limits::default(), Modules::default());
    s.ctl("push fcall").await.unwrap();
    assert_eq!(s.modules(), ["fcall"]);
    let (one, two) = (tversion(8192), tversion(65536));
    let mut wire = Vec::new();
    wire.extend_from_slice(&one);
    wire.extend_from_slice(&two);
    wire.extend_from_slice(&one[..5]);
    // The bytes come as TCP delivers them: cut anywhere.
    for piece in wire.chunks(3) {
        let block = Block {
            data: Bytes::copy_from_slice(piece),
            delim: false,
        };
        s.device_write(block).await.unwrap();
    }
    assert_eq!(s.read(1 << 20).await, one);
    assert_eq!(s.read(1 << 20).await, two);
    assert!(s.read(1 << 20).now_or_never().is_none(), "half a message");
    // Popped, the module gives up what it held.
    s.ctl("pop").await.unwrap();
    assert_eq!(s.read(1 << 20).await, one[..5]);
}

#[tokio::test]
async fn fcall_hangs_up_on_a_message_size_no_9p_peer_sends() {
    let s = Stream::new(Limits::default(), Modules::default());
    s.ctl("push fcall").await.unwrap();
    let junk = Block::delimited(&b"GET / HTTP/1.0\r\n\r\n"[..]);
    let e = s.device_write(junk).await.unwrap_err();
    assert!(e.ename().contains("bad message size"), "{e}");
    assert!(s.is_hungup());
    assert_eq!(s.read(100).await, "");
}

#[tokio::test]
async fn ctl_refuses_what_it_does_not_know() {
    let s = Stream::new(Limits::default(), Modules::default());
    for (msg, says) in [
        ("frobnicate 3", "unknown ctl message \"frobnicate 3\""),
        ("push", "unknown ctl message"),
        ("push nosuch", "push: no module \"nosuch\""),
        ("pop", "pop: no module pushed"),
        ("", "unknown ctl message"),
    ] {
        let e = s.ctl(msg).await.unwrap_err();
        assert!(e.ename().contains(says), "{msg:?}: {e}");
    }
    assert!(!s.is_hungup());
    s.ctl("hangup").await.unwrap();
    assert!(s.is_hungup());
}

#[tokio::test]
async fn a_streams_device_end_sees_writes_whole() {
    let s = Stream::new(Limits::default(), Modules::default());
    s.write(Bytes::from_static(b"connect")).await.unwrap();
    s.write(Bytes::from_static(b"ed")).await.unwrap();
    assert_eq!(s.device_read(100).await, "connect");
    assert_eq!(s.device_read(100).await, "ed");
    s.hangup();
    assert_eq!(s.device_read(100).await, "");
    let e = s.write(Bytes::from_static(b"late")).await.unwrap_err();
    assert_eq!(e.errno(), Errno::EPIPE);
}

#[tokio::test]
async fn a_pipe_joins_two_streams_and_the_last_close_hangs_up() {
    let (one, two) = Stream::pipe(Limits::default(), Modules::default());
    one.write(Bytes::from_static(b"ping")).await.unwrap();
    two.write(Bytes::from_static(b"pong")).await.unwrap();
    assert_eq!(two.read(100).await, "ping");
    assert_eq!(one.read(100).await, "pong");
    one.write(Bytes::from_static(b"bye")).await.unwrap();
    drop(one);
    assert_eq!(two.read(100).await, "bye");
    assert_eq!(
        two.read(100).await,
        "",
        "end of file once the other end is gone"
    );
    let e = two.write(Bytes::from_static(b"x")).await.unwrap_err();
    assert_eq!(e.errno(), Errno::EPIPE);
}

#[test]
fn conversations_take_the_lowest_free_number_up_to_the_limit() {
    let convs = Conversations::new(3);
    let a = convs.alloc(|n| n).unwrap();
    let b = convs.alloc(|n| n).unwrap();
    let c = convs.alloc(|n| n).unwrap();
    assert_eq!((*a, *b, *c), (0, 1, 2));
    let e = convs.alloc(|n| n).unwrap_err();
    assert!(e.ename().contains("no free conversations"), "{e}");
    drop(b);
    assert_eq!(convs.live(), [0, 2]);
    assert!(convs.get(1).is_none());
    assert_eq!(*convs.alloc(|n| n).unwrap(), 1);
    assert_eq!(convs.get(2).as_deref(), Some(&2));
}
