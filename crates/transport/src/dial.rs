//! Plan 9 dial strings: `tcp!host!port`, `unix!/path`, and the `host:port`
//! form people type. The default 9P port is 564.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

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
    /// `unix!/path`.
    Unix(PathBuf),
}

impl FromStr for Addr {
    type Err = String;

    fn from_str(s: &str) -> Result<Addr, String> {
        let bad = || format!("bad address {s:?}: want tcp!host!port, unix!/path or host:port");
        let parts: Vec<&str> = s.split('!').collect();
        match parts.as_slice() {
            ["unix", path] if !path.is_empty() => Ok(Addr::Unix(PathBuf::from(path))),
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

fn tcp(host: &str, port: u16) -> Addr {
    Addr::Tcp {
        host: host.to_owned(),
        port,
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { host, port } => write!(f, "tcp!{host}!{port}"),
            Addr::Unix(path) => write!(f, "unix!{}", path.display()),
        }
    }
}

/// A connected byte stream of either kind.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A boxed stream and a printable name for its peer.
pub type Conn = (Box<dyn Stream>, String);

impl Addr {
    /// Connects to the address.
    pub async fn dial(&self) -> io::Result<Box<dyn Stream>> {
        Ok(match self {
            Addr::Tcp { host, port } => {
                let s = TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                Box::new(s)
            }
            Addr::Unix(path) => Box::new(UnixStream::connect(path).await?),
        })
    }

    /// Starts listening on the address. A stale unix socket file is replaced.
    pub async fn listen(&self) -> io::Result<Listener> {
        Ok(match self {
            Addr::Tcp { host, port } => {
                let host = if host == "*" { "0.0.0.0" } else { host };
                Listener::Tcp(TcpListener::bind((host, *port)).await?)
            }
            Addr::Unix(path) => {
                if path.exists() && UnixStream::connect(path).await.is_err() {
                    std::fs::remove_file(path)?;
                }
                Listener::Unix(UnixListener::bind(path)?, path.clone())
            }
        })
    }
}

/// A listening socket of either kind.
#[derive(Debug)]
pub enum Listener {
    /// A TCP socket.
    Tcp(TcpListener),
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
        Ok(())
    }
}

impl Listener {
    /// Waits for the next connection.
    pub async fn accept(&self) -> io::Result<Conn> {
        let (stream, peer) = self.accept_peer().await?;
        Ok((stream, peer.name))
    }

    /// Waits for the next connection, and tells who made it.
    pub async fn accept_peer(&self) -> io::Result<(Box<dyn Stream>, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                s.set_nodelay(true)?;
                Ok((Box::new(s), Peer::named(peer.to_string())))
            }
            Listener::Unix(l, path) => {
                let (s, _) = l.accept().await?;
                let uid = rustix::net::sockopt::socket_peercred(&s)
                    .ok()
                    .map(|cred| cred.uid.as_raw());
                let peer = Peer {
                    name: path.display().to_string(),
                    uid,
                };
                Ok((Box::new(s), peer))
            }
        }
    }

    /// The address actually bound (with the real port when 0 was asked).
    pub fn local_addr(&self) -> io::Result<Addr> {
        match self {
            Listener::Tcp(l) => {
                let a = l.local_addr()?;
                Ok(Addr::Tcp {
                    host: a.ip().to_string(),
                    port: a.port(),
                })
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
