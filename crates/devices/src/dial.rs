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
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use ninep_client::{Client, Dialer, Error, File, Fsys, Mode, Options, Prover, Transfer};
use ninep_transport::{Addr, Stream};
use ninep_wire::NONUNAME;
use ninep_wire::consts::dotl::O_RDWR;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::PollSender;

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

/// How to attach to the gateways on a dial string's way: as `uname`,
/// proven through Tauth by `prover` to a gateway that asks (MUNGE, say).
/// TLS client certificates and peercred prove the user beneath 9P: the
/// [`Dialer`] carries the first, a `unix!` gateway address the second.
#[derive(Debug, Clone, Copy)]
pub struct Gateways<'a> {
    /// The user to attach as.
    pub uname: &'a str,
    /// What proves the user to a gateway whose server asks for Tauth.
    pub prover: Option<&'a dyn Prover>,
}

impl<'a> Gateways<'a> {
    /// Attaching as `uname`, proving nothing.
    pub fn as_user(uname: &'a str) -> Gateways<'a> {
        Gateways {
            uname,
            prover: None,
        }
    }

    async fn attach(&self, client: Client) -> Result<Fsys, Error> {
        match self.prover {
            Some(prover) => client.attach_proven(self.uname, NONUNAME, "", prover).await,
            None => client.attach(self.uname, "").await,
        }
    }
}

/// A connection to `addr` (see [`route`]), the first hop made as `dialer`
/// makes it (with its TLS, say); the 9P sessions with gateways on the way
/// use `options` and attach as `uname`, proving nothing more.
pub async fn dial(
    addr: &str,
    dialer: &Dialer,
    options: &Options,
    uname: &str,
) -> Result<Box<dyn Stream>, Error> {
    dial_as(addr, dialer, options, Gateways::as_user(uname)).await
}

/// As [`dial`], attaching to gateways as `gateways` says.
pub async fn dial_as(
    addr: &str,
    dialer: &Dialer,
    options: &Options,
    gateways: Gateways<'_>,
) -> Result<Box<dyn Stream>, Error> {
    match route(addr) {
        Route::Direct(addr) => {
            let addr: Addr = addr.parse().map_err(|e: String| invalid(e))?;
            Ok(dialer.dial(&addr).await?)
        }
        Route::Through { gateway, dir, dial } => {
            let stream = Box::pin(dial_as(gateway, dialer, options, gateways)).await?;
            let client = Client::over(stream, options.clone()).await?;
            let gateway = gateways.attach(client).await?;
            Ok(Box::new(call(&gateway, dir, dial).await?))
        }
    }
}

/// A 9P client of the server at `addr` (see [`route`] and [`dial`]).
pub async fn connect(
    addr: &str,
    dialer: &Dialer,
    options: Options,
    uname: &str,
) -> Result<Client, Error> {
    connect_as(addr, dialer, options, Gateways::as_user(uname)).await
}

/// As [`connect`], attaching to gateways as `gateways` says.
pub async fn connect_as(
    addr: &str,
    dialer: &Dialer,
    options: Options,
    gateways: Gateways<'_>,
) -> Result<Client, Error> {
    let stream = dial_as(addr, dialer, &options, gateways).await?;
    Client::over(stream, options).await
}

/// A call made through the network directory `dir` of `gateway`: the
/// conversation's `data`, with its `ctl` held open (closing both hangs up).
///
/// Each direction is a stream (docs/streams.md) where the gateway offers
/// it, so that data flows without a round trip per read or write, run by
/// a task of its own. What comes in is held for the reader up to
/// [`INCOMING`] pieces and the stream's credit, before the gateway's queue
/// and then TCP make the sender wait; what goes out is taken up to
/// [`OUTGOING`] pieces ahead of the gateway's credit. A write's failure
/// (the call hung up) is seen by the next write or flush; dropping the
/// call still sends what was written.
pub struct Call {
    incoming: mpsc::Receiver<io::Result<Bytes>>,
    /// The rest of the piece last taken from `incoming`.
    piece: Bytes,
    reader: JoinHandle<()>,
    outgoing: PollSender<Out>,
    /// Why the writer stopped, if it failed.
    failed: Arc<Mutex<Option<io::Error>>>,
    /// The flush under way: answered once all before it is sent.
    flushing: Option<oneshot::Receiver<()>>,
    data: Arc<File>,
    /// Held open with `data`: the conversation lives while either is.
    _ctl: File,
}

/// What a [`Call`]'s writer is given.
enum Out {
    Data(Bytes),
    Flush(oneshot::Sender<()>),
}

/// Pieces read ahead for the reader of a [`Call`].
pub const INCOMING: usize = 4;

/// Pieces taken ahead from the writer of a [`Call`].
pub const OUTGOING: usize = 4;

/// Most bytes of one piece taken from the writer of a [`Call`].
const PIECE: usize = 256 << 10;

/// Most credit a call's read stream grants.
const READ_WINDOW: u64 = 4 << 20;

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("data", &self.data).finish()
    }
}

impl Call {
    fn new(data: File, ctl: File) -> Call {
        let data = Arc::new(data);
        let (tx, incoming) = mpsc::channel(INCOMING);
        let file = data.clone();
        let reader = tokio::spawn(async move {
            let how = Transfer {
                mode: Mode::Streamed,
                max_window: READ_WINDOW,
            };
            let mut range = match file.read_range(0, None, how).await {
                Ok(range) => range,
                Err(e) => return drop(tx.send(Err(e.into())).await),
            };
            loop {
                let piece = match range.next().await {
                    Ok(Some(piece)) => Ok(piece),
                    Ok(None) => return,
                    Err(e) => Err(e.into()),
                };
                let failed = piece.is_err();
                if tx.send(piece).await.is_err() || failed {
                    return;
                }
            }
        });
        let (tx, mut outgoing) = mpsc::channel(OUTGOING);
        let failed = Arc::new(Mutex::new(None));
        let (file, failure) = (data.clone(), failed.clone());
        tokio::spawn(async move {
            let written = async {
                let mut range = file.write_range(0, Transfer::new(Mode::Streamed)).await?;
                while let Some(out) = outgoing.recv().await {
                    match out {
                        Out::Data(data) => range.write(data).await?,
                        Out::Flush(done) => drop(done.send(())),
                    }
                }
                range.finish().await
            };
            if let Err(e) = written.await {
                *failure.lock() = Some(e.into());
            }
        });
        Call {
            incoming,
            piece: Bytes::new(),
            reader,
            outgoing: PollSender::new(tx),
            failed,
            flushing: None,
            data,
            _ctl: ctl,
        }
    }

    /// Why the writer is gone.
    fn write_failure(&self) -> io::Error {
        self.failed
            .lock()
            .take()
            .unwrap_or_else(|| io::ErrorKind::BrokenPipe.into())
    }

    /// Waits for room for one more piece for the writer.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let room = ready!(self.outgoing.poll_reserve(cx));
        Poll::Ready(room.map_err(|_| self.write_failure()))
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Makes the call `dial` (`net!host!service`) through the network
/// directory `dir` of `gateway`: a numeric address (or any, where `dir`
/// has no `cs`) as it is, else each of `dir/cs`'s translations in turn,
/// each read only once the one before has failed.
pub async fn call(gateway: &Fsys, dir: &str, dial: &str) -> Result<Call, Error> {
    let dir = dir.trim_end_matches('/');
    let [net, host, port] = dial.split('!').collect::<Vec<_>>()[..] else {
        return Err(invalid(format!("{dial}: want net!host!port")));
    };
    let net = if net == "net" { "tcp" } else { net };
    let as_is = || {
        connect_at(
            gateway,
            format!("{dir}/{net}/clone"),
            format!("{host}!{port}"),
        )
    };
    let numeric = host.parse::<std::net::IpAddr>().is_ok() && port.parse::<u16>().is_ok();
    if numeric {
        return as_is().await;
    }
    let Ok(cs) = gateway.open_pipelined(&format!("{dir}/cs"), O_RDWR).await else {
        return as_is().await;
    };
    cs.write_at(0, Bytes::copy_from_slice(dial.as_bytes()))
        .await?;
    let mut failed = None;
    loop {
        let line = cs.read_at(0, 1024).await?;
        let Some((clone, addr)) = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| l.trim().split_once(' '))
        else {
            break;
        };
        let clone = clone.strip_prefix("/net").unwrap_or(clone);
        match connect_at(gateway, format!("{dir}{clone}"), addr.to_owned()).await {
            Ok(call) => return Ok(call),
            Err(e) => failed = Some(e),
        }
    }
    Err(failed.unwrap_or_else(|| invalid(format!("{dial}: no translation"))))
}

/// Opens `clone` and makes the call, in three round trips: the walk and
/// open of `clone` (the fid then the conversation's `ctl`); the read of
/// the conversation's number, with the `connect` sent beside it; and the
/// walk and open of its `data`, while the connect is under way.
async fn connect_at(gateway: &Fsys, clone: String, addr: String) -> Result<Call, Error> {
    let ctl = gateway.open_pipelined(&clone, O_RDWR).await?;
    let net = clone.rsplit_once('/').map_or("", |(net, _)| net);
    let connect = ctl.write_at(0, Bytes::from(format!("connect {addr}")));
    let data = async {
        let n = ctl.read_at(0, 32).await?;
        let n = std::str::from_utf8(&n)
            .ok()
            .map(str::trim)
            .filter(|n| n.parse::<u32>().is_ok())
            .ok_or_else(|| invalid(format!("{clone}: no conversation number")))?;
        gateway
            .open_pipelined(&format!("{net}/{n}/data"), O_RDWR)
            .await
    };
    let (connected, data) = tokio::join!(connect, data);
    connected?;
    Ok(Call::new(data?, ctl))
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
        if self.piece.is_empty() {
            match ready!(self.incoming.poll_recv(cx)) {
                Some(piece) => self.piece = piece?,
                // End of file.
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = self.piece.len().min(buf.remaining());
        buf.put_slice(&self.piece.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Call {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_room(cx))?;
        let n = data.len().min(PIECE);
        let piece = Out::Data(Bytes::copy_from_slice(&data[..n]));
        if self.outgoing.send_item(piece).is_err() {
            return Poll::Ready(Err(self.write_failure()));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.flushing.is_none() {
            ready!(self.poll_room(cx))?;
            let (done, flushed) = oneshot::channel();
            if self.outgoing.send_item(Out::Flush(done)).is_err() {
                return Poll::Ready(Err(self.write_failure()));
            }
            self.flushing = Some(flushed);
        }
        let flushed = self.flushing.as_mut().map(|f| Pin::new(f).poll(cx));
        let flushed = ready!(flushed.unwrap_or(Poll::Ready(Ok(()))));
        self.flushing = None;
        Poll::Ready(flushed.map_err(|_| self.write_failure()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
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
