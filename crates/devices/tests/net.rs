//! `ninep serve net`: the host's TCP as Plan 9's /net, against real
//! sockets on loopback.

mod common;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ninep_client::{File, Fsys};
use ninep_devices::net::{Allow, NetFs, Options};
use ninep_ramfs::RamFs;
use ninep_server::queue::Limits;
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR};
use ninep_wire::{
    Dialect, Errno, Fcall, Fid, Msg, NONUNAME, NOTAG, Rattach, Rclunk, Rversion, Rwalk, Tattach,
    Tclunk, Tversion, Twalk,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use common::{attach, names, start};

/// An echo server on loopback: its port, and a channel that gets a message
/// each time a connection to it ends.
async fn echo_server() -> (u16, mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ended, ends) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let ended = ended.clone();
            tokio::spawn(async move {
                let (mut rx, mut tx) = tcp.split();
                let _ = tokio::io::copy(&mut rx, &mut tx).await;
                let _ = ended.send(());
            });
        }
    });
    (port, ends)
}

async fn text(fsys: &Fsys, path: &str) -> String {
    String::from_utf8(fsys.read(path).await.unwrap()).unwrap()
}

async fn ctl(file: &File, msg: &str) -> Result<(), ninep_client::Error> {
    file.write_at(0, Bytes::copy_from_slice(msg.as_bytes()))
        .await
        .map(drop)
}

/// A network server with `options`, attached to, and conversation 0
/// connected to `port` on loopback: the server, the attach, and the ctl.
async fn called(options: Options, port: u16) -> (ninep_server::Spawned, Fsys, File) {
    let (server, addr) = start(NetFs::new(options)).await;
    let net = attach(&addr, "glenda", "").await;
    let ctl_fid = net.open("tcp/clone", O_RDWR).await.unwrap();
    ctl(&ctl_fid, &format!("connect 127.0.0.1!{port}"))
        .await
        .unwrap();
    (server, net, ctl_fid)
}

#[tokio::test]
async fn clone_connect_data_and_the_last_close_hangs_up() {
    let (port, mut ends) = echo_server().await;
    let (_server, addr) = start(NetFs::new(Options::default())).await;
    let net = attach(&addr, "glenda", "").await;
    assert_eq!(names(&net, "/").await, ["cs", "tcp", "udp"]);
    assert_eq!(
        names(&net, "tcp").await,
        ["clone"],
        "walking allocates nothing"
    );

    let ctl_fid = net.open("tcp/clone", O_RDWR).await.unwrap();
    assert_eq!(ctl_fid.read_at(0, 32).await.unwrap(), "0");
    assert_eq!(names(&net, "tcp").await, ["0", "clone"]);
    assert_eq!(
        names(&net, "tcp/0").await,
        ["ctl", "data", "err", "listen", "local", "remote", "status"]
    );
    assert!(text(&net, "tcp/0/status").await.starts_with("Closed"));
    ctl(&ctl_fid, &format!("connect 127.0.0.1!{port}\n"))
        .await
        .unwrap();
    assert_eq!(
        text(&net, "tcp/0/remote").await,
        format!("127.0.0.1!{port}\n")
    );
    assert!(text(&net, "tcp/0/local").await.starts_with("127.0.0.1!"));
    assert!(text(&net, "tcp/0/status").await.starts_with("Established"));

    let data = net.open("tcp/0/data", O_RDWR).await.unwrap();
    data.write_at(0, Bytes::from_static(b"hello, echo"))
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 11 {
        got.extend_from_slice(&data.read_at(0, 8192).await.unwrap());
    }
    assert_eq!(got, b"hello, echo");

    // A second conversation takes the next number.
    let second = net.open("tcp/clone", O_RDWR).await.unwrap();
    assert_eq!(second.read_at(0, 32).await.unwrap(), "1");
    second.close().await.unwrap();

    ctl_fid.close().await.unwrap();
    assert!(ends.try_recv().is_err(), "data is still open");
    data.close().await.unwrap();
    ends.recv()
        .await
        .expect("the socket is closed at the last close");
    assert_eq!(names(&net, "tcp").await, ["clone"]);
    assert!(net.walk("tcp/0").await.is_err());
}

#[tokio::test]
async fn hangup_ends_reads_and_refuses_writes() {
    let (port, mut ends) = echo_server().await;
    let (_server, net, ctl_fid) = called(Options::default(), port).await;
    let data = net.open("tcp/0/data", O_RDWR).await.unwrap();
    ctl(&ctl_fid, "hangup").await.unwrap();
    ends.recv().await.expect("hangup closes the socket");
    assert_eq!(data.read_at(0, 100).await.unwrap(), "");
    let e = data
        .write_at(0, Bytes::from_static(b"late"))
        .await
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EPIPE, "{e}");
    assert!(text(&net, "tcp/0/status").await.starts_with("Hungup"));
}

#[tokio::test]
async fn bad_input_gets_a_clear_error() {
    let refused = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_port = refused.local_addr().unwrap().port();
    drop(refused);
    let options = Options {
        conversations: 4,
        dial: Allow::parse("127.0.0.1!*").unwrap(),
        ..Options::default()
    };
    let (_server, addr) = start(NetFs::new(options)).await;
    let net = attach(&addr, "glenda", "").await;
    let ctl_fid = net.open("tcp/clone", O_RDWR).await.unwrap();
    for (msg, says) in [
        ("frobnicate", "unknown ctl message \"frobnicate\""),
        ("connect", "bad ctl message \"connect\": connect addr!port"),
        ("connect nowhere", "bad address \"nowhere\""),
        ("connect example.com!80", "not a numeric address"),
        ("connect 127.0.0.1!99999", "bad port \"99999\""),
        ("connect 10.0.0.1!80", "not allowed here"),
        ("announce 8080", "not allowed here"),
        (
            &format!("connect 127.0.0.1!{closed_port}"),
            "connection refused",
        ),
        ("push nosuch", "push: no module \"nosuch\""),
    ] {
        let e = ctl(&ctl_fid, msg).await.unwrap_err();
        assert!(e.to_string().to_lowercase().contains(says), "{msg:?}: {e}");
    }
    // For 9P2000.L peers, which get only the errno, the err file says why.
    assert_eq!(
        text(&net, "tcp/0/err").await,
        "push: no module \"nosuch\"\n"
    );
    let e = ctl_fid
        .write_at(0, Bytes::from_static(b"\xff\xfe"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ctl messages are text"), "{e}");
    let data = net.open("tcp/0/data", O_RDWR).await.unwrap();
    let e = data.read_at(0, 10).await.unwrap_err();
    assert!(e.to_string().contains("not connected"), "{e}");
    let e = net.open("tcp/0/listen", O_RDWR).await.unwrap_err();
    assert!(e.to_string().contains("not announced"), "{e}");

    // Someone else's conversation is not theirs to open.
    let other = attach(&addr, "rob", "").await;
    assert_eq!(
        other.open("tcp/0/data", O_RDWR).await.unwrap_err().errno(),
        Errno::EACCES
    );
}

#[tokio::test]
async fn conversations_are_bounded_and_freed_at_close() {
    let options = Options {
        conversations: 4,
        ..Options::default()
    };
    let (_server, addr) = start(NetFs::new(options)).await;
    let net = attach(&addr, "glenda", "").await;
    for _ in 0..1000 {
        let clone = net.open("tcp/clone", O_RDONLY).await.unwrap();
        assert_eq!(clone.read_at(0, 32).await.unwrap(), "0");
        clone.close().await.unwrap();
    }
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(net.open("tcp/clone", O_RDWR).await.unwrap());
    }
    let e = net.open("tcp/clone", O_RDWR).await.unwrap_err();
    assert!(e.to_string().contains("no free conversations"), "{e}");
    open.swap_remove(1).close().await.unwrap();
    let again = net.open("tcp/clone", O_RDWR).await.unwrap();
    assert_eq!(again.read_at(0, 32).await.unwrap(), "1");
}

#[tokio::test]
async fn cs_translates_dial_strings() {
    let (_server, addr) = start(NetFs::new(Options::default())).await;
    let net = attach(&addr, "glenda", "").await;
    let cs = net.open("cs", O_RDWR).await.unwrap();
    let ask = async |dial: &str| {
        ctl(&cs, dial).await?;
        let mut answers = Vec::new();
        loop {
            let line = cs.read_at(0, 1024).await?;
            if line.is_empty() {
                return Ok::<_, ninep_client::Error>(answers);
            }
            answers.push(String::from_utf8(line.to_vec()).unwrap());
        }
    };
    assert_eq!(
        ask("tcp!127.0.0.1!9fs").await.unwrap(),
        ["/net/tcp/clone 127.0.0.1!564"]
    );
    assert_eq!(
        ask("net!127.0.0.1!80").await.unwrap(),
        ["/net/tcp/clone 127.0.0.1!80"]
    );
    assert_eq!(
        ask("udp!127.0.0.1!53").await.unwrap(),
        ["/net/udp/clone 127.0.0.1!53"]
    );
    let http = ask("tcp!localhost!http").await.unwrap();
    assert!(http.iter().any(|a| a.ends_with("!80")), "{http:?}");
    for (dial, says) in [
        ("localhost", "bad dial string"),
        ("il!localhost!80", "no network \"il\""),
        ("tcp!localhost!nosuchservice", "unknown service"),
    ] {
        let e = ask(dial).await.unwrap_err();
        assert!(e.to_string().contains(says), "{dial}: {e}");
    }
}

#[tokio::test]
async fn announce_and_listen_take_a_call() {
    let options = Options {
        announce: Allow::parse("127.0.0.1!*").unwrap(),
        ..Options::default()
    };
    let (_server, addr) = start(NetFs::new(options)).await;
    let net = attach(&addr, "glenda", "").await;
    let announced = net.open("tcp/clone", O_RDWR).await.unwrap();
    ctl(&announced, "announce 127.0.0.1!0").await.unwrap();
    assert!(text(&net, "tcp/0/status").await.starts_with("Listen"));
    let local = text(&net, "tcp/0/local").await;
    let port: u16 = local.trim().rsplit_once('!').unwrap().1.parse().unwrap();

    let caller = async {
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        tcp.write_all(b"ring ring").await.unwrap();
        let mut answer = [0; 5];
        tcp.read_exact(&mut answer).await.unwrap();
        answer
    };
    let answerer = async {
        let call = net.open("tcp/0/listen", O_RDWR).await.unwrap();
        let n = String::from_utf8(call.read_at(0, 32).await.unwrap().to_vec()).unwrap();
        assert_eq!(n, "1");
        let data = net.open("tcp/1/data", O_RDWR).await.unwrap();
        let mut got = Vec::new();
        while got.len() < 9 {
            got.extend_from_slice(&data.read_at(0, 100).await.unwrap());
        }
        assert_eq!(got, b"ring ring");
        data.write_at(0, Bytes::from_static(b"hello"))
            .await
            .unwrap();
        (call, data)
    };
    let (answer, _open) = tokio::join!(caller, answerer);
    assert_eq!(&answer, b"hello");
}

/// A loopback server that sends `messages` messages of `size` bytes to
/// the first connection, each starting with its size as 9P's do (so that
/// `fcall` passes them), every byte after the size its index in the
/// message; its port, and how many bytes it has sent so far.
async fn message_source(messages: usize, size: usize) -> (u16, Arc<AtomicUsize>) {
    let source = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = source.local_addr().unwrap().port();
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        let (mut tcp, _) = source.accept().await.unwrap();
        let message: Vec<u8> = (size as u32)
            .to_le_bytes()
            .into_iter()
            .chain((4..size).map(|i| i as u8))
            .collect();
        for _ in 0..messages {
            tcp.write_all(&message).await.unwrap();
            counter.fetch_add(size, Ordering::SeqCst);
        }
        // Held open until the reader is done.
        let _ = tcp.read(&mut [0; 1]).await;
    });
    (port, sent)
}

/// What a conversation's `status` says it holds in its queue for readers.
async fn qin(net: &Fsys) -> usize {
    let status = text(net, "tcp/0/status").await;
    let figures: Vec<&str> = status.split_whitespace().collect();
    figures[2].parse().unwrap()
}

/// Waits until `sent` stops growing (the sender waits on TCP's window)
/// and says where it stopped.
async fn stalled(sent: &AtomicUsize) -> usize {
    let mut last = usize::MAX;
    loop {
        let now = sent.load(Ordering::SeqCst);
        if now == last {
            return now;
        }
        last = now;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// Nobody reads a call that sends 32 MiB, then somebody reads it all in
/// 64 KiB reads: the sender waits on TCP meanwhile, and the conversation
/// holds at most its high water mark in memory, with a module pushed (the
/// stream's queue fills to the mark) and without (reads take from the
/// socket: nothing is held).
async fn slow_reader(push: bool) {
    const SIZE: usize = 64 * 1024;
    const MESSAGES: usize = 512;
    const HIGH: usize = 64 * 1024;
    let (port, sent) = message_source(MESSAGES, SIZE).await;
    let options = Options {
        queue: Limits {
            high_water: HIGH,
            blocks: 1024,
        },
        ..Options::default()
    };
    let (_server, net, ctl_fid) = called(options, port).await;
    if push {
        ctl(&ctl_fid, "push fcall").await.unwrap();
        // Nobody reads: the queue fills to its mark and stops there.
        while qin(&net).await < HIGH {}
    }
    let stopped = stalled(&sent).await;
    assert!(stopped < SIZE * MESSAGES, "the sender waits on TCP");
    assert_eq!(qin(&net).await, if push { HIGH } else { 0 });

    let data = net.open("tcp/0/data", O_RDONLY).await.unwrap();
    let mut received = Vec::new();
    while received.len() < SIZE * MESSAGES {
        let piece = data.read_at(0, SIZE as u32).await.unwrap();
        assert!(!piece.is_empty());
        received.extend_from_slice(&piece);
        assert!(qin(&net).await <= HIGH);
    }
    for message in received.chunks(SIZE) {
        assert_eq!(message[..4], (SIZE as u32).to_le_bytes());
        assert!(message[4..].iter().zip(4..).all(|(&b, i)| b == i as u8));
    }
}

#[tokio::test]
async fn a_slow_reader_slows_the_sender_and_holds_nothing() {
    slow_reader(false).await;
}

#[tokio::test]
async fn a_slow_reader_slows_the_sender_and_the_queue_stays_under_the_mark() {
    slow_reader(true).await;
}

/// Large reads are spliced from the call's socket into the 9P
/// connection; what arrives is every byte, in order, whatever the read
/// sizes, beside reads too small to splice.
#[tokio::test]
async fn large_and_small_reads_take_every_byte_in_order() {
    const SIZE: usize = 1 << 20;
    const MESSAGES: usize = 16;
    let (port, _sent) = message_source(MESSAGES, SIZE).await;
    let (_server, net, _ctl_fid) = called(Options::default(), port).await;
    let data = net.open("tcp/0/data", O_RDONLY).await.unwrap();
    let mut received = Vec::new();
    for count in [1000u32, 1 << 20, 70_000, 8192, 300_000]
        .into_iter()
        .cycle()
    {
        if received.len() == SIZE * MESSAGES {
            break;
        }
        let piece = data.read_at(0, count).await.unwrap();
        assert!(!piece.is_empty() && piece.len() <= count as usize);
        received.extend_from_slice(&piece);
    }
    for message in received.chunks(SIZE) {
        assert_eq!(message[..4], (SIZE as u32).to_le_bytes());
        assert!(message[4..].iter().zip(4..).all(|(&b, i)| b == i as u8));
    }
}

/// A read already waiting on the call when `fcall` is pushed gets what
/// the module makes of the bytes that come next: one whole message.
#[tokio::test]
async fn a_push_reaches_a_read_already_waiting() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_server, net, ctl_fid) = called(Options::default(), port).await;
    let (mut peer, _) = listener.accept().await.unwrap();
    let data = net.open("tcp/0/data", O_RDONLY).await.unwrap();
    let waiting = tokio::spawn(async move { data.read_at(0, 8192).await.unwrap() });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    ctl(&ctl_fid, "push fcall").await.unwrap();
    // One 9-byte message in two writes, then the start of another.
    peer.write_all(&[9, 0, 0, 0, 1]).await.unwrap();
    peer.flush().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    peer.write_all(&[2, 3, 4, 5, 20, 0]).await.unwrap();
    let got = waiting.await.unwrap();
    assert_eq!(&got[..], &[9, 0, 0, 0, 1, 2, 3, 4, 5]);
}

/// A call to a fresh peer, conversation 0's `data` open for reading, and
/// the peer's end.
async fn call_a_peer() -> (
    ninep_server::Spawned,
    Fsys,
    File,
    File,
    tokio::net::TcpStream,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (server, net, ctl_fid) = called(Options::default(), port).await;
    let (peer, _) = listener.accept().await.unwrap();
    let data = net.open("tcp/0/data", O_RDONLY).await.unwrap();
    (server, net, ctl_fid, data, peer)
}

/// Reads `data` to its end (or `want` bytes) in reads of `count`, each
/// given 5 s.
async fn read_through(data: &File, count: u32, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < want {
        let read = tokio::time::timeout(Duration::from_secs(5), data.read_at(0, count));
        let piece = read.await.expect("a read waits with bytes there").unwrap();
        if piece.is_empty() {
            break;
        }
        got.extend_from_slice(&piece);
    }
    got
}

/// What a peer sent before it reset the connection (closing with unread
/// input does) is read whole, by small reads and by spliced ones.
#[tokio::test]
async fn what_came_before_a_reset_is_read() {
    for count in [8192, 1 << 20] {
        let (_server, _net, _ctl, data, mut peer) = call_a_peer().await;
        peer.write_all(&[7; 60_000]).await.unwrap();
        rustix::net::sockopt::set_socket_linger(&peer, Some(Duration::ZERO)).unwrap();
        drop(peer);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let got = read_through(&data, count, usize::MAX).await;
        assert_eq!(got.len(), 60_000, "reads of {count}");
    }
}

/// A byte of urgent data (telnet's Synch, ftp's ABOR) stops no read: what
/// follows it is read, by small reads and by large ones (splice stops at
/// the urgent mark, recv reads past it).
#[tokio::test]
async fn urgent_data_stops_no_read() {
    for count in [8192, 1 << 20] {
        let (_server, _net, _ctl, data, mut peer) = call_a_peer().await;
        rustix::net::send(peer.as_fd(), b"!", rustix::net::SendFlags::OOB).unwrap();
        peer.write_all(b"after the urgent byte").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let got = read_through(&data, count, 21).await;
        assert_eq!(got, b"after the urgent byte", "reads of {count}");
    }
}

/// The kernel's timer on the established TCP socket whose local port is
/// `port`, from /proc/net/tcp: 0 none, 1 retransmit, 2 keepalive. (A
/// closed socket of another test may linger on the same port, in
/// TIME_WAIT with a timer of its own.)
fn tcp_timer(port: u16) -> Option<u8> {
    const ESTABLISHED: &str = "01";
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = fields[1].rsplit(':').next()?;
        (u16::from_str_radix(local_port, 16).ok()? == port && fields[3] == ESTABLISHED)
            .then(|| u8::from_str_radix(fields[5].split(':').next()?, 16).ok())
            .flatten()
    })
}

#[tokio::test]
async fn keepalive_starts_the_kernels_probes_on_the_call() {
    let (port, _ends) = echo_server().await;
    let (_server, net, ctl_fid) = called(Options::default(), port).await;
    let local = text(&net, "tcp/0/local").await;
    let local: u16 = local.trim().rsplit('!').next().unwrap().parse().unwrap();
    assert_eq!(tcp_timer(local), Some(0), "no timer before keepalive");
    ctl(&ctl_fid, "keepalive 2000").await.unwrap();
    assert_eq!(tcp_timer(local), Some(2), "the keepalive timer runs");
    let bad = ctl(&ctl_fid, "keepalive often").await.unwrap_err();
    assert!(bad.to_string().contains("bad keepalive"), "{bad}");
}

/// A UDP echo server on loopback: its port.
async fn udp_echo() -> u16 {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(&buf[..n], from).await;
        }
    });
    port
}

#[tokio::test]
async fn a_udp_call_keeps_each_datagram_whole() {
    let port = udp_echo().await;
    let (_server, addr) = start(NetFs::new(Options::default())).await;
    let net = attach(&addr, "glenda", "").await;
    assert_eq!(names(&net, "udp").await, ["clone"]);
    let ctl_fid = net.open("udp/clone", O_RDWR).await.unwrap();
    assert_eq!(ctl_fid.read_at(0, 32).await.unwrap(), "0");
    ctl(&ctl_fid, &format!("connect 127.0.0.1!{port}"))
        .await
        .unwrap();
    assert_eq!(
        text(&net, "udp/0/remote").await,
        format!("127.0.0.1!{port}\n")
    );
    let data = Arc::new(net.open("udp/0/data", O_RDWR).await.unwrap());
    for d in [&b"one"[..], b"two, longer", b"3"] {
        data.write_at(0, Bytes::copy_from_slice(d)).await.unwrap();
    }
    // One datagram a read, in order here on loopback.
    for d in [&b"one"[..], b"two, longer", b"3"] {
        assert_eq!(data.read_at(0, 8192).await.unwrap(), d);
    }
    // A read shorter than the datagram gets its start; the rest is gone.
    data.write_at(0, Bytes::from_static(b"truncated"))
        .await
        .unwrap();
    assert_eq!(data.read_at(0, 5).await.unwrap(), "trunc");
    // tcp's numbers are its own.
    let tcp = net.open("tcp/clone", O_RDWR).await.unwrap();
    assert_eq!(tcp.read_at(0, 32).await.unwrap(), "0");
    // keepalive and push are tcp's; headers is udp's.
    assert!(ctl(&ctl_fid, "keepalive").await.is_err());
    assert!(ctl(&ctl_fid, "push fcall").await.is_err());
    assert!(ctl(&tcp, "headers").await.is_err());

    // Hangup wakes a waiting read, which then reads the end.
    let waiting = tokio::spawn({
        let data = data.clone();
        async move { data.read_at(0, 100).await }
    });
    tokio::task::yield_now().await;
    ctl(&ctl_fid, "hangup").await.unwrap();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("hangup wakes the read");
    assert_eq!(ended.unwrap().unwrap(), "");
    assert!(data.write_at(0, Bytes::from_static(b"late")).await.is_err());
}

#[tokio::test]
async fn an_announced_udp_conversation_reads_and_writes_with_headers() {
    let options = Options {
        announce: Allow::any(),
        dial: Allow::parse("127.0.0.1!*").unwrap(),
        ..Options::default()
    };
    let (_server, addr) = start(NetFs::new(options)).await;
    let net = attach(&addr, "glenda", "").await;
    let ctl_fid = net.open("udp/clone", O_RDWR).await.unwrap();
    ctl(&ctl_fid, "announce 127.0.0.1!0").await.unwrap();
    assert!(text(&net, "udp/0/status").await.starts_with("Announced"));
    let local = text(&net, "udp/0/local").await;
    let local: u16 = local.trim().rsplit('!').next().unwrap().parse().unwrap();
    let data = net.open("udp/0/data", O_RDWR).await.unwrap();
    // Without headers there is nowhere to send to.
    let e = data
        .write_at(0, Bytes::from_static(b"to whom?"))
        .await
        .unwrap_err();
    assert_eq!(e.errno(), Errno::ENOTCONN, "{e}");
    ctl(&ctl_fid, "headers").await.unwrap();

    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let peer_port = peer.local_addr().unwrap().port();
    peer.send_to(b"hello", ("127.0.0.1", local)).await.unwrap();
    let got = data.read_at(0, 8192).await.unwrap();
    assert_eq!(got.len(), 52 + 5);
    let v4 = |ip: [u8; 4]| std::net::Ipv4Addr::from(ip).to_ipv6_mapped().octets();
    assert_eq!(got[..16], v4([127, 0, 0, 1]), "remote address");
    assert_eq!(got[16..32], v4([127, 0, 0, 1]), "local address");
    assert_eq!(u16::from_be_bytes([got[48], got[49]]), peer_port);
    assert_eq!(u16::from_be_bytes([got[50], got[51]]), local);
    assert_eq!(&got[52..], b"hello");

    // The answer goes where its header says.
    let mut answer = got[..52].to_vec();
    answer.extend_from_slice(b"world");
    data.write_at(0, Bytes::from(answer)).await.unwrap();
    let mut buf = [0u8; 100];
    let (n, from) = peer.recv_from(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"world");
    assert_eq!(from.port(), local);

    // A header naming an address the dial allow-list refuses, and one too
    // short, are refused.
    let mut elsewhere = got[..52].to_vec();
    elsewhere[..16].copy_from_slice(&v4([10, 0, 0, 1]));
    elsewhere.extend_from_slice(b"x");
    let e = data.write_at(0, Bytes::from(elsewhere)).await.unwrap_err();
    assert_eq!(e.errno(), Errno::EACCES, "{e}");
    let e = data
        .write_at(0, Bytes::from_static(b"short"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("header"), "{e}");
}

#[tokio::test]
async fn fcall_carries_a_9p_session_a_message_per_read() {
    let (_ramfs, ram_addr) = start(RamFs::new()).await;
    let port = ram_addr.rsplit('!').next().unwrap().parse().unwrap();
    let (_server, net, ctl_fid) = called(Options::default(), port).await;
    ctl(&ctl_fid, "push fcall").await.unwrap();
    let n = String::from_utf8(ctl_fid.read_at(0, 32).await.unwrap().to_vec()).unwrap();
    let data = net.open(&format!("tcp/{n}/data"), O_RDWR).await.unwrap();
    let dialect = Dialect::U;
    let send = async |fcalls: &[Fcall]| {
        let mut all = Vec::new();
        for fcall in fcalls {
            all.extend_from_slice(&fcall.to_bytes(dialect).unwrap());
        }
        data.write_all_at(0, Bytes::from(all)).await.unwrap();
    };
    // Each read is one whole message (Fcall::decode refuses anything else).
    let receive = async || Fcall::decode(data.read_at(0, 8192).await.unwrap(), dialect).unwrap();

    let version = Tversion {
        msize: 8192,
        version: dialect.version().into(),
    };
    send(&[Fcall::new(NOTAG, version)]).await;
    let reply = receive().await;
    assert!(
        matches!(reply.msg, Msg::Rversion(Rversion { msize: 8192, .. })),
        "{reply:?}"
    );

    // Three requests in one write; their replies, which the server may
    // send in one write too, come back a message per read.
    let attach = Tattach {
        fid: Fid(0),
        afid: Fid::NOFID,
        uname: "glenda".into(),
        aname: String::new(),
        n_uname: NONUNAME,
    };
    let walk = Twalk {
        fid: Fid(0),
        newfid: Fid(1),
        wname: Vec::new(),
    };
    send(&[
        Fcall::new(1, attach),
        Fcall::new(2, walk),
        Fcall::new(3, Tclunk { fid: Fid(1) }),
    ])
    .await;
    let mut replies = [receive().await, receive().await, receive().await];
    replies.sort_by_key(|r| r.tag);
    assert_eq!(replies.each_ref().map(|r| r.tag), [1, 2, 3]);
    assert!(matches!(replies[0].msg, Msg::Rattach(Rattach { .. })));
    assert!(matches!(replies[1].msg, Msg::Rwalk(Rwalk { .. })));
    assert!(matches!(replies[2].msg, Msg::Rclunk(Rclunk { .. })));
}

/// TCP connections to or from `port` still open (established, or closed
/// by the peer only), from the kernel's tables: other tests of this file
/// open descriptors meanwhile, so counting this process's is no measure.
fn open_connections(port: u16) -> usize {
    const ESTABLISHED: &str = "01";
    const CLOSE_WAIT: &str = "08";
    let port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| table.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3
                && (fields[1].ends_with(&port) || fields[2].ends_with(&port))
                && [ESTABLISHED, CLOSE_WAIT].contains(&fields[3])
        })
        .count()
}

/// Opens of the clone file in the test below: `NINEP_CLONE_OPENS`, or
/// 10,000 (scripts/bench-devices runs 100,000, built for release).
fn clone_opens() -> usize {
    std::env::var("NINEP_CLONE_OPENS").map_or(10_000, |n| n.parse().unwrap())
}

#[tokio::test]
async fn a_clone_file_opened_again_and_again_leaks_nothing() {
    // Every hundredth conversation makes a call, and its socket must go too.
    const CALL_EVERY: usize = 100;
    let (port, mut ends) = echo_server().await;
    let (_server, addr) = start(NetFs::new(Options::default())).await;
    let net = attach(&addr, "glenda", "").await;
    for i in 0..clone_opens() {
        let ctl_fid = net.open_pipelined("tcp/clone", O_RDWR).await.unwrap();
        if i % CALL_EVERY == 0 {
            ctl(&ctl_fid, &format!("connect 127.0.0.1!{port}"))
                .await
                .unwrap();
            let n = String::from_utf8(ctl_fid.read_at(0, 32).await.unwrap().to_vec()).unwrap();
            let data = net.open(&format!("tcp/{n}/data"), O_RDWR).await.unwrap();
            data.write_at(0, Bytes::from_static(b"ping")).await.unwrap();
            assert_eq!(data.read_at(0, 32).await.unwrap(), "ping");
            data.close().await.unwrap();
        }
        ctl_fid.close().await.unwrap();
        if i % CALL_EVERY == 0 {
            ends.recv().await.expect("the call's socket is closed");
        }
    }
    assert_eq!(names(&net, "tcp").await, ["clone"]);
    let again = net.open("tcp/clone", O_RDWR).await.unwrap();
    assert_eq!(
        again.read_at(0, 32).await.unwrap(),
        "0",
        "number 0 is free again"
    );
    again.close().await.unwrap();
    assert_eq!(open_connections(port), 0, "every call's socket is closed");
}
