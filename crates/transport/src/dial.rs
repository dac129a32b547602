//! Plan 9 dial strings: `tcp!host!port`, `tls!host!port`, `unix!/path`,
//! and the `host:port` form people type; and, for dialing only, a command
//! to speak to through a pipe: `exec!COMMAND`, or `ssh!host!DIR` for
//! `ninep serve --stdio DIR` run on `host` by ssh. The default 9P port is
//! 564.

use std::any::Any;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::exec::Piped;
use crate::splice::SpliceTarget;
use crate::tls::{Accepted, TlsClient, TlsServer};

/// The port 9P servers listen on unless told otherwise.
pub const DEFAULT_PORT: u16 = 564;

/// Where a 9P server listens or a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    /// `tcp!host!port`; the host `*` means every local address.
    Tcp {
        /// Host name or address.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// `tls!host!port`: TCP, and TLS over it.
    Tls {
        /// Host name or address; a client checks the server's certificate
        /// for this name.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// `unix!/path`.
    Unix(PathBuf),
    /// `exec!COMMAND`: the standard input and output of `sh -c COMMAND`.
    Exec(String),
}

impl FromStr for Addr {
    type Err = String;

    fn from_str(s: &str) -> Result<Addr, String> {
        if let Some(command) = s.strip_prefix("exec!").filter(|c| !c.trim().is_empty()) {
            return Ok(Addr::Exec(command.to_owned()));
        }
        if let Some(rest) = s.strip_prefix("ssh!")
            && let Some((host, dir)) = rest.split_once('!')
            && !host.is_empty()
            && !dir.is_empty()
        {
            // ssh hands the remote shell its words joined: the directory
            // is quoted for that shell, and each word again for ours.
            let remote = ["ninep", "serve", "--stdio", &quote(dir)].map(quote);
            return Ok(Addr::Exec(format!(
                "exec ssh -T {} {}",
                quote(host),
                remote.join(" ")
            )));
        }
        let bad = || {
            format!("bad address {s:?}: want tcp!host!port, tls!host!port, unix!/path or host:port")
        };
        let parts: Vec<&str> = s.split('!').collect();
        match parts.as_slice() {
            ["unix", path] if !path.is_empty() => Ok(Addr::Unix(PathBuf::from(path))),
            ["tls", host] if !host.is_empty() => Ok(tls(host, DEFAULT_PORT)),
            ["tls", host, port] if !host.is_empty() => {
                let port = port.parse().map_err(|_| bad())?;
                Ok(tls(host, port))
            }
            ["tcp" | "net", host] => Ok(tcp(host, DEFAULT_PORT)),
            ["tcp" | "net", host, port] => {
                let port = port.parse().map_err(|_| bad())?;
                Ok(tcp(host, port))
            }
            [one] if one.starts_with('/') => Ok(Addr::Unix(PathBuf::from(one))),
            [one] => {
                // host:port, [v6]:port, or a bare host.
                if let Some((host, port)) = one.rsplit_once(':')
                    && (!host.contains(':') || host.starts_with('['))
                {
                    let port = port.parse().map_err(|_| bad())?;
                    let host = host.trim_start_matches('[').trim_end_matches(']');
                    if host.is_empty() {
                        return Err(bad());
                    }
                    return Ok(tcp(host, port));
                }
                if one.is_empty() {
                    return Err(bad());
                }
                Ok(tcp(one, DEFAULT_PORT))
            }
            _ => Err(bad()),
        }
    }
}

/// `word` quoted for a POSIX shell.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn tcp(host: &str, port: u16) -> Addr {
    Addr::Tcp {
        host: host.to_owned(),
        port,
    }
}

fn tls(host: &str, port: u16) -> Addr {
    Addr::Tls {
        host: host.to_owned(),
        port,
    }
}

/// The host to bind for `host`: `*` is every local address.
fn bind_host(host: &str) -> &str {
    if host == "*" { "0.0.0.0" } else { host }
}

/// How long a TCP peer may go without acknowledging what was sent to it,
/// or without answering keepalive probes on an idle connection, before the
/// connection is taken for dead. Without it a link that dies without a
/// reset (a cable pulled, a NAT that forgot the connection) holds calls for
/// TCP's fifteen minutes of retransmission; with it, a client that
/// recovers dials again after this long, and a server lets the session go.
/// A peer that is slow to answer a request, but alive, is not affected.
pub const DEAD_PEER: std::time::Duration = std::time::Duration::from_secs(30);

async fn dial_tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let s = TcpStream::connect((host, port)).await?;
    tune(&s)?;
    Ok(s)
}

/// Room a connection makes at once for what its reader has not read: a
/// reply at the client's default msize (1 MiB + 24) and the start of the
/// next.
const RECEIVE_ROOM: usize = 2 << 20;

/// Sets a TCP connection's options: no Nagle delay (9P is request and
/// reply), room for a whole large message ([`RECEIVE_ROOM`]), and
/// [`DEAD_PEER`].
fn tune(s: &TcpStream) -> io::Result<()> {
    use rustix::net::sockopt;
    s.set_nodelay(true)?;
    crate::sys::make_receive_room(s, RECEIVE_ROOM)?;
    sockopt::set_socket_keepalive(s, true)?;
    // Probes start after a third of it idle; TCP_USER_TIMEOUT then ends
    // the connection once a probe or data has gone unacknowledged for all
    // of it, however many probes that took.
    sockopt::set_tcp_keepidle(s, DEAD_PEER / 3)?;
    sockopt::set_tcp_keepintvl(s, DEAD_PEER / 6)?;
    let ms = u32::try_from(DEAD_PEER.as_millis()).unwrap_or(u32::MAX);
    sockopt::set_tcp_user_timeout(s, ms)?;
    Ok(())
}

/// Gives a unix connection's sender room for a whole large message
/// ([`RECEIVE_ROOM`]) that its reader has not read. A unix socket's buffer
/// is fixed (nothing tunes it), at net.core.wmem_default (208 KiB) unless
/// set, and a reply of a MiB would cross in five pieces, the reader woken
/// for each. The kernel grants at most net.core.wmem_max (208 KiB on a
/// stock kernel, which then doubles the room), and charges only what is
/// queued: a peer that stops reading holds that much of its memory.
fn tune_unix(s: &UnixStream) -> io::Result<()> {
    rustix::net::sockopt::set_socket_send_buffer_size(s, RECEIVE_ROOM)?;
    Ok(())
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { host, port } => write!(f, "tcp!{host}!{port}"),
            Addr::Tls { host, port } => write!(f, "tls!{host}!{port}"),
            Addr::Unix(path) => write!(f, "unix!{}", path.display()),
            Addr::Exec(command) => write!(f, "exec!{command}"),
        }
    }
}

/// A connected byte stream of either kind.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// A new handle on the socket a plain TCP or unix stream writes to, for
    /// splicing file data into it (see [`crate::Writer::spawn_on_socket`]):
    /// a duplicate descriptor, registered with the runtime (so this is
    /// called within one); none for streams that change or wrap what is
    /// written (TLS, a command's pipes), or if that fails.
    fn splice_target(&self) -> Option<SpliceTarget>;
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {
    fn splice_target(&self) -> Option<SpliceTarget> {
        let any: &dyn Any = self;
        if let Some(boxed) = any.downcast_ref::<Box<dyn Stream>>() {
            return boxed.as_ref().splice_target();
        }
        if let Some(tcp) = any.downcast_ref::<TcpStream>() {
            return SpliceTarget::tcp(tcp).ok();
        }
        SpliceTarget::unix(any.downcast_ref::<UnixStream>()?).ok()
    }
}

/// A boxed stream and a printable name for its peer.
pub type Conn = (Box<dyn Stream>, String);

impl Addr {
    /// Connects to the address, with no TLS configured.
    pub async fn dial(&self) -> io::Result<Box<dyn Stream>> {
        Dialer::default().dial(self).await
    }

    /// Starts listening on the address, with no TLS configured. A stale
    /// unix socket file is replaced.
    pub async fn listen(&self) -> io::Result<Listener> {
        self.listen_with(None).await
    }

    /// Starts listening on the address; a `tls!` one takes its
    /// connections with `tls`.
    pub async fn listen_with(&self, tls: Option<TlsServer>) -> io::Result<Listener> {
        Ok(match self {
            Addr::Tcp { host, port } => {
                Listener::Tcp(TcpListener::bind((bind_host(host), *port)).await?)
            }
            Addr::Tls { host, port } => {
                let tls = tls.ok_or_else(|| needs("a certificate and key to listen on"))?;
                Listener::Tls(TcpListener::bind((bind_host(host), *port)).await?, tls)
            }
            Addr::Unix(path) => {
                if path.exists() && UnixStream::connect(path).await.is_err() {
                    std::fs::remove_file(path)?;
                }
                Listener::Unix(UnixListener::bind(path)?, path.clone())
            }
            Addr::Exec(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "exec! is for dialing; to serve a pipe, use --stdio",
                ));
            }
        })
    }
}

/// The error for a `tls!` address without the TLS configuration it needs.
fn needs(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("tls! needs {what} (--tls-cert, --tls-key, --tls-ca)"),
    )
}

/// How a client connects: the addresses of every kind, and its side of TLS
/// for `tls!` ones.
#[derive(Debug, Clone, Default)]
pub struct Dialer {
    tls: Option<TlsClient>,
}

impl Dialer {
    /// A dialer that speaks TLS as `tls` says.
    pub fn with_tls(tls: TlsClient) -> Dialer {
        Dialer { tls: Some(tls) }
    }

    /// Connects to `addr`.
    pub async fn dial(&self, addr: &Addr) -> io::Result<Box<dyn Stream>> {
        Ok(match addr {
            Addr::Tcp { host, port } => Box::new(dial_tcp(host, *port).await?),
            Addr::Tls { host, port } => {
                let tls = self.tls.as_ref().ok_or_else(|| needs("a CA to dial"))?;
                Box::new(tls.connect(host, dial_tcp(host, *port).await?).await?)
            }
            Addr::Unix(path) => {
                let s = UnixStream::connect(path).await?;
                tune_unix(&s)?;
                Box::new(s)
            }
            Addr::Exec(command) => Box::new(Piped::spawn(command)?),
        })
    }
}

/// A listening socket of any kind.
#[derive(Debug)]
pub enum Listener {
    /// A TCP socket.
    Tcp(TcpListener),
    /// A TCP socket whose connections speak TLS.
    Tls(TcpListener, TlsServer),
    /// A Unix domain socket and the path it is bound to.
    Unix(UnixListener, PathBuf),
}

/// Who is at the other end of an accepted connection, as far as its
/// transport can tell. What it proves is the server's to judge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// A printable name: the peer's address, or the socket's path.
    pub name: String,
    /// The uid of the process that connected to a unix socket, as the
    /// kernel reports it (SO_PEERCRED).
    pub uid: Option<u32>,
    /// The name (subject common name) in the client certificate of a TLS
    /// peer, which its CA vouched for.
    pub cert_name: Option<String>,
}

impl Peer {
    /// A peer known by name only, as on a pipe.
    pub fn named(name: impl Into<String>) -> Peer {
        Peer {
            name: name.into(),
            ..Peer::default()
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(uid) = self.uid {
            write!(f, " (uid {uid})")?;
        }
        if let Some(name) = &self.cert_name {
            write!(f, " (certificate {name})")?;
        }
        Ok(())
    }
}

/// A connection accepted, its handshake (if any) yet to run.
#[derive(Debug)]
pub struct Incoming {
    link: Link,
    peer: Peer,
}

enum Link {
    Ready(Box<dyn Stream>),
    Tls(TcpStream, TlsServer),
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Link::Ready(_) => "Ready",
            Link::Tls(..) => "Tls",
        })
    }
}

/// An accepted connection once its handshake has run.
pub enum Established {
    /// Ready to carry 9P.
    Ready(Box<dyn Stream>, Peer),
    /// The peer spoke something other than TLS to a TLS port: the stream
    /// as it came, to be told so.
    NotTls(Box<dyn Stream>, Peer),
}

impl fmt::Debug for Established {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Established::Ready(_, peer) => write!(f, "Ready({peer})"),
            Established::NotTls(_, peer) => write!(f, "NotTls({peer})"),
        }
    }
}

impl Incoming {
    /// Who connected, as far as is known before any handshake.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Runs the connection's handshake, if it has one.
    pub async fn establish(self) -> io::Result<Established> {
        let Incoming { link, mut peer } = self;
        Ok(match link {
            Link::Ready(stream) => Established::Ready(stream, peer),
            Link::Tls(tcp, tls) => match tls.accept(tcp).await? {
                Accepted::Tls(stream, name) => {
                    peer.cert_name = name;
                    Established::Ready(stream, peer)
                }
                Accepted::NotTls(tcp) => Established::NotTls(Box::new(tcp), peer),
            },
        })
    }
}

impl Listener {
    /// Waits for the next connection, and runs its handshake.
    pub async fn accept(&self) -> io::Result<Conn> {
        let (stream, peer) = self.accept_peer().await?;
        Ok((stream, peer.name))
    }

    /// Waits for the next connection, runs its handshake, and tells who
    /// made it.
    pub async fn accept_peer(&self) -> io::Result<(Box<dyn Stream>, Peer)> {
        match self.incoming().await?.establish().await? {
            Established::Ready(stream, peer) => Ok((stream, peer)),
            Established::NotTls(_, peer) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{peer}: not TLS"),
            )),
        }
    }

    /// Waits for the next connection; its handshake is left to run, so
    /// that a slow one holds up nobody else.
    pub async fn incoming(&self) -> io::Result<Incoming> {
        match self {
            Listener::Tcp(l) | Listener::Tls(l, _) => {
                let (s, addr) = l.accept().await?;
                tune(&s)?;
                let peer = Peer::named(addr.to_string());
                let link = match self {
                    Listener::Tls(_, tls) => Link::Tls(s, tls.clone()),
                    _ => Link::Ready(Box::new(s)),
                };
                Ok(Incoming { link, peer })
            }
            Listener::Unix(l, path) => {
                let (s, _) = l.accept().await?;
                tune_unix(&s)?;
                let uid = rustix::net::sockopt::socket_peercred(&s)
                    .ok()
                    .map(|cred| cred.uid.as_raw());
                let peer = Peer {
                    name: path.display().to_string(),
                    uid,
                    cert_name: None,
                };
                Ok(Incoming {
                    link: Link::Ready(Box::new(s)),
                    peer,
                })
            }
        }
    }

    /// The address actually bound (with the real port when 0 was asked).
    pub fn local_addr(&self) -> io::Result<Addr> {
        match self {
            Listener::Tcp(l) => {
                let a = l.local_addr()?;
                Ok(tcp(&a.ip().to_string(), a.port()))
            }
            Listener::Tls(l, _) => {
                let a = l.local_addr()?;
                Ok(tls(&a.ip().to_string(), a.port()))
            }
            Listener::Unix(_, path) => Ok(Addr::Unix(path.clone())),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(s: &str) -> Addr {
        s.parse().unwrap()
    }

    #[test]
    fn dial_strings() {
        assert_eq!(parse("tcp!localhost!5640"), tcp("localhost", 5640));
        assert_eq!(parse("tcp!*!564"), tcp("*", 564));
        assert_eq!(parse("tcp!10.0.0.1"), tcp("10.0.0.1", 564));
        assert_eq!(parse("net!host!99"), tcp("host", 99));
        assert_eq!(
            parse("unix!/tmp/9p.sock"),
            Addr::Unix("/tmp/9p.sock".into())
        );
        assert_eq!(parse("/tmp/9p.sock"), Addr::Unix("/tmp/9p.sock".into()));
        assert_eq!(parse("127.0.0.1:5640"), tcp("127.0.0.1", 5640));
        assert_eq!(parse("[::1]:5640"), tcp("::1", 5640));
        assert_eq!(parse("example.org"), tcp("example.org", 564));
        for bad in ["", "tcp!h!port", "unix!", "a!b!c!d", ":5", "h:x"] {
            assert!(bad.parse::<Addr>().is_err(), "{bad}");
        }
        assert_eq!(parse("tcp!h!1").to_string(), "tcp!h!1");
        assert_eq!(parse("tls!h!1").to_string(), "tls!h!1");
        assert_eq!(parse("tls!h"), tls("h", 564));
        assert_eq!(
            parse("exec!ninep serve --stdio a!b"),
            Addr::Exec("ninep serve --stdio a!b".into())
        );
        assert_eq!(
            parse("ssh!me@h!/srv"),
            Addr::Exec(r#"exec ssh -T 'me@h' 'ninep' 'serve' '--stdio' ''\''/srv'\'''"#.into())
        );
        for bad in ["exec!", "exec! ", "ssh!h", "ssh!!d", "tls!"] {
            assert!(bad.parse::<Addr>().is_err(), "{bad}");
        }
    }

    /// A dialled TCP connection has room for a whole large reply from the
    /// start, and a message of one byte still wakes its reader.
    #[tokio::test]
    async fn tcp_connections_make_room_for_a_large_reply() {
        use rustix::net::sockopt;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (dialled, accepted) = tokio::join!(dial_tcp("127.0.0.1", port), l.accept());
        let (mut dialled, (mut accepted, _)) = (dialled.unwrap(), accepted.unwrap());
        // The kernel caps the mark at half of tcp_rmem's maximum; the buffer
        // it makes holds at least the mark.
        let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap();
        let max: usize = rmem.split_whitespace().nth(2).unwrap().parse().unwrap();
        let room = sockopt::socket_recv_buffer_size(&dialled).unwrap();
        assert!(room >= RECEIVE_ROOM.min(max / 2), "{room} bytes of room");
        accepted.write_all(b"x").await.unwrap();
        let mut byte = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), dialled.read(&mut byte)).await;
        assert_eq!(read.expect("one byte wakes the reader").unwrap(), 1);
    }

    /// Either end of a unix connection sends a whole large reply at once
    /// (as large as net.core.wmem_max lets it), its reader not reading yet.
    #[tokio::test]
    async fn unix_connections_make_room_for_a_large_reply() {
        use tokio::io::AsyncWriteExt;
        let path = std::env::temp_dir().join(format!("ninep-room-{}.sock", std::process::id()));
        let addr = Addr::Unix(path);
        let l = addr.listen().await.unwrap();
        let (dialled, accepted) = tokio::join!(addr.dial(), l.accept());
        let (mut dialled, mut accepted) = (dialled.unwrap(), accepted.unwrap().0);
        // The kernel caps the room asked for at wmem_max and doubles it;
        // the default room (wmem_default) holds less than the cap.
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let reply = vec![7u8; ((1 << 20) + 24).min(max)];
        for (name, end) in [("dialled", &mut dialled), ("accepted", &mut accepted)] {
            let sent = tokio::time::timeout(Duration::from_secs(5), end.write_all(&reply)).await;
            assert!(sent.is_ok(), "the {name} end waited for its reader");
        }
    }

    /// A TCP connection takes a silent peer for dead after DEAD_PEER,
    /// rather than after TCP's retransmissions.
    #[tokio::test]
    async fn tcp_connections_give_up_on_a_silent_peer() {
        use rustix::net::sockopt;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (dialled, _accepted) = tokio::join!(dial_tcp("127.0.0.1", port), l.accept());
        let dialled = dialled.unwrap();
        assert!(sockopt::socket_keepalive(&dialled).unwrap());
        assert_eq!(
            sockopt::tcp_user_timeout(&dialled).unwrap(),
            DEAD_PEER.as_millis() as u32
        );
        assert_eq!(sockopt::tcp_keepidle(&dialled).unwrap(), DEAD_PEER / 3);
    }

    #[tokio::test]
    async fn listen_and_dial_unix() {
        let path = std::env::temp_dir().join(format!("ninep-dial-{}.sock", std::process::id()));
        let addr = Addr::Unix(path.clone());
        let listener = addr.listen().await.unwrap();
        let (_c, accepted) = tokio::join!(addr.dial(), listener.accept_peer());
        let (_s, peer) = accepted.unwrap();
        // The kernel tells who connected: this very process.
        assert_eq!(peer.uid, Some(rustix::process::getuid().as_raw()));
        drop(listener);
        assert!(!path.exists());
    }
}
