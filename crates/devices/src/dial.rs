//! Dialling through a `/net` that a 9P server offers, as Plan 9's dial(2)
//! does through an imported gateway's (`/n/gw/net/tcp!host!port`).
//!
//! A dial string `GW:/DIR/NET!HOST!SERVICE` names a 9P server `GW` (itself
//! any dial string, through another gateway if need be), a network
//! directory `DIR` on it (`/` for `ninep serve net`, `/net` where a name
//! space mounts one there) and the call to make from there. The call goes
//! as Plan 9's does: the directory's `cs` translates (if it has one), the
//! clone file gives a conversation, `connect` makes the call, and `data`
//! is the connection. Any other dial string is dialled directly.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use ninep_client::{Client, Error, File, Fsys, Options};
use ninep_transport::{Addr, Stream};
use ninep_wire::consts::dotl::O_RDWR;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where a dial string leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// Dialled from here.
    Direct(&'a str),
    /// Through the network directory `dir` of the 9P server at `gateway`.
    Through {
        /// The gateway's own dial string.
        gateway: &'a str,
        /// The network directory on it.
        dir: &'a str,
        /// The call to make there: `net!host!service`.
        dial: &'a str,
    },
}

/// How `addr` is to be dialled: through a gateway if it has the form
/// `GW:/DIR/NET!HOST!SERVICE` (split at its last `:/`).
pub fn route(addr: &str) -> Route<'_> {
    let Some(at) = addr.rfind(":/").filter(|&at| at > 0) else {
        return Route::Direct(addr);
    };
    let (gateway, path) = (&addr[..at], &addr[at + 1..]);
    let (dir, dial) = path.rsplit_once('/').expect("the path starts with /");
    Route::Through {
        gateway,
        dir: if dir.is_empty() { "/" } else { dir },
        dial,
    }
}

/// A connection to `addr` (see [`route`]); the 9P sessions with gateways
/// on the way use `options` and attach as `uname`.
pub async fn dial(addr: &str, options: &Options, uname: &str) -> Result<Box<dyn Stream>, Error> {
    match route(addr) {
        Route::Direct(addr) => {
            let addr: Addr = addr.parse().map_err(|e: String| invalid(e))?;
            Ok(addr.dial().await?)
        }
        Route::Through { gateway, dir, dial } => {
            let stream = Box::pin(self::dial(gateway, options, uname)).await?;
            let gateway = Client::over(stream, options.clone())
                .await?
                .attach(uname, "")
                .await?;
            Ok(Box::new(call(&gateway, dir, dial).await?))
        }
    }
}

/// A 9P client of the server at `addr` (see [`route`]), attaching to
/// gateways on the way as `uname`.
pub async fn connect(addr: &str, options: Options, uname: &str) -> Result<Client, Error> {
    let stream = dial(addr, &options, uname).await?;
    Client::over(stream, options).await
}

/// A call made through the network directory `dir` of `gateway`: the
/// conversation's `data`, with its `ctl` held open (closing both hangs up).
#[derive(Debug)]
pub struct Call {
    data: File,
    ctl: File,
}

impl Call {
    /// The conversation's directory on the gateway, as `tcp/N`.
    pub fn conversation(&self) -> ninep_wire::Qid {
        self.ctl.qid()
    }
}

/// Makes the call `dial` (`net!host!service`) through the network
/// directory `dir` of `gateway`, trying each translation in turn.
pub async fn call(gateway: &Fsys, dir: &str, dial: &str) -> Result<Call, Error> {
    let dir = dir.trim_end_matches('/');
    let mut failed = None;
    for (clone, addr) in translate(gateway, dir, dial).await? {
        match connect_at(gateway, &clone, &addr).await {
            Ok(call) => return Ok(call),
            Err(e) => failed = Some(e),
        }
    }
    Err(failed.unwrap_or_else(|| invalid(format!("{dial}: no translation"))))
}

/// The clone files and addresses to try: `dir/cs`'s answers, with its
/// `/net` taken as `dir`, or without a `cs` the dial string as it is.
async fn translate(gateway: &Fsys, dir: &str, dial: &str) -> Result<Vec<(String, String)>, Error> {
    let Ok(cs) = gateway.open(&format!("{dir}/cs"), O_RDWR).await else {
        let [net, host, port] = dial.split('!').collect::<Vec<_>>()[..] else {
            return Err(invalid(format!("{dial}: want net!host!port")));
        };
        let net = if net == "net" { "tcp" } else { net };
        return Ok(vec![(
            format!("{dir}/{net}/clone"),
            format!("{host}!{port}"),
        )]);
    };
    cs.write_at(0, Bytes::copy_from_slice(dial.as_bytes()))
        .await?;
    let mut found = Vec::new();
    loop {
        let line = cs.read_at(0, 1024).await?;
        let Some((clone, addr)) = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| l.trim().split_once(' '))
        else {
            break;
        };
        let clone = clone.strip_prefix("/net").unwrap_or(clone);
        found.push((format!("{dir}{clone}"), addr.to_owned()));
    }
    Ok(found)
}

async fn connect_at(gateway: &Fsys, clone: &str, addr: &str) -> Result<Call, Error> {
    let ctl = gateway.open(clone, O_RDWR).await?;
    let n = ctl.read_at(0, 32).await?;
    let n = std::str::from_utf8(&n)
        .ok()
        .map(str::trim)
        .filter(|n| n.parse::<u32>().is_ok())
        .ok_or_else(|| invalid(format!("{clone}: no conversation number")))?;
    let connect = format!("connect {addr}");
    ctl.write_at(0, Bytes::from(connect)).await?;
    let net = clone.rsplit_once('/').map_or("", |(net, _)| net);
    let data = gateway.open(&format!("{net}/{n}/data"), O_RDWR).await?;
    Ok(Call { data, ctl })
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Io(io::Error::new(io::ErrorKind::InvalidInput, what.into()))
}

impl AsyncRead for Call {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.data).poll_read(cx, buf)
    }
}

impl AsyncWrite for Call {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.data).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.data).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.data).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("tcp!h!564"), Route::Direct("tcp!h!564"));
        assert_eq!(route("unix!/tmp/s"), Route::Direct("unix!/tmp/s"));
        assert_eq!(
            route("tcp!gw!564:/net/tcp!10.0.0.2!564"),
            Route::Through {
                gateway: "tcp!gw!564",
                dir: "/net",
                dial: "tcp!10.0.0.2!564"
            }
        );
        assert_eq!(
            route("tcp!a!1:/tcp!b!2:/tcp!c!3"),
            Route::Through {
                gateway: "tcp!a!1:/tcp!b!2",
                dir: "/",
                dial: "tcp!c!3"
            }
        );
    }
}
