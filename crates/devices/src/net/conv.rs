//! A conversation: for TCP a stream whose device end is a socket, for UDP
//! a socket read and written a datagram at a time; and the ctl messages
//! that make and end calls.
//!
//! UDP keeps no queue of its own: a read of `data` is one datagram (cut to
//! the count, as Plan 9's), a write one datagram, and the kernel's socket
//! buffers are the flow control (a datagram that finds them full is lost,
//! as UDP's are). An announced UDP conversation takes `headers`: then each
//! datagram read or written starts with Plan 9's 52-byte header (remote
//! address, local address, interface address, each 16 bytes in IPv6 form;
//! remote port, local port, each 2 bytes big-endian), which names where
//! it came from or goes.
//!
//! A TCP call's incoming bytes wait in the kernel's socket buffer, and
//! reads of `data` take them from there (large ones spliced into the 9P
//! connection, uncopied): that buffer is the queue, and TCP's window its
//! flow control, so a slow reader slows the sender and the gateway holds
//! nothing. Once a module is pushed, a pump moves them up through the
//! stream instead (its queue bounded by its high water mark), since the
//! modules work on blocks in memory.

use std::net::SocketAddr;
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ninep_server::queue::{Block, Limits, Modules, Stream};
use ninep_server::{Error, PipeLeave, Result};
use ninep_transport::PipedFile;
use ninep_wire::Errno;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::allow::Allow;

/// Bytes read from a socket at a time.
const SOCKET_READ: usize = 64 * 1024;

/// The time between keepalive probes when `keepalive` names none (Plan 9's
/// default).
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The largest UDP datagram.
const DATAGRAM: usize = 65_536;

/// The length of a UDP header in `headers` mode.
pub(crate) const UDP_HEADER: usize = 52;

/// The protocols served, each a directory of conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub(crate) const ALL: [Proto; 2] = [Proto::Tcp, Proto::Udp];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// What a conversation is doing.
#[derive(Debug)]
enum State {
    Idle,
    Established,
    Announced(Arc<TcpListener>),
    /// An announced UDP conversation: datagrams from anyone.
    Bound,
    Hungup,
}

/// One conversation: `tcp/N`. It lives while any of its files is open;
/// dropping it hangs up and closes its socket.
#[derive(Debug)]
pub(crate) struct Conv {
    pub(crate) n: usize,
    pub(crate) proto: Proto,
    /// The user who made it: only they may open its files.
    pub(crate) owner: String,
    pub(crate) stream: Arc<Stream>,
    state: Mutex<State>,
    /// The local port asked for by `bind`.
    bind: Mutex<Option<u16>>,
    local: Mutex<Option<SocketAddr>>,
    remote: Mutex<Option<SocketAddr>>,
    /// The tasks moving data between the socket and the stream.
    pumps: Mutex<Vec<JoinHandle<()>>>,
    /// The receiving half of a TCP call while reads take from it directly
    /// (until a module is pushed).
    direct: Mutex<Option<Arc<OwnedReadHalf>>>,
    /// One direct reader at a time, so that reads are atomic.
    reader: tokio::sync::Mutex<()>,
    /// The call's socket, for its options (the halves are the pumps' and
    /// the direct readers'); closed with them at hangup.
    socket: Mutex<Option<OwnedFd>>,
    /// The keepalive interval asked for, applied to each call.
    keepalive: Mutex<Option<Duration>>,
    /// A UDP conversation's socket, once connected or announced.
    udp: Mutex<Option<Arc<UdpSocket>>>,
    /// Datagrams carry Plan 9's UDP header (`headers`).
    headers: AtomicBool,
    /// Wakes reads waiting on a socket at hangup, and direct reads when a
    /// pump takes their socket over.
    wake: Notify,
    /// The last ctl message's refusal, for peers whose dialect carries only
    /// an errno (9P2000.L).
    err: Mutex<String>,
}

/// What conversations may do.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub(crate) dial: Allow,
    pub(crate) announce: Allow,
}

impl Conv {
    pub(crate) fn new(
        n: usize,
        proto: Proto,
        owner: &str,
        limits: Limits,
        modules: Modules,
    ) -> Conv {
        Conv {
            n,
            proto,
            owner: owner.to_owned(),
            stream: Stream::new(limits, modules),
            state: Mutex::new(State::Idle),
            bind: Mutex::new(None),
            local: Mutex::new(None),
            remote: Mutex::new(None),
            pumps: Mutex::new(Vec::new()),
            direct: Mutex::new(None),
            reader: tokio::sync::Mutex::new(()),
            socket: Mutex::new(None),
            keepalive: Mutex::new(None),
            udp: Mutex::new(None),
            headers: AtomicBool::new(false),
            wake: Notify::new(),
            err: Mutex::new(String::new()),
        }
    }

    /// A write of `ctl`; a refusal is also kept for the `err` file.
    pub(crate) async fn ctl(&self, rules: &Rules, msg: &str) -> Result<()> {
        let result = self.ctl_message(rules, msg).await;
        if let Err(e) = &result {
            *self.err.lock() = e.ename().to_owned();
        }
        result
    }

    async fn ctl_message(&self, rules: &Rules, msg: &str) -> Result<()> {
        let words: Vec<&str> = msg.split_whitespace().collect();
        match words[..] {
            ["connect", addr] => self.connect(rules, addr).await,
            ["connect", addr, local] => {
                *self.bind.lock() = Some(parse_port(local)?);
                self.connect(rules, addr).await
            }
            ["announce", addr] => self.announce(rules, addr).await,
            ["bind", port] => {
                *self.bind.lock() = Some(parse_port(port)?);
                Ok(())
            }
            ["hangup"] => {
                self.hangup();
                Ok(())
            }
            ["headers"] => {
                self.udp_only("headers")?;
                self.headers.store(true, Ordering::Relaxed);
                Ok(())
            }
            ["keepalive"] => self.keepalive(KEEPALIVE),
            ["keepalive", ms] => {
                let ms: u64 = ms
                    .parse()
                    .map_err(|_| Error::new(format!("bad keepalive interval {ms:?}: want ms")))?;
                self.keepalive(Duration::from_millis(ms))
            }
            ["connect", ..] | ["announce", ..] | ["bind", ..] => Err(Error::new(format!(
                "bad ctl message {:?}: connect ADDR!PORT [LOCALPORT], announce [ADDR!]PORT, bind PORT",
                msg.trim()
            ))),
            _ if self.proto == Proto::Udp => Err(Error::new(format!(
                "bad ctl message {:?}: udp takes connect, announce, bind, headers, hangup",
                msg.trim()
            ))),
            _ => {
                self.stream.ctl(msg).await?;
                if words.first() == Some(&"push") {
                    self.pump_up();
                }
                Ok(())
            }
        }
    }

    fn udp_only(&self, what: &str) -> Result<()> {
        match self.proto {
            Proto::Udp => Ok(()),
            Proto::Tcp => Err(Error::new(format!("{what}: for udp conversations only"))),
        }
    }

    /// Turns on TCP keepalive probes every `every` (whole seconds, at least
    /// one: the kernel's unit), for the call now and any made later.
    fn keepalive(&self, every: Duration) -> Result<()> {
        if self.proto == Proto::Udp {
            return Err(Error::new("keepalive: for tcp conversations only"));
        }
        let every = every.max(Duration::from_secs(1));
        *self.keepalive.lock() = Some(every);
        match &*self.socket.lock() {
            Some(socket) => set_keepalive(socket, every).map_err(|e| io_error("keepalive", e)),
            None => Ok(()),
        }
    }

    fn idle(&self) -> Result<()> {
        match *self.state.lock() {
            State::Idle => Ok(()),
            _ => Err(Error::new("conversation already in use")),
        }
    }

    async fn connect(&self, rules: &Rules, addr: &str) -> Result<()> {
        self.idle()?;
        let to = parse_addr(addr, None)?;
        if !rules.dial.admits(to) {
            return Err(Error::with_errno(
                Errno::EACCES,
                format!("connect {addr}: not allowed here"),
            ));
        }
        let bind = *self.bind.lock();
        let any = |port: u16| -> SocketAddr {
            if to.is_ipv4() {
                ([0, 0, 0, 0], port).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, port).into()
            }
        };
        if self.proto == Proto::Udp {
            let socket = UdpSocket::bind(any(bind.unwrap_or(0)))
                .await
                .map_err(|e| io_error("bind", e))?;
            socket
                .connect(to)
                .await
                .map_err(|e| io_error(&format!("connect {addr}"), e))?;
            *self.remote.lock() = Some(to);
            return self.datagrams(socket, State::Established);
        }
        let socket = if to.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        if let Some(port) = bind {
            socket.bind(any(port)).map_err(|e| io_error("bind", e))?;
        }
        let tcp = socket
            .connect(to)
            .await
            .map_err(|e| io_error(&format!("connect {addr}"), e))?;
        self.established(tcp)
    }

    /// Takes `socket` as the conversation's, now in `state`.
    fn datagrams(&self, socket: UdpSocket, state: State) -> Result<()> {
        *self.local.lock() = socket.local_addr().ok();
        *self.udp.lock() = Some(Arc::new(socket));
        *self.state.lock() = state;
        Ok(())
    }

    /// Starts moving data between `tcp` and the stream.
    pub(crate) fn established(&self, tcp: TcpStream) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let socket = tcp
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| io_error("dup", e))?;
        if let Some(every) = *self.keepalive.lock() {
            set_keepalive(&socket, every).map_err(|e| io_error("keepalive", e))?;
        }
        *self.socket.lock() = Some(socket);
        *self.local.lock() = tcp.local_addr().ok();
        *self.remote.lock() = tcp.peer_addr().ok();
        *self.state.lock() = State::Established;
        let (rx, mut tx) = tcp.into_split();
        *self.direct.lock() = Some(Arc::new(rx));
        if !self.stream.modules().is_empty() {
            self.pump_up();
        }
        let stream = self.stream.clone();
        let down = tokio::spawn(async move {
            loop {
                let data = stream.device_read(SOCKET_READ).await;
                // Empty writes are not queued, so empty is the hangup.
                if data.is_empty() || tx.write_all(&data).await.is_err() {
                    break;
                }
            }
            let _ = tx.shutdown().await;
        });
        self.pumps.lock().push(down);
        Ok(())
    }

    /// Moves the call's incoming bytes up through the stream from now on,
    /// rather than leaving them to direct reads.
    fn pump_up(&self) {
        // Held until the pump is among them, so that a hangup, which takes
        // the socket from direct reads before it stops the pumps, stops it.
        let mut pumps = self.pumps.lock();
        let Some(rx) = self.direct.lock().take() else {
            return;
        };
        self.wake.notify_waiters();
        let stream = self.stream.clone();
        let up = tokio::spawn(async move {
            loop {
                let data = read_socket((*rx).as_ref(), SOCKET_READ).await;
                let block = Block { data, delim: false };
                if block.data.is_empty() || stream.device_write(block).await.is_err() {
                    break;
                }
            }
            // The peer is gone: readers get what came, then end of file.
            stream.up_queue().hangup();
        });
        pumps.push(up);
    }

    async fn announce(&self, rules: &Rules, addr: &str) -> Result<()> {
        self.idle()?;
        let at = parse_addr(addr, Some("0.0.0.0"))?;
        if !rules.announce.admits(at) {
            return Err(Error::with_errno(
                Errno::EACCES,
                format!("announce {addr}: not allowed here"),
            ));
        }
        if self.proto == Proto::Udp {
            let socket = UdpSocket::bind(at)
                .await
                .map_err(|e| io_error(&format!("announce {addr}"), e))?;
            return self.datagrams(socket, State::Bound);
        }
        let listener = TcpListener::bind(at)
            .await
            .map_err(|e| io_error(&format!("announce {addr}"), e))?;
        *self.local.lock() = listener.local_addr().ok();
        *self.state.lock() = State::Announced(Arc::new(listener));
        Ok(())
    }

    /// The listener of an announced conversation, for `listen`.
    pub(crate) fn listener(&self) -> Result<Arc<TcpListener>> {
        match &*self.state.lock() {
            State::Announced(listener) => Ok(listener.clone()),
            _ => Err(Error::new("listen: conversation not announced")),
        }
    }

    /// True if `data` may be read and written: a call was made or taken
    /// (perhaps since hung up, which reads see as end of file).
    pub(crate) fn check_data(&self) -> Result<()> {
        match *self.state.lock() {
            State::Established | State::Bound | State::Hungup => Ok(()),
            State::Idle | State::Announced(_) => Err(Error::with_errno(
                Errno::ENOTCONN,
                "conversation not connected",
            )),
        }
    }

    pub(crate) fn hangup(&self) {
        self.stream.hangup();
        *self.state.lock() = State::Hungup;
        self.direct.lock().take();
        for pump in self.pumps.lock().drain(..) {
            pump.abort();
        }
        self.socket.lock().take();
        self.udp.lock().take();
        self.wake.notify_waiters();
    }

    /// The `local` file: `addr!port`.
    pub(crate) fn local(&self) -> String {
        show(*self.local.lock())
    }

    /// The `remote` file: `addr!port`.
    pub(crate) fn remote(&self) -> String {
        show(*self.remote.lock())
    }

    /// The `err` file: why the last ctl message was refused.
    pub(crate) fn err(&self) -> String {
        let err = self.err.lock();
        if err.is_empty() {
            String::new()
        } else {
            format!("{err}\n")
        }
    }

    /// The `status` file: the state and the queues' figures.
    pub(crate) fn status(&self) -> String {
        let state = match &*self.state.lock() {
            State::Idle => "Closed",
            State::Established if self.stream.is_hungup() => "Closing",
            State::Established => "Established",
            State::Announced(_) => "Listen",
            State::Bound => "Announced",
            State::Hungup => "Hungup",
        };
        let (qin, qout) = self.stream.queued();
        format!("{state} qin {qin} qout {qout}\n")
    }
}

impl Drop for Conv {
    /// The last close hangs up and closes the socket.
    fn drop(&mut self) {
        self.hangup();
    }
}

/// SO_KEEPALIVE, with the first probe after `every` idle and the next
/// ones `every` apart.
fn set_keepalive(socket: &OwnedFd, every: Duration) -> std::io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_tcp_keepidle(socket, every)?;
    sockopt::set_tcp_keepintvl(socket, every)?;
    sockopt::set_socket_keepalive(socket, true)?;
    Ok(())
}

fn show(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(a) => format!("{}!{}\n", a.ip(), a.port()),
        None => "::!0\n".to_owned(),
    }
}

/// Up to `max` bytes that have come on `tcp`, waiting while none have;
/// empty at its end (an error ends the call too). Safe to drop while it
/// waits: nothing has been taken then.
async fn read_socket(tcp: &TcpStream, max: usize) -> Bytes {
    let mut buf = BytesMut::with_capacity(max);
    loop {
        if tcp.readable().await.is_err() {
            return Bytes::new();
        }
        match tcp.try_read_buf(&mut buf) {
            Ok(_) => return buf.freeze(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Bytes::new(),
        }
    }
}

fn io_error(what: &str, e: std::io::Error) -> Error {
    let errno = e.raw_os_error().map_or(Errno::EIO, |n| Errno(n as u32));
    Error::with_errno(errno, format!("{what}: {e}"))
}

fn parse_port(port: &str) -> Result<u16> {
    port.parse()
        .map_err(|_| Error::new(format!("bad port {port:?}")))
}

/// `ADDR!PORT` (numeric, as cs translates), or with `any_host` given also
/// `*!PORT` and a bare `PORT`, which mean that host.
pub(crate) fn parse_addr(addr: &str, any_host: Option<&str>) -> Result<SocketAddr> {
    let (host, port) = match (addr.rsplit_once('!'), any_host) {
        (Some(("*", port)), Some(any)) => (any, port),
        (Some((host, port)), _) => (host, port),
        (None, Some(any)) => (any, addr),
        (None, None) => return Err(Error::new(format!("bad address {addr:?}: want ADDR!PORT"))),
    };
    let ip: std::net::IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| {
            Error::new(format!(
                "bad address {addr:?}: not a numeric address (ask cs)"
            ))
        })?;
    Ok(SocketAddr::new(ip, parse_port(port)?))
}

impl Conv {
    /// A read of `data`: up to `count` bytes of the stream, or one datagram;
    /// empty once hung up.
    pub(crate) async fn read_data(&self, count: usize) -> Result<Bytes> {
        self.check_data()?;
        match self.proto {
            Proto::Tcp => Ok(self.read_tcp(count).await),
            Proto::Udp => self.receive(count).await,
        }
    }

    /// A read of a TCP call's `data`: taken from the socket while reads do
    /// that, else from the stream.
    async fn read_tcp(&self, count: usize) -> Bytes {
        if count == 0 {
            return Bytes::new();
        }
        let _reader = self.reader.lock().await;
        let mut buf = BytesMut::with_capacity(count.min(SOCKET_READ));
        match self.read_direct(|tcp| tcp.try_read_buf(&mut buf)).await {
            Some(Ok(n)) if n > 0 => buf.freeze(),
            Some(_) => {
                // The peer is gone (or the call failed): end of file.
                self.stream.up_queue().hangup();
                Bytes::new()
            }
            None => self.stream.read(count).await,
        }
    }

    /// A large read of a TCP call's `data` moved from the socket into a
    /// pipe held with what `leave` gives; None where it is not read
    /// directly, or the usual read should take it (no pipe to be had, a
    /// failed splice, whose error it then reports).
    pub(crate) async fn read_piped(&self, count: usize, leave: &PipeLeave) -> Option<PipedFile> {
        if self.proto != Proto::Tcp || self.check_data().is_err() {
            return None;
        }
        let _reader = self.reader.lock().await;
        let piped = self
            .read_direct(|tcp| {
                let Some(held) = leave.take() else {
                    return Ok(None);
                };
                match PipedFile::from_socket(tcp.as_fd(), count) {
                    Ok(piped) => Ok(Some(piped.holding(held))),
                    // Readable, yet nothing to splice: splice stops at the
                    // urgent mark where recv reads on past it (or the
                    // readiness was stale, which recv finds out).
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?
            .ok()??;
        if piped.is_empty() {
            // The peer is gone: end of file.
            self.stream.up_queue().hangup();
        }
        Some(piped)
    }

    /// Waits for the call's socket to have something and then `take`s it,
    /// while reads take from the socket directly; None once they do not.
    /// `take` runs with the socket held, so that once a pump has it no
    /// direct read takes any more (what came first is read first).
    async fn read_direct<T>(
        &self,
        mut take: impl FnMut(&TcpStream) -> std::io::Result<T>,
    ) -> Option<std::io::Result<T>> {
        loop {
            let woken = self.wake.notified();
            let rx = self.direct.lock().clone()?;
            tokio::select! {
                biased;
                () = woken => continue,
                ready = (*rx).as_ref().readable() => {
                    if let Err(e) = ready {
                        return Some(Err(e));
                    }
                }
            }
            let direct = self.direct.lock();
            let Some(rx) = direct.as_ref() else { continue };
            match take((**rx).as_ref()) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                done => return Some(done),
            }
        }
    }

    /// Data written to `data`, refused once the call is over.
    pub(crate) async fn write_data(&self, rules: &Rules, data: Bytes) -> Result<u32> {
        self.check_data()?;
        if data.is_empty() {
            return Ok(0);
        }
        match self.proto {
            Proto::Tcp => Ok(self.stream.write(data).await? as u32),
            Proto::Udp => self.send(rules, data).await,
        }
    }

    /// The UDP socket, or why there is none to use.
    fn udp_socket(&self) -> Result<Arc<UdpSocket>> {
        self.udp
            .lock()
            .clone()
            .ok_or_else(|| Error::with_errno(Errno::EPIPE, "i/o on hungup channel"))
    }

    /// One datagram (with its header in `headers` mode), cut to `count`;
    /// empty once hung up. Dropping it (a flushed read) takes nothing.
    async fn receive(&self, count: usize) -> Result<Bytes> {
        // Made before the socket is looked at, so no hangup slips between.
        let hungup = self.wake.notified();
        let Ok(socket) = self.udp_socket() else {
            return Ok(Bytes::new());
        };
        let mut buf = vec![0u8; DATAGRAM];
        let (n, from) = tokio::select! {
            () = hungup => return Ok(Bytes::new()),
            got = socket.recv_from(&mut buf) => got.map_err(|e| io_error("read", e))?,
        };
        let mut out = BytesMut::with_capacity(UDP_HEADER + n);
        if self.headers.load(Ordering::Relaxed) {
            let local = socket.local_addr().map_err(|e| io_error("read", e))?;
            put_header(&mut out, from, local);
        }
        out.extend_from_slice(&buf[..n]);
        out.truncate(count);
        Ok(out.freeze())
    }

    /// Sends `data` as one datagram: to the connected address, or in
    /// `headers` mode to the one its header names (which the dial
    /// allow-list must admit, as a `connect` would).
    async fn send(&self, rules: &Rules, data: Bytes) -> Result<u32> {
        let socket = self.udp_socket()?;
        let sent = if self.headers.load(Ordering::Relaxed) {
            let to = header_destination(&data)?;
            if !rules.dial.admits(to) {
                return Err(Error::with_errno(
                    Errno::EACCES,
                    format!("send to {}!{}: not allowed here", to.ip(), to.port()),
                ));
            }
            socket.send_to(&data[UDP_HEADER..], to).await
        } else if self.remote.lock().is_some() {
            socket.send(&data).await
        } else {
            return Err(Error::with_errno(
                Errno::ENOTCONN,
                "announced udp conversation: write headers to ctl, then a header with each datagram",
            ));
        };
        sent.map_err(|e| io_error("write", e))?;
        Ok(data.len() as u32)
    }
}

/// Plan 9's UDP header for a datagram from `from` to `local`.
fn put_header(out: &mut BytesMut, from: SocketAddr, local: SocketAddr) {
    let v6 = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    out.extend_from_slice(&v6(from.ip()).octets());
    out.extend_from_slice(&v6(local.ip()).octets());
    out.extend_from_slice(&v6(local.ip()).octets());
    out.extend_from_slice(&from.port().to_be_bytes());
    out.extend_from_slice(&local.port().to_be_bytes());
}

/// Where a datagram written with a header goes: its remote address and
/// port.
fn header_destination(data: &[u8]) -> Result<SocketAddr> {
    if data.len() < UDP_HEADER {
        return Err(Error::new(format!(
            "udp write of {} bytes: shorter than the {UDP_HEADER}-byte header",
            data.len()
        )));
    }
    let mut raddr = [0u8; 16];
    raddr.copy_from_slice(&data[..16]);
    let raddr = Ipv6Addr::from(raddr);
    let ip = raddr.to_ipv4_mapped().map_or(IpAddr::V6(raddr), IpAddr::V4);
    let port = u16::from_be_bytes([data[48], data[49]]);
    Ok(SocketAddr::new(ip, port))
}
