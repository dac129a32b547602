//! A TCP conversation: a stream whose device end is a socket, and the
//! ctl messages that make and end calls.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ninep_server::queue::{Block, Limits, Modules, Stream};
use ninep_server::{Error, Result};
use ninep_wire::Errno;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use super::allow::Allow;

/// Bytes read from a socket at a time.
const SOCKET_READ: usize = 64 * 1024;

/// The time between keepalive probes when `keepalive` names none (Plan 9's
/// default).
const KEEPALIVE: Duration = Duration::from_secs(30);

/// What a conversation is doing.
#[derive(Debug)]
enum State {
    Idle,
    Established,
    Announced(Arc<TcpListener>),
    Hungup,
}

/// One conversation: `tcp/N`. It lives while any of its files is open;
/// dropping it hangs up and closes its socket.
#[derive(Debug)]
pub(crate) struct Conv {
    pub(crate) n: usize,
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
    /// The call's socket, for its options (the pumps own its halves);
    /// closed with them at hangup.
    socket: Mutex<Option<OwnedFd>>,
    /// The keepalive interval asked for, applied to each call.
    keepalive: Mutex<Option<Duration>>,
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
    pub(crate) fn new(n: usize, owner: &str, limits: Limits, modules: Modules) -> Conv {
        Conv {
            n,
            owner: owner.to_owned(),
            stream: Stream::new(limits, modules),
            state: Mutex::new(State::Idle),
            bind: Mutex::new(None),
            local: Mutex::new(None),
            remote: Mutex::new(None),
            pumps: Mutex::new(Vec::new()),
            socket: Mutex::new(None),
            keepalive: Mutex::new(None),
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
            _ => self.stream.ctl(msg).await,
        }
    }

    /// Turns on TCP keepalive probes every `every` (whole seconds, at least
    /// one: the kernel's unit), for the call now and any made later.
    fn keepalive(&self, every: Duration) -> Result<()> {
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
        let socket = if to.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        if let Some(port) = *self.bind.lock() {
            let any: SocketAddr = if to.is_ipv4() {
                ([0, 0, 0, 0], port).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, port).into()
            };
            socket.bind(any).map_err(|e| io_error("bind", e))?;
        }
        let tcp = socket
            .connect(to)
            .await
            .map_err(|e| io_error(&format!("connect {addr}"), e))?;
        self.established(tcp)
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
        let (mut rx, mut tx) = tcp.into_split();
        let stream = self.stream.clone();
        let up = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            loop {
                buf.reserve(SOCKET_READ);
                match rx.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let block = Block {
                            data: buf.split().freeze(),
                            delim: false,
                        };
                        if stream.device_write(block).await.is_err() {
                            break;
                        }
                    }
                }
            }
            // The peer is gone: readers get what came, then end of file.
            stream.up_queue().hangup();
        });
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
        self.pumps.lock().extend([up, down]);
        Ok(())
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
            State::Established | State::Hungup => Ok(()),
            State::Idle | State::Announced(_) => Err(Error::with_errno(
                Errno::ENOTCONN,
                "conversation not connected",
            )),
        }
    }

    pub(crate) fn hangup(&self) {
        self.stream.hangup();
        *self.state.lock() = State::Hungup;
        for pump in self.pumps.lock().drain(..) {
            pump.abort();
        }
        self.socket.lock().take();
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

/// Data written to `data`, refused once the call is over.
pub(crate) async fn write_data(conv: &Conv, data: Bytes) -> Result<u32> {
    conv.check_data()?;
    if data.is_empty() {
        return Ok(0);
    }
    Ok(conv.stream.write(data).await? as u32)
}
